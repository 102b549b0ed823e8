// Writing pages (infer/page.h) in the formats OCR tools exchange (docs/pages.md shows each):
//   text   the text in reading order, a blank line between blocks
//   hocr   hOCR 1.2 (XHTML): ocr_page, ocr_carea, ocr_par, ocr_line, ocrx_word with bbox,
//          baseline and x_wconf; x_bboxes and x_confs per character on request
//   alto   ALTO v4 (alto-4-4.xsd): Page, PrintSpace, TextBlock, TextLine, String and SP
//   page   PAGE XML 2019-07-15: TextRegion, TextLine, Word, Glyph on request, with Coords and
//          TextEquiv; a PAGE document holds one page
//   jsonl  one JSON object per page: blocks, lines, words (and characters) with boxes and
//          confidences
// Boxes are written as whole pixels: x0, y0 rounded down and x1, y1 up, so that a box always
// covers what it marks. Text is escaped for XML; bytes that are not valid UTF-8 become U+FFFD.
#pragma once
#include <string>
#include <vector>

#include "infer/page.h"

namespace ocrt::infer {

enum class PageFormat { text, hocr, alto, page, jsonl };
PageFormat parse_page_format(const std::string& name);  // "text", "hocr", "alto", "page", "jsonl"
const char* page_format_name(PageFormat f);
// The file name extension ocrt-infer --output-dir gives a format: .txt, .hocr, .xml, .xml, .json
const char* page_format_extension(PageFormat f);

struct PageFormatOptions {
  bool char_boxes = false;       // hOCR x_bboxes/x_confs, PAGE Glyphs, ALTO Glyphs, jsonl "chars"
  std::string software = "ocrt";  // what the documents name as their producer
  std::string created;           // PAGE XML's Created/LastChange (ISO 8601); empty: the current time
};

// One document holding `pages` (a multi-page input gives several). PAGE XML holds exactly one
// page: more is an error (write one document per page).
std::string format_pages(const std::vector<Page>& pages, PageFormat format, const PageFormatOptions& o = {});

}  // namespace ocrt::infer
