#!/usr/bin/env bash
# The installed package as a user meets it: the ctest tests of label `install`
# (tests/CMakeLists.txt), one step each, all on the same prefix ROOT/prefix.
#
#   install_test.sh STEP BUILD_DIR ROOT CMAKE
#     install    `cmake --install BUILD_DIR` into ROOT/prefix (emptied first), then checks what
#                landed: the programs run, the model is the shipped one, libocrt.so exports the
#                C API and nothing else, and every installed header compiles with nothing but
#                the prefix on the include path (no header includes one left out of the install)
#     cmake      examples/ as a separate CMake project, find_package(ocrt) from the prefix; its
#                read_line reads the sample lines
#     pkgconfig  examples/read_line.c compiled as C99 with `pkg-config --cflags --libs ocrt`
#     ctypes     examples/ocrt_ctypes.py with /usr/bin/python3 over the prefix's libocrt.so
# Each program that reads the samples must print what the installed ocrt-infer prints for them
# (the same predictor, the same batches: the same text and confidence), and the true text for
# the lines the shipped model reads right. It misreads three of the twelve: 000002 ("(556)
# 012-3466 before 6 pm"), 000003 ("texct") and 000006 ("14 lg gross").
set -euo pipefail
step=$1 build=$2 root=$3 cmake=$4
src=$(cd "$(dirname "$0")/../.." && pwd)
prefix=$root/prefix
work=$root/work-$step
samples=("$src"/samples/lines/*.png)
read_right=(000000 000001 000004 000005 000007 000008 000009 000010 000011)

fail() {
  echo "FAILED: $*" >&2
  exit 1
}

# The installed ocrt-infer's reading of the samples, --format text or tsv. It finds the shipped
# model itself, in prefix/share/ocrt/weights (no --weights), as an installed ocrt-infer must.
# Its default decoding, with the installed language model (the install step checks that it finds
# it), as the C API's ocrt_open and examples/read_line.cpp decode; --precision fp32 makes the
# model it finds the float32 file the examples open (without it, the int8 file on CPUs with an
# int8 kernel, installed too: tests/infer/test_ocrt_infer.cpp checks the choice).
infer() { "$prefix/bin/ocrt-infer" --precision fp32 --format "$1" "${samples[@]}" 2>> "$work/ocrt-infer.log"; }

# Checks that the file's lines (one per sample, the text in column $2) hold the true text of
# every line the model reads right.
check_truth() {
  local out=$1 column=$2 i=0 stem text
  for png in "${samples[@]}"; do
    i=$((i + 1))
    stem=$(basename "$png" .png)
    [[ " ${read_right[*]} " == *" $stem "* ]] || continue
    text=$(sed -n "${i}p" "$out" | cut -f "$column")
    [[ "$text" == "$(cat "${png%.png}.gt.txt")" ]] || fail "$stem read as '$text', not '$(cat "${png%.png}.gt.txt")'"
  done
  echo "the ${#read_right[@]} lines the model reads right: true text"
}

libdir() { dirname "$(find "$prefix" -name libocrt.so -print -quit)"; }

rm -rf "$work"
mkdir -p "$work"
case $step in
  install)
    rm -rf "$prefix"
    "$cmake" --install "$build" --prefix "$prefix" > "$work/install.log"
    echo "installed $(grep -c '^-- Installing' "$work/install.log") files into $prefix"
    lib=$(libdir)
    [[ -n "$lib" ]] || fail "no libocrt.so under $prefix"
    for f in bin/ocrt-infer bin/ocrt-lm bin/ocrt-quantize bin/ocrt-export bin/ocrt-train bin/ocrt-synth bin/ocrt-report \
             include/ocrt/infer/predictor.h include/ocrt/capi/ocrt.h include/ocrt/runtime/tensor.h \
             include/ocrt/train/trainer.h share/ocrt/weights/lm-en.clm share/ocrt/weights/crnn-s-en-int8.safetensors \
             share/ocrt/weights/crnn-en-int8.safetensors; do
      [[ -e "$prefix/$f" ]] || fail "$f was not installed"
    done
    for f in "$lib"/libocrt_{runtime,ops,models,infer,train,capi}.a "$lib/pkgconfig/ocrt.pc" \
             "$lib/cmake/ocrt/ocrtConfig.cmake" "$lib/cmake/ocrt/ocrtConfigVersion.cmake" \
             "$lib/cmake/ocrt/ocrtTargets.cmake"; do
      [[ -e "$f" ]] || fail "$f was not installed"
    done
    cmp "$src/weights/crnn-en.safetensors" "$prefix/share/ocrt/weights/crnn-en.safetensors"
    [[ ! -e "$prefix/include/ocrt/runtime/stb.h" ]] || fail "runtime/stb.h (needs stb) was installed"
    for p in ocrt-infer ocrt-lm ocrt-quantize ocrt-export ocrt-train ocrt-synth ocrt-report; do
      "$prefix/bin/$p" --help > /dev/null || fail "$p --help"
    done
    echo "the seven programs run; the shipped model is installed"
    "$prefix/bin/ocrt-infer" "${samples[0]}" 2>&1 > /dev/null | grep -q "decoding beam 10 + LM $prefix/share/ocrt/weights/lm-en.clm" ||
      fail "the installed ocrt-infer does not decode with the installed language model by default"
    echo "the installed ocrt-infer decodes with the installed language model by default"

    # libocrt.so's dynamic symbols: only the C API (capi/ocrt.map).
    exported=$(nm -D --defined-only "$lib/libocrt.so" | awk '{print $3}' | sort)
    others=$(grep -v '^ocrt_' <<< "$exported" || true)
    [[ -z "$others" ]] || fail "libocrt.so exports more than the C API: $(head -5 <<< "$others")"
    for f in $(grep -o 'ocrt_[a-z_]*(' "$prefix/include/ocrt/capi/ocrt.h" | tr -d '(' | sort -u); do
      grep -qx "$f" <<< "$exported" || fail "libocrt.so does not export $f"
    done
    echo "libocrt.so exports the $(wc -l <<< "$exported") functions of capi/ocrt.h and nothing else"

    # Every installed header at once, against the prefix alone.
    (cd "$prefix/include/ocrt" && find . -name '*.h' | sort | sed 's|^\./\(.*\)|#include "\1"|') > "$work/all.cpp"
    c++ -std=c++20 -fsyntax-only -I"$prefix/include/ocrt" "$work/all.cpp"
    echo "the $(wc -l < "$work/all.cpp") installed headers compile with only $prefix/include/ocrt"
    ;;

  cmake)
    "$cmake" -S "$src/examples" -B "$work" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release > "$work.log"
    found=$(grep '^ocrt_DIR:' "$work/CMakeCache.txt" | cut -d= -f2)
    [[ "$found" == "$prefix"/* ]] || fail "find_package(ocrt) found $found, not the test's prefix"
    "$cmake" --build "$work" >> "$work.log"
    echo "examples/ built against $found"
    "$work/read_line" "${samples[@]}" > "$work/read_line.txt"
    infer text > "$work/ocrt-infer.txt"
    diff "$work/ocrt-infer.txt" "$work/read_line.txt" || fail "read_line and ocrt-infer read the samples differently"
    echo "read_line prints what ocrt-infer prints for the ${#samples[@]} samples"
    check_truth "$work/read_line.txt" 1
    ;;

  pkgconfig)
    lib=$(libdir)
    flags=$(PKG_CONFIG_PATH="$lib/pkgconfig" pkg-config --cflags --libs ocrt)
    echo "pkg-config --cflags --libs ocrt: $flags"
    # shellcheck disable=SC2086  # the flags are words
    cc -std=c99 -Wall -Wextra -pedantic -Werror "$src/examples/read_line.c" $flags -o "$work/read_line_c"
    LD_LIBRARY_PATH="$lib" "$work/read_line_c" "$prefix/share/ocrt/weights/crnn-en.safetensors" "${samples[@]}" \
      > "$work/read_line_c.tsv"
    infer tsv | cut -f 1-3 > "$work/ocrt-infer.tsv"
    diff "$work/ocrt-infer.tsv" "$work/read_line_c.tsv" || fail "read_line.c and ocrt-infer read the samples differently"
    echo "read_line.c prints what ocrt-infer --format tsv prints for the ${#samples[@]} samples"
    check_truth "$work/read_line_c.tsv" 2
    ;;

  ctypes)
    lib=$(libdir)
    /usr/bin/python3 "$src/examples/ocrt_ctypes.py" --lib "$lib/libocrt.so" "${samples[@]}" > "$work/ctypes.tsv"
    infer tsv > "$work/ocrt-infer.tsv"
    diff "$work/ocrt-infer.tsv" "$work/ctypes.tsv" || fail "ocrt_ctypes.py and ocrt-infer read the samples differently"
    echo "ocrt_ctypes.py prints what ocrt-infer --format tsv prints for the ${#samples[@]} samples"
    check_truth "$work/ctypes.tsv" 2
    ;;

  *)
    fail "unknown step '$step' (install, cmake, pkgconfig or ctypes)"
    ;;
esac
