// Scores page OCR output files against their truth with ocrt's own page scorer
// (infer/page_eval.h, docs/pages.md "Evaluation"), so that any engine that writes hOCR (or ALTO,
// or PAGE XML) is judged by exactly the code that judges `ocrt-infer --eval`. bench/page_bench.sh
// uses it on Tesseract's hOCR and on ocrt's own (--format hocr --output-dir).
//
//   bench_page_score [options] OUTPUT TRUTH [OUTPUT TRUTH ...]
//   bench_page_score [options] --pairs FILE        (OUTPUT<TAB>TRUTH a line)
//
// OUTPUT is read with read_page_truth (hOCR: every ocrx_word's bbox and text, lines from
// ocr_line and its kin; ALTO; PAGE XML) and turned into the Page that score_page judges:
// score_page reads only a Page's words (page_words: text and box, in order) and its text
// (page_text: every line's text), so one line holding the document's words and its text (lines
// apart by '\n', white space squeezed by the scorer on both sides) gives the very score the
// document's own Page would. TRUTH is anything read_page_truth reads (ocrt-synth's NNNNNN.json,
// hOCR, ALTO, PAGE XML); a synth JSON's "layout" groups the pages.
//
// An OUTPUT that is missing or cannot be read counts as a page read as nothing (every truth word
// missed) and is named on stderr and in the table ("failed").
//
// Every page is scored twice: as written, and "folded" (typographic quotes, dashes, ligatures,
// the ellipsis and no-break space in the OUTPUT mapped to ASCII, the map of bench/score_lines.py):
// Tesseract writes the straight quotes of the print as curly ones, which an ASCII truth counts as
// wrong words. ocrt's charset is ASCII, so folding changes nothing for it.
//
// Prints a markdown table per page, the totals, and a table per layout; --json FILE writes the
// same as JSON (the counts of infer/page_eval.h's PageScore::to_json).
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "infer/page.h"
#include "infer/page_eval.h"
#include "runtime/cli.h"
#include "runtime/error.h"
#include "runtime/json.h"

using namespace ocrt;
using namespace ocrt::infer;
namespace fs = std::filesystem;

namespace {

// bench/score_lines.py's FOLD, as UTF-8.
const std::pair<const char*, const char*> kFold[] = {
    {"\u2018", "'"},  {"\u2019", "'"},   {"\u201a", "'"},  {"\u201b", "'"},  {"\u2032", "'"},  {"\u00b4", "'"},
    {"\u201c", "\""}, {"\u201d", "\""},  {"\u201e", "\""}, {"\u201f", "\""}, {"\u2033", "\""}, {"\u2010", "-"},
    {"\u2011", "-"},  {"\u2012", "-"},   {"\u2013", "-"},  {"\u2014", "-"},  {"\u2212", "-"},  {"\ufb00", "ff"},
    {"\ufb01", "fi"}, {"\ufb02", "fl"},  {"\ufb03", "ffi"}, {"\ufb04", "ffl"}, {"\u2026", "..."}, {"\u00a0", " "},
};

std::string fold(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    bool done = false;
    for (const auto& [from, to] : kFold) {
      const std::string f(from);
      if (s.compare(i, f.size(), f) == 0) {
        out += to;
        i += f.size();
        done = true;
        break;
      }
    }
    if (!done) out += s[i++];
  }
  return out;
}

// The Page score_page judges, from a document read by read_page_truth (see the top).
Page page_of(const PageTruth& doc, bool folded) {
  PageLine line;
  line.text = folded ? fold(doc.text) : doc.text;
  for (const TruthWord& w : doc.words) {
    PageWord pw;
    pw.text = folded ? fold(w.text) : w.text;
    pw.box = w.box;
    line.words.push_back(std::move(pw));
  }
  PageBlock block;
  block.lines.push_back(std::move(line));
  Page page;
  page.blocks.push_back(std::move(block));
  return page;
}

std::string layout_of(const std::string& truth_path) {
  std::ifstream in(truth_path, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string::npos || text[first] != '{') return "-";
  try {
    const Json j = parse_json(text);
    if (const Json* l = j.find("layout"); l && l->is_string()) return l->as_string();
  } catch (const std::exception&) {
  }
  return "-";
}

struct Tally {
  int64_t pages = 0, failed = 0;
  PageScore raw, folded;
  void add(const PageScore& r, const PageScore& f, bool fail) {
    ++pages, failed += fail ? 1 : 0;
    raw += r, folded += f;
  }
  Json to_json() const {
    Json j = Json::object();
    j.set("pages", pages);
    j.set("failed", failed);
    j.set("score", raw.to_json());
    j.set("folded", folded.to_json());
    return j;
  }
};

std::string pct(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.2f%%", 100 * v);
  return b;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    std::string pairs_file, json_file, name;
    cli::Parser p("bench_page_score",
                  "usage: bench_page_score [options] OUTPUT TRUTH [OUTPUT TRUTH ...]\n"
                  "Scores page OCR documents (hOCR, ALTO, PAGE XML) against page truth with infer/page_eval.h.\n");
    p.add(cli::text("--pairs", "FILE", pairs_file, "more pairs, OUTPUT<TAB>TRUTH a line"));
    p.add(cli::text("--json", "FILE", json_file, "also write the scores as JSON"));
    p.add(cli::text("--name", "NAME", name, "the engine's name, printed above the tables"));
    const std::vector<std::string> rest = p.parse(argc, argv);
    OCRT_CHECK(rest.size() % 2 == 0, "give pairs of OUTPUT TRUTH (", rest.size(), " arguments)");
    std::vector<std::pair<std::string, std::string>> pairs;
    for (size_t i = 0; i < rest.size(); i += 2) pairs.emplace_back(rest[i], rest[i + 1]);
    if (!pairs_file.empty()) {
      std::ifstream in(pairs_file);
      OCRT_CHECK(in.good(), pairs_file, ": cannot read");
      std::string line;
      while (std::getline(in, line)) {
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.empty()) continue;
        const size_t tab = line.find('\t');
        OCRT_CHECK(tab != std::string::npos, pairs_file, ": a line must be OUTPUT<TAB>TRUTH: '", line, "'");
        pairs.emplace_back(line.substr(0, tab), line.substr(tab + 1));
      }
    }
    OCRT_CHECK(!pairs.empty(), "no pages to score (give OUTPUT TRUTH pairs or --pairs FILE)");

    Tally all;
    std::map<std::string, Tally> by_layout;
    Json per_page = Json::array();
    if (!name.empty()) std::printf("### %s\n\n", name.c_str());
    std::printf("| page | layout | truth words | right | wrong | missed | extra | word acc. | CER | word acc. folded | CER folded |\n");
    std::printf("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
    for (const auto& [output, truth_file] : pairs) {
      const PageTruth truth = read_page_truth(truth_file);  // a bad truth file is the bench's error: stop
      PageTruth doc;
      std::string error;
      if (!fs::exists(output)) {
        error = "no output file";
      } else {
        try {
          doc = read_page_truth(output);
        } catch (const std::exception& e) {
          error = e.what();
        }
      }
      if (!error.empty()) std::fprintf(stderr, "bench_page_score: %s: %s (scored as a page with no words)\n",
                                       output.c_str(), error.c_str());
      const PageScore raw = score_page(page_of(doc, false), truth);
      const PageScore folded = score_page(page_of(doc, true), truth);
      const std::string layout = layout_of(truth_file);
      all.add(raw, folded, !error.empty());
      by_layout[layout].add(raw, folded, !error.empty());
      std::printf("| %s%s | %s | %lld | %lld | %lld | %lld | %lld | %s | %s | %s | %s |\n",
                  fs::path(truth_file).stem().string().c_str(), error.empty() ? "" : " (failed)", layout.c_str(),
                  (long long)raw.truth_words, (long long)raw.right, (long long)raw.wrong, (long long)raw.missed,
                  (long long)raw.extra, pct(raw.word_accuracy()).c_str(), pct(raw.cer()).c_str(),
                  pct(folded.word_accuracy()).c_str(), pct(folded.cer()).c_str());
      Json pj = Json::object();
      pj.set("output", output);
      pj.set("truth", truth_file);
      pj.set("layout", layout);
      if (!error.empty()) pj.set("error", error);
      pj.set("score", raw.to_json());
      pj.set("folded", folded.to_json());
      per_page.push_back(std::move(pj));
    }
    const PageScore& t = all.raw;
    std::printf("| **all (%lld pages, %lld failed)** | | %lld | %lld | %lld | %lld | %lld | %s | %s | %s | %s |\n",
                (long long)all.pages, (long long)all.failed, (long long)t.truth_words, (long long)t.right,
                (long long)t.wrong, (long long)t.missed, (long long)t.extra, pct(t.word_accuracy()).c_str(),
                pct(t.cer()).c_str(), pct(all.folded.word_accuracy()).c_str(), pct(all.folded.cer()).c_str());

    std::printf("\n| layout | pages | truth words | word acc. | missed | extra | CER | word acc. folded | CER folded |\n");
    std::printf("| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
    Json layouts = Json::object();
    for (const auto& [layout, l] : by_layout) {
      std::printf("| %s | %lld | %lld | %s | %lld | %lld | %s | %s | %s |\n", layout.c_str(), (long long)l.pages,
                  (long long)l.raw.truth_words, pct(l.raw.word_accuracy()).c_str(), (long long)l.raw.missed,
                  (long long)l.raw.extra, pct(l.raw.cer()).c_str(), pct(l.folded.word_accuracy()).c_str(),
                  pct(l.folded.cer()).c_str());
      layouts.set(layout, l.to_json());
    }
    if (!json_file.empty()) {
      Json j = all.to_json();
      if (!name.empty()) j.set("name", name);
      j.set("layouts", std::move(layouts));
      j.set("pages_scored", std::move(per_page));
      std::ofstream out(json_file);
      out << j.dump(1) << "\n";
      OCRT_CHECK(out.good(), json_file, ": cannot write");
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_page_score: %s\n", e.what());
    return 1;
  }
}
