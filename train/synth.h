// Synthetic text lines: text rendered with stb_truetype from TrueType/OpenType fonts, for
// training without (or beside) real data. docs/data.md has the details.
//
// Fonts are read-only once loaded, so one Font may render on several loader threads at once.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "models/charset.h"
#include "runtime/image.h"

namespace ocrt::train {

// How rendered type is set beyond the font itself. `word` scales the space's advance (1: the
// font's own; print set tight, as many PDFs are, has word spaces half the font's), and
// `tracking` adds that many pixel heights between every two neighbouring characters (negative:
// closer). `small_caps` > 0 sets the line in small capitals: each lower-case ASCII letter is
// drawn as its capital at that fraction of the capitals' size (about the x-height: 0.66-0.8 in
// print), on the baseline, while the text (the label) keeps the lower-case letter, as a reader
// transcribes "Davenport" set in small capitals. 0: the font's own letters.
struct TypeSetting {
  double word = 1;
  double tracking = 0;
  double small_caps = 0;
};

// A loaded font (the file's bytes and stb_truetype's view of them).
//
// stb_truetype trusts the file it is given: load fonts you trust (the system's). load() checks
// the table directory against the file size, so a truncated or non-font file is an error, not
// a crash, and it rejects symbol fonts (OS/2 family class "symbolic" or PANOSE "Latin
// symbol", like URW's Dingbats and Standard Symbols), whose character map sends the letters
// to pictures: they would "cover" any text and render nonsense for its label.
class Font {
 public:
  static std::shared_ptr<Font> load(const std::string& path);  // throws naming the path
  const std::string& path() const { return path_; }
  // True when the font has a glyph for every character of `text` (a space always counts as
  // covered). Throws for invalid UTF-8.
  bool covers(const std::string& text) const;
  // Renders one line: dark text (ink) on a light background (paper), with `margin` pixels
  // around. `pixel_height` is the font's ascent-to-descent span in pixels, so the image is
  // about pixel_height + 2 * margin high; glyphs reaching beyond the ascent, the descent or
  // their advance (accents, italic overhangs) widen the canvas rather than being cut. Throws
  // when the font lacks a character.
  // `setting` sets the type's spacing and small capitals (TypeSetting above); the default
  // renders exactly as the font says.
  GrayImage render(const std::string& text, double pixel_height, int64_t margin = 2, uint8_t ink = 0,
                   uint8_t paper = 255, TypeSetting setting = TypeSetting()) const;
  ~Font();
  Font(const Font&) = delete;  // stb's view points into data_: a copy would share and free it twice
  Font& operator=(const Font&) = delete;

 private:
  Font() = default;
  std::string path_;
  std::vector<unsigned char> data_;
  void* info_ = nullptr;  // stbtt_fontinfo, kept out of this header
};

// Every readable font under the given files and folders (*.ttf, *.otf, *.ttc, recursively,
// sorted). Files stb_truetype cannot read (and symbol fonts) are skipped and listed, with the
// reason, in *skipped (when given); no font at all is an error.
std::vector<std::shared_ptr<Font>> load_fonts(const std::vector<std::string>& paths,
                                              std::vector<std::string>* skipped = nullptr);

// The fonts Debian installs (DejaVu, Liberation, FreeFont, URW base35) that exist here, or,
// when the environment sets OCRT_FONT_DIRS (folders separated by ':'), those of its folders that exist.
std::vector<std::string> default_font_dirs();

// Random text: mostly words from a word list (one a line; only words fully in the charset are
// kept), sometimes capitalised or followed by punctuation, mixed with numbers, runs of symbols
// and random strings over the whole charset (so that every character of the charset gets
// seen), separated by single spaces when the charset has a space.
//
// With a prose corpus (read_prose), most lines are runs of consecutive words of real text
// instead, and some are built of structured items (dates, times, prices, percentages, phone
// and reference numbers, e-mail addresses, URLs, abbreviations) among words: TextMix says how
// many of each.
class SampleRng;

struct TextMix {
  double prose = 0.6;       // consecutive words from the corpus (needs one)
  double structured = 0.2;  // structured items among dictionary words
  // the rest: the word / number / symbol / random-string mix that needs no corpus
  double prose_upper = 0.03;   // of prose lines: all upper case (headings)
  double prose_hyphen = 0.08;  // of prose lines: the last word cut with a hyphen
  void validate() const;
};

class TextSource {
 public:
  enum class Kind { prose, structured, mixed };
  TextSource(const std::vector<std::string>& words, const nn::Charset& charset,
             std::vector<std::string> prose = {}, TextMix mix = {});
  // One word a line (a line holding spaces gives several words), e.g. /usr/share/dict/words.
  static std::vector<std::string> read_words(const std::string& path);
  // The words of text files, in order (split at white space), for prose lines. Fortune files
  // (Debian's fortunes packages) are read as text: their '%' separator lines are left out.
  // Throws naming a file that cannot be read; files must be UTF-8 (a word with invalid UTF-8
  // is dropped).
  static std::vector<std::string> read_prose(const std::vector<std::string>& paths);
  // A text for an n drawn uniformly from [min_chars, max_chars], with no leading, trailing or
  // doubled space. Mixed lines have exactly n characters (a word that does not fit is cut);
  // prose and structured lines stop at the last whole word or item that fits (a single
  // longer one is cut), so they may be shorter, but never shorter than min_chars (such a
  // draw is replaced by a mixed line). Pure function of its arguments; *kind (when
  // given) says which kind of line it is.
  std::string sample(uint64_t seed, int64_t min_chars, int64_t max_chars, Kind* kind = nullptr) const;
  size_t num_words() const { return words_.size(); }
  size_t num_prose_words() const { return prose_.size(); }

 private:
  std::string sample_mixed(SampleRng& rng, int64_t n) const;
  std::string sample_prose(SampleRng& rng, int64_t n) const;
  std::string sample_structured(SampleRng& rng, int64_t n) const;
  std::string structured_item(SampleRng& rng) const;
  bool in_charset(const std::string& text) const;

  std::vector<std::string> words_;
  std::vector<std::string> prose_;  // corpus words in the charset, in order
  TextMix mix_;
  std::vector<std::string> digits_, symbols_;  // ASCII digits / ASCII punctuation in the charset
  std::vector<std::string> trailing_;          // of those, the marks that end a word: , . ; : ! ?
  std::vector<std::string> chars_;    // every printable character of the charset but space
  nn::Charset charset_;
};

// Splits a 64-bit seed into a stream of numbers: a tiny deterministic generator for per-sample
// randomness (Philox-based, so any sample's numbers depend only on its seed).
class SampleRng {
 public:
  explicit SampleRng(uint64_t seed) : seed_(seed) {}
  // A seed for item `index` of a run seeded with `seed` (sample i of ocrt-synth, say):
  // neighbouring indices give unrelated streams.
  static uint64_t derive(uint64_t seed, uint64_t index);
  uint64_t next();                   // 64 random bits
  double uniform();                  // [0, 1)
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  int64_t integer(int64_t lo, int64_t hi);  // [lo, hi]
  double normal();                   // standard normal (Box-Muller; takes two draws)
  // n standard normal numbers, two from each 128-bit block of the generator (Box-Muller's
  // cosine and sine): a quarter of the generator calls of n normal()s, for per-pixel noise.
  // Advances the stream by ceil(n / 2) draws.
  void normals(double* out, size_t n);

 private:
  uint64_t seed_, counter_ = 0;
};

// A value drawn uniformly from [lo, hi], or lo itself without a draw when the ends are equal, so
// that a range left at a single value moves no other draw of the seed.
double draw_in(SampleRng& rng, double lo, double hi);

// The type's spacing of one line drawn uniformly from [word_lo, word_hi] and [tracking_lo,
// tracking_hi] (ocrt-train's --synth-spacing / --synth-tracking, ocrt-synth's --spacing /
// --tracking). A range with equal ends is that value and draws nothing, so that the default
// (1:1, 0:0) leaves every other draw of a seed where it was.
TypeSetting draw_spacing(SampleRng& rng, double word_lo, double word_hi, double tracking_lo, double tracking_hi);

// Whether a line of `text` is set in small capitals, with probability `share` (ocrt-train's
// --synth-small-caps, ocrt-synth's --small-caps), and at which size: kSmallCapsSize's range,
// drawn uniformly. Only a text with a lower-case letter and with a capital or a digit can be:
// those stand at full height beside the small capitals and tell a reader (and the model) which
// letters are small. A line of small capitals alone looks like a line of capitals once cut to
// its ink and scaled, as the page reader cuts lines: labelled lower case, it taught a first
// model (bench/results/pages.md, twenty-ninth session) to read real capitals as lower case.
// 0 where it is not; a share of 0, or a text that cannot be, draws nothing (every other draw
// of a seed stays where it was).
constexpr double kSmallCapsSize[2] = {0.66, 0.8};
double draw_small_caps(SampleRng& rng, double share, const std::string& text);

}  // namespace ocrt::train
