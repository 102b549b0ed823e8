// ocrt-synth's page truth files (runtime/page_truth.h): what they hold is read back, and every
// malformed file is refused naming the file, the line and the word.
#include <catch2/catch.hpp>

#include "runtime/page_truth.h"

using namespace ocrt;

TEST_CASE("page truth: lines, their outlines and words", "[page_truth]") {
  const std::string json = R"({"width": 100, "height": 50, "dpi": 150, "layout": "article", "skew": 0,
    "lines": [{"text": "Hello world", "heading": true, "points": [[10, 5], [90, 5], [90, 20], [10, 20]],
               "words": [{"text": "Hello", "points": [[10, 5], [45, 5], [45, 20], [10, 20]]},
                         {"text": "world", "points": [[50, 5], [90, 5], [90, 20], [50, 20]]}]},
              {"text": "2", "points": [[10, 30], [20, 30], [20, 45], [10, 45]], "words": []}]})";
  const PageTruthFile t = parse_page_truth(json, "p.json", true);
  REQUIRE(t.lines.size() == 2);
  CHECK(t.lines[0].text == "Hello world");
  CHECK(t.lines[0].heading);
  CHECK_FALSE(t.lines[1].heading);
  CHECK(t.lines[0].outline.corners[2].x == 90);
  REQUIRE(t.lines[0].words.size() == 2);
  CHECK(t.lines[0].words[1].text == "world");
  CHECK(t.lines[0].words[1].outline.box().x0 == 50);
  // For the detector's training a line needs only its outline.
  const PageTruthFile outlines = parse_page_truth(R"({"lines": [{"points": [[0,0],[4,0],[4,2],[0,2]]}]})", "o.json", false);
  REQUIRE(outlines.lines.size() == 1);
  CHECK(outlines.lines[0].outline.box().width() == 4);
  // A line without points takes the box of its words.
  const PageTruthFile from_words = parse_page_truth(
      R"({"lines": [{"text": "a b", "words": [{"text": "a", "points": [[0,0],[2,0],[2,3],[0,3]]},
                                               {"text": "b", "points": [[5,1],[8,1],[8,4],[5,4]]}]}]})",
      "w.json", true);
  CHECK(from_words.lines[0].outline.box().x1 == 8);
  CHECK(from_words.lines[0].outline.box().y1 == 4);
}

TEST_CASE("page truth: malformed files are refused by file, line and word", "[page_truth]") {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"not json", "t.json: not a page truth file (JSON parse error"},
      {"[1, 2]", "t.json: not a page truth file (expected an object with \"lines\""},
      {R"({"lines": 3})", "expected an object with \"lines\""},
      {R"({"lines": [7]})", "t.json: line 1 must be an object"},
      {R"({"lines": [{"text": "a", "words": []}]})", "t.json: line 1 needs \"points\""},
      {R"({"lines": [{"text": "a", "words": [], "points": [[0, 0], [1, 0], [1, 1]]}]})", "line 1: \"points\" must be 4 corners"},
      {R"({"lines": [{"text": "a", "words": [], "points": [[0, 0], [1, 0], [1, "x"], [0, 1]]}]})", "line 1: corner 3 must be [x, y]"},
      {R"({"lines": [{"points": [[0,0],[1,0],[1,1],[0,1]], "words": []}]})", "t.json: line 1 needs \"text\""},
      {R"({"lines": [{"text": "a", "points": [[0,0],[1,0],[1,1],[0,1]]}]})", "t.json: line 1 needs \"words\""},
      {R"({"lines": [{"text": "a", "points": [[0,0],[1,0],[1,1],[0,1]], "words": [{"text": "a"}]}]})",
       "t.json: line 1, word 1 needs \"text\" and \"points\""},
      {R"({"lines": [{"text": "a", "points": [[0,0],[1,0],[1,1],[0,1]], "words": [{"points": [[0,0],[1,0],[1,1],[0,1]]}]}]})",
       "t.json: line 1, word 1 needs \"text\""},
  };
  for (const auto& [text, message] : cases) {
    INFO(text);
    CHECK_THROWS_WITH(parse_page_truth(text, "t.json", true), Catch::Contains(message));
  }
  CHECK_THROWS_WITH(read_page_truth("/nonexistent/p.json", false), Catch::Contains("/nonexistent/p.json: cannot open it"));
}
