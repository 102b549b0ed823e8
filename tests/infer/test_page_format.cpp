// The page formats (infer/page_format.h) on a page built by hand: two blocks, a line with
// text that needs escaping (and bytes that are not UTF-8), a failed line and a line with no
// words. Every XML format must be well-formed (tests/xml_check.h) and carry the exact boxes;
// docs/pages.md says how the documents were checked against the ALTO and PAGE schemas:
// with OCRT_PAGE_XML_DIR set, the last test case writes them there for
// tools/validate_page_xml.sh.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "infer/page_format.h"
#include "runtime/json.h"
#include "xml_check.h"

using namespace ocrt;
using namespace ocrt::infer;
using ocrt::testing::xml_problem;

namespace {

PageWord word(const std::string& text, Rect box, double conf) {
  PageWord w;
  w.text = text;
  w.box = box;
  w.confidence = conf;
  const double step = box.width() / (double)text.size();
  for (size_t i = 0; i < text.size(); ++i)
    w.chars.push_back({std::string(1, text[i]), Rect{box.x0 + step * (double)i, box.y0, box.x0 + step * (double)(i + 1), box.y1}, conf});
  return w;
}

PageLine line(const std::string& text, Rect box, std::vector<PageWord> words) {
  PageLine l;
  l.text = text;
  l.outline = Quad::from_rect(box);
  l.box = box;
  l.confidence = 0.9;
  l.words = std::move(words);
  return l;
}

Page sample_page() {
  Page p;
  p.name = "scan \"1\" <a&b>.png";
  p.width = 1000, p.height = 800;
  PageBlock b1;
  b1.lines.push_back(line("Hello world", {100.4, 50.2, 400.6, 80.7},
                          {word("Hello", {100.4, 50.2, 240.5, 80.7}, 0.96), word("world", {260.2, 50.2, 400.6, 80.7}, 0.5)}));
  b1.lines.push_back(line("a<b & \"c\" \xff", {100, 90, 400, 120},
                          {word("a<b", {100, 90, 150, 120}, 0.8), word("&", {160, 90, 170, 120}, 0.7),
                           word("\"c\"", {180, 90, 220, 120}, 0.9), word("\xff", {230, 90, 240, 120}, 0.2)}));
  b1.box = b1.lines[0].box.united(b1.lines[1].box);
  PageBlock b2;
  PageLine failed = line("", {100, 300, 400, 330}, {});
  failed.error = "cannot read";
  b2.lines.push_back(failed);
  b2.lines.push_back(line("", {100, 340, 400, 370}, {}));  // blank
  b2.lines.push_back(line("end", {100, 380, 1200, 410}, {word("end", {100, 380, 1200, 410}, 1.0)}));  // past the edge
  b2.box = b2.lines[0].box.united(b2.lines[2].box);
  p.blocks = {b1, b2};
  return p;
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("page formats: names and extensions", "[page]") {
  for (const char* name : {"text", "hocr", "alto", "page", "jsonl"})
    CHECK(std::string(page_format_name(parse_page_format(name))) == name);
  CHECK_THROWS_WITH(parse_page_format("pdf"), Catch::Contains("text, hocr, alto, page or jsonl"));
  CHECK(std::string(page_format_extension(PageFormat::hocr)) == ".hocr");
  CHECK(std::string(page_format_extension(PageFormat::alto)) == ".xml");
  CHECK(std::string(page_format_extension(PageFormat::jsonl)) == ".json");
}

TEST_CASE("page formats: text", "[page]") {
  const Page p = sample_page();
  CHECK(format_pages({p}, PageFormat::text) == "Hello world\na<b & \"c\" \xff\n\n\n\nend\n");
  CHECK(format_pages({p, p}, PageFormat::text) == page_text(p) + "\f" + page_text(p));
  CHECK(format_pages({}, PageFormat::text).empty());
}

TEST_CASE("page formats: hOCR", "[page]") {
  PageFormatOptions o;
  const std::string h = format_pages({sample_page()}, PageFormat::hocr, o);
  CHECK(xml_problem(h) == "");
  CHECK(contains(h, "class=\"ocr_page\" id=\"page_1\" title=\"image &quot;scan &quot;1&quot; &lt;a&amp;b&gt;.png&quot;; bbox 0 0 1000 800; ppageno 0\""));
  CHECK(contains(h, "class=\"ocr_carea\" id=\"block_1_1\" title=\"bbox 100 50 401 120\""));
  CHECK(contains(h, "class=\"ocr_line\" id=\"line_1_1\" title=\"bbox 100 50 401 81; baseline 0.0000 -6.4; x_size 31.0\""));
  CHECK(contains(h, "title=\"bbox 100 50 241 81; x_wconf 96\">Hello</span>"));
  CHECK(contains(h, ">a&lt;b</span>"));
  CHECK(contains(h, ">&amp;</span>"));
  CHECK(contains(h, ">\xEF\xBF\xBD</span>"));  // not UTF-8: U+FFFD
  CHECK(contains(h, "title=\"bbox 100 380 1000 410; x_wconf 100\">end</span>"));  // clamped to the page
  CHECK_FALSE(contains(h, "x_bboxes"));
  o.char_boxes = true;
  const std::string hc = format_pages({sample_page(), sample_page()}, PageFormat::hocr, o);
  CHECK(xml_problem(hc) == "");
  CHECK(contains(hc, "x_wconf 96; x_bboxes 100 50 129 81 128 50 157 81 156 50 185 81 184 50 213 81 212 50 241 81; x_confs 96.0 96.0 96.0 96.0 96.0\""));
  CHECK(contains(hc, "id=\"page_2\""));
  CHECK(contains(hc, "id=\"word_2_1\""));
}

TEST_CASE("page formats: ALTO v4", "[page]") {
  PageFormatOptions o;
  const std::string a = format_pages({sample_page()}, PageFormat::alto, o);
  CHECK(xml_problem(a) == "");
  CHECK(contains(a, "xmlns=\"http://www.loc.gov/standards/alto/ns-v4#\""));
  CHECK(contains(a, "<MeasurementUnit>pixel</MeasurementUnit>"));
  CHECK(contains(a, "<Page ID=\"page_1\" PHYSICAL_IMG_NR=\"1\" WIDTH=\"1000\" HEIGHT=\"800\">"));
  CHECK(contains(a, "<String ID=\"string_1\" HPOS=\"100\" VPOS=\"50\" WIDTH=\"141\" HEIGHT=\"31\" CONTENT=\"Hello\" WC=\"0.960\"/>"));
  CHECK(contains(a, "<SP HPOS=\"241\" VPOS=\"50\" WIDTH=\"19\"/>"));
  CHECK(contains(a, "CONTENT=\"&quot;c&quot;\""));
  CHECK(contains(a, "BASELINE=\"100,75 401,75\""));
  // A TextLine needs a String: the failed and the blank line are left out, the block stays.
  size_t lines = 0;
  for (size_t at = a.find("<TextLine "); at != std::string::npos; at = a.find("<TextLine ", at + 1)) ++lines;
  CHECK(lines == 3);
  CHECK_FALSE(contains(a, "<Glyph"));
  o.char_boxes = true;
  const std::string ag = format_pages({sample_page()}, PageFormat::alto, o);
  CHECK(xml_problem(ag) == "");
  CHECK(contains(ag, "<Glyph ID=\"glyph_1\" CONTENT=\"H\" HPOS=\"100\" VPOS=\"50\" WIDTH=\"29\" HEIGHT=\"31\" GC=\"0.960\"/>"));
}

TEST_CASE("page formats: PAGE XML", "[page]") {
  PageFormatOptions o;
  o.created = "2026-11-25T10:00:00";
  const std::string x = format_pages({sample_page()}, PageFormat::page, o);
  CHECK(xml_problem(x) == "");
  CHECK(contains(x, "<Created>2026-11-25T10:00:00</Created>"));
  CHECK(contains(x, "imageFilename=\"scan &quot;1&quot; &lt;a&amp;b&gt;.png\" imageWidth=\"1000\" imageHeight=\"800\""));
  CHECK(contains(x, "<RegionRefIndexed index=\"1\" regionRef=\"region_2\"/>"));
  CHECK(contains(x, "<TextLine id=\"line_1\">\n        <Coords points=\"100,50 401,50 401,81 100,81\"/>"));
  CHECK(contains(x, "<Unicode>a&lt;b &amp; &quot;c&quot; \xEF\xBF\xBD</Unicode>"));
  CHECK(contains(x, "<TextEquiv conf=\"0.500\">\n            <Unicode>world</Unicode>"));
  // Every points attribute as the schema's pattern has it: non-negative x,y pairs.
  const std::regex pts("points=\"([^\"]*)\"");
  const std::regex pattern("([0-9]+,[0-9]+ )+([0-9]+,[0-9]+)");
  int checked = 0;
  for (auto it = std::sregex_iterator(x.begin(), x.end(), pts); it != std::sregex_iterator(); ++it, ++checked)
    CHECK(std::regex_match((*it)[1].str(), pattern));
  CHECK(checked > 10);
  CHECK_THROWS_WITH(format_pages({sample_page(), sample_page()}, PageFormat::page), Catch::Contains("one page"));
  o.char_boxes = true;
  CHECK(xml_problem(format_pages({sample_page()}, PageFormat::page, o)) == "");
  CHECK(contains(format_pages({sample_page()}, PageFormat::page, o), "<Glyph id=\"glyph_1\">"));
}

TEST_CASE("page formats: JSON lines", "[page]") {
  PageFormatOptions o;
  o.char_boxes = true;
  Page turned = sample_page();
  turned.rotation = 270;  // found turned by 270 degrees (PageReadInfo::rotation)
  const std::string s = format_pages({turned, Page{}}, PageFormat::jsonl, o);
  const size_t nl = s.find('\n');
  REQUIRE(nl != std::string::npos);
  const Json j = parse_json(s.substr(0, nl));
  CHECK(j.at("width").as_int() == 1000);
  CHECK(j.at("rotation").as_int() == 270);
  CHECK(j.at("blocks").size() == 2);
  const Json& l0 = j.at("blocks")[0].at("lines")[0];
  CHECK(l0.at("text").as_string() == "Hello world");
  CHECK(l0.at("box")[2].as_int() == 401);
  CHECK(l0.at("words")[1].at("confidence").as_number() == Approx(0.5));
  CHECK(l0.at("words")[0].at("chars").size() == 5);
  CHECK(j.at("blocks")[1].at("lines")[0].at("error").as_string() == "cannot read");
  const Json empty = parse_json(s.substr(nl + 1, s.size() - nl - 2));
  CHECK(empty.at("blocks").size() == 0);
  CHECK(empty.at("rotation").as_int() == 0);
  CHECK(empty.at("text").as_string().empty());
}

TEST_CASE("page formats: an empty page is a valid document in every format", "[page]") {
  Page p;
  p.name = "blank.png";
  p.width = 10, p.height = 10;
  for (PageFormat f : {PageFormat::hocr, PageFormat::alto, PageFormat::page}) {
    INFO(page_format_name(f));
    CHECK(xml_problem(format_pages({p}, f)) == "");
  }
  CHECK(format_pages({p}, PageFormat::text).empty());
}

TEST_CASE("page formats: the documents written for schema validation", "[page]") {
  const char* dir = std::getenv("OCRT_PAGE_XML_DIR");
  if (dir == nullptr) return;  // only when tools/validate_page_xml.sh asks
  Page empty;
  empty.name = "blank.png";
  empty.width = 10, empty.height = 10;
  for (bool chars : {false, true}) {
    PageFormatOptions o;
    o.char_boxes = chars;
    const std::string suffix = chars ? "-chars" : "";
    for (PageFormat f : {PageFormat::alto, PageFormat::page}) {
      const std::string name = std::string(dir) + "/" + page_format_name(f);
      std::ofstream(name + "-sample" + suffix + ".xml") << format_pages({sample_page()}, f, o);
      std::ofstream(name + "-empty" + suffix + ".xml") << format_pages({empty}, f, o);
    }
    std::ofstream(std::string(dir) + "/alto-two-pages" + suffix + ".xml")
        << format_pages({sample_page(), sample_page()}, PageFormat::alto, o);
  }
}
