// ocrt-infer as a command (infer/ocrt_infer.cpp): every number on its command line is read
// strictly and range-checked before any model or input is read, the error naming the flag; its
// --help lists the flags docs/cli.md describes. (Its reading of lines: test_odd_input.cpp,
// test_hostile_output.cpp, test_shipped_model.cpp.)
#include <catch2/catch.hpp>

#include <fstream>
#include <string>
#include <vector>

#include "infer/model_loader.h"
#include "infer/predictor.h"
#include "run_command.h"
#include "runtime/cpu/int8_gemm.h"
#include "runtime/cpu_isa.h"
#include "temp_dir.h"

using namespace ocrt::testing;

TEST_CASE("ocrt-infer refuses every bad number by its flag before any work", "[infer][cli]") {
  // A model file that does not exist: a flag error must come first.
  const std::string bin = program("ocrt-infer") + " --weights /nonexistent.safetensors ";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--threads 0 a.png", "--threads: must be in [1, 4096], got 0"},
      {"--threads=-2 a.png", "--threads: must be in [1, 4096], got -2"},
      {"--batch 1e3 a.png", "--batch: expected an integer, got '1e3'"},
      {"--batch 0 a.png", "--batch: must be in [1, 65536], got 0"},
      {"--beam-width 0 a.png", "--beam-width: must be in [1, 10000], got 0"},
      {"--beam-width 18446744073709551617 a.png", "--beam-width: 18446744073709551617 is beyond the range"},
      {"--lm-weight nan a.png", "--lm-weight: expected a finite number, got 'nan'"},
      {"--lm-weight -1 a.png", "--lm-weight: must be in [0, inf), got -1"},
      {"--lm-bonus inf a.png", "--lm-bonus: expected a finite number, got 'inf'"},
      {"--lm-bonus 1e999 a.png", "--lm-bonus: expected a finite number"},
      {"--worst -1 a.png", "--worst: must be in [0, 1000000], got -1"},
      {"--page-jobs 0 a.png", "--page-jobs: must be in [1, 256], got 0"},
      {"--cpu-workers 0 a.png", "--cpu-workers: must be in [1, 4096], got 0"},
      {"--cpu-workers two a.png", "--cpu-workers: expected an integer, got 'two'"},
      {"--cpu-workers 2 --devices cpu,cpu a.png", "--cpu-workers splits the CPU when no --device or --devices"},
      {"--max-image-pixels 0 a.png", "--max-image-pixels: must be in [1, 4294967296], got 0"},
      {"--max-image-pixels 1e9 a.png", "--max-image-pixels: expected an integer"},
      {"--precision fp8 a.png", "--precision: expected fp32, tf32, bf16, int8 or auto, got 'fp8'"},
      {"--conv winograd a.png", "--conv: unknown convolution mode 'winograd'"},
      {"--decoder viterbi a.png", "--decoder: expected auto, greedy or beam, got 'viterbi'"},
      {"--beam-doubt 1.5 a.png", "--beam-doubt: must be in [0, 1], got 1.5"},
      {"--lm-uniform 1 a.png", "--lm-uniform: must be in [0, 1), got 1"},
      {"--format xml a.png", "--format:"},
      {"--device cuda:1x a.png", "--device: invalid device 'cuda:1x'"},
      {"--devices cpu,gpu a.png", "--devices: invalid device 'gpu'"},
      {"--worst", "--worst: expects a value (N)"},
      {"--frobnicate a.png", "unknown option '--frobnicate' (see ocrt-infer --help)"},
  };
  check_refusals("ocrt-infer", bin, 2, cases);
}

TEST_CASE("ocrt-infer --help lists its flags, and docs/cli.md describes each", "[infer][cli]") {
  CHECK(help_flags("ocrt-infer").size() >= 20);
  CHECK(undocumented_flags("ocrt-infer").empty());
}

TEST_CASE("ocrt-infer --eval: a bad label line fails alone, and reference characters outside the charset are named",
          "[infer][cli]") {
  ocrt::testing::TempDir dir("infer-eval-labels");
  const std::string samples = std::string(OCRT_SOURCE_DIR) + "/samples/lines/";
  const std::string labels = (dir.path / "labels.txt").string();
  // Line 2 has no tab; line 3's truth holds 'é' and '€', which the shipped ASCII model cannot read.
  std::ofstream(labels) << samples << "000000.png\tThe quick brown fox jumps over the lazy dog.\n"
                        << "just a path without its text\n"
                        << samples << "000000.png\tThe quick brown fox jumps over the lazy d\xc3\xa9g \xe2\x82\xac\n";
  std::string out;
  const int rc = run_command(program("ocrt-infer") + " --threads 1 --eval " + labels, &out);
  INFO(out);
  CHECK(rc == 1);  // one line failed
  CHECK_THAT(out, Catch::Contains("labels.txt line 2: expected 'path<TAB>text', found no tab"));
  CHECK_THAT(out, Catch::Contains("lines          2"));  // both good lines were read and scored
  CHECK_THAT(out, Catch::Contains("not in charset 2 reference characters in 1 lines"));
  CHECK_THAT(out, Catch::Contains("'\xc3\xa9' x1") && Catch::Contains("'\xe2\x82\xac' x1"));
  CHECK_THAT(out, Catch::Contains("3 lines (1 failed)"));
  // The same file through a pipe, and the jsonl summary's count.
  CHECK(run_command("cat " + labels + " | " + program("ocrt-infer") + " --threads 1 --eval --format jsonl /dev/stdin",
                    &out) == 1);
  CHECK_THAT(out, Catch::Contains("\"outside_charset\":{\"chars\":2,\"lines\":1"));
}

TEST_CASE("ocrt-infer decodes with the shipped language model by default, and greedily when asked", "[infer][cli]") {
  const std::string line = std::string(OCRT_SOURCE_DIR) + "/samples/lines/000000.png ";
  const std::string lm = std::string(OCRT_SOURCE_DIR) + "/weights/lm-en.clm";
  std::string out;
  REQUIRE(run_command(program("ocrt-infer") + " --threads 1 " + line, &out) == 0);
  INFO(out);
  CHECK_THAT(out, Catch::Contains("; decoding beam 10 + LM " + lm + " (lines in doubt 0.2)"));
  CHECK_THAT(out, Catch::Contains("The quick brown fox jumps over the lazy dog."));
  // --beam-doubt given: that share; --decoder beam: every line, without an LM unless --lm.
  REQUIRE(run_command(program("ocrt-infer") + " --threads 1 --beam-doubt 0.5 " + line, &out) == 0);
  CHECK_THAT(out, Catch::Contains("; decoding beam 10 + LM " + lm + " (lines in doubt 0.5)"));
  REQUIRE(run_command(program("ocrt-infer") + " --threads 1 --decoder beam " + line, &out) == 0);
  CHECK_THAT(out, Catch::Contains("; decoding beam 10\n"));
  REQUIRE(run_command(program("ocrt-infer") + " --threads 1 --decoder greedy " + line, &out) == 0);
  CHECK_THAT(out, Catch::Contains("; decoding greedy\n"));
  // An LM with greedy decoding is a contradiction.
  CHECK(run_command(program("ocrt-infer") + " --threads 1 --decoder greedy --lm " + lm + " " + line, &out) == 2);
  CHECK_THAT(out, Catch::Contains("a language model is used by beam search only"));
}

TEST_CASE("ocrt-infer reads with the shipped int8 recogniser on CPUs with an int8 kernel, unless told otherwise",
          "[infer][cli]") {
  const std::string line = std::string(OCRT_SOURCE_DIR) + "/samples/lines/000000.png ";
  std::string out;
  REQUIRE(run_command(program("ocrt-infer") + " --threads 1 " + line, &out) == 0);
  INFO(out);
  CHECK_THAT(out, Catch::Contains("The quick brown fox jumps over the lazy dog."));
  if (ocrt::cpu::int8_gemm_simd()) CHECK_THAT(out, Catch::Contains(", int8 ("));
  else CHECK_THAT(out, Catch::Contains(", fp32;"));
  // --precision given, or a weights file named: float32 as asked.
  REQUIRE(run_command(program("ocrt-infer") + " --threads 1 --precision fp32 " + line, &out) == 0);
  CHECK_THAT(out, Catch::Contains(", fp32;"));
  REQUIRE(run_command(program("ocrt-infer") + " --threads 1 --weights " + OCRT_SOURCE_DIR +
                          "/weights/crnn-en.safetensors " + line,
                      &out) == 0);
  CHECK_THAT(out, Catch::Contains(", fp32;"));
}

TEST_CASE("ocrt-infer splits the CPU into one worker a thread, and a lone batch runs on every thread",
          "[infer][cli]") {
  const std::string lines = std::string(OCRT_SOURCE_DIR) + "/samples/lines/000000.png " + OCRT_SOURCE_DIR +
                            "/samples/lines/000001.png ";
  std::string out;
  // auto (the default) and asked for: two workers of one thread each, whatever the path. The two
  // lines are one batch, which the first worker takes with nothing beside it: on both threads.
  for (const std::string flags : {"", "--precision fp32 ", "--precision fp32 --cpu-workers 2 "}) {
    REQUIRE(run_command(program("ocrt-infer") + " --threads 2 " + flags + lines, &out) == 0);
    INFO(flags << out);
    CHECK_THAT(out, Catch::Contains("The quick brown fox jumps over the lazy dog."));
    CHECK_THAT(out, Catch::Contains("worker 1 (cpu)"));
    CHECK_THAT(out, Catch::Contains("2 lines in 1 batches, 100.0%") && Catch::Contains("(1 on every thread)"));
  }
  // One thread, one worker asked for, or one device named: one worker.
  for (const std::string flags : {"--threads 1 ", "--threads 2 --cpu-workers 1 ", "--threads 2 --device cpu "}) {
    REQUIRE(run_command(program("ocrt-infer") + " " + flags + lines, &out) == 0);
    INFO(flags << out);
    CHECK(out.find("worker 1 (cpu)") == std::string::npos);
    CHECK(out.find("on every thread") == std::string::npos);
  }
}

TEST_CASE("ocrt-infer --precision int8 reads int8 files only, and auto follows the shipped files' records",
          "[infer][cli]") {
  const std::string line = std::string(OCRT_SOURCE_DIR) + "/samples/lines/000000.png ";
  const std::string weights = std::string(OCRT_SOURCE_DIR) + "/weights/";
  std::string out;
  // A float file asked to run in int8: refused, naming the tool that makes an int8 file.
  CHECK(run_command(program("ocrt-infer") + " --threads 1 --precision int8 --weights " + weights +
                        "crnn-en.safetensors " + line,
                    &out) == 2);
  CHECK_THAT(out, Catch::Contains("is a float one: make an int8 file of it with ocrt-quantize"));
  if (!ocrt::cpu::int8_gemm_simd()) {
    CHECK(run_command(program("ocrt-infer") + " --threads 1 --precision int8 " + line, &out) == 2);
    CHECK_THAT(out, Catch::Contains("--precision int8 runs on CPUs with an int8 kernel"));
    return;
  }
  REQUIRE(run_command(program("ocrt-infer") + " --threads 1 --precision int8 " + line, &out) == 0);
  INFO(out);
  CHECK_THAT(out, Catch::Contains("The quick brown fox jumps over the lazy dog."));
  CHECK_THAT(out, Catch::Contains(", int8 ("));
  REQUIRE(run_command(program("ocrt-infer") + " --threads 1 --precision int8 --weights " + weights +
                          "crnn-s-en-int8.safetensors " + line,
                      &out) == 0);
  CHECK_THAT(out, Catch::Contains(", int8 ("));
  // auto: the shipped int8 file's record validates int8 (weights/README.md), and the summary
  // gives the record's figures (whatever bench/precision_cer.sh measured for the shipped files).
  std::string int8_why, bf16_why;
  REQUIRE(ocrt::infer::precision_validated(ocrt::infer::load_model(weights + "crnn-en-int8.safetensors").training,
                                           "int8", &int8_why));
  CHECK_THAT(int8_why, Catch::StartsWith("int8 CER "));
  REQUIRE(run_command(program("ocrt-infer") + " --threads 1 --precision auto " + line, &out) == 0);
  CHECK_THAT(out, Catch::Contains(", int8 (") && Catch::Contains("(auto: " + int8_why + ")"));
  // auto with the float file named: bf16 where the CPU has bf16 instructions, by its record.
  const bool bf16_cpu = (int)ocrt::cpu_isa() >= (int)ocrt::CpuIsa::avx512bf16;
  REQUIRE(ocrt::infer::precision_validated(ocrt::infer::load_model(weights + "crnn-en.safetensors").training,
                                           "bf16", &bf16_why));
  REQUIRE(run_command(program("ocrt-infer") + " --threads 1 --precision auto --weights " + weights +
                          "crnn-en.safetensors " + line,
                      &out) == 0);
  CHECK_THAT(out, Catch::Contains(bf16_cpu ? ", bf16 (auto: " + bf16_why + ")" : std::string(", fp32 (auto: the ")));
}
