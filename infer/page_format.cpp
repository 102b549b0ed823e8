#include "infer/page_format.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>

#include "runtime/error.h"
#include "runtime/json.h"
#include "runtime/text.h"

namespace ocrt::infer {

PageFormat parse_page_format(const std::string& name) {
  if (name == "text") return PageFormat::text;
  if (name == "hocr") return PageFormat::hocr;
  if (name == "alto") return PageFormat::alto;
  if (name == "page") return PageFormat::page;
  if (name == "jsonl") return PageFormat::jsonl;
  fail("unknown page format '", name, "' (expected text, hocr, alto, page or jsonl)");
}

const char* page_format_name(PageFormat f) {
  switch (f) {
    case PageFormat::text: return "text";
    case PageFormat::hocr: return "hocr";
    case PageFormat::alto: return "alto";
    case PageFormat::page: return "page";
    case PageFormat::jsonl: return "jsonl";
  }
  return "?";
}

const char* page_format_extension(PageFormat f) {
  switch (f) {
    case PageFormat::text: return ".txt";
    case PageFormat::hocr: return ".hocr";
    case PageFormat::alto: case PageFormat::page: return ".xml";
    case PageFormat::jsonl: return ".json";
  }
  return "";
}

namespace {

// A box in whole pixels that covers the box it comes from, inside the page when its size is known.
struct PixelBox {
  int64_t x0, y0, x1, y1;
  int64_t width() const { return x1 - x0; }
  int64_t height() const { return y1 - y0; }
};

PixelBox pixels(const Rect& r, const Page& page) {
  auto clamp = [](double v, int64_t hi) {
    if (!std::isfinite(v)) return (int64_t)0;
    const double c = std::max(0.0, hi > 0 ? std::min(v, (double)hi) : std::min(v, 1e15));
    return (int64_t)c;
  };
  PixelBox b{clamp(std::floor(r.x0), page.width), clamp(std::floor(r.y0), page.height),
             clamp(std::ceil(r.x1), page.width), clamp(std::ceil(r.y1), page.height)};
  b.x1 = std::max(b.x1, b.x0), b.y1 = std::max(b.y1, b.y0);
  return b;
}

std::string num(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, std::isfinite(v) ? v : 0.0);
  return buf;
}

std::string bbox(const PixelBox& b) {
  return std::to_string(b.x0) + " " + std::to_string(b.y0) + " " + std::to_string(b.x1) + " " + std::to_string(b.y1);
}

// The line's baseline: its bottom edge raised by a fifth of its height (the share of the
// descenders in Latin print), as a slope and the point where it crosses the left side.
struct Baseline {
  double slope = 0;
  Point left, right;
};
Baseline baseline_of(const PageLine& l) {
  const auto& c = l.outline.corners;
  const Point a{c[3].x + 0.2 * (c[0].x - c[3].x), c[3].y + 0.2 * (c[0].y - c[3].y)};
  const Point b{c[2].x + 0.2 * (c[1].x - c[2].x), c[2].y + 0.2 * (c[1].y - c[2].y)};
  Baseline bl;
  bl.slope = b.x != a.x ? (b.y - a.y) / (b.x - a.x) : 0;
  bl.left = a, bl.right = b;
  return bl;
}

double confidence01(double c) { return std::isfinite(c) ? std::clamp(c, 0.0, 1.0) : 0.0; }

std::string iso_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  return buf;
}

// ---- hOCR

void write_hocr(std::string& out, const std::vector<Page>& pages, const PageFormatOptions& o) {
  out += "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
         "<!DOCTYPE html PUBLIC \"-//W3C//DTD XHTML 1.0 Transitional//EN\"\n"
         "    \"http://www.w3.org/TR/xhtml1/DTD/xhtml1-transitional.dtd\">\n"
         "<html xmlns=\"http://www.w3.org/1999/xhtml\" xml:lang=\"en\" lang=\"en\">\n <head>\n  <title>";
  out += pages.empty() ? "" : xml_escape(pages[0].name);
  out += "</title>\n  <meta http-equiv=\"Content-Type\" content=\"text/html;charset=utf-8\"/>\n"
         "  <meta name=\"ocr-system\" content=\"" + xml_escape(o.software) + "\"/>\n"
         "  <meta name=\"ocr-capabilities\" content=\"ocr_page ocr_carea ocr_par ocr_line ocrx_word ocrp_wconf";
  out += o.char_boxes ? " ocrp_x_bboxes\"/>\n" : "\"/>\n";
  out += " </head>\n <body>\n";
  for (size_t p = 0; p < pages.size(); ++p) {
    const Page& page = pages[p];
    const std::string pn = std::to_string(p + 1);
    out += "  <div class=\"ocr_page\" id=\"page_" + pn + "\" title=\"" +
           xml_escape("image \"" + page.name + "\"; bbox 0 0 " + std::to_string(page.width) + " " +
                      std::to_string(page.height) + "; ppageno " + std::to_string(p)) + "\">\n";
    int64_t line_no = 0, word_no = 0;
    for (size_t b = 0; b < page.blocks.size(); ++b) {
      const PageBlock& block = page.blocks[b];
      const std::string id = pn + "_" + std::to_string(b + 1);
      const std::string box = bbox(pixels(block.box, page));
      out += "   <div class=\"ocr_carea\" id=\"block_" + id + "\" title=\"bbox " + box + "\">\n";
      out += "    <p class=\"ocr_par\" id=\"par_" + id + "\" title=\"bbox " + box + "\">\n";
      for (const PageLine& line : block.lines) {
        const PixelBox lb = pixels(line.box, page);
        const Baseline bl = baseline_of(line);
        const double offset = bl.left.y + bl.slope * ((double)lb.x0 - bl.left.x) - (double)lb.y1;
        out += "     <span class=\"ocr_line\" id=\"line_" + pn + "_" + std::to_string(++line_no) + "\" title=\"bbox " +
               bbox(lb) + "; baseline " + num(bl.slope, 4) + " " + num(offset, 1) + "; x_size " +
               num((double)lb.height(), 1) + "\">";
        for (size_t w = 0; w < line.words.size(); ++w) {
          const PageWord& word = line.words[w];
          if (w > 0) out += ' ';
          out += "\n      <span class=\"ocrx_word\" id=\"word_" + pn + "_" + std::to_string(++word_no) + "\" title=\"bbox " +
                 bbox(pixels(word.box, page)) + "; x_wconf " + num(100 * confidence01(word.confidence), 0);
          if (o.char_boxes) {
            out += "; x_bboxes";
            for (const PageChar& ch : word.chars) out.append(" ").append(bbox(pixels(ch.box, page)));
            out += "; x_confs";
            for (const PageChar& ch : word.chars) out.append(" ").append(num(100 * confidence01(ch.confidence), 1));
          }
          out += "\">" + xml_escape(word.text) + "</span>";
        }
        out += "\n     </span>\n";
      }
      out += "    </p>\n   </div>\n";
    }
    out += "  </div>\n";
  }
  out += " </body>\n</html>\n";
}

// ---- ALTO v4

std::string alto_position(const PixelBox& b) {
  return "HPOS=\"" + std::to_string(b.x0) + "\" VPOS=\"" + std::to_string(b.y0) + "\" WIDTH=\"" +
         std::to_string(b.width()) + "\" HEIGHT=\"" + std::to_string(b.height()) + "\"";
}

// "x,y x,y ...": a polygon's points rounded to the nearest pixel, inside the page.
std::string points(const std::vector<Point>& pts, const Page& page) {
  std::string s;
  for (const Point& p : pts) {
    const PixelBox b = pixels(Rect{std::round(p.x), std::round(p.y), std::round(p.x), std::round(p.y)}, page);
    if (!s.empty()) s += ' ';
    s += std::to_string(b.x0) + "," + std::to_string(b.y0);
  }
  return s;
}

void write_alto(std::string& out, const std::vector<Page>& pages, const PageFormatOptions& o) {
  out += "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
         "<alto xmlns=\"http://www.loc.gov/standards/alto/ns-v4#\" "
         "xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\" "
         "xsi:schemaLocation=\"http://www.loc.gov/standards/alto/ns-v4# http://www.loc.gov/alto/v4/alto-4-4.xsd\">\n"
         "  <Description>\n    <MeasurementUnit>pixel</MeasurementUnit>\n";
  if (!pages.empty())
    out += "    <sourceImageInformation>\n      <fileName>" + xml_escape(pages[0].name) +
           "</fileName>\n    </sourceImageInformation>\n";
  out += "    <Processing ID=\"processing_1\">\n      <processingSoftware>\n        <softwareName>" +
         xml_escape(o.software) + "</softwareName>\n      </processingSoftware>\n    </Processing>\n"
         "  </Description>\n  <Layout>\n";
  int64_t block_no = 0, line_no = 0, string_no = 0, glyph_no = 0;
  for (size_t p = 0; p < pages.size(); ++p) {
    const Page& page = pages[p];
    const PixelBox whole = pixels(Rect{0, 0, (double)page.width, (double)page.height}, page);
    out += "    <Page ID=\"page_" + std::to_string(p + 1) + "\" PHYSICAL_IMG_NR=\"" + std::to_string(p + 1) +
           "\" WIDTH=\"" + std::to_string(page.width) + "\" HEIGHT=\"" + std::to_string(page.height) + "\">\n";
    out += "      <PrintSpace " + alto_position(whole) + ">\n";
    for (const PageBlock& block : page.blocks) {
      bool any = false;  // a TextLine needs a String, a TextBlock may be empty
      out += "        <TextBlock ID=\"block_" + std::to_string(++block_no) + "\" " + alto_position(pixels(block.box, page)) + ">\n";
      for (const PageLine& line : block.lines) {
        if (line.words.empty()) continue;
        any = true;
        const Baseline bl = baseline_of(line);
        out += "          <TextLine ID=\"line_" + std::to_string(++line_no) + "\" " + alto_position(pixels(line.box, page)) +
               " BASELINE=\"" + points({bl.left, bl.right}, page) + "\">\n";
        for (size_t w = 0; w < line.words.size(); ++w) {
          const PageWord& word = line.words[w];
          const PixelBox wb = pixels(word.box, page);
          if (w > 0) {
            const PixelBox prev = pixels(line.words[w - 1].box, page);
            out += "            <SP HPOS=\"" + std::to_string(prev.x1) + "\" VPOS=\"" + std::to_string(wb.y0) +
                   "\" WIDTH=\"" + std::to_string(std::max<int64_t>(0, wb.x0 - prev.x1)) + "\"/>\n";
          }
          out += "            <String ID=\"string_" + std::to_string(++string_no) + "\" " + alto_position(wb) +
                 " CONTENT=\"" + xml_escape(word.text) + "\" WC=\"" + num(confidence01(word.confidence), 3) + "\"";
          if (!o.char_boxes) {
            out += "/>\n";
            continue;
          }
          out += ">\n";
          for (const PageChar& ch : word.chars)
            out += "              <Glyph ID=\"glyph_" + std::to_string(++glyph_no) + "\" CONTENT=\"" + xml_escape(ch.ch) +
                   "\" " + alto_position(pixels(ch.box, page)) + " GC=\"" + num(confidence01(ch.confidence), 3) + "\"/>\n";
          out += "            </String>\n";
        }
        out += "          </TextLine>\n";
      }
      (void)any;
      out += "        </TextBlock>\n";
    }
    out += "      </PrintSpace>\n    </Page>\n";
  }
  out += "  </Layout>\n</alto>\n";
}

// ---- PAGE XML 2019-07-15

std::vector<Point> corners_of(const Rect& r) { return {{r.x0, r.y0}, {r.x1, r.y0}, {r.x1, r.y1}, {r.x0, r.y1}}; }

std::string text_equiv(const std::string& indent, const std::string& text, double conf) {
  return indent + "<TextEquiv conf=\"" + num(confidence01(conf), 3) + "\">\n" + indent + "  <Unicode>" +
         xml_escape(text) + "</Unicode>\n" + indent + "</TextEquiv>\n";
}

void write_page_xml(std::string& out, const Page& page, const PageFormatOptions& o) {
  const std::string created = o.created.empty() ? iso_now() : o.created;
  out += "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
         "<PcGts xmlns=\"http://schema.primaresearch.org/PAGE/gts/pagecontent/2019-07-15\" "
         "xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\" "
         "xsi:schemaLocation=\"http://schema.primaresearch.org/PAGE/gts/pagecontent/2019-07-15 "
         "http://schema.primaresearch.org/PAGE/gts/pagecontent/2019-07-15/pagecontent.xsd\">\n"
         "  <Metadata>\n    <Creator>" + xml_escape(o.software) + "</Creator>\n    <Created>" + xml_escape(created) +
         "</Created>\n    <LastChange>" + xml_escape(created) + "</LastChange>\n  </Metadata>\n";
  out += "  <Page imageFilename=\"" + xml_escape(page.name) + "\" imageWidth=\"" + std::to_string(page.width) +
         "\" imageHeight=\"" + std::to_string(page.height) + "\">\n";
  if (!page.blocks.empty()) {
    out += "    <ReadingOrder>\n      <OrderedGroup id=\"reading_order\">\n";
    for (size_t b = 0; b < page.blocks.size(); ++b)
      out += "        <RegionRefIndexed index=\"" + std::to_string(b) + "\" regionRef=\"region_" + std::to_string(b + 1) + "\"/>\n";
    out += "      </OrderedGroup>\n    </ReadingOrder>\n";
  }
  int64_t line_no = 0, word_no = 0, glyph_no = 0;
  for (size_t b = 0; b < page.blocks.size(); ++b) {
    const PageBlock& block = page.blocks[b];
    out += "    <TextRegion id=\"region_" + std::to_string(b + 1) + "\">\n      <Coords points=\"" +
           points(corners_of(block.box), page) + "\"/>\n";
    std::string region_text;
    for (const PageLine& line : block.lines) {
      const Baseline bl = baseline_of(line);
      const auto& c = line.outline.corners;
      out += "      <TextLine id=\"line_" + std::to_string(++line_no) + "\">\n        <Coords points=\"" +
             points({c[0], c[1], c[2], c[3]}, page) + "\"/>\n        <Baseline points=\"" + points({bl.left, bl.right}, page) + "\"/>\n";
      for (const PageWord& word : line.words) {
        out += "        <Word id=\"word_" + std::to_string(++word_no) + "\">\n          <Coords points=\"" +
               points(corners_of(word.box), page) + "\"/>\n";
        if (o.char_boxes)
          for (const PageChar& ch : word.chars)
            out += "          <Glyph id=\"glyph_" + std::to_string(++glyph_no) + "\">\n            <Coords points=\"" +
                   points(corners_of(ch.box), page) + "\"/>\n" + text_equiv("            ", ch.ch, ch.confidence) +
                   "          </Glyph>\n";
        out += text_equiv("          ", word.text, word.confidence) + "        </Word>\n";
      }
      out += text_equiv("        ", line.text, line.confidence) + "      </TextLine>\n";
      region_text += (region_text.empty() ? "" : "\n") + line.text;
    }
    double conf = 0;
    for (const PageLine& line : block.lines) conf += confidence01(line.confidence);
    conf = block.lines.empty() ? 0 : conf / (double)block.lines.size();
    out += text_equiv("      ", region_text, conf) + "    </TextRegion>\n";
  }
  out += "  </Page>\n</PcGts>\n";
}

// ---- JSON lines

Json box_json(const Rect& r, const Page& page) {
  const PixelBox b = pixels(r, page);
  Json j = Json::array();
  for (int64_t v : {b.x0, b.y0, b.x1, b.y1}) j.push_back(v);
  return j;
}

Json page_json(const Page& page, const PageFormatOptions& o) {
  Json blocks = Json::array();
  for (const PageBlock& block : page.blocks) {
    Json lines = Json::array();
    for (const PageLine& line : block.lines) {
      Json words = Json::array();
      for (const PageWord& word : line.words) {
        Json w = Json::object();
        w.set("text", valid_utf8(word.text));
        w.set("box", box_json(word.box, page));
        w.set("confidence", confidence01(word.confidence));
        if (o.char_boxes) {
          Json chars = Json::array();
          for (const PageChar& ch : word.chars) {
            Json c = Json::object();
            c.set("c", valid_utf8(ch.ch));
            c.set("box", box_json(ch.box, page));
            c.set("confidence", confidence01(ch.confidence));
            chars.push_back(c);
          }
          w.set("chars", chars);
        }
        words.push_back(w);
      }
      Json outline = Json::array();
      for (const Point& p : line.outline.corners) {
        Json pt = Json::array();
        pt.push_back(std::isfinite(p.x) ? std::round(p.x * 10) / 10 : 0.0);
        pt.push_back(std::isfinite(p.y) ? std::round(p.y * 10) / 10 : 0.0);
        outline.push_back(pt);
      }
      Json l = Json::object();
      l.set("text", valid_utf8(line.text));
      l.set("confidence", confidence01(line.confidence));
      l.set("box", box_json(line.box, page));
      l.set("outline", outline);
      l.set("words", words);
      if (!line.error.empty()) l.set("error", valid_utf8(line.error));
      lines.push_back(l);
    }
    Json b = Json::object();
    b.set("box", box_json(block.box, page));
    b.set("lines", lines);
    blocks.push_back(b);
  }
  Json j = Json::object();
  j.set("path", valid_utf8(page.name));
  j.set("width", page.width);
  j.set("height", page.height);
  j.set("rotation", (int64_t)page.rotation);
  j.set("text", valid_utf8(page_text(page)));
  j.set("blocks", blocks);
  if (!page.error.empty()) j.set("error", valid_utf8(page.error));
  return j;
}

}  // namespace

std::string format_pages(const std::vector<Page>& pages, PageFormat format, const PageFormatOptions& o) {
  std::string out;
  switch (format) {
    case PageFormat::text:
      for (size_t p = 0; p < pages.size(); ++p) {
        if (p > 0) out += '\f';  // pages apart, as pdftotext and Tesseract do
        out += page_text(pages[p]);
      }
      break;
    case PageFormat::hocr: write_hocr(out, pages, o); break;
    case PageFormat::alto: write_alto(out, pages, o); break;
    case PageFormat::page:
      OCRT_CHECK(pages.size() == 1, "a PAGE XML document holds one page (got ", pages.size(), ")");
      write_page_xml(out, pages[0], o);
      break;
    case PageFormat::jsonl:
      for (const Page& page : pages) out += page_json(page, o).dump() + "\n";
      break;
  }
  return out;
}

}  // namespace ocrt::infer
