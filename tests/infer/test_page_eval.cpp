// Page scoring (infer/page_eval.h) on pages built by hand: a perfect reading, a wrong, a missed
// and an extra word, punctuation and case, two words read as one, the text's CER with its
// white space ignored; and the truth files ocrt-synth --pages writes, good and broken.
#include <catch2/catch.hpp>

#include <fstream>
#include <string>
#include <vector>

#include "infer/page_eval.h"
#include "infer/page_format.h"
#include "runtime/xml.h"
#include "temp_dir.h"

using namespace ocrt;
using namespace ocrt::infer;

namespace {

PageWord word(const std::string& text, double x0, double y0, double x1, double y1) {
  PageWord w;
  w.text = text;
  w.box = {x0, y0, x1, y1};
  return w;
}

// One block of one line holding the words; the line's text is the words joined by spaces.
Page page_of(const std::vector<PageWord>& words) {
  PageLine l;
  for (const PageWord& w : words) {
    l.words.push_back(w);
    l.text += (l.text.empty() ? "" : " ") + w.text;
    l.box = l.box.united(w.box);
  }
  Page p;
  p.blocks.resize(1);
  p.blocks[0].lines.push_back(l);
  return p;
}

PageTruth truth_of(const std::vector<PageWord>& words) {
  PageTruth t;
  for (const PageWord& w : words) {
    t.words.push_back({w.text, w.box});
    t.text += (t.text.empty() ? "" : " ") + w.text;
  }
  return t;
}

}  // namespace

TEST_CASE("score_page: a perfect reading, and each kind of error", "[page]") {
  const std::vector<PageWord> truth = {word("The", 0, 0, 30, 10), word("end.", 40, 0, 80, 10), word("Now", 0, 20, 30, 30)};
  const PageScore perfect = score_page(page_of(truth), truth_of(truth));
  CHECK(perfect.truth_words == 3);
  CHECK(perfect.right == 3);
  CHECK(perfect.extra == 0);
  CHECK(perfect.word_accuracy() == 1.0);
  CHECK(perfect.cer() == 0.0);

  // "end" for "end." is right (punctuation), "now" for "Now" is wrong (case); an extra word
  // where there is none; "The" never read.
  const PageScore s = score_page(page_of({word("end", 41, 1, 79, 9), word("now", 0, 20, 30, 30), word("x", 200, 200, 210, 210)}),
                                 truth_of(truth));
  CHECK(s.right == 1);
  CHECK(s.wrong == 1);
  CHECK(s.missed == 1);
  CHECK(s.extra == 1);
  CHECK(s.word_accuracy() == Approx(1.0 / 3));
  // Texts "The end. Now" and "end now x": 12 characters of truth.
  CHECK(s.truth_chars == 12);
  CHECK(s.distance > 0);
}

TEST_CASE("score_page: two words read as one, punctuation-only words, white space", "[page]") {
  const std::vector<PageWord> truth = {word("foo", 0, 0, 30, 10), word("bar", 35, 0, 65, 10), word("-", 70, 0, 75, 10)};
  const PageScore merged = score_page(page_of({word("foobar", 0, 0, 65, 10), word("-", 70, 0, 75, 10)}), truth_of(truth));
  CHECK(merged.right == 1);  // only the dash
  CHECK(merged.wrong == 2);  // both halves judged against "foobar"
  CHECK(merged.extra == 0);
  const PageScore dash = score_page(page_of({word("foo", 0, 0, 30, 10), word("bar", 35, 0, 65, 10), word("~", 70, 0, 75, 10)}),
                                    truth_of(truth));
  CHECK(dash.right == 3);  // a punctuation-only truth word counts when it is found
  // The text's white space (line breaks, blank lines between blocks) is not an error.
  Page two_blocks = page_of({word("foo", 0, 0, 30, 10)});
  two_blocks.blocks.push_back(page_of({word("bar", 35, 0, 65, 10), word("-", 70, 0, 75, 10)}).blocks[0]);
  CHECK(score_page(two_blocks, truth_of(truth)).distance == 0);
}

TEST_CASE("score_page: the words not read right, and how", "[page]") {
  const std::vector<PageWord> truth = {word("YoY", 0, 0, 30, 10),   word("Change", 35, 0, 90, 10),
                                       word("Davenport", 0, 20, 90, 30), word("Agency", 0, 40, 60, 50),
                                       word("1", 0, 60, 8, 70),       word("end.", 20, 60, 60, 70)};
  const Page read = page_of({word("YoYChange", 0, 0, 90, 10), word("DAVENPORT", 0, 20, 90, 30),
                             word("Agancy", 0, 40, 60, 50), word("end", 20, 60, 60, 70)});
  std::vector<WordMiss> misses;
  const PageScore s = score_page(read, truth_of(truth), &misses);
  CHECK(s.right == 1);  // "end" for "end."
  CHECK(s.wrong == 4);
  CHECK(s.joined == 2);
  CHECK(s.case_only == 1);
  CHECK(s.missed == 1);
  CHECK(s.extra == 0);
  // In the truth's order, each with what was read where it lies.
  REQUIRE(misses.size() == 5);
  CHECK(misses[0].kind == WordMissKind::joined);
  CHECK(misses[0].truth == "YoY");
  CHECK(misses[0].read == "YoYChange");
  CHECK(misses[1].kind == WordMissKind::joined);
  CHECK(misses[1].truth == "Change");
  CHECK(misses[2].kind == WordMissKind::case_only);
  CHECK(misses[2].read == "DAVENPORT");
  CHECK(misses[3].kind == WordMissKind::wrong);
  CHECK(misses[3].read == "Agancy");
  CHECK(misses[4].kind == WordMissKind::missed);
  CHECK(misses[4].truth == "1");
  CHECK(misses[4].read.empty());
  CHECK(misses[4].box.x1 == 8);
  const Json j = misses[2].to_json();
  CHECK(j.at("kind").as_string() == "case");
  CHECK(j.at("truth").as_string() == "Davenport");
  CHECK(j.at("box").as_array().size() == 4);
  // A joined pair that happens to differ only in case is joined, not case: the space is the error.
  const PageScore joined_case = score_page(page_of({word("ab", 0, 0, 20, 10)}),
                                           truth_of({word("A", 0, 0, 8, 10), word("B", 12, 0, 20, 10)}));
  CHECK(joined_case.joined == 2);
  CHECK(joined_case.case_only == 0);
  // The counts add up in totals and go into the JSON.
  PageScore total = s;
  total += joined_case;
  CHECK(total.joined == 4);
  CHECK(total.to_json().at("case_only").as_number() == 1);
  // Without the list, the same scores.
  CHECK(score_page(read, truth_of(truth)).to_json().dump() == s.to_json().dump());
}

TEST_CASE("without_punctuation removes typographic punctuation as well as ASCII's", "[page]") {
  // Print's curly quotes and apostrophes, dashes, pilcrow, section sign, bullet and ellipsis
  // against the ASCII a reader writes for them.
  CHECK(without_punctuation("Plaintiff\u2019s") == without_punctuation("Plaintiff's"));
  CHECK(without_punctuation("3:13\u2013cv\u2013899") == "313cv899");
  CHECK(without_punctuation("\u201c\u2018allegedly") == "allegedly");
  CHECK(without_punctuation("recur.\u201d\u2019") == "recur");
  CHECK(without_punctuation("\u00b65.") == "5");
  CHECK(without_punctuation("\u00a7\u00a012") == "\u00a012");  // the no-break space is not punctuation
  CHECK(without_punctuation("\u2022item\u2026") == "item");
  CHECK(without_punctuation("\u00abnon\u00bb") == "non");
  // Letters, digits and symbols that are not punctuation stay: accents, degrees, the fraction
  // slash (a math symbol), the euro sign.
  CHECK(without_punctuation("caf\u00e9") == "caf\u00e9");
  CHECK(without_punctuation("20\u00b0C") == "20\u00b0C");
  CHECK(without_punctuation("1\u20442") == "1\u20442");
  CHECK(without_punctuation("\u20ac5") == "\u20ac5");
  // In a page's score: the curly apostrophe of the truth against the straight one read.
  const PageScore s = score_page(page_of({word("don't", 0, 0, 40, 10)}), truth_of({word("don\u2019t", 0, 0, 40, 10)}));
  CHECK(s.right == 1);
}

TEST_CASE("score_page: empty pages and totals", "[page]") {
  const PageScore nothing = score_page(Page{}, PageTruth{});
  CHECK(nothing.word_accuracy() == 1.0);
  CHECK(nothing.cer() == 0.0);
  const PageScore garbage = score_page(page_of({word("x", 0, 0, 5, 5)}), PageTruth{});
  CHECK(garbage.word_accuracy() == 0.0);
  CHECK(garbage.extra == 1);
  CHECK(garbage.cer() == 1.0);
  PageScore total = garbage;
  total += nothing;
  CHECK(total.extra == 1);
  CHECK(total.to_json().at("word_accuracy").as_number() == 0.0);
}

TEST_CASE("truth_from_synth_json: ocrt-synth's page truth, and broken files", "[page]") {
  const std::string doc = R"({"width":100,"height":50,"dpi":150,"layout":"article","skew":0,"lines":[
    {"text":"Hello world","points":[[0,0],[90,0],[90,10],[0,10]],"heading":true,"words":[
      {"text":"Hello","points":[[0,0],[40,0],[40,10],[0,10]]},{"text":"world","points":[[50,0],[90,1],[90,11],[50,10]]}]},
    {"text":"bye","points":[[0,20],[30,20],[30,30],[0,30]],"heading":false,"words":[
      {"text":"bye","points":[[0,20],[30,20],[30,30],[0,30]]}]}]})";
  const PageTruth t = truth_from_synth_json(doc, "p.json");
  REQUIRE(t.words.size() == 3);
  CHECK(t.words[1].text == "world");
  CHECK(t.words[1].box.y1 == 11);
  CHECK(t.text == "Hello world\nbye");
  CHECK_THROWS_WITH(truth_from_synth_json("{", "p.json"), Catch::Contains("p.json: not a page truth file"));
  CHECK_THROWS_WITH(truth_from_synth_json("[]", "p.json"), Catch::Contains("expected an object with \"lines\""));
  CHECK_THROWS_WITH(truth_from_synth_json(R"({"lines":[{"text":"a"}]})", "p.json"), Catch::Contains("line 1 needs"));
  CHECK_THROWS_WITH(truth_from_synth_json(R"({"lines":[{"text":"a","words":[{"text":"a","points":[[1]]}]}]})", "p.json"),
                    Catch::Contains("p.json: line 1, word 1: \"points\" must be 4 corners [x, y]"));
  CHECK_THROWS_WITH(
      truth_from_synth_json(R"({"lines":[{"text":"a","words":[{"text":"a","points":[[0,0],[1,0],[1,1],[0]]}]}]})", "p.json"),
      Catch::Contains("p.json: line 1, word 1: corner 4 must be [x, y]"));
}

TEST_CASE("page truth from hOCR, ALTO and PAGE XML: ocrt's own documents read back", "[page]") {
  // Two lines; whole-pixel boxes so that the formats' rounding keeps them.
  Page page = page_of({word("Hello", 10, 10, 60, 30), word("w&rld", 70, 10, 130, 30)});
  PageLine second;
  second.text = "bye";
  second.words.push_back(word("bye", 10, 40, 40, 60));
  second.box = second.words[0].box;
  second.outline = Quad::from_rect(second.box);
  page.blocks[0].lines[0].outline = Quad::from_rect(page.blocks[0].lines[0].box);
  page.blocks[0].lines.push_back(second);
  page.name = "p.png";
  page.width = 200, page.height = 100;
  for (PageFormat f : {PageFormat::hocr, PageFormat::alto, PageFormat::page}) {
    INFO(page_format_name(f));
    const std::string doc = format_pages({page}, f);
    const XmlElement root = parse_xml(doc, "t");
    const PageTruth t = f == PageFormat::hocr ? truth_from_hocr(root, "t")
                        : f == PageFormat::alto ? truth_from_alto(root, "t")
                                                : truth_from_page_xml(root, "t");
    REQUIRE(t.words.size() == 3);
    CHECK(t.words[1].text == "w&rld");
    CHECK(t.words[1].box.x0 == 70);
    CHECK(t.words[1].box.x1 == 130);
    CHECK(t.words[2].box.y0 == 40);
    CHECK(t.text == "Hello w&rld\nbye");
    const PageScore s = score_page(page, t);
    CHECK(s.right == 3);
    CHECK(s.distance == 0);
    // And read_page_truth tells the format from the file.
    ocrt::testing::TempDir dir("truth");
    const auto path = dir.path / "t.xml";
    std::ofstream(path) << doc;
    CHECK(read_page_truth(path.string()).words.size() == 3);
  }
}

TEST_CASE("page truth: a PAGE line without words, units, and what is not a truth file", "[page]") {
  const std::string page_xml = R"(<PcGts xmlns="http://schema.primaresearch.org/PAGE/gts/pagecontent/2019-07-15"><Page>
    <TextRegion id="r"><TextLine id="l"><Coords points="0,0 100,0 100,10 0,10"/>
    <TextEquiv><Unicode>abc defgh</Unicode></TextEquiv></TextLine></TextRegion></Page></PcGts>)";
  const PageTruth t = truth_from_page_xml(parse_xml(page_xml, "p"), "p");
  REQUIRE(t.words.size() == 2);
  CHECK(t.words[0].box.x1 == Approx(40));  // "abc " is 4 of the 10 characters with spaces
  CHECK(t.words[1].text == "defgh");
  const std::string alto_mm = R"(<alto><Description><MeasurementUnit>mm10</MeasurementUnit></Description></alto>)";
  CHECK_THROWS_WITH(truth_from_alto(parse_xml(alto_mm, "a"), "a"), Catch::Contains("ALTO in mm10"));
  const std::string no_bbox = R"(<html><body><span class="ocrx_word" title="x_wconf 9">hi</span></body></html>)";
  CHECK_THROWS_WITH(truth_from_hocr(parse_xml(no_bbox, "h"), "h"), Catch::Contains("without a bbox"));
  const std::string bad_num = R"(<alto><String HPOS="1e999" VPOS="0" WIDTH="1" HEIGHT="1" CONTENT="x"/></alto>)";
  CHECK_THROWS_WITH(truth_from_alto(parse_xml(bad_num, "a"), "a"), Catch::Contains("HPOS is not a number"));
  ocrt::testing::TempDir dir("truth-bad");
  std::ofstream(dir.path / "svg.xml") << "<svg/>";
  CHECK_THROWS_WITH(read_page_truth((dir.path / "svg.xml").string()), Catch::Contains("its root element is <svg>"));
  CHECK_THROWS_WITH(read_page_truth((dir.path / "none.xml").string()), Catch::Contains("cannot read the truth file"));
}
