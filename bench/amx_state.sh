# Sourced by bench scripts (not run): the AMX tiles' state through BUILD/bench_gemm --probe, on
# machines whose tiles switch between their full rate and a quarter of it for seconds to minutes
# (bench/results/cpu-bf16.md), which every AMX program's speed follows.
#   probe_state          prints the share (%) of half a second's samples that were fast
#   wait_fast SECONDS    waits up to about SECONDS for a share of 80%, and prints the last share
# Needs BUILD set by the caller.
probe_state() {
  "$BUILD/bench_gemm" --threads 1 --probe 0.5 | tail -1 | sed -E 's/^fast ([0-9]+)%.*/\1/'
}
wait_fast() {
  local s waited=0
  s=$(probe_state)
  while (( s < 80 && waited < $1 )); do
    sleep 1
    waited=$((waited + 1))
    s=$(probe_state)
  done
  echo "$s"
}
