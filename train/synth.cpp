// Font rendering with stb_truetype, font discovery, random text and the per-sample generator
// (see synth.h).
#include "train/synth.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "runtime/interrupt.h"
#include "runtime/error.h"
#include "runtime/rng.h"
#include "runtime/stb.h"

namespace ocrt::train {

namespace fs = std::filesystem;

namespace {

const stbtt_fontinfo* info_of(void* p) { return static_cast<const stbtt_fontinfo*>(p); }

// The code point of one UTF-8 character (as nn::utf8_chars returns them: already validated).
uint32_t codepoint(const std::string& ch) {
  const auto* s = reinterpret_cast<const unsigned char*>(ch.data());
  if (s[0] < 0x80) return s[0];
  if ((s[0] & 0xE0) == 0xC0) return ((s[0] & 0x1Fu) << 6) | (s[1] & 0x3Fu);
  if ((s[0] & 0xF0) == 0xE0) return ((s[0] & 0x0Fu) << 12) | ((s[1] & 0x3Fu) << 6) | (s[2] & 0x3Fu);
  return ((s[0] & 0x07u) << 18) | ((s[1] & 0x3Fu) << 12) | ((s[2] & 0x3Fu) << 6) | (s[3] & 0x3Fu);
}

uint32_t be32(const unsigned char* p) { return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]; }
uint16_t be16(const unsigned char* p) { return (uint16_t)(p[0] << 8 | p[1]); }

// Checks the sfnt table directory at `offset` against the file size (stb_truetype reads it
// without bounds checks) and returns the position and length of the OS/2 table (0, 0 when the
// font has none).
std::pair<size_t, size_t> check_tables(const std::vector<unsigned char>& data, int offset, const std::string& path) {
  const uint64_t size = data.size(), base = (uint64_t)offset;
  OCRT_CHECK(base + 12 <= size, path, ": truncated font (the table directory lies past the end of the file)");
  const uint64_t num_tables = be16(&data[base + 4]);
  OCRT_CHECK(base + 12 + 16 * num_tables <= size, path, ": truncated font (", num_tables,
             " tables announced, the directory does not fit in the file)");
  std::pair<size_t, size_t> os2{0, 0};
  for (uint64_t i = 0; i < num_tables; ++i) {
    const unsigned char* rec = &data[base + 12 + 16 * i];
    const uint64_t at = be32(rec + 8), length = be32(rec + 12);
    OCRT_CHECK(at + length <= size, path, ": truncated font (table '", std::string((const char*)rec, 4),
               "' lies past the end of the file)");
    if (std::memcmp(rec, "OS/2", 4) == 0) os2 = {(size_t)at, (size_t)length};
  }
  return os2;
}

bool is_control(const std::string& ch) {
  const uint32_t cp = codepoint(ch);
  return cp < 0x20 || (cp >= 0x7F && cp < 0xA0);
}

// Appends the words of `line` (runs of characters between white space) to `out`.
void split_at_spaces(const std::string& line, std::vector<std::string>& out) {
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && std::isspace((unsigned char)line[i])) ++i;
    size_t j = i;
    while (j < line.size() && !std::isspace((unsigned char)line[j])) ++j;
    if (j > i) out.push_back(line.substr(i, j - i));
    i = j;
  }
}

}  // namespace

std::shared_ptr<Font> Font::load(const std::string& path) {
  std::error_code ec;
  OCRT_CHECK(!fs::is_directory(path, ec), path, ": is a folder, not a font file");
  std::ifstream in(path, std::ios::binary);
  OCRT_CHECK(in.good(), path, ": cannot open the font file");
  std::shared_ptr<Font> f(new Font());
  f->path_ = path;
  f->data_.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  OCRT_CHECK(!f->data_.empty(), path, ": the font file is empty");
  // stb reads the 16-byte collection header before it knows what the file is.
  OCRT_CHECK(f->data_.size() >= 16, path, ": too small to be a font (", f->data_.size(), " bytes)");
  const int offset = stbtt_GetFontOffsetForIndex(f->data_.data(), 0);
  OCRT_CHECK(offset >= 0, path, ": not a font stb_truetype can read (TrueType or OpenType)");
  const auto [os2, os2_length] = check_tables(f->data_, offset, path);
  auto* info = new stbtt_fontinfo();
  f->info_ = info;
  OCRT_CHECK(stbtt_InitFont(info, f->data_.data(), offset), path,
             ": not a font stb_truetype can read (TrueType or OpenType with a Unicode character map)");
  OCRT_CHECK(stbtt_FindGlyphIndex(info, 'a') != 0 || stbtt_FindGlyphIndex(info, '0') != 0, path,
             ": the font has no Latin letters or digits");
  // OS/2 sFamilyClass (offset 30, high byte) 12 is "symbolic"; PANOSE bFamilyType (offset 32)
  // 5 is "Latin symbol".
  if (os2_length >= 34) {
    const unsigned family_class = f->data_[os2 + 30], panose_family = f->data_[os2 + 32];
    OCRT_CHECK(family_class != 12 && panose_family != 5, path,
               ": a symbol font (its letters are pictures or symbols), not usable for text");
  }
  return f;
}

Font::~Font() { delete static_cast<stbtt_fontinfo*>(info_); }

bool Font::covers(const std::string& text) const {
  for (const std::string& ch : nn::utf8_chars(text))
    if (ch != " " && stbtt_FindGlyphIndex(info_of(info_), (int)codepoint(ch)) == 0) return false;
  return true;
}

GrayImage Font::render(const std::string& text, double pixel_height, int64_t margin, uint8_t ink, uint8_t paper,
                       TypeSetting setting) const {
  OCRT_CHECK(pixel_height >= 4 && pixel_height <= 512, "render: pixel height must be in [4, 512], got ", pixel_height);
  OCRT_CHECK(margin >= 0 && margin <= 1024, "render: margin must be in [0, 1024], got ", margin);
  const auto chars = nn::utf8_chars(text, "render");
  OCRT_CHECK(!chars.empty(), "render: empty text");
  OCRT_CHECK(std::isfinite(setting.word) && setting.word >= 0 && std::isfinite(setting.tracking) &&
                 std::abs(setting.tracking) <= 1,
             "render: spacing must have a word factor >= 0 and a tracking within [-1, 1] heights, got ", setting.word,
             " and ", setting.tracking);
  OCRT_CHECK(setting.small_caps == 0 || (setting.small_caps >= 0.3 && setting.small_caps <= 1),
             "render: small capitals must be 0 (none) or within [0.3, 1] of the capitals' size, got ", setting.small_caps);
  const stbtt_fontinfo* info = info_of(info_);
  const float scale = stbtt_ScaleForPixelHeight(info, (float)pixel_height);
  int ascent, descent, gap;
  stbtt_GetFontVMetrics(info, &ascent, &descent, &gap);

  // Pass 1: glyphs, pen positions and bitmap boxes, to size the canvas. Coordinates are pixels
  // relative to the pen's start on the baseline, y pointing down.
  struct Placed {
    int glyph;
    float scale;     // the font's scale, or a small capital's
    float shift;     // sub-pixel part of the pen position
    int64_t x, y;    // top-left of the glyph's bitmap
    int w, h;
  };
  // Character i's glyph and scale: with small capitals, a lower-case ASCII letter is its
  // capital made smaller (where the font has that capital).
  const float small_scale = scale * (float)setting.small_caps;
  auto glyph_of = [&](size_t i, float* glyph_scale) {
    const uint32_t c = codepoint(chars[i]);
    *glyph_scale = scale;
    if (setting.small_caps > 0 && c >= 'a' && c <= 'z') {
      if (const int capital = stbtt_FindGlyphIndex(info, (int)(c - 'a' + 'A'))) {
        *glyph_scale = small_scale;
        return capital;
      }
    }
    return stbtt_FindGlyphIndex(info, (int)c);
  };
  std::vector<Placed> placed;
  int64_t left = 0, top = -(int64_t)std::ceil(ascent * scale);
  int64_t bottom = (int64_t)std::ceil(-descent * scale), right = 0;
  float pen = 0;
  for (size_t i = 0; i < chars.size(); ++i) {
    float gs;
    const int g = glyph_of(i, &gs);
    OCRT_CHECK(g != 0 || chars[i] == " ", path_, ": the font has no glyph for '", chars[i], "'");
    Placed p{g, gs, pen - std::floor(pen), 0, 0, 0, 0};
    int x0, y0, x1, y1;
    stbtt_GetGlyphBitmapBoxSubpixel(info, g, gs, gs, p.shift, 0, &x0, &y0, &x1, &y1);
    p.x = (int64_t)std::floor(pen) + x0, p.y = y0, p.w = x1 - x0, p.h = y1 - y0;
    if (p.w > 0 && p.h > 0) {  // a space has no bitmap
      left = std::min(left, p.x), right = std::max(right, p.x + p.w);
      top = std::min(top, p.y), bottom = std::max(bottom, p.y + p.h);
      placed.push_back(p);
    }
    int advance, lsb;
    stbtt_GetGlyphHMetrics(info, g, &advance, &lsb);
    // A space's advance scaled by setting.word (x 1 is exact: the font's own spacing).
    pen += chars[i] == " " ? advance * scale * (float)setting.word : advance * gs;
    if (i + 1 < chars.size()) {
      float next_scale;
      const int next = glyph_of(i + 1, &next_scale);
      pen += std::min(gs, next_scale) * stbtt_GetGlyphKernAdvance(info, g, next);
      if (setting.tracking != 0) pen += (float)(setting.tracking * pixel_height);
    }
  }
  right = std::max(right, (int64_t)std::ceil(pen));
  const int64_t width = std::max<int64_t>(1, right - left + 2 * margin);
  const int64_t height = std::max<int64_t>(1, bottom - top + 2 * margin);
  OCRT_CHECK(width * height <= (int64_t)1 << 28, "render: the line would be ", width, "x", height,
             " pixels; use a shorter text or a smaller pixel height");

  // Pass 2: rasterise each glyph and add its coverage (kerned neighbours may overlap).
  std::vector<float> coverage((size_t)(width * height), 0.f);
  std::vector<unsigned char> bmp;
  for (const Placed& p : placed) {
    bmp.assign((size_t)p.w * (size_t)p.h, 0);
    stbtt_MakeGlyphBitmapSubpixel(info, bmp.data(), p.w, p.h, p.w, p.scale, p.scale, p.shift, 0, p.glyph);
    const int64_t ox = margin - left + p.x, oy = margin - top + p.y;  // inside the canvas by construction
    for (int r = 0; r < p.h; ++r)
      for (int c = 0; c < p.w; ++c) {
        float& v = coverage[(size_t)((oy + r) * width + ox + c)];
        v = std::min(1.f, v + bmp[(size_t)r * (size_t)p.w + (size_t)c] / 255.f);
      }
  }
  GrayImage img;
  img.width = width, img.height = height;
  img.pixels.resize(coverage.size());
  for (size_t i = 0; i < coverage.size(); ++i)
    img.pixels[i] = (uint8_t)std::lround(paper + ((double)ink - (double)paper) * coverage[i]);
  return img;
}

std::vector<std::shared_ptr<Font>> load_fonts(const std::vector<std::string>& paths, std::vector<std::string>* skipped) {
  OCRT_CHECK(!paths.empty(), "fonts: no font file or folder given");
  std::vector<std::string> files;
  for (const auto& p : paths) {
    std::error_code ec;
    OCRT_CHECK(fs::exists(p, ec), p, ": no such font file or folder");
    if (!fs::is_directory(p, ec)) {
      files.push_back(p);
      continue;
    }
    // error_code overloads throughout: an unreadable sub-folder is skipped, not a crash.
    for (fs::recursive_directory_iterator it(p, fs::directory_options::skip_permission_denied, ec), end;
         !ec && it != end; it.increment(ec)) {
      std::string ext = it->path().extension().string();
      std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return (char)std::tolower(c); });
      if (it->is_regular_file(ec) && (ext == ".ttf" || ext == ".otf" || ext == ".ttc"))
        files.push_back(it->path().string());
    }
    OCRT_CHECK(!ec, p, ": cannot list the font folder: ", ec.message());
  }
  std::sort(files.begin(), files.end());
  files.erase(std::unique(files.begin(), files.end()), files.end());
  std::vector<std::shared_ptr<Font>> fonts;
  std::string first_problem;
  for (const auto& f : files) {
    throw_if_interrupted("loading fonts");
    try {
      fonts.push_back(Font::load(f));
    } catch (const Error& e) {
      if (first_problem.empty()) first_problem = e.what();
      if (skipped) skipped->push_back(e.what());
    }
  }
  OCRT_CHECK(!fonts.empty(), "fonts: no readable font among the ", files.size(), " font files (*.ttf, *.otf, *.ttc) in ",
             paths.size() == 1 ? paths[0] : std::to_string(paths.size()) + " paths",
             first_problem.empty() ? "" : "; first problem: ", first_problem);
  return fonts;
}

std::vector<std::string> default_font_dirs() {
  std::vector<std::string> out;
  // OCRT_FONT_DIRS (folders separated by ':') replaces the Debian folders, for machines that
  // have fonts elsewhere (the lent GPU machines get them in .gpu-fonts/train).
  if (const char* env = std::getenv("OCRT_FONT_DIRS"); env != nullptr && *env != '\0') {
    std::string dirs(env);
    for (size_t start = 0; start <= dirs.size();) {
      size_t end = dirs.find(':', start);
      if (end == std::string::npos) end = dirs.size();
      if (end > start && fs::is_directory(dirs.substr(start, end - start))) out.push_back(dirs.substr(start, end - start));
      start = end + 1;
    }
    return out;
  }
  for (const char* d : {"/usr/share/fonts/truetype/dejavu", "/usr/share/fonts/truetype/liberation",
                        "/usr/share/fonts/truetype/freefont", "/usr/share/fonts/opentype/urw-base35"})
    if (fs::is_directory(d)) out.emplace_back(d);
  return out;
}

void TextMix::validate() const {
  for (auto [p, name] : {std::pair{prose, "prose"}, {structured, "structured"}, {prose_upper, "prose_upper"},
                         {prose_hyphen, "prose_hyphen"}})
    OCRT_CHECK(p >= 0 && p <= 1, "text mix: ", name, " must be a share in [0, 1], got ", p);
  OCRT_CHECK(prose + structured <= 1, "text mix: prose + structured must be at most 1, got ", prose + structured);
}

TextSource::TextSource(const std::vector<std::string>& words, const nn::Charset& charset,
                       std::vector<std::string> prose, TextMix mix)
    : mix_(mix), charset_(charset) {
  mix_.validate();
  // A line may hold several words; each is kept only when every character is in the charset
  // (a word with invalid UTF-8 is not).
  for (const auto& line : words) {
    std::vector<std::string> split;
    split_at_spaces(line, split);
    for (auto& w : split)
      if (in_charset(w)) words_.push_back(std::move(w));
  }
  for (int c = 0x21; c < 0x7F; ++c) {
    const std::string ch(1, (char)c);
    if (!charset.contains(ch)) continue;
    if (std::isdigit(c)) digits_.push_back(ch);
    else if (std::ispunct(c)) symbols_.push_back(ch);
    if (std::strchr(",.;:!?", c)) trailing_.push_back(ch);
  }
  for (const auto& ch : charset.chars())
    if (ch != " " && !is_control(ch)) chars_.push_back(ch);
  OCRT_CHECK(!chars_.empty(), "text source: the charset has no printable character besides the space");
  // Corpus words outside the charset are left out (the text around them stays in order).
  for (auto& w : prose)
    if (in_charset(w)) prose_.push_back(std::move(w));
}

bool TextSource::in_charset(const std::string& text) const {
  try {
    const auto chars = nn::utf8_chars(text);
    return std::all_of(chars.begin(), chars.end(), [&](const std::string& c) { return charset_.contains(c); });
  } catch (const Error&) {
    return false;  // invalid UTF-8
  }
}

std::vector<std::string> TextSource::read_prose(const std::vector<std::string>& paths) {
  std::vector<std::string> words;
  for (const auto& path : paths) {
    std::error_code ec;
    OCRT_CHECK(!fs::is_directory(path, ec), path, ": is a folder, not a text file");
    std::ifstream in(path, std::ios::binary);
    OCRT_CHECK(in.good(), path, ": cannot open the text");
    std::string line;
    for (int64_t n = 1; std::getline(in, line); ++n) {
      if (n % 16384 == 0) throw_if_interrupted("reading the prose");
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line == "%") continue;  // a fortune file's separator
      split_at_spaces(line, words);
    }
  }
  return words;
}

std::vector<std::string> TextSource::read_words(const std::string& path) {
  std::error_code ec;
  OCRT_CHECK(!fs::is_directory(path, ec), path, ": is a folder, not a word list");
  std::ifstream in(path);
  OCRT_CHECK(in.good(), path, ": cannot open the word list");
  std::vector<std::string> words;
  std::string line;
  for (int64_t n = 1; std::getline(in, line); ++n) {
    if (n % 16384 == 0) throw_if_interrupted("reading the word list");
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!line.empty()) words.push_back(line);
  }
  return words;
}

std::string TextSource::sample(uint64_t seed, int64_t min_chars, int64_t max_chars, Kind* kind) const {
  OCRT_CHECK(min_chars >= 1 && max_chars >= min_chars, "text source: need 1 <= min_chars <= max_chars, got ", min_chars,
             " and ", max_chars);
  SampleRng rng(seed);
  const double which = rng.uniform();
  const int64_t n = rng.integer(min_chars, max_chars);
  Kind k = Kind::mixed;
  if (which < mix_.prose && !prose_.empty()) k = Kind::prose;
  else if (which >= mix_.prose && which < mix_.prose + mix_.structured && charset_.contains(" ")) k = Kind::structured;
  std::string text;
  if (k == Kind::prose) text = sample_prose(rng, n);
  else if (k == Kind::structured) text = sample_structured(rng, n);
  // Prose and structured lines end at a whole word, so they can fall short of min_chars: then
  // the line is a mixed one after all.
  if (k == Kind::mixed || (int64_t)nn::utf8_chars(text).size() < min_chars) {
    k = Kind::mixed;
    text = sample_mixed(rng, n);
  }
  if (kind) *kind = k;
  return text;
}

std::string TextSource::sample_mixed(SampleRng& rng, int64_t n) const {
  auto pick = [&rng](const std::vector<std::string>& from) { return from[(size_t)rng.integer(0, (int64_t)from.size() - 1)]; };
  // One piece: a word (70%; sometimes capitalised or followed by a mark), a number (18%), a
  // run of symbols (6%) or a random string over the whole charset (6%). A kind the charset
  // cannot make falls through to the random string.
  auto piece = [&]() {
    std::vector<std::string> out;
    const double kind = rng.uniform();
    if (kind < 0.7 && !words_.empty()) {
      out = nn::utf8_chars(pick(words_));
      const double upper = rng.uniform();
      // 12%: first letter upper-case, 3%: all of it; only when the charset has those letters.
      const size_t n = upper < 0.03 ? out.size() : upper < 0.15 ? 1 : 0;
      std::vector<std::string> changed = out;
      for (size_t i = 0; i < n; ++i)
        if (changed[i].size() == 1) changed[i][0] = (char)std::toupper((unsigned char)changed[i][0]);
      if (std::all_of(changed.begin(), changed.end(), [&](const std::string& c) { return charset_.contains(c); }))
        out = std::move(changed);
      if (rng.uniform() < 0.1 && !trailing_.empty()) out.push_back(pick(trailing_));
    } else if (kind < 0.88 && !digits_.empty()) {
      const int64_t len = rng.integer(1, 6);
      for (int64_t i = 0; i < len; ++i) out.push_back(pick(digits_));
    } else if (kind < 0.94 && !symbols_.empty()) {
      const int64_t len = rng.integer(1, 3);
      for (int64_t i = 0; i < len; ++i) out.push_back(pick(symbols_));
    } else {
      const int64_t len = rng.integer(1, 8);
      for (int64_t i = 0; i < len; ++i) out.push_back(pick(chars_));
    }
    return out;
  };
  const bool spaced = charset_.contains(" ");
  std::vector<std::string> text;
  while ((int64_t)text.size() < n) {
    if (!text.empty() && spaced) {
      if (n - (int64_t)text.size() < 2) {
        // Room for one character only: a space there would end the line, so glue a mark on.
        text.push_back(pick(trailing_.empty() ? chars_ : trailing_));
        continue;
      }
      text.push_back(" ");
    }
    const std::vector<std::string> p = piece();
    const size_t take = std::min(p.size(), (size_t)(n - (int64_t)text.size()));  // a word that does not fit is cut
    text.insert(text.end(), p.begin(), p.begin() + (std::ptrdiff_t)take);
  }
  std::string out;
  for (const auto& ch : text) out += ch;
  return out;
}

// Consecutive corpus words from a random place, as many as fit in n characters.
std::string TextSource::sample_prose(SampleRng& rng, int64_t n) const {
  const bool upper = rng.uniform() < mix_.prose_upper;
  const bool hyphen = rng.uniform() < mix_.prose_hyphen;
  size_t at = (size_t)rng.integer(0, (int64_t)prose_.size() - 1);
  std::string out;
  auto length = [](const std::string& t) { return (int64_t)nn::utf8_chars(t).size(); };
  int64_t used = 0;
  for (size_t taken = 0; taken < prose_.size(); ++taken, at = (at + 1) % prose_.size()) {
    const std::string& word = prose_[at];
    const int64_t len = length(word), room = n - used - (out.empty() ? 0 : 1);
    if (len <= room) {
      if (!out.empty()) out += ' ';
      out += word;
      used += len + (used > 0 ? 1 : 0);
      continue;
    }
    // The word does not fit. A line ends here, or (hyphenation) with the word's first part.
    const auto chars = nn::utf8_chars(word);
    const bool alpha = std::all_of(chars.begin(), chars.end(), [](const std::string& c) {
      return c.size() == 1 && std::isalpha((unsigned char)c[0]);
    });
    if (out.empty()) {
      for (int64_t i = 0; i < n && i < len; ++i) out += chars[(size_t)i];  // a single long word: cut
    } else if (hyphen && alpha && room >= 3 && len >= 5 && charset_.contains("-")) {
      out += ' ';
      const int64_t keep = std::min<int64_t>(room - 1, len - 2);
      for (int64_t i = 0; i < keep; ++i) out += chars[(size_t)i];
      out += '-';
    }
    break;
  }
  if (upper) {
    std::string changed = out;
    for (char& c : changed) c = (char)std::toupper((unsigned char)c);
    if (in_charset(changed)) out = std::move(changed);
  }
  return out;
}

// Structured items (and now and then a dictionary word between them), as many as fit.
std::string TextSource::sample_structured(SampleRng& rng, int64_t n) const {
  std::string out;
  int64_t used = 0;
  for (int tries = 0; tries < 16 && used < n; ++tries) {
    std::string item;
    if (!words_.empty() && rng.uniform() < 0.4) {
      item = words_[(size_t)rng.integer(0, (int64_t)words_.size() - 1)];
      if (rng.uniform() < 0.3 && item.size() > 0) item[0] = (char)std::toupper((unsigned char)item[0]);
      if (rng.uniform() < 0.15) item += ':';
    } else {
      item = structured_item(rng);
    }
    if (!in_charset(item)) continue;
    const int64_t len = (int64_t)nn::utf8_chars(item).size(), room = n - used - (out.empty() ? 0 : 1);
    if (len > room) {
      if (out.empty()) {  // a single longer item is cut (items are ASCII: a byte is a character)
        out = item.substr(0, (size_t)n);
        while (!out.empty() && out.back() == ' ') out.pop_back();
      }
      break;
    }
    if (!out.empty()) out += ' ';
    out += item;
    used += len + (used > 0 ? 1 : 0);
  }
  if (out.empty()) out = sample_mixed(rng, n);  // nothing fitted the charset
  return out;
}

std::string TextSource::structured_item(SampleRng& rng) const {
  static const char* const kMonths[] = {"January", "February", "March",     "April",   "May",      "June",
                                        "July",    "August",   "September", "October", "November", "December"};
  static const char* const kShortMonths[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                             "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  static const char* const kDays[] = {"Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"};
  static const char* const kAbbrev[] = {"Dr.", "Mr.", "Mrs.", "Ms.", "Prof.", "St.", "e.g.", "i.e.", "etc.", "vs.",
                                        "Inc.", "Ltd.", "Co.", "Corp.", "Jr.", "Sr.", "No.", "approx.", "U.S.",
                                        "U.K.", "a.m.", "p.m.", "Ave.", "Rd.", "Dept.", "Fig.", "Vol.", "Ch."};
  static const char* const kTlds[] = {"com", "org", "net", "edu", "gov", "io", "co.uk", "de"};
  auto num = [&](int64_t lo, int64_t hi) { return std::to_string(rng.integer(lo, hi)); };
  auto two = [&](int64_t lo, int64_t hi) {
    const std::string v = num(lo, hi);
    return v.size() < 2 ? "0" + v : v;
  };
  auto word = [&]() -> std::string {
    if (words_.empty()) return "example";
    std::string w = words_[(size_t)rng.integer(0, (int64_t)words_.size() - 1)];
    std::string lower;
    for (char c : w)
      if (std::isalnum((unsigned char)c)) lower += (char)std::tolower((unsigned char)c);
    return lower.empty() ? "example" : lower;
  };
  auto grouped = [&](int64_t value) {  // 1234567 -> 1,234,567
    std::string digits = std::to_string(value), out;
    for (size_t i = 0; i < digits.size(); ++i) {
      if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
      out += digits[i];
    }
    return out;
  };
  const int64_t kind = rng.integer(0, 14);
  const int64_t year = rng.integer(1890, 2035);
  switch (kind) {
    case 0:  // dates, in the forms print uses
      switch (rng.integer(0, 4)) {
        case 0: return num(1, 28) + " " + kMonths[rng.integer(0, 11)] + " " + std::to_string(year);
        case 1: return std::string(kMonths[rng.integer(0, 11)]) + " " + num(1, 28) + ", " + std::to_string(year);
        case 2: return std::to_string(year) + "-" + two(1, 12) + "-" + two(1, 28);
        case 3: return two(1, 12) + "/" + two(1, 28) + "/" + (rng.uniform() < 0.5 ? std::to_string(year) : two(0, 99));
        default: return std::string(kDays[rng.integer(0, 6)]) + ", " + num(1, 28) + " " + kShortMonths[rng.integer(0, 11)];
      }
    case 1:  // times
      return num(1, 12) + ":" + two(0, 59) + (rng.uniform() < 0.5 ? (rng.uniform() < 0.5 ? " am" : " pm") : "");
    case 2: {  // prices
      const int64_t whole = rng.uniform() < 0.6 ? rng.integer(0, 999) : rng.integer(1000, 2000000);
      const std::string cents = "." + two(0, 99);
      switch (rng.integer(0, 3)) {
        case 0: return "$" + grouped(whole) + cents;
        case 1: return (rng.uniform() < 0.5 ? "-$" : "$") + grouped(whole);
        case 2: return grouped(whole) + cents + " " + (rng.uniform() < 0.5 ? "EUR" : "USD");
        default: return "USD " + grouped(whole) + cents;
      }
    }
    case 3:  // percentages
      return (rng.uniform() < 0.2 ? "+" : "") + num(0, 100) + (rng.uniform() < 0.5 ? "." + num(0, 9) : "") + "%";
    case 4:  // grouped and decimal numbers
      return rng.uniform() < 0.5 ? grouped(rng.integer(1000, 99999999)) : num(0, 999) + "." + num(0, 99999);
    case 5:  // phone numbers
      return rng.uniform() < 0.5 ? "(" + num(200, 999) + ") " + num(200, 999) + "-" + num(1000, 9999)
                                 : "+" + num(1, 99) + " " + num(10, 999) + " " + num(100, 9999) + " " + num(1000, 9999);
    case 6: {  // e-mail addresses: a name or first.last, in 30% capitalised as names are
      // (Matthew.Harrison@...: all lower case, the model read ".H" as a sentence's end and
      // a new word on the real pages of bench/results/pages.md)
      const bool capitalised = rng.uniform() < 0.3;
      auto name = [&] {
        std::string w = word();
        if (capitalised) w[0] = (char)std::toupper((unsigned char)w[0]);
        return w;
      };
      std::string local = name();
      if (rng.uniform() < 0.5) local += "." + name();
      return local + "@" + word() + "." + kTlds[rng.integer(0, 7)];
    }
    case 7:  // URLs
      return std::string(rng.uniform() < 0.5 ? "https://" : "") + (rng.uniform() < 0.6 ? "www." : "") + word() + "." +
             kTlds[rng.integer(0, 7)] + (rng.uniform() < 0.6 ? "/" + word() : "") +
             (rng.uniform() < 0.3 ? "?id=" + num(1, 99999) : "");
    case 8:  // abbreviations
      return kAbbrev[rng.integer(0, (int64_t)std::size(kAbbrev) - 1)];
    case 9:  // references: pages, figures, sections, volumes
      switch (rng.integer(0, 4)) {
        case 0: return "p. " + num(1, 999);
        case 1: return "pp. " + num(1, 400) + "-" + num(401, 900);
        case 2: return "Fig. " + num(1, 30) + (rng.uniform() < 0.3 ? std::string(1, (char)('a' + rng.integer(0, 3))) : "");
        case 3: return "Section " + num(1, 12) + "." + num(1, 9) + (rng.uniform() < 0.4 ? "." + num(1, 9) : "");
        default: return "Vol. " + num(1, 60) + ", No. " + num(1, 12);
      }
    case 10:  // identifiers: invoice, order and ISBN numbers
      switch (rng.integer(0, 2)) {
        case 0: return "#" + num(100, 999999);
        case 1: return "ISBN " + num(0, 9) + "-" + num(100, 999) + "-" + num(10000, 99999) + "-" + num(0, 9);
        default: return std::string(1, (char)('A' + rng.integer(0, 25))) + std::string(1, (char)('A' + rng.integer(0, 25))) +
                        "-" + num(1000, 99999);
      }
    case 11:  // quoted or bracketed words
      switch (rng.integer(0, 3)) {
        case 0: return "\"" + word() + "\"";
        case 1: return "(" + word() + ")";
        case 2: return "'" + word() + "'";
        default: return "[" + num(1, 99) + "]";
      }
    case 12:  // a year or an ordinal
      return rng.uniform() < 0.5 ? std::to_string(year) : num(1, 99) + (rng.uniform() < 0.5 ? "th" : "nd");
    case 13:  // reporting periods, as business and financial print writes them: Q1, 2Q14, FY2015E, H1 2019
      switch (rng.integer(0, 3)) {
        case 0: return "Q" + num(1, 4) + (rng.uniform() < 0.5 ? " " + std::to_string(year) : "");
        case 1: return num(1, 4) + "Q" + two(0, 99);
        case 2: {
          const double r = rng.uniform();
          return "FY" + (rng.uniform() < 0.5 ? std::to_string(year) : two(0, 99)) + (r < 0.3 ? "A" : r < 0.6 ? "E" : "");
        }
        default: return "H" + num(1, 2) + " " + std::to_string(year);
      }
    default: {  // measures
      static const char* const kUnits[] = {"kg", "km", "mm", "cm", "lb", "oz", "ft", "in.", "mph", "MB", "GB", "ml"};
      return num(1, 999) + (rng.uniform() < 0.5 ? "." + num(0, 9) : "") + " " + kUnits[rng.integer(0, 11)];
    }
  }
}


uint64_t SampleRng::derive(uint64_t seed, uint64_t index) {
  const Philox4x32 r = philox4x32_10(seed, index, 0xD371'7E5Eu);
  return ((uint64_t)r.v[0] << 32) | r.v[1];
}

uint64_t SampleRng::next() {
  const Philox4x32 r = philox4x32_10(seed_, counter_++, 0x5A17u);
  return ((uint64_t)r.v[0] << 32) | r.v[1];
}

double SampleRng::uniform() { return (double)(next() >> 11) * (1.0 / 9007199254740992.0); }

int64_t SampleRng::integer(int64_t lo, int64_t hi) {
  OCRT_CHECK(hi >= lo, "SampleRng::integer: empty range [", lo, ", ", hi, "]");
  const uint64_t span = (uint64_t)hi - (uint64_t)lo + 1;  // 0 means the full 64-bit range
  return span == 0 ? (int64_t)next() : (int64_t)((uint64_t)lo + next() % span);
}

void SampleRng::normals(double* out, size_t n) {
  for (size_t i = 0; i < n; i += 2) {
    const Philox4x32 r = philox4x32_10(seed_, counter_++, 0x5A17u);
    const uint64_t a = ((uint64_t)r.v[0] << 32) | r.v[1], b = ((uint64_t)r.v[2] << 32) | r.v[3];
    const double u1 = 1 - (double)(a >> 11) * (1.0 / 9007199254740992.0);  // (0, 1]: log never sees 0
    const double u2 = (double)(b >> 11) * (1.0 / 9007199254740992.0);
    const double radius = std::sqrt(-2 * std::log(u1)), angle = 6.283185307179586 * u2;
    out[i] = radius * std::cos(angle);
    if (i + 1 < n) out[i + 1] = radius * std::sin(angle);
  }
}

double draw_in(SampleRng& rng, double lo, double hi) { return lo < hi ? rng.uniform(lo, hi) : lo; }

TypeSetting draw_spacing(SampleRng& rng, double word_lo, double word_hi, double tracking_lo, double tracking_hi) {
  const double word = draw_in(rng, word_lo, word_hi);  // in this order: the word space first
  return {word, draw_in(rng, tracking_lo, tracking_hi)};
}

double draw_small_caps(SampleRng& rng, double share, const std::string& text) {
  const auto has = [&](auto test) { return std::any_of(text.begin(), text.end(), [&](char c) { return test((unsigned char)c); }); };
  const bool lower = has([](unsigned char c) { return c >= 'a' && c <= 'z'; });
  const bool full_height = has([](unsigned char c) { return (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); });
  if (share <= 0 || !lower || !full_height || rng.uniform() >= share) return 0;
  return rng.uniform(kSmallCapsSize[0], kSmallCapsSize[1]);
}

double SampleRng::normal() {
  const double u1 = 1 - uniform();  // (0, 1]: log never sees 0
  return std::sqrt(-2 * std::log(u1)) * std::cos(6.283185307179586 * uniform());
}

}  // namespace ocrt::train
