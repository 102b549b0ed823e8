// The command-line parser (runtime/cli.h): numbers are read strictly, flags by the table,
// errors name the flag, and --help is written from the table.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "runtime/cli.h"

using namespace ocrt;
using Catch::Contains;

TEST_CASE("cli numbers: the whole text, finite, within the type", "[cli]") {
  CHECK(cli::parse_int("--n", "12") == 12);
  CHECK(cli::parse_int("--n", "-3") == -3);
  CHECK(cli::parse_int("--n", "+4") == 4);
  CHECK(cli::parse_int("--n", "9223372036854775807") == INT64_MAX);
  for (const char* bad : {"", " 5", "5 ", "1e3", "0x10", "12abc", "1.0", "nan"})
    CHECK_THROWS_WITH(cli::parse_int("--n", bad), Contains("--n: expected an integer"));
  CHECK_THROWS_WITH(cli::parse_int("--n", "9223372036854775808"), Contains("--n") && Contains("beyond the range"));
  CHECK_THROWS_WITH(cli::parse_int("--n", "-99999999999999999999"), Contains("beyond the range"));

  CHECK(cli::parse_u64("--seed", "18446744073709551615") == UINT64_MAX);
  for (const char* bad : {"-1", "18446744073709551616", " 1", "", "-0"})
    CHECK_THROWS_WITH(cli::parse_u64("--seed", bad), Contains("--seed: expected an integer in [0, 2^64 - 1]"));

  CHECK(cli::parse_double("--lr", "1e-3") == 1e-3);
  CHECK(cli::parse_double("--lr", "-2") == -2);
  CHECK(cli::parse_double("--lr", "1e300") == 1e300);
  for (const char* bad : {"nan", "NaN", "inf", "-inf", "infinity", "1e400", "-1e400"})
    CHECK_THROWS_WITH(cli::parse_double("--lr", bad), Contains("--lr: expected a finite number"));
  for (const char* bad : {"", " 1", "1 ", "1,5", "0.1x", "e5"})
    CHECK_THROWS_WITH(cli::parse_double("--lr", bad), Contains("--lr: expected a number"));
  // 1e-400 would round to 0: a typo, not a request for 0.
  CHECK_THROWS_WITH(cli::parse_double("--lr", "1e-400"), Contains("--lr: 1e-400 is too small for a double"));
}

TEST_CASE("cli lists and pairs", "[cli]") {
  CHECK(cli::split_list("a,b,,c") == std::vector<std::string>{"a", "b", "c"});
  CHECK(cli::split_list(",,").empty());
  CHECK(cli::split_pair("--h", "3:28", "LO:HI") == std::pair<std::string, std::string>{"3", "28"});
  CHECK_THROWS_WITH(cli::split_pair("--h", "3", "LO:HI"), Contains("--h: expected LO:HI, got '3'"));
}

TEST_CASE("cli ranges: closed and open ends, written as intervals", "[cli]") {
  const cli::Range momentum{0, 1, false, true};
  CHECK(momentum.contains(0));
  CHECK(momentum.contains(0.99));
  CHECK_FALSE(momentum.contains(1));
  CHECK_FALSE(momentum.contains(-1e-9));
  CHECK(momentum.str() == "[0, 1)");
  CHECK(cli::Range{0, 1e6, true}.str() == "(0, 1e6]");
  CHECK(cli::Range{0, HUGE_VAL, false, true}.str() == "[0, inf)");
  CHECK(cli::Range{1e-5, 0.25}.str() == "[1e-5, 0.25]");
  CHECK(cli::parse_double("--m", "0.5", momentum) == 0.5);
  CHECK_THROWS_WITH(cli::parse_double("--m", "1", momentum), Contains("--m: must be in [0, 1), got 1"));
  CHECK(cli::parse_int("--n", "7", 1, 7) == 7);
  CHECK_THROWS_WITH(cli::parse_int("--n", "8", 1, 7), Contains("--n: must be in [1, 7], got 8"));
}

namespace {

struct Settings {
  int64_t batch = 32;
  int threads = 0;
  uint64_t seed = 1;
  double lr = 1e-3, momentum = 0.9;
  std::string out = "run";
  std::vector<std::string> train;
  bool augment = true, resume = false;
  std::vector<std::string> lists;  // --list, repeatable
};

int parse_kind(const std::string& name) {
  if (name == "one") return 1;
  if (name == "two") return 2;
  fail("unknown kind '", name, "' (expected one or two)");
}

cli::Parser parser(Settings& s, int& kind) {
  cli::Parser p("ocrt-test", "usage: ocrt-test [options] INPUT...");
  p.note("\nData");
  p.add(cli::list("--train", "SOURCES", s.train, "label files and folders,\nor 'synth'"));
  p.add(cli::integer("--batch", "N", s.batch, 1, 1024, "lines per step (32)"));
  p.add(cli::integer("--threads", "N", s.threads, 0, 64, "CPU threads"));
  p.add(cli::u64("--seed", "S", s.seed, "(1)"));
  p.add(cli::real("--lr", "LR", s.lr, {0, HUGE_VAL, true, true}, "(1e-3)"));
  p.add(cli::real("--momentum", "M", s.momentum, {0, 1, false, true}, "(0.9)"));
  p.add(cli::text("--out", "DIR", s.out, "where to write"));
  p.add(cli::toggle("--no-augment", s.augment, false, "no augmentation"));
  p.add(cli::toggle("--resume", s.resume, true, "continue"));
  p.add(cli::choice("--kind", "one|two", kind, parse_kind, "a choice"));
  p.add({"--list", "FILE", "repeatable", [&s](const std::string& v) { s.lists.push_back(v); }});
  p.add(cli::text("--a-rather-long-flag-name", "VALUE", s.out, "its help below it"));
  p.add({"--device", "D", "a setter whose errors do not name the flag",
         [](const std::string& v) { fail("invalid device '", v, "'"); }});
  p.add({"--named", "X", "a setter whose errors do", [](const std::string&) { fail("--named: no"); }});
  return p;
}

}  // namespace

TEST_CASE("cli parser: --flag value and --flag=value, arguments in order", "[cli]") {
  Settings s;
  int kind = 0;
  const std::vector<std::string> args = parser(s, kind).parse(
      {"a.png", "--batch", "8", "--lr=2e-3", "--train", "x.txt,y", "-", "--no-augment", "--kind=two", "--seed",
       "18446744073709551615", "--list", "l1", "--list=l2", "b.png", "--threads", "0", "--out=", "--", "--resume"});
  CHECK(args == std::vector<std::string>{"a.png", "-", "b.png", "--resume"});
  CHECK(s.batch == 8);
  CHECK(s.lr == 2e-3);
  CHECK(s.train == std::vector<std::string>{"x.txt", "y"});
  CHECK_FALSE(s.augment);
  CHECK_FALSE(s.resume);  // after "--": an argument
  CHECK(kind == 2);
  CHECK(s.seed == UINT64_MAX);
  CHECK(s.lists == std::vector<std::string>{"l1", "l2"});
  CHECK(s.out.empty());  // --out= gives the empty value

  // A program that reads its arguments in order with the flags (ocrt-infer's inputs and --list).
  Settings t;
  std::vector<std::string> order;
  cli::Parser p = parser(t, kind);
  p.arguments([&](const std::string& a) { order.push_back("arg " + a); });
  p.add({"--in", "FILE", "an input", [&](const std::string& v) { order.push_back("in " + v); }});
  CHECK(p.parse({"a", "--in", "b", "c", "--batch", "2", "--in=d"}).empty());
  CHECK(order == std::vector<std::string>{"arg a", "in b", "arg c", "in d"});
}

TEST_CASE("cli parser: every error names the flag", "[cli]") {
  Settings s;
  int kind = 0;
  const cli::Parser p = parser(s, kind);
  auto error = [&](std::vector<std::string> args) -> std::string {
    try {
      p.parse(args);
    } catch (const Error& e) {
      return e.what();
    }
    return "(accepted)";
  };
  CHECK_THAT(error({"--bogus"}), Contains("unknown option '--bogus' (see ocrt-test --help)"));
  CHECK_THAT(error({"--bogus=1"}), Contains("unknown option '--bogus'"));
  CHECK_THAT(error({"-x"}), Contains("unknown option '-x'"));
  CHECK_THAT(error({"--batch"}), Contains("--batch: expects a value (N)"));
  CHECK_THAT(error({"--out", "--resume"}), Contains("--out: expects a value (DIR), got the flag '--resume'"));
  CHECK_THAT(error({"--resume=yes"}), Contains("--resume: takes no value"));
  CHECK_THAT(error({"--batch", "0"}), Contains("--batch: must be in [1, 1024], got 0"));
  CHECK_THAT(error({"--batch=1025"}), Contains("--batch: must be in [1, 1024], got 1025"));
  CHECK_THAT(error({"--batch", "1e3"}), Contains("--batch: expected an integer, got '1e3'"));
  CHECK_THAT(error({"--threads", "99999999999"}), Contains("--threads: must be in [0, 64]"));
  CHECK_THAT(error({"--seed", "-1"}), Contains("--seed: expected an integer in [0, 2^64 - 1], got '-1'"));
  CHECK_THAT(error({"--lr", "0"}), Contains("--lr: must be in (0, inf), got 0"));
  CHECK_THAT(error({"--lr", "nan"}), Contains("--lr: expected a finite number, got 'nan'"));
  CHECK_THAT(error({"--momentum", "5"}), Contains("--momentum: must be in [0, 1), got 5"));
  CHECK_THAT(error({"--momentum", "1"}), Contains("--momentum: must be in [0, 1), got 1"));
  CHECK_THAT(error({"--kind", "three"}), Contains("--kind: unknown kind 'three' (expected one or two)"));
  CHECK_THAT(error({"--train", ","}), Contains("--train: expected one or more items"));
  // The parser puts the flag's name in front of a setter's error, once.
  CHECK(error({"--device", "gpu0"}) == "--device: invalid device 'gpu0'");
  CHECK(error({"--named=1"}) == "--named: no");
  // Negative numbers are values, not flags.
  CHECK_THAT(error({"--lr", "-1"}), Contains("--lr: must be in (0, inf), got -1"));
  // A value that fails leaves the setting as it was.
  CHECK(s.batch == 32);
  CHECK(s.momentum == 0.9);
}

TEST_CASE("cli parser: a flag is in the table once, and --help is written from the table", "[cli]") {
  Settings s;
  int kind = 0;
  cli::Parser p = parser(s, kind);
  CHECK_THROWS_WITH(p.add(cli::text("--out", "DIR", s.out, "again")), Contains("--out is in the table twice"));
  CHECK_THROWS(p.add(cli::text("out", "DIR", s.out, "no dashes")));
  const std::string help = p.help();
  CHECK(help.starts_with("usage: ocrt-test [options] INPUT...\n\nData\n"));
  // Value names and help texts from column 25; continuation lines indented to it; a flag too
  // long for the column has its help on the next line.
  CHECK_THAT(help, Contains("  --train SOURCES        label files and folders,\n"
                            "                         or 'synth'\n"));
  CHECK_THAT(help, Contains("  --no-augment           no augmentation\n"));
  CHECK_THAT(help, Contains("  --a-rather-long-flag-name VALUE\n                         its help below it\n"));
  for (const char* flag : {"--batch N", "--threads N", "--seed S", "--lr LR", "--momentum M", "--out DIR", "--resume",
                           "--kind one|two", "--list FILE"})
    CHECK_THAT(help, Contains(std::string("  ") + flag + " "));
}

TEST_CASE("cli: ranges print small whole numbers as they are written", "[cli]") {
  CHECK(cli::Range{50, 600}.str() == "[50, 600]");  // not [5e1, 6e2]
  CHECK(cli::Range{0, 4096}.str() == "[0, 4096]");
  CHECK(cli::Range{0, 1e9}.str() == "[0, 1e9]");
}
