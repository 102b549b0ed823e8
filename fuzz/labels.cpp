// Fuzz target: label files and .gt.txt folders, as training (train/data.h) and ocrt-infer
// (infer/inputs.h) read them.
//
// The input is written as a label file (`path<TAB>text` a line), as a --list file, as stdin
// ("-") and as the .gt.txt beside an image in a folder of pairs. Promises checked: the two
// readers, written separately "with the same rules", accept the same label files and give the
// same samples, or find the same first malformed line with the same message (training refuses
// the file there; ocrt-infer makes it that line's error and reads on); a list gives its
// non-empty lines; a
// .gt.txt gives its text less one trailing newline. The labels then go through the start-up
// check of training (UTF-8, charset, CTC length) with a real image beside them.
#include <sstream>

#include "fuzz/fuzz_common.h"
#include "infer/inputs.h"
#include "models/charset.h"
#include "runtime/image.h"
#include "train/data.h"

using namespace ocrt;

namespace {

struct Read {
  std::vector<train::Sample> samples;
  std::string error;  // empty when the source was read to its end
};

Read read_with_training(const std::string& source) {
  Read r;
  try {
    r.samples = train::read_source(source);
  } catch (const Error& e) {
    r.error = e.what();
  }
  return r;
}

Read read_with_inference(const std::string& source, bool list, std::istream* in = nullptr) {
  Read r;
  try {
    infer::InputReader reader(false, in);
    if (list) reader.add_list(source);
    else reader.add(source);
    infer::InputLine line;
    while (reader.next(line)) {
      if (line.error.empty()) r.samples.push_back({line.path, line.truth.value_or("<none>")});
      // The first malformed line; up to a NUL byte, as training's exception's what() reads.
      else if (r.error.empty()) r.error = line.error.c_str();
    }
  } catch (const Error& e) {
    r.error = e.what();
  }
  if (!r.error.empty()) r.samples.clear();  // training reads a file whole: on an error it has nothing
  return r;
}

bool same(const Read& a, const Read& b) {
  if (a.error != b.error || a.samples.size() != b.samples.size()) return false;
  for (size_t i = 0; i < a.samples.size(); ++i)
    if (a.samples[i].path != b.samples[i].path || a.samples[i].text != b.samples[i].text) return false;
  return true;
}

// The non-empty lines of text, a trailing '\r' dropped, as every reader splits a file.
std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!line.empty()) out.push_back(line);
  }
  return out;
}

void report(const char* what, const Read& a, const Read& b) {
  std::fprintf(stderr, "fuzz: %s differ: %zu samples / '%s' vs %zu samples / '%s'\n", what, a.samples.size(),
               a.error.c_str(), b.samples.size(), b.error.c_str());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);

  // 1. A label file.
  const std::string labels = fuzz::write_scratch("labels.txt", data, size);
  const Read t = read_with_training(labels), i = read_with_inference(labels, false);
  if (!same(t, i)) report("label files read by training and by ocrt-infer", t, i);
  FUZZ_EXPECT(same(t, i));

  // 2. A list file (--list) and stdin: one path a line, as written.
  const std::vector<std::string> lines = lines_of(text);
  const std::string list = fuzz::write_scratch("list.lst", data, size);
  const Read l = read_with_inference(list, true);
  FUZZ_EXPECT(l.error.empty() && l.samples.size() == lines.size());
  for (size_t k = 0; k < lines.size(); ++k) FUZZ_EXPECT(l.samples[k].path == lines[k]);
  std::istringstream stdin_text(text);
  const Read s = read_with_inference("-", false, &stdin_text);
  FUZZ_EXPECT(s.error.empty() && s.samples.size() == lines.size());

  // 3. The text of a pair's .gt.txt, beside a real image.
  static const std::string pairs = [] {
    const std::string dir = (fuzz::scratch_dir() / "pairs").string();
    fuzz::write_scratch("pairs/line.gt.txt", "", 0);
    GrayImage img;
    img.width = 96, img.height = 32, img.pixels.assign(96 * 32, 255);
    for (int64_t x = 10; x < 80; x += 6)
      for (int64_t y = 8; y < 24; ++y) img.pixels[(size_t)(y * 96 + x)] = 0;
    save_gray_png((fuzz::scratch_dir() / "pairs" / "line.png").string(), img);
    return dir;
  }();
  fuzz::write_scratch("pairs/line.gt.txt", data, size);
  const Read tf = read_with_training(pairs), inf = read_with_inference(pairs, false);
  if (!same(tf, inf)) report("folders read by training and by ocrt-infer", tf, inf);
  FUZZ_EXPECT(same(tf, inf));
  FUZZ_EXPECT(tf.error.empty() && tf.samples.size() == 1);
  std::string truth = text;
  if (!truth.empty() && truth.back() == '\n') truth.pop_back();
  if (!truth.empty() && truth.back() == '\r') truth.pop_back();
  FUZZ_EXPECT(tf.samples[0].text == truth);

  // 4. The start-up check of training: every label of the file (never its paths, which the
  // fuzzer chooses) with the real image, and the .gt.txt pair.
  std::vector<train::Sample> samples = tf.samples;
  for (size_t k = 0; k < t.samples.size() && k < 64; ++k) samples.push_back({tf.samples[0].path, t.samples[k].text});
  const train::ValidationReport report_ = train::validate_samples(samples, nn::Charset::ascii(), 32);
  FUZZ_EXPECT(report_.total == (int64_t)samples.size());
  FUZZ_EXPECT((int64_t)report_.good.size() + report_.bad() == report_.total);
  for (const auto& g : report_.good) FUZZ_EXPECT(train::frames_needed(g.classes) <= train::frames_for_width(g.width));
  (void)report_.summary();
  return 0;
}
