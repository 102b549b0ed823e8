// The training report (train/report.h) from run folders written by hand: a resumed run with
// losses spanning decades, NaN and garbage lines, texts that need escaping and a worst/ folder
// with good, missing and unsafe images; and odd folders (empty, one point, nothing finite, a
// run from before the start event). Every chart must be well-formed XML with no NaN in it.
// tests/train/report_screenshot.sh looks at the page in Chromium.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "runtime/image.h"
#include "runtime/json.h"
#include "runtime/safetensors.h"
#include "temp_dir.h"
#include "xml_check.h"
#include "train/report.h"

using namespace ocrt;
using namespace ocrt::train;
namespace fs = std::filesystem;
using ocrt::testing::TempDir;
using ocrt::testing::xml_problem;

namespace {

// The <svg>...</svg> elements of a page, in order.
std::vector<std::string> svgs_of(const std::string& html) {
  std::vector<std::string> out;
  for (size_t at = html.find("<svg"); at != std::string::npos; at = html.find("<svg", at + 1)) {
    const size_t end = html.find("</svg>", at);
    REQUIRE(end != std::string::npos);
    out.push_back(html.substr(at, end + 6 - at));
  }
  return out;
}

// Every chart of the page is well-formed and free of NaN and infinities; returns them by id.
std::map<std::string, std::string> check_charts(const std::string& html) {
  std::map<std::string, std::string> by_id;
  const auto svgs = svgs_of(html);
  CHECK(svgs.size() == 8);  // four quantities, by step and by wall time
  for (const std::string& svg : svgs) {
    INFO(svg.substr(0, 200));
    CHECK(xml_problem(svg) == "");
    std::string lower = svg;
    for (char& c : lower) c = (char)std::tolower((unsigned char)c);
    // Numbers in the markup: nothing that printf makes of NaN or infinity.
    CHECK(lower.find("nan") == std::string::npos);
    CHECK(lower.find("inf") == std::string::npos);
    const size_t id = svg.find("id=\"");
    REQUIRE(id != std::string::npos);
    by_id[svg.substr(id + 4, svg.find('"', id + 4) - id - 4)] = svg;
  }
  return by_id;
}

int count(const std::string& text, const std::string& what) {
  int k = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++k;
  return k;
}

std::string base64_decode(const std::string& s) {
  static const std::string chars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : s) {
    if (c == '=') break;
    const size_t v = chars.find(c);
    REQUIRE(v != std::string::npos);
    acc = acc << 6 | (uint32_t)v;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += char((acc >> bits) & 0xFF);
    }
  }
  return out;
}

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  REQUIRE(out.good());
}

GrayImage stripes(int64_t w, int64_t h) {
  GrayImage g;
  g.width = w;
  g.height = h;
  for (int64_t y = 0; y < h; ++y)
    for (int64_t x = 0; x < w; ++x) g.pixels.push_back((uint8_t)((x / 3) % 2 ? 30 : 230));
  return g;
}

}  // namespace

TEST_CASE("report: a resumed run with NaN, garbage and text to escape gives sound charts", "[report]") {
  TempDir dir("report-run");
  std::string m;
  const std::string start = R"("arch":"crnn-s","parameters":2203744,)"
                            R"("settings":{"arch":"crnn-s","steps":100,"train":["a<b>.txt","c&d.txt"],"lr":0.001}})";
  m += R"({"event":"start","step":0,"time":0,"from":"",)" + start + "\n";
  // Losses from 50 down to 0.5: two decades, so the loss axis is logarithmic.
  for (int s = 10; s <= 50; s += 10) {
    m += R"({"event":"train","step":)" + std::to_string(s) + R"(,"loss":)" + std::to_string(500.0 / s) +
         R"(,"lr":0.001,"samples_per_sec":)" + std::to_string(20 + s % 7) + R"(,"skipped_steps":0,"time":)" +
         std::to_string(s * 0.5) + "}\n";
    if (s % 20 == 0)
      m += R"({"event":"eval","step":)" + std::to_string(s) + R"(,"cer":)" + std::to_string(10.0 / s) +
           R"(,"line_accuracy":0.1,"lines":64,"time":)" + std::to_string(s * 0.5 + 1) + "}\n";
  }
  m += "this line is not JSON\n";
  m += R"({"event":"train","step":1e999,"loss":1})" "\n";  // a step no double holds: not an event
  m += R"([1, 2, 3])" "\n";
  m += R"({"event":"checkpoint","step":50,"why":"stop_at","time":26})" "\n";
  // The resumed part: its clock starts again at 0; NaN (as Python writes it) and null losses.
  m += R"({"event":"start","step":50,"time":0,"from":"run/ckpt-00000050.safetensors",)" + start + "\n";
  m += R"({"event":"train","step":60,"loss":NaN,"lr":0.0008,"samples_per_sec":Infinity,"skipped_steps":1,"time":5})" "\n";
  m += R"({"event":"train","step":70,"loss":null,"lr":0.0006,"samples_per_sec":21,"skipped_steps":2,"time":10})" "\n";
  m += R"({"event":"train","step":80,"loss":0.7,"lr":0.0004,"samples_per_sec":22,"skipped_steps":2,"time":15})" "\n";
  m += R"({"event":"train","step":90,"loss":0.6,"lr":0.0002,"samples_per_sec":22,"skipped_steps":2,"time":20})" "\n";
  m += R"({"event":"train","step":100,"loss":0.5,"lr":0.0001,"samples_per_sec":23,"skipped_steps":2,"time":25})" "\n";
  m += R"({"event":"eval","step":100,"cer":0.125,"line_accuracy":0.5,"lines":64,"time":26})" "\n";
  m += R"({"event":"summary","steps":100,"samples_per_sec":21.5,"interrupted":false,"ms_per_step":{"data":1.5},"time":27})" "\n";
  write_text(dir.path / "metrics.jsonl", m);

  // worst/: a good image with a truth full of markup, one missing, one outside the folder, and
  // a truth that is not UTF-8.
  fs::create_directories(dir.path / "worst");
  const GrayImage img = stripes(60, 32);
  save_gray_png((dir.path / "worst" / "00000100-01.png").string(), img);
  write_text(dir.path / "worst" / "index.json",
             R"({"format":"ocrt-worst-1","step":100,"evaluated":64,"lines":[)"
             R"({"image":"00000100-01.png","id":"a.png","truth":"<script>alert(\"x\")</script> & 'q'","reading":"<script>","distance":30,"cer":0.9},)"
             R"({"image":"00000100-02.png","id":"b.png","truth":"gone","reading":"gore","distance":1,"cer":0.25},)"
             R"({"image":"../../metrics.jsonl","id":"c.png","truth":"x","reading":"y","distance":1,"cer":1},)"
             "{\"image\":\"00000100-04.png\",\"truth\":\"bad \\u00ff\",\"reading\":\"\",\"distance\":4,\"cer\":1}"
             "]}");
  // Invalid UTF-8 can only come from a file JSON does not vouch for; an id is as good a place as any.
  RunRecord run = read_run(dir.path.string());
  run.worst[3].truth = "bad \xff\xfe bytes";

  // What was read: one point per step, the resumed part's clock joined to the first's.
  REQUIRE(run.train.size() == 10);
  REQUIRE(run.evals.size() == 3);
  REQUIRE(run.starts.size() == 2);
  CHECK(run.starts[1].time == Approx(26));  // the last time of the first part
  CHECK(run.train[5].step == 60);
  CHECK(std::isnan(run.train[5].loss));
  CHECK(std::isnan(run.train[5].samples_per_sec));
  CHECK(std::isnan(run.train[6].loss));
  CHECK(run.train[9].time == Approx(26 + 25));
  CHECK(run.summary_is_last);
  CHECK(run.settings.at("steps").as_int() == 100);
  REQUIRE(run.worst.size() == 4);
  CHECK(!run.worst[0].png.empty());
  CHECK(run.worst[1].png.empty());
  CHECK(run.worst[2].png.empty());  // "../" is never followed

  const std::string html = report_html(run);
  const auto charts = check_charts(html);
  // The losses span decades: log scale; the resume is marked; the NaN and null losses are not
  // drawn but counted.
  CHECK_THAT(charts.at("chart-loss-step"), Catch::Contains("(log scale)"));
  CHECK_THAT(charts.at("chart-loss-step"), Catch::Contains(">resumed<"));
  CHECK_THAT(charts.at("chart-loss-time"), Catch::Contains(">resumed<"));
  CHECK_THAT(charts.at("chart-loss-step"), Catch::Contains("2 values not finite, not drawn"));
  CHECK_THAT(charts.at("chart-speed-step"), Catch::Contains("1 value not finite, not drawn"));
  CHECK_THAT(charts.at("chart-lr-step"), !Catch::Contains("(log scale)"));
  // The NaN breaks the loss line: one polyline before it, one after.
  CHECK(count(charts.at("chart-loss-step"), "<polyline") == 2);
  CHECK(count(charts.at("chart-cer-step"), "<circle") == 3);  // evaluations get dots

  // Text is escaped wherever it lands; invalid UTF-8 becomes U+FFFD.
  CHECK_THAT(html, !Catch::Contains("<script"));
  // (the truth is cut into marked runs where it differs from the reading)
  CHECK_THAT(html, Catch::Contains("&lt;script&gt;alert(&quot;x&quot;)</span>&lt;"));
  CHECK_THAT(html, Catch::Contains("script&gt;<span class=\"del\"> &amp; &#39;q&#39;</span>"));
  CHECK_THAT(html, Catch::Contains("a&lt;b&gt;.txt, c&amp;d.txt"));
  CHECK_THAT(html, Catch::Contains("bad \xEF\xBF\xBD\xEF\xBF\xBD bytes"));
  CHECK_THAT(html, Catch::Contains("resumed from run/ckpt-00000050.safetensors"));
  CHECK_THAT(html, Catch::Contains("2,203,744"));
  // The notes name what was skipped.
  CHECK_THAT(html, Catch::Contains("3 lines were not an ocrt event"));
  CHECK_THAT(html, Catch::Contains("1 line held NaN or Infinity"));
  CHECK_THAT(html, Catch::Contains("3 images are missing"));
  CHECK_THAT(html, Catch::Contains("Finished: 100 steps."));

  // The one good image is embedded as a PNG that decodes to what was saved.
  REQUIRE(count(html, "src=\"data:image/png;base64,") == 1);
  const size_t at = html.find("base64,") + 7;
  const std::string png = base64_decode(html.substr(at, html.find('"', at) - at));
  const GrayImage back = decode_gray_image(png.data(), png.size(), "embedded");
  CHECK(back.width == img.width);
  CHECK(back.height == img.height);
  CHECK(back.pixels == img.pixels);
  // No script, nothing fetched: every src and href is a data: URI.
  CHECK(count(html, "src=\"") == count(html, "src=\"data:"));
  CHECK(count(html, "href=") == 0);
}

TEST_CASE("report: empty, one-point, all-NaN and old run folders still give a whole page", "[report]") {
  TempDir dir("report-odd");
  const std::string d = dir.path.string();
  const std::string out = (dir.path / "report.html").string();
  auto page = [&] {
    write_report(d, out);
    std::ifstream in(out);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };

  SECTION("an empty folder") {
    const std::string html = page();
    check_charts(html);
    CHECK_THAT(html, Catch::Contains("metrics.jsonl is missing"));
    CHECK(count(html, "no training steps logged yet") == 6);
    CHECK_THAT(html, Catch::Contains("None saved"));
  }
  SECTION("an empty metrics.jsonl") {
    write_text(dir.path / "metrics.jsonl", "");
    const std::string html = page();
    check_charts(html);
    CHECK_THAT(html, Catch::Contains("holds no events yet"));
  }
  SECTION("a single point") {
    write_text(dir.path / "metrics.jsonl",
               R"({"event":"train","step":7,"loss":2.5,"lr":0.001,"samples_per_sec":9,"time":3})" "\n"
               R"({"event":"eval","step":7,"cer":0,"line_accuracy":1,"lines":5,"time":4})" "\n");
    const auto charts = check_charts(page());
    for (const auto& [id, svg] : charts) {
      INFO(id);
      CHECK(count(svg, "<circle") == 1);  // a point alone is a dot, not an invisible line
      CHECK(count(svg, "<polyline") == 0);
    }
  }
  SECTION("nothing finite") {
    write_text(dir.path / "metrics.jsonl",
               R"({"event":"train","step":1,"loss":NaN,"lr":Infinity,"samples_per_sec":-Infinity,"time":1})" "\n"
               R"({"event":"train","step":2,"loss":NaN,"lr":NaN,"samples_per_sec":NaN,"time":2})" "\n");
    const auto charts = check_charts(page());
    CHECK_THAT(charts.at("chart-loss-step"), Catch::Contains("no finite values (2 not finite)"));
    CHECK_THAT(charts.at("chart-lr-time"), Catch::Contains("no finite values (2 not finite)"));
  }
  SECTION("huge values and a constant one") {
    write_text(dir.path / "metrics.jsonl",
               R"({"event":"train","step":1,"loss":1e308,"lr":0.001,"samples_per_sec":-1e308,"time":1})" "\n"
               R"({"event":"train","step":2,"loss":-1e308,"lr":0.001,"samples_per_sec":1e308,"time":2})" "\n");
    const auto charts = check_charts(page());
    CHECK(count(charts.at("chart-loss-step"), "<polyline") == 1);
    CHECK(count(charts.at("chart-lr-step"), "<polyline") == 1);
  }
  SECTION("a run from before the start event: settings from the newest checkpoint, no wall times") {
    write_text(dir.path / "metrics.jsonl",
               R"({"event":"train","step":5,"loss":3,"lr":0.001,"samples_per_sec":9,"skipped_steps":0})" "\n"
               R"({"event":"train","step":10,"loss":2,"lr":0.001,"samples_per_sec":9,"skipped_steps":0})" "\n");
    save_safetensors((dir.path / "ckpt-00000010.safetensors").string(), {},
                     {{"format", "ocrt-checkpoint-1"},
                      {"state", R"({"step":10,"settings":{"arch":"crnn","batch":64,"note":"<&>"}})"}});
    const std::string html = page();
    const auto charts = check_charts(html);
    CHECK_THAT(html, Catch::Contains("Settings, from ckpt-00000010.safetensors"));
    CHECK_THAT(html, Catch::Contains("&lt;&amp;&gt;"));
    CHECK(count(charts.at("chart-loss-step"), "<polyline") == 1);
    CHECK_THAT(charts.at("chart-loss-time"), Catch::Contains("no wall times in metrics.jsonl"));
    CHECK_THAT(html, Catch::Contains("Running, or stopped without a summary: the last event is at step 10"));
  }
  SECTION("a worst/ folder with a damaged index") {
    fs::create_directories(dir.path / "worst");
    write_text(dir.path / "worst" / "index.json", "{\"lines\": [");
    const std::string html = page();
    check_charts(html);
    CHECK_THAT(html, Catch::Contains("worst/index.json cannot be read"));
  }
}

TEST_CASE("report: a folder that does not exist is an error, and an unwritable output too", "[report]") {
  TempDir dir("report-missing");
  CHECK_THROWS_WITH(read_run((dir.path / "nope").string()), Catch::Contains("not a folder"));
  CHECK_THROWS(write_report(dir.path.string(), (dir.path / "no" / "such" / "dir" / "r.html").string()));
}

TEST_CASE("report: write_worst_lines replaces the previous evaluation's lines, nothing else", "[report]") {
  TempDir dir("report-worst");
  const std::string d = dir.path.string();
  WorstLine a{"x.png", "truth & <more>", "trth", 3, 0.2, stripes(40, 32)};
  WorstLine b{"synth:5", "b", "", 1, 1.0, stripes(12, 32)};
  write_worst_lines(d, 10, 64, {a, b, a});
  write_text(dir.path / "worst" / "notes.txt", "mine");
  CHECK(fs::exists(dir.path / "worst" / "00000010-03.png"));

  write_worst_lines(d, 20, 64, {b});
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(dir.path / "worst")) names.insert(e.path().filename().string());
  CHECK(names == std::set<std::string>{"00000020-01.png", "index.json", "notes.txt"});
  std::ifstream in(dir.path / "worst" / "index.json");
  const Json index = parse_json(std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>()));
  CHECK(index.at("format").as_string() == "ocrt-worst-1");
  CHECK(index.at("step").as_int() == 20);
  REQUIRE(index.at("lines").size() == 1);
  CHECK(index.at("lines")[0].at("id").as_string() == "synth:5");

  // Read back by the report, in order, with their images.
  write_worst_lines(d, 30, 64, {a, b});
  const RunRecord run = read_run(d);
  CHECK(run.worst_step == 30);
  CHECK(run.worst_evaluated == 64);
  REQUIRE(run.worst.size() == 2);
  CHECK(run.worst[0].truth == "truth & <more>");
  CHECK(run.worst[0].width == 40);
  CHECK(run.worst[1].reading.empty());
  CHECK(!run.worst[1].png.empty());

  // No worst line at all (every line read right) is an index with an empty list.
  write_worst_lines(d, 40, 64, {});
  const RunRecord none = read_run(d);
  CHECK(none.worst_step == 40);
  CHECK(none.worst.empty());
  CHECK_THAT(report_html(none), Catch::Contains("Every one of the 64 validation lines was read right"));
}

TEST_CASE("report: html_escape", "[report]") {
  CHECK(html_escape("a<b>&\"c'") == "a&lt;b&gt;&amp;&quot;c&#39;");
  CHECK(html_escape("caf\xC3\xA9 \xE2\x82\xAC") == "caf\xC3\xA9 \xE2\x82\xAC");  // UTF-8 kept
  CHECK(html_escape("\xC0\xAF") == "\xEF\xBF\xBD\xEF\xBF\xBD");               // overlong '/'
  CHECK(html_escape("\xED\xA0\x80") == "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // a surrogate
  CHECK(html_escape(std::string("a\0b\x07", 4)) == "a\xEF\xBF\xBD" "b\xEF\xBF\xBD");
  CHECK(html_escape("tab\tand\nnewline") == "tab\tand\nnewline");
}
