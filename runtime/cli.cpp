// The command-line parser (see cli.h): strict number parsing, the flag builders, and Parser.
#include "runtime/cli.h"

#include <cerrno>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace ocrt::cli {

namespace {

// strtoll and friends skip leading white space and stop at the first character they cannot
// use; a flag's value must be the number and nothing else.
bool starts_like_a_number(const std::string& text) {
  return !text.empty() && !std::isspace((unsigned char)text[0]);
}

// The shortest text that reads back as x, exponent as a person writes it: 1e-3, 1e6, 0.25.
std::string number_str(double x) {
  char text[32];
  if (x == std::floor(x) && std::fabs(x) < 1e5) {  // a small whole number as one: 50, not 5e1
    std::snprintf(text, sizeof text, "%.0f", x);
    return text;
  }
  for (int digits = 1; digits <= 17; ++digits) {  // 17 significant digits always read back
    std::snprintf(text, sizeof text, "%.*g", digits, x);
    if (std::strtod(text, nullptr) == x) break;
  }
  std::string s = text;
  const size_t e = s.find('e');  // "1e+06" -> "1e6", "1e-05" -> "1e-5"
  if (e == std::string::npos) return s;
  const bool negative = s[e + 1] == '-';
  const size_t digits = s.find_first_not_of("+-0", e + 1);
  return s.substr(0, e) + (negative ? "e-" : "e") + s.substr(digits);
}

}  // namespace

int64_t parse_int(const std::string& flag, const std::string& text) {
  char* end = nullptr;
  errno = 0;
  const long long x = std::strtoll(text.c_str(), &end, 10);
  OCRT_CHECK(starts_like_a_number(text) && *end == '\0', flag, ": expected an integer, got '", text, "'");
  OCRT_CHECK(errno == 0, flag, ": ", text, " is beyond the range of a 64-bit integer");
  return x;
}

uint64_t parse_u64(const std::string& flag, const std::string& text) {
  char* end = nullptr;
  errno = 0;
  const unsigned long long x = std::strtoull(text.c_str(), &end, 10);
  OCRT_CHECK(starts_like_a_number(text) && text[0] != '-' && *end == '\0' && errno == 0, flag,
             ": expected an integer in [0, 2^64 - 1], got '", text, "'");
  return x;
}

double parse_double(const std::string& flag, const std::string& text) {
  char* end = nullptr;
  errno = 0;
  const double x = std::strtod(text.c_str(), &end);
  OCRT_CHECK(starts_like_a_number(text) && *end == '\0', flag, ": expected a number, got '", text, "'");
  OCRT_CHECK(std::isfinite(x), flag, ": expected a finite number, got '", text, "'");
  // ERANGE here is underflow (overflow is an infinity, refused above): a value rounded to 0 or
  // towards it. A setting of 1e-400 is a typo, not a request for 0.
  OCRT_CHECK(errno == 0, flag, ": ", text, " is too small for a double (it would round towards 0)");
  return x;
}

int64_t parse_int(const std::string& flag, const std::string& text, int64_t lo, int64_t hi) {
  const int64_t x = parse_int(flag, text);
  OCRT_CHECK(x >= lo && x <= hi, flag, ": must be in [", lo, ", ", hi, "], got ", x);
  return x;
}

double parse_double(const std::string& flag, const std::string& text, Range range) {
  const double x = parse_double(flag, text);
  OCRT_CHECK(range.contains(x), flag, ": must be in ", range.str(), ", got ", text);
  return x;
}

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    if (comma > start) out.push_back(text.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

std::pair<std::string, std::string> split_pair(const std::string& flag, const std::string& text, const char* form) {
  const size_t colon = text.find(':');
  OCRT_CHECK(colon != std::string::npos, flag, ": expected ", form, ", got '", text, "'");
  return {text.substr(0, colon), text.substr(colon + 1)};
}

// ---- the flag builders

Flag toggle(const std::string& name, bool& to, bool value, const std::string& help) {
  return Flag{name, "", help, [&to, value](const std::string&) { to = value; }};
}

Flag text(const std::string& name, const std::string& value, std::string& to, const std::string& help) {
  return Flag{name, value, help, [&to](const std::string& v) { to = v; }};
}

Flag list(const std::string& name, const std::string& value, std::vector<std::string>& to, const std::string& help) {
  return Flag{name, value, help, [name, &to](const std::string& v) {
                to = split_list(v);
                OCRT_CHECK(!to.empty(), name, ": expected one or more items separated by commas, got '", v, "'");
              }};
}

Flag integer(const std::string& name, const std::string& value, int64_t& to, int64_t lo, int64_t hi,
             const std::string& help) {
  return Flag{name, value, help, [name, &to, lo, hi](const std::string& v) { to = parse_int(name, v, lo, hi); }};
}

Flag integer(const std::string& name, const std::string& value, int& to, int64_t lo, int64_t hi,
             const std::string& help) {
  OCRT_CHECK(lo >= INT32_MIN && hi <= INT32_MAX, name, ": the range of an int flag must fit an int");
  return Flag{name, value, help, [name, &to, lo, hi](const std::string& v) { to = (int)parse_int(name, v, lo, hi); }};
}

Flag u64(const std::string& name, const std::string& value, uint64_t& to, const std::string& help) {
  return Flag{name, value, help, [name, &to](const std::string& v) { to = parse_u64(name, v); }};
}

bool Range::contains(double x) const {
  return (lo_open ? x > lo : x >= lo) && (hi_open ? x < hi : x <= hi);
}

std::string Range::str() const {
  std::string s = lo_open ? "(" : "[";
  s += number_str(lo) + ", " + number_str(hi);
  s += hi_open ? ")" : "]";
  return s;
}

Flag real(const std::string& name, const std::string& value, double& to, Range range, const std::string& help) {
  return Flag{name, value, help, [name, &to, range](const std::string& v) { to = parse_double(name, v, range); }};
}

// ---- the parser

Parser::Parser(std::string program, std::string usage) : program_(std::move(program)), usage_(std::move(usage)) {}

Parser& Parser::add(Flag flag) {
  OCRT_CHECK(flag.name.starts_with("--") && flag.set, program_, ": a flag needs a --name and a setter");
  OCRT_CHECK(!find(flag.name), program_, ": the flag ", flag.name, " is in the table twice");
  rows_.push_back(std::move(flag));
  return *this;
}

Parser& Parser::note(const std::string& text) {
  rows_.push_back(Flag{"", "", text, nullptr});
  return *this;
}

Parser& Parser::arguments(std::function<void(const std::string&)> take) {
  take_argument_ = std::move(take);
  return *this;
}

// Every error of a flag's setter names the flag: "--device: invalid device 'gpu0': ...".
void Parser::set(const Flag& flag, const std::string& value) const {
  try {
    flag.set(value);
  } catch (const std::exception& e) {
    const std::string what = e.what();
    if (what.starts_with(flag.name + ":")) throw;
    fail(flag.name, ": ", what);
  }
}

const Flag* Parser::find(const std::string& name) const {
  for (const Flag& f : rows_)
    if (!f.name.empty() && f.name == name) return &f;
  return nullptr;
}

std::vector<std::string> Parser::parse(int argc, const char* const* argv) const {
  return parse(std::vector<std::string>(argv + 1, argv + argc));
}

std::vector<std::string> Parser::parse(const std::vector<std::string>& args) const {
  std::vector<std::string> others;
  auto argument = [&](const std::string& arg) {
    if (take_argument_) take_argument_(arg);
    else others.push_back(arg);
  };
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {  // everything after it is an argument, even "--weird-name.png"
      for (size_t k = i + 1; k < args.size(); ++k) argument(args[k]);
      break;
    }
    if (arg == "--help" || arg == "-h") {
      std::fputs(help().c_str(), stdout);
      std::exit(0);
    }
    if (arg == "-" || !arg.starts_with("-")) {
      argument(arg);
      continue;
    }
    // --name=value or --name value
    const size_t eq = arg.find('=');
    const std::string name = arg.substr(0, eq);
    const Flag* flag = find(name);
    OCRT_CHECK(flag, "unknown option '", name, "' (see ", program_, " --help)");
    if (flag->value.empty()) {
      OCRT_CHECK(eq == std::string::npos, name, ": takes no value, got '", arg, "'");
      set(*flag, "");
    } else if (eq != std::string::npos) {
      set(*flag, arg.substr(eq + 1));
    } else {
      OCRT_CHECK(i + 1 < args.size(), name, ": expects a value (", flag->value, ")");
      const std::string& value = args[++i];
      OCRT_CHECK(!value.starts_with("--"), name, ": expects a value (", flag->value, "), got the flag '", value,
                 "' (write ", name, "=", value, " if that is the value)");
      set(*flag, value);
    }
  }
  return others;
}

std::string Parser::help() const {
  constexpr size_t kColumn = 25;  // where help texts start
  const std::string indent(kColumn, ' ');
  std::string out = usage_ + "\n";
  for (const Flag& f : rows_) {
    if (f.name.empty()) {
      out += f.help + "\n";
      continue;
    }
    std::string head = "  " + f.name + (f.value.empty() ? "" : " " + f.value);
    head += head.size() + 1 < kColumn ? std::string(kColumn - head.size(), ' ') : "\n" + indent;
    std::istringstream lines(f.help);
    std::string line;
    bool first = true;
    while (std::getline(lines, line)) {
      out += (first ? head : indent) + line + "\n";
      first = false;
    }
    if (first) out += head + "\n";
  }
  return out;
}

}  // namespace ocrt::cli
