// Scoring a read page against its truth (docs/pages.md, "Evaluation"): words matched by
// position, as page OCR is judged.
//
//   - Each truth word is matched to the output word whose box overlaps it most (by area; no
//     overlap: missed). Several truth words may match one output word (two words read as one):
//     each is then judged against it, so at most one of them can be right.
//   - A matched truth word is right when both texts agree once punctuation is removed
//     (ASCII's and typographic punctuation: without_punctuation below; "end." and "end" agree,
//     "Plaintiff’s" and "Plaintiff's" agree, "end" and "End" do not). A truth word that is
//     only punctuation is right when it is matched at all.
//   - An output word that no truth word matched is extra.
//   - A wrong word is also counted by how it went wrong, where that is plain: joined (its output
//     word was matched by another truth word too: a space not read, "YoYChange" for "YoY" and
//     "Change") or case only ("DAVENPORT" for "Davenport": small capitals, usually); the other
//     wrong words are misread letters, or a space read where there is none.
//   - The CER of the reading-order text: the edit distance, in code points, between the output
//     and the truth texts with every run of white space made one space, over the truth's length.
//
// Word accuracy is right / truth words; missed and extra words are reported beside it, so that
// reading the same word twice (or everything into one box) cannot look good.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "infer/page.h"
#include "runtime/json.h"
#include "runtime/xml.h"

namespace ocrt::infer {

struct TruthWord {
  std::string text;
  Rect box;
};

struct PageTruth {
  std::vector<TruthWord> words;  // in reading order
  std::string text;              // the page's text in reading order (lines apart by '\n')
};

// The truth ocrt-synth --pages writes beside a page (NNNNNN.json: lines of words with their
// outlines, in the order they were drawn, which is the reading order of the layouts it draws).
// Throws naming `name` for a document that is not one.
PageTruth truth_from_synth_json(const std::string& json_text, const std::string& name);

// Truth in the page formats other tools write (and ocrt writes, infer/page_format.h), words in
// document order:
//   hOCR      every element of class ocrx_word: its title's bbox and its text (trimmed); lines
//             are the ocr_line / ocrx_line / ocr_header / ocr_caption / ocr_textfloat elements
//   ALTO      every String: HPOS, VPOS, WIDTH, HEIGHT and CONTENT, in pixels (MeasurementUnit
//             pixel; other units are refused, naming them); lines are the TextLines
//   PAGE XML  every Word: the box of its Coords points and the Unicode of its first TextEquiv;
//             a TextLine without Words gives its own TextEquiv's words, splitting its box by
//             their share of the characters
// A word without text is left out. Throws naming `name` for a document of none of these forms.
PageTruth truth_from_hocr(const XmlElement& root, const std::string& name);
PageTruth truth_from_alto(const XmlElement& root, const std::string& name);
PageTruth truth_from_page_xml(const XmlElement& root, const std::string& name);

// A truth file by its content: ocrt-synth's JSON, hOCR, ALTO or PAGE XML.
PageTruth read_page_truth(const std::string& path);

struct PageScore {
  int64_t truth_words = 0;
  int64_t right = 0;       // matched and agreeing
  int64_t wrong = 0;       // matched, disagreeing; of them:
  int64_t joined = 0;      //   matched to an output word that another truth word matched too
  int64_t case_only = 0;   //   (not joined) agreeing once letter case is ignored as well
  int64_t missed = 0;      // no output word overlaps them
  int64_t extra = 0;       // output words no truth word matched
  int64_t distance = 0;    // edit distance of the reading-order texts, code points
  int64_t truth_chars = 0;

  double word_accuracy() const;  // right / truth_words; 1 for a page with no words and no extra ones
  double cer() const;            // distance / truth_chars; 0 when both are 0, 1 when only truth_chars is
  PageScore& operator+=(const PageScore& o);
  Json to_json() const;          // the counts and both rates
};

// The words of a page's output, in reading order.
std::vector<TruthWord> page_words(const Page& page);

// A truth word that was not read right, and what was read there (--eval lists them).
enum class WordMissKind { wrong, joined, case_only, missed };
const char* word_miss_kind_name(WordMissKind k);  // "wrong", "joined", "case", "missed"
struct WordMiss {
  WordMissKind kind = WordMissKind::wrong;
  std::string truth;
  std::string read;  // the output word it was matched to ("" when missed)
  Rect box;          // the truth word's
  Json to_json() const;
};

// The page's scores; with `misses`, also every truth word not read right, in the truth's order.
PageScore score_page(const Page& output, const PageTruth& truth, std::vector<WordMiss>* misses = nullptr);

// The text with punctuation removed, for comparing words: ASCII punctuation and symbols, and the
// punctuation of Latin-1, General Punctuation and Supplemental Punctuation (curly quotes and
// apostrophes, dashes, bullets, the pilcrow...), so that "Plaintiff’s" as printed and
// "Plaintiff's" as read are the same word.
std::string without_punctuation(const std::string& word);

}  // namespace ocrt::infer
