// Command-line flags, shared by every ocrt program (ocrt-train, ocrt-synth, ocrt-report,
// ocrt-infer, ocrt-lm, ocrt-export). A program lists its flags in a table: each row is a flag's
// name, the value it takes, where that value goes and its help text. The Parser reads argv
// against the table and writes --help from it, so the help cannot forget a flag:
//
//   cli::Parser p("ocrt-lm", "usage: ocrt-lm --out FILE [options] CORPUS...");
//   p.add(cli::text("--out", "FILE", out, "where to write the model"));
//   p.add(cli::integer("--order", "N", order, 1, 6, "n-gram order, 1..6 (5)"));
//   std::vector<std::string> corpus = p.parse(argc, argv);  // the arguments that are not flags
//
// Both `--flag value` and `--flag=value` work. Every error names the flag: an unknown flag, a
// missing value, and a number that is not exactly one (the whole text, finite, no overflow)
// or lies outside its flag's range (docs/cli.md lists each program's ranges).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "runtime/error.h"

namespace ocrt::cli {

// ---- values: each throws an Error that names the flag and quotes the text it could not use

// A decimal integer in [INT64_MIN, INT64_MAX]: "12", "-3", "+4"; not "1e3", " 5", "0x10", "".
int64_t parse_int(const std::string& flag, const std::string& text);
// An unsigned 64-bit value (seeds): a leading minus is refused, not wrapped to 2^64 - 1.
uint64_t parse_u64(const std::string& flag, const std::string& text);
// A finite number: "1e-3", "0.5", "-2"; NaN, infinities and values beyond a double's range
// (1e400, or 1e-400 that would round to 0) are refused.
double parse_double(const std::string& flag, const std::string& text);
// Where a real number may lie: [lo, hi], or with open ends "(lo, hi)" for > lo, < hi.
struct Range {
  double lo, hi;
  bool lo_open = false, hi_open = false;
  bool contains(double x) const;
  std::string str() const;  // "[0, 1)"
};
// The same, and inside a range: "--batch: must be in [1, 1048576], got 0".
int64_t parse_int(const std::string& flag, const std::string& text, int64_t lo, int64_t hi);
double parse_double(const std::string& flag, const std::string& text, Range range);
// "a,b,,c" -> {"a", "b", "c"}: empty items are dropped.
std::vector<std::string> split_list(const std::string& text);
// "3:28" -> {"3", "28"}; text without a colon is an error quoting `form` ("MIN:MAX").
std::pair<std::string, std::string> split_pair(const std::string& flag, const std::string& text, const char* form);

// ---- the table

struct Flag {
  std::string name;   // "--batch"; empty: a line of help text (a heading, a paragraph)
  std::string value;  // the value's name in the help ("N", "FILE"); empty: a switch, no value
  std::string help;   // the help text; '\n' starts another line
  // Reads the value and stores it (a switch gets ""); throws when it cannot (the Parser puts
  // the flag's name in front of the message when it does not start with it).
  std::function<void(const std::string& value)> set;
};

// A switch: sets `to` to `value` (--augment sets true, --no-augment false).
Flag toggle(const std::string& name, bool& to, bool value, const std::string& help);
// A string, stored as given.
Flag text(const std::string& name, const std::string& value, std::string& to, const std::string& help);
// A comma-separated list (split_list); at least one item.
Flag list(const std::string& name, const std::string& value, std::vector<std::string>& to, const std::string& help);
// An integer in [lo, hi].
Flag integer(const std::string& name, const std::string& value, int64_t& to, int64_t lo, int64_t hi,
             const std::string& help);
Flag integer(const std::string& name, const std::string& value, int& to, int64_t lo, int64_t hi,
             const std::string& help);
// Any unsigned 64-bit value (a seed).
Flag u64(const std::string& name, const std::string& value, uint64_t& to, const std::string& help);

// A finite number in `range`.
Flag real(const std::string& name, const std::string& value, double& to, Range range, const std::string& help);

// One of a few names, read by `parse` (e.g. parse_optimizer_kind, which throws listing the
// names it takes).
template <class T>
Flag choice(const std::string& name, const std::string& value, T& to, T (*parse)(const std::string&),
            const std::string& help) {
  return Flag{name, value, help, [&to, parse](const std::string& v) { to = parse(v); }};
}

// ---- the parser

class Parser {
 public:
  // program: the name in error messages ("ocrt-train"); usage: the first lines of --help.
  Parser(std::string program, std::string usage);

  Parser& add(Flag flag);               // a flag may be added once
  Parser& note(const std::string& text);  // --help text between flags: a heading, a paragraph, ""
  // Where the arguments that are not flags go, in their order among the flags (ocrt-infer reads
  // its inputs and --list files in command-line order); without it, parse() returns them.
  Parser& arguments(std::function<void(const std::string& arg)> take);

  // Reads argv[1..]: stores every flag's value and returns the other arguments in order (a lone
  // "-" is one; after "--" all are). --help and -h print help() to stdout and exit(0). A value
  // that starts with "--" is taken as a forgotten value, not as the value: write --flag=--x.
  std::vector<std::string> parse(int argc, const char* const* argv) const;
  std::vector<std::string> parse(const std::vector<std::string>& args) const;

  // The usage, then each row: "  --flag VALUE" with its help from column 25 (below the flag
  // when the flag is longer), text rows as they are.
  std::string help() const;

 private:
  const Flag* find(const std::string& name) const;
  void set(const Flag& flag, const std::string& value) const;
  std::string program_, usage_;
  std::vector<Flag> rows_;
  std::function<void(const std::string&)> take_argument_;
};

}  // namespace ocrt::cli
