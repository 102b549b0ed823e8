// Image decoding and preprocessing: every pixel format (gray, gray+alpha, RGB, RGBA, 16-bit,
// JPEG, BMP) to BT.601 gray with alpha over white; every bad file (missing, empty, corrupt,
// truncated, a directory); resizing rules (bilinear growth of 8-px lines, area averaging of
// 300-px ones); batch packing with white padding and normalisation; normalize_line, inference's
// checks for blank, light-on-dark, faint and coloured lines.
#include <catch2/catch.hpp>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>

#include "runtime/image.h"
#include "runtime/stb.h"
#include "temp_dir.h"

using namespace ocrt;
namespace fs = std::filesystem;

namespace {

std::string temp(const std::string& name) {
  return (ocrt::testing::process_temp_dir("image") / name).string();
}

// Writes raw 8-bit samples with `channels` per pixel as a PNG through stb_image_write.
std::string write_png(const std::string& name, int w, int h, int channels, const std::vector<uint8_t>& samples) {
  const std::string path = temp(name);
  REQUIRE(stbi_write_png(path.c_str(), w, h, channels, samples.data(), w * channels));
  return path;
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

}  // namespace

TEST_CASE("images decode to BT.601 gray, alpha over white", "[image]") {
  // Gray, gray+alpha, RGB, RGBA: one 2x1 image each.
  GrayImage g = load_gray_image(write_png("g.png", 2, 1, 1, {0, 200}));
  CHECK(g.width == 2);
  CHECK(g.height == 1);
  CHECK(g.pixels == std::vector<uint8_t>{0, 200});
  GrayImage ga = load_gray_image(write_png("ga.png", 2, 1, 2, {0, 255, 0, 0}));  // opaque black, transparent black
  CHECK(ga.pixels == std::vector<uint8_t>{0, 255});
  GrayImage rgb = load_gray_image(write_png("rgb.png", 2, 1, 3, {255, 0, 0, 10, 20, 30}));
  CHECK((int)rgb.pixels[0] == (int)std::lround(0.299 * 255));
  CHECK((int)rgb.pixels[1] == (int)std::lround(0.299 * 10 + 0.587 * 20 + 0.114 * 30));
  GrayImage rgba = load_gray_image(write_png("rgba.png", 2, 1, 4, {0, 0, 255, 255, 0, 0, 0, 51}));
  CHECK((int)rgba.pixels[0] == (int)std::lround(0.114 * 255));
  CHECK((int)rgba.pixels[1] == (int)std::lround(0.8 * 255));  // black at alpha 0.2 over white
  // 16-bit PNGs (written by tools/reference/images.py).
  const std::string dir = std::string(OCRT_SOURCE_DIR) + "/tests/fixtures/images/";
  GrayImage g16 = load_gray_image(dir + "gray16.png");
  REQUIRE(g16.width == 5);
  REQUIRE(g16.height == 3);
  for (int i = 0; i < 15; ++i) CHECK((int)g16.pixels[(size_t)i] == (int)std::lround(255.0 * i / 14));
  GrayImage rgba16 = load_gray_image(dir + "rgba16.png");
  CHECK((int)rgba16.pixels[0] == (int)std::lround(0.299 * 255));
  CHECK(std::abs((int)rgba16.pixels[1] - 127) <= 1);
  // JPEG and BMP through stb_image_write.
  std::vector<uint8_t> flat(8 * 8, 90);
  const std::string jpg = temp("flat.jpg"), bmp = temp("flat.bmp");
  REQUIRE(stbi_write_jpg(jpg.c_str(), 8, 8, 1, flat.data(), 95));
  REQUIRE(stbi_write_bmp(bmp.c_str(), 8, 8, 1, flat.data()));
  for (uint8_t v : load_gray_image(jpg).pixels) CHECK(std::abs((int)v - 90) <= 2);
  CHECK(load_gray_image(bmp).pixels == flat);
}

TEST_CASE("bad image files give clear errors naming the file", "[image]") {
  CHECK_THROWS_WITH(load_gray_image(temp("missing.png")), Catch::Contains("missing.png: no such file"));
  const std::string empty = temp("empty.png"), junk = temp("junk.png"), cut = temp("cut.png");
  write_bytes(empty, "");
  write_bytes(junk, "this is not an image at all");
  CHECK_THROWS_WITH(load_gray_image(empty), Catch::Contains("empty.png: the image file is empty"));
  CHECK_THROWS_WITH(load_gray_image(junk), Catch::Contains("junk.png: not an image ocrt can decode"));
  // A PNG cut in half.
  std::vector<uint8_t> px(64 * 32, 128);
  const std::string whole = write_png("whole.png", 64, 32, 1, px);
  std::ifstream in(whole, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  write_bytes(cut, bytes.substr(0, bytes.size() / 2));
  CHECK_THROWS_WITH(load_gray_image(cut), Catch::Contains("cut.png"));
  CHECK_THROWS_WITH(load_gray_image(fs::temp_directory_path().string()), Catch::Contains("is a directory"));
}

TEST_CASE("resize_to_height keeps the aspect ratio, leaves 32-high images alone, never makes width 0", "[image]") {
  GrayImage img;
  img.width = 100, img.height = 64;
  img.pixels.assign(100 * 64, 200);
  GrayImage r = resize_to_height(img, 32);
  CHECK(r.width == 50);
  CHECK(r.height == 32);
  for (uint8_t v : r.pixels) CHECK(v == 200);  // flat stays flat, both filters
  GrayImage same;
  same.width = 7, same.height = 32;
  same.pixels.assign(7 * 32, 0);
  same.pixels[5] = 77;
  CHECK(resize_to_height(same, 32).pixels == same.pixels);
  GrayImage tall;
  tall.width = 1, tall.height = 1000;
  tall.pixels.assign(1000, 10);
  CHECK(resize_to_height(tall, 32).width == 1);
  GrayImage dot;
  dot.width = 1, dot.height = 1;
  dot.pixels = {42};
  GrayImage up = resize_to_height(dot, 32);
  CHECK(up.width == 32);
  for (uint8_t v : up.pixels) CHECK(v == 42);
  // Shrinking averages: a 2x2 checkerboard of 0/255 becomes mid-gray at height 1.
  GrayImage cb;
  cb.width = 2, cb.height = 2;
  cb.pixels = {0, 255, 255, 0};
  CHECK(std::abs((int)resize_to_height(cb, 1).pixels[0] - 128) <= 1);
}

TEST_CASE("pack_batch pads with white to a multiple of 4 and the widest line, then normalises", "[image]") {
  GrayImage a, b;
  a.width = 5, a.height = 2, a.pixels.assign(10, 0);
  b.width = 9, b.height = 2, b.pixels.assign(18, 255);
  std::vector<int64_t> widths;
  Tensor t = pack_batch({a, b}, BatchSpec{}, &widths);
  CHECK(t.shape() == Shape{2, 1, 2, 12});
  CHECK(widths == std::vector<int64_t>{8, 12});
  const auto v = t.to_vector<float>();
  CHECK(v[0] == -1.0f);      // black
  CHECK(v[5] == 1.0f);       // padding is white
  CHECK(v[24 + 3] == 1.0f);  // white
  CHECK(padded_width(1) == 4);
  CHECK(padded_width(4) == 4);
  CHECK(padded_width(5) == 8);
  GrayImage c;
  c.width = 3, c.height = 3, c.pixels.assign(9, 0);
  CHECK_THROWS_WITH(pack_batch({a, c}, BatchSpec{}), Catch::Contains("line 1 is 3 pixels high, line 0 is 2"));
}

TEST_CASE("save_gray_png round-trips", "[image]") {
  GrayImage img;
  img.width = 3, img.height = 2, img.pixels = {1, 2, 3, 250, 251, 252};
  const std::string path = temp("roundtrip.png");
  save_gray_png(path, img);
  CHECK(load_gray_image(path).pixels == img.pixels);
}

namespace {

// A line of "print": vertical strokes 3 * scale px wide every 9 * scale px, joined by bars
// 2 * scale px high, ink on paper, in the middle 60% of the height (a font-free stand-in for text).
GrayImage print_line(int64_t width, int64_t height, uint8_t ink, uint8_t paper, int64_t scale = 1) {
  GrayImage img;
  img.width = width, img.height = height;
  img.pixels.assign((size_t)(width * height), paper);
  const int64_t top = height / 5, bottom = height - height / 5, s = scale;
  for (int64_t x = 4 * s; x + 3 * s < width - 4 * s; x += 9 * s)
    for (int64_t y = top; y < bottom; ++y)
      for (int64_t k = 0; k < 3 * s; ++k) img.pixels[(size_t)(y * width + x + k)] = ink;
  for (int64_t x = 4 * s; x + 9 * s < width - 4 * s; x += 18 * s)
    for (int64_t y = top; y < top + 2 * s; ++y)
      for (int64_t k = 0; k < 9 * s; ++k) img.pixels[(size_t)(y * width + x + k)] = ink;
  return img;
}

GrayImage flat(int64_t width, int64_t height, uint8_t value) {
  GrayImage img;
  img.width = width, img.height = height;
  img.pixels.assign((size_t)(width * height), value);
  return img;
}

// Adds Gaussian noise of the given standard deviation (fixed seed, Box-Muller), clamped.
GrayImage add_noise(GrayImage img, double sigma) {
  uint64_t s = 12345;
  auto uniform = [&] {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    return ((double)(s >> 11) + 0.5) / 9007199254740992.0;
  };
  for (auto& v : img.pixels) {
    const double g = std::sqrt(-2 * std::log(uniform())) * std::cos(6.283185307179586 * uniform());
    v = (uint8_t)std::clamp<long>(std::lround(v + sigma * g), 0, 255);
  }
  return img;
}

GrayImage noisy_paper(int64_t width, int64_t height, uint8_t paper, double sigma) {
  return add_noise(flat(width, height, paper), sigma);
}

GrayImage inverted(GrayImage img) {
  for (auto& v : img.pixels) v = (uint8_t)(255 - v);
  return img;
}

int max_abs_diff(const GrayImage& a, const GrayImage& b) {
  REQUIRE(a.width == b.width);
  REQUIRE(a.height == b.height);
  int d = 0;
  for (size_t i = 0; i < a.pixels.size(); ++i) d = std::max(d, std::abs((int)a.pixels[i] - (int)b.pixels[i]));
  return d;
}

}  // namespace

TEST_CASE("resize_to_height: 8-px lines grow bilinearly, 300-px lines shrink by area averaging", "[image]") {
  // Growing 8 -> 32: a hard edge becomes a ramp (bilinear), monotone, ends kept; point sampling
  // would copy pixels and leave no value in between.
  GrayImage step = flat(16, 8, 0);
  for (int64_t y = 0; y < 8; ++y)
    for (int64_t x = 8; x < 16; ++x) step.pixels[(size_t)(y * 16 + x)] = 255;
  const GrayImage up = resize_to_height(step, 32);
  REQUIRE(up.width == 64);
  int between = 0;
  for (int64_t x = 0; x < 64; ++x) {
    between += up.at(x, 5) > 0 && up.at(x, 5) < 255;
    if (x) CHECK(up.at(x, 5) >= up.at(x - 1, 5));
  }
  CHECK(between >= 3);
  CHECK(up.at(0, 5) == 0);
  CHECK(up.at(63, 5) == 255);
  // The centre of output column o is source x = (o + 0.5) / 4 - 0.5: column 30 sits at 7.125,
  // 12.5% of the way from the last black pixel (7) to the first white one (8).
  CHECK(up.at(30, 5) == 32);
  // Shrinking 300 -> 32: one-pixel stripes (rows and columns) average to mid-gray; point sampling
  // would alias them to black or white.
  GrayImage rows = flat(600, 300, 0), columns = flat(600, 300, 0);
  for (int64_t y = 0; y < 300; ++y)
    for (int64_t x = 0; x < 600; ++x) {
      rows.pixels[(size_t)(y * 600 + x)] = y % 2 ? 255 : 0;
      columns.pixels[(size_t)(y * 600 + x)] = x % 2 ? 255 : 0;
    }
  for (const GrayImage& img : {rows, columns}) {
    const GrayImage down = resize_to_height(img, 32);
    REQUIRE(down.height == 32);
    REQUIRE(down.width == 64);
    // Each output pixel covers 9.375 source pixels across the stripes: at most one stripe
    // more of one kind, 255 / 9.375 / 2 = 13.6 off mid-gray.
    for (uint8_t v : down.pixels) CHECK(std::abs((int)v - 128) <= 14);
  }
  // A 3-px stroke in a 300-px line keeps its ink (a third of an output pixel's area).
  GrayImage stroke = flat(300, 300, 255);
  for (int64_t y = 0; y < 300; ++y)
    for (int64_t x = 150; x < 153; ++x) stroke.pixels[(size_t)(y * 300 + x)] = 0;
  const GrayImage thin = resize_to_height(stroke, 32);
  // Output column 16 covers source columns 150 .. 159.375: 255 * (1 - 3 / 9.375) = 173.4.
  CHECK(*std::min_element(thin.pixels.begin(), thin.pixels.end()) == 173);
}

TEST_CASE("normalize_line: ordinary print passes unchanged, light-on-dark is inverted", "[image]") {
  const GrayImage line = print_line(200, 32, 20, 245);
  LineNormalization info;
  CHECK(normalize_line(line, {}, &info).pixels == line.pixels);
  CHECK_FALSE(info.blank);
  CHECK_FALSE(info.inverted);
  CHECK_FALSE(info.stretched);
  CHECK(info.dark_ink > 1000);
  CHECK(info.light_ink == 0);
  // The same line in white on black reads as the original, exactly.
  CHECK(normalize_line(inverted(line), {}, &info).pixels == line.pixels);
  CHECK(info.inverted);
  CHECK(info.light_ink > 1000);
  // Through the resize too: within rounding (resize rounds 255 - v and v independently).
  const GrayImage tall = print_line(600, 96, 20, 245, 3);
  const GrayImage a = normalize_line(resize_to_height(tall, 32));
  const GrayImage b = normalize_line(resize_to_height(inverted(tall), 32), {}, &info);
  CHECK(info.inverted);
  CHECK(max_abs_diff(a, b) <= 1);
  // Off: the line as it is.
  LineNormalizeOptions off;
  off.enabled = false;
  CHECK(normalize_line(inverted(line), off, &info).pixels == inverted(line).pixels);
  CHECK_FALSE(info.inverted);
}

TEST_CASE("normalize_line: faint and coloured print", "[image]") {
  // Gray 150 ink on gray 200 paper: stretched so that ink is black and paper white.
  LineNormalization info;
  const GrayImage faint = normalize_line(print_line(200, 32, 150, 200), {}, &info);
  CHECK(info.stretched);
  CHECK_FALSE(info.inverted);
  CHECK(info.lo == 150);
  CHECK(info.hi == 200);
  CHECK(faint.pixels == print_line(200, 32, 0, 255).pixels);
  // Coloured ink on coloured paper, decoded to BT.601 gray: dark blue on yellow and red on white
  // read as dark on light; white on dark green and yellow on blue are inverted; red on blue
  // (gray 76 on 29) is light on dark and faint: inverted and stretched.
  struct Colours {
    const char* name;
    uint8_t ink[3], paper[3];
    bool invert, stretch;
  };
  const Colours cases[] = {{"blue on yellow", {0, 0, 139}, {255, 255, 0}, false, false},
                           {"red on white", {255, 0, 0}, {255, 255, 255}, false, false},
                           {"white on dark green", {255, 255, 255}, {0, 100, 0}, true, false},
                           {"yellow on blue", {255, 255, 0}, {0, 0, 200}, true, false},
                           {"red on blue", {255, 0, 0}, {0, 0, 255}, true, true}};
  const GrayImage shape = print_line(120, 32, 0, 255);
  for (const Colours& c : cases) {
    INFO(c.name);
    std::vector<uint8_t> rgb;
    for (uint8_t v : shape.pixels)
      for (int k = 0; k < 3; ++k) rgb.push_back(v ? c.paper[k] : c.ink[k]);
    const GrayImage gray = load_gray_image(write_png("colour.png", 120, 32, 3, rgb));
    const GrayImage n = normalize_line(gray, {}, &info);
    CHECK(info.inverted == c.invert);
    CHECK(info.stretched == c.stretch);
    // Whatever the colours, the ink ends up darker than the paper, by at least 120 levels.
    CHECK((int)n.at(60, 2) - (int)n.at(4 + 9 * 6 + 1, 16) >= 120);
  }
}

TEST_CASE("normalize_line: a line without ink is blank, a single period is not", "[image]") {
  LineNormalization info;
  for (const GrayImage& blank : {flat(300, 32, 255), flat(300, 32, 128), flat(1, 1, 0), flat(1, 1, 255),
                                 noisy_paper(400, 32, 225, 8), noisy_paper(40, 32, 60, 8)}) {
    INFO(blank.width << "x" << blank.height << " around " << (int)blank.pixels[0]);
    normalize_line(blank, {}, &info);
    CHECK(info.blank);
  }
  // Paper texture: a slow ramp across the line (light falling unevenly) plus noise.
  GrayImage ramp = flat(600, 32, 0);
  for (int64_t y = 0; y < 32; ++y)
    for (int64_t x = 0; x < 600; ++x) ramp.pixels[(size_t)(y * 600 + x)] = (uint8_t)(150 + x * 60 / 600);
  ramp = add_noise(ramp, 6);
  normalize_line(ramp, {}, &info);
  CHECK(info.blank);
  // A period (3x3 px at height 32) in a wide blank line is ink.
  GrayImage period = flat(400, 32, 240);
  for (int64_t y = 22; y < 25; ++y)
    for (int64_t x = 200; x < 203; ++x) period.pixels[(size_t)(y * 400 + x)] = 30;
  normalize_line(period, {}, &info);
  CHECK_FALSE(info.blank);
  CHECK_FALSE(info.inverted);
  // And noisy paper with print on it is not blank.
  const GrayImage noisy_print = add_noise(print_line(200, 32, 30, 220), 8);
  normalize_line(noisy_print, {}, &info);
  CHECK_FALSE(info.blank);
  CHECK(is_uniform(flat(1, 1, 7), 24));
  CHECK(is_uniform(flat(50, 3, 200), 24));
  CHECK_FALSE(is_uniform(print_line(50, 6, 0, 255), 24));
}

TEST_CASE("looks_screened: a field of dots is a screen, paper, flat grey and solid ink are not", "[image]") {
  const auto image = [](int64_t w, int64_t h, const std::function<uint8_t(int64_t, int64_t)>& f) {
    GrayImage g;
    g.width = w, g.height = h;
    for (int64_t y = 0; y < h; ++y)
      for (int64_t x = 0; x < w; ++x) g.pixels.push_back(f(x, y));
    return g;
  };
  // One-pixel dots of ink on paper, a checkerboard: grey (about 125) once blurred, each pixel
  // about 105 levels from it.
  const GrayImage dots = image(64, 32, [](int64_t x, int64_t y) { return (uint8_t)((x + y) % 2 ? 230 : 20); });
  CHECK(looks_screened(dots, gaussian_blur(dots, 1.0), 0, 0, 64, 32));
  CHECK(looks_screened(dots, gaussian_blur(dots, 1.0), 8, 8, 24, 24));  // a part of it
  const GrayImage paper = image(64, 32, [](int64_t, int64_t) { return (uint8_t)230; });
  CHECK_FALSE(looks_screened(paper, gaussian_blur(paper, 1.0), 0, 0, 64, 32));
  const GrayImage grey = image(64, 32, [](int64_t, int64_t) { return (uint8_t)128; });  // grey, but flat
  CHECK_FALSE(looks_screened(grey, gaussian_blur(grey, 1.0), 0, 0, 64, 32));
  const GrayImage ink = image(64, 32, [](int64_t, int64_t) { return (uint8_t)10; });
  CHECK_FALSE(looks_screened(ink, gaussian_blur(ink, 1.0), 0, 0, 64, 32));
  // Text on paper: blocks of ink 8 wide, 8 apart, rows 8-23; blurred, most of it is paper.
  const GrayImage text =
      image(64, 32, [](int64_t x, int64_t y) { return (uint8_t)(y >= 8 && y < 24 && (x / 8) % 2 ? 20 : 230); });
  CHECK_FALSE(looks_screened(text, gaussian_blur(text, 1.0), 0, 0, 64, 32));
  CHECK_FALSE(looks_screened(dots, gaussian_blur(dots, 1.0), 5, 5, 5, 20));  // an empty part
  CHECK_THROWS_WITH(looks_screened(dots, paper, 0, 0, 65, 32), Catch::Contains("is not inside"));
  CHECK_THROWS_WITH(looks_screened(dots, image(63, 32, [](int64_t, int64_t) { return (uint8_t)0; }), 0, 0, 1, 1),
                    Catch::Contains("differ in size"));
}
