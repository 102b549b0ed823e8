// The inputs of ocrt-infer (infer/inputs.h): label files, folders with .gt.txt files, lists,
// standard input, pipes and devices, read in the order given; what is not a line is reported.
#include <catch2/catch.hpp>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "infer/inputs.h"
#include "temp_dir.h"

using namespace ocrt;
using namespace ocrt::infer;
namespace fs = std::filesystem;

namespace {

fs::path temp_dir() { return ocrt::testing::process_temp_dir("inputs"); }

void write_bytes(const std::string& path, const std::string& bytes) { std::ofstream(path, std::ios::binary) << bytes; }

}  // namespace

TEST_CASE("inputs: label files, folders with .gt.txt, lists and stdin, in order", "[infer]") {
  const fs::path dir = temp_dir() / "inputs";
  fs::remove_all(dir);
  fs::create_directories(dir / "folder" / "sub");
  write_bytes((dir / "folder" / "b.png").string(), "x");
  write_bytes((dir / "folder" / "b.gt.txt").string(), "bee\n");
  write_bytes((dir / "folder" / "sub" / "a.jpg").string(), "x");  // no .gt.txt
  write_bytes((dir / "folder" / "notes.md").string(), "not an image");
  write_bytes((dir / "labels.txt").string(), "one.png\tfirst line\r\n\n/abs/two.png\tsecond\ttabbed\n");
  write_bytes((dir / "list").string(), "p1.png\n\np2.png\n");
  std::istringstream standard_input("s1.png\ns2.png\n");

  InputReader r(false, &standard_input);
  r.add((dir / "labels.txt").string());
  r.add("plain.png");
  r.add_list((dir / "list").string());
  r.add((dir / "folder").string());
  r.add("-");
  std::vector<InputLine> got;
  InputLine line;
  while (r.next(line)) got.push_back(line);
  REQUIRE(got.size() == 9);
  CHECK(got[0].path == (dir / "one.png").string());
  CHECK(got[0].truth == std::optional<std::string>("first line"));
  CHECK(got[1].path == "/abs/two.png");
  CHECK(got[1].truth == std::optional<std::string>("second\ttabbed"));
  CHECK(got[2].path == "plain.png");
  CHECK(!got[2].truth);
  CHECK(got[3].path == "p1.png");
  CHECK(got[4].path == "p2.png");
  CHECK(got[5].path == (dir / "folder" / "b.png").string());
  CHECK(got[5].truth == std::optional<std::string>("bee"));
  CHECK(got[6].path == (dir / "folder" / "sub" / "a.jpg").string());
  CHECK(!got[6].truth);
  CHECK(got[7].path == "s1.png");
  CHECK(got[8].path == "s2.png");

  // --eval: only sources with ground truth; a folder's unlabelled images are skipped.
  InputReader e(true, &standard_input);
  CHECK_THROWS_WITH(e.add("plain.png"), Catch::Contains("--eval needs the true text"));
  CHECK_THROWS_WITH(e.add("-"), Catch::Contains("stdin"));
  CHECK_THROWS_WITH(e.add_list((dir / "list").string()), Catch::Contains("--eval"));
  e.add((dir / "folder").string());
  REQUIRE(e.next(line));
  CHECK(line.truth == std::optional<std::string>("bee"));
  CHECK(!e.next(line));
  CHECK(e.skipped_without_truth() == 1);

  // A malformed label line is that line's error (issue 23, item 13): the lines after it are read.
  write_bytes((dir / "bad.txt").string(), "ok.png\tfine\nno tab here\n\tno path\nlast.png\tend\n");
  InputReader b;
  b.add((dir / "bad.txt").string());
  REQUIRE(b.next(line));
  CHECK(line.error.empty());
  REQUIRE(b.next(line));
  CHECK(line.path == (dir / "bad.txt").string() + " line 2");
  CHECK_THAT(line.error, Catch::Contains("bad.txt line 2") && Catch::Contains("no tab"));
  CHECK(!line.truth);
  REQUIRE(b.next(line));
  CHECK_THAT(line.error, Catch::Contains("bad.txt line 3") && Catch::Contains("the image path is empty"));
  REQUIRE(b.next(line));
  CHECK(line.error.empty());
  CHECK(line.truth == std::optional<std::string>("end"));
  CHECK(!b.next(line));
  CHECK_THROWS_WITH(InputReader().add((dir / "missing.txt").string()), Catch::Contains("no such label file"));
  CHECK_THROWS_WITH(InputReader().add_list((dir / "missing").string()), Catch::Contains("no such list file"));
  CHECK_THROWS_WITH(InputReader().add_list(dir.string()), Catch::Contains("is a folder"));
}

TEST_CASE("inputs: pipes, devices and /dev/stdin are read as text, and an empty folder is noted", "[infer]") {
  const fs::path dir = temp_dir() / "streams";
  fs::remove_all(dir);
  fs::create_directories(dir / "empty");
  InputLine line;
  // /dev/null: a stream with nothing in it, as a list or an input, with or without --eval.
  for (bool eval : {false, true}) {
    InputReader r(eval);
    r.add("/dev/null");
    if (!eval) r.add_list("/dev/null");
    CHECK(!r.next(line));
  }
  // A pipe (what <(...) gives): label lines when the first line holds a tab, else paths.
  auto piped = [&](const std::string& text, bool eval) {
    int fds[2];
    REQUIRE(::pipe(fds) == 0);
    REQUIRE(::write(fds[1], text.data(), text.size()) == (ssize_t)text.size());
    ::close(fds[1]);
    InputReader r(eval);
    r.add("/dev/fd/" + std::to_string(fds[0]));
    std::vector<InputLine> got;
    while (r.next(line)) got.push_back(line);
    ::close(fds[0]);
    return got;
  };
  auto labels = piped("a.png\tfirst\nb.png\tsecond\n", true);
  REQUIRE(labels.size() == 2);
  CHECK(labels[0].path == "a.png");
  CHECK(labels[1].truth == std::optional<std::string>("second"));
  auto paths = piped("a.png\nsub/b.png\n", false);
  REQUIRE(paths.size() == 2);
  CHECK(paths[1].path == "sub/b.png");
  CHECK(!paths[1].truth);
  auto no_truth = piped("a.png\n", true);  // --eval, but only paths
  REQUIRE(no_truth.size() == 1);
  CHECK_THAT(no_truth[0].error, Catch::Contains("--eval needs 'path<TAB>text' lines"));
  auto binary = piped(std::string("\x89PNG\r\n\x1a\n\0\0\0\rIHDR", 16), false);  // an image through a pipe
  REQUIRE(binary.size() == 1);
  CHECK_THAT(binary[0].error, Catch::Contains("binary data"));
  // An empty folder reads nothing and says so once.
  InputReader r;
  r.add((dir / "empty").string());
  CHECK(!r.next(line));
  const auto notes = r.take_notes();
  REQUIRE(notes.size() == 1);
  CHECK_THAT(notes[0], Catch::Contains("empty") && Catch::Contains("holds no image"));
  CHECK(r.take_notes().empty());
}
