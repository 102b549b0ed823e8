// ocrt-lm: builds the character n-gram language model that `ocrt-infer --decoder beam --lm FILE`
// decodes with (models/char_lm.h; the file format is in docs/formats.md).
//
// The corpus is UTF-8 text. Text lines are what OCR reads, and a printed line starts and ends
// anywhere in a sentence, so the corpus is read as one stream: every run of whitespace (line
// breaks included) becomes one space, and no line-start or line-end symbol is learnt.
//
// Exit status: 0 the model was written; 2 a bad flag or an unreadable/invalid corpus file.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "models/char_lm.h"
#include "models/charset.h"
#include "runtime/cli.h"
#include "runtime/error.h"

using namespace ocrt;

namespace {

struct LmArgs {
  std::string out;
  int order = 5;
  int64_t min_count = 2;
  std::vector<std::string> skip, held_out;
};

cli::Parser lm_flags(LmArgs& a) {
  cli::Parser p("ocrt-lm", R"(usage: ocrt-lm --out FILE [options] CORPUS...

Builds a character n-gram language model (interpolated Witten-Bell) from UTF-8 text files for
ocrt-infer --decoder beam --lm FILE.
)");
  p.add(cli::text("--out", "FILE", a.out, "where to write the model (written atomically)"));
  p.add(cli::integer("--order", "N", a.order, 1, nn::CharLM::kMaxOrder,
                     "n-gram order, 1..6 (5): the model sees the last N - 1 characters"));
  p.add(cli::integer("--min-count", "N", a.min_count, 1, 1000000000000,
                     "n-grams of order >= 3 seen fewer than N times are not stored (2, >= 1);\n"
                     "their probability mass goes to the shorter contexts"));
  p.add({"--skip-line", "TEXT",
         "drop corpus lines that hold exactly TEXT (after trimming spaces), e.g.\n"
         "--skip-line % for fortune files; may be repeated",
         [&a](const std::string& v) { a.skip.push_back(v); }});
  p.add({"--held-out", "FILE",
         "also report bits per character on this text (read like the corpus);\n"
         "may be repeated",
         [&a](const std::string& v) { a.held_out.push_back(v); }});
  p.note("  --help                 this text\n\n"
         "Every run of whitespace in the corpus (line breaks too) becomes one space; other control\n"
         "characters are dropped, a backspace deletes the character before it (overstrike in old\n"
         "text files).");
  return p;
}

// One file, UTF-8, normalised as described above and appended to `out`.
void read_corpus(const std::string& path, const std::vector<std::string>& skip, std::u32string& out) {
  std::ifstream f(path, std::ios::binary);
  OCRT_CHECK(f.good(), path, ": cannot open: ", std::strerror(errno));
  std::string line;
  int64_t number = 0;
  while (std::getline(f, line)) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const size_t a = line.find_first_not_of(" \t"), b = line.find_last_not_of(" \t");
    const std::string trimmed = a == std::string::npos ? "" : line.substr(a, b - a + 1);
    bool skipped = false;
    for (const std::string& s : skip) skipped = skipped || trimmed == s;
    if (skipped) continue;
    const std::vector<std::string> chars = nn::utf8_chars(line, path + " line " + std::to_string(number));
    for (const std::string& ch : chars) {
      const auto* s = reinterpret_cast<const unsigned char*>(ch.data());
      char32_t cp = ch.size() == 1 ? s[0] : ch.size() == 2 ? (s[0] & 0x1F) : ch.size() == 3 ? (s[0] & 0x0F) : (s[0] & 0x07);
      for (size_t k = 1; k < ch.size(); ++k) cp = (cp << 6) | (s[k] & 0x3F);
      if (cp == '\b') {
        if (!out.empty() && out.back() != U' ') out.pop_back();
      } else if (cp == ' ' || cp == '\t' || cp == '\f' || cp == '\v' || cp == 0xA0) {
        if (!out.empty() && out.back() != U' ') out.push_back(U' ');
      } else if (cp >= 0x20 && cp != 0x7F && !(cp >= 0x80 && cp < 0xA0)) {
        out.push_back(cp);
      }
    }
    if (!out.empty() && out.back() != U' ') out.push_back(U' ');  // the line break
  }
  OCRT_CHECK(f.eof(), path, ": read error after line ", number);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    LmArgs a;
    const std::vector<std::string> corpus = lm_flags(a).parse(argc, argv);
    OCRT_CHECK(!a.out.empty(), "--out FILE is required (see ocrt-lm --help)");
    OCRT_CHECK(!corpus.empty(), "no corpus files given (see ocrt-lm --help)");
    std::u32string text;
    for (const std::string& path : corpus) read_corpus(path, a.skip, text);
    const nn::CharLM lm = nn::CharLM::build(text, a.order, a.min_count);
    lm.save(a.out);
    std::fprintf(stderr, "ocrt-lm: %zu files, %zu characters, vocabulary %d (+ other), order %d, min count %lld: "
                 "%lld n-grams -> %s\n",
                 corpus.size(), text.size(), lm.vocab_size(), lm.order(), (long long)a.min_count, (long long)lm.ngrams(),
                 a.out.c_str());
    for (const std::string& path : a.held_out) {
      std::u32string h;
      read_corpus(path, a.skip, h);
      std::fprintf(stderr, "ocrt-lm: %s: %zu characters, %.3f bits per character\n", path.c_str(), h.size(),
                   lm.bits_per_char(h));
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ocrt-lm: %s\n", e.what());
    return 2;
  }
  return 0;
}
