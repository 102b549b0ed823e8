#!/usr/bin/env python3
"""Writes the hand-made seed files of fuzz/corpus/ (small, valid or deliberately damaged
examples of every input a target reads). Run from the repository root:

    python3 fuzz/make_seeds.py          # rewrites the seed_* files, leaves the others alone

Files the fuzzer added (scripts/fuzz.sh merges them in) are named by their hash and are not
touched. Images are written by hand (PNG, BMP, PNM, TGA, GIF, PSD, HDR); JPEG needs an encoder,
so a tiny C++ program with stb_image_write (Debian's libstb-dev) writes those.

One seed is not written here: model_file/seed_int8_crnn_tiny.safetensors, an int8 model file
(models/int8.h) of a CRNN with 4 channels a layer, 4 hidden units and 3 characters, calibrated
on one synthetic 32 x 40 input and written by nn::int8_state_dict and nn::save_model_file (a
dozen lines of C++ against the library; its tensors are what tests/models/test_int8.cpp's
"an int8 model file" case writes, smaller). It is kept as it is.
"""
import json
import os
import struct
import subprocess
import sys
import tempfile
import zlib

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def put(target, name, data):
    d = os.path.join(ROOT, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode("utf-8")
    with open(os.path.join(d, "seed_" + name), "wb") as f:
        f.write(data)


def pattern(w, h, channels=1, maxval=255):
    """A few dark strokes on white: what a text line looks like."""
    px = []
    for y in range(h):
        for x in range(w):
            ink = (x % 5 in (1, 2)) and 2 <= y < h - 2 and w > 2
            v = maxval // 8 if ink else maxval
            px.append([v] * channels)
    return px


# ---------------------------------------------------------------- PNG
def png_chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def png(w, h, color_type, bit_depth, rows, palette=None, trns=None, interlace=0):
    out = b"\x89PNG\r\n\x1a\n"
    out += png_chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, bit_depth, color_type, 0, 0, interlace))
    if palette:
        out += png_chunk(b"PLTE", b"".join(bytes(c) for c in palette))
    if trns:
        out += png_chunk(b"tRNS", trns)
    raw = b"".join(b"\x00" + r for r in rows)
    out += png_chunk(b"IDAT", zlib.compress(raw, 9))
    out += png_chunk(b"IEND", b"")
    return out


def png_rows(w, h, channels, depth):
    rows = []
    px = pattern(w, h, channels, (1 << depth) - 1)
    for y in range(h):
        r = b""
        for x in range(w):
            for v in px[y * w + x]:
                r += struct.pack(">H", v) if depth == 16 else bytes([v])
        rows.append(r)
    return rows


def pngs():
    put("image", "gray_1x1.png", png(1, 1, 0, 8, [b"\x80"]))
    put("image", "gray_24x10.png", png(24, 10, 0, 8, png_rows(24, 10, 1, 8)))
    put("image", "rgb_20x9.png", png(20, 9, 2, 8, png_rows(20, 9, 3, 8)))
    put("image", "rgba_12x8.png", png(12, 8, 6, 8, png_rows(12, 8, 4, 8)))
    put("image", "graya_9x9.png", png(9, 9, 4, 8, png_rows(9, 9, 2, 8)))
    put("image", "gray16_16x8.png", png(16, 8, 0, 16, png_rows(16, 8, 1, 16)))
    put("image", "rgb16_8x8.png", png(8, 8, 2, 16, png_rows(8, 8, 3, 16)))
    # 2-bit palette with a transparent entry, and an interlaced (Adam7) gray image.
    rows = [bytes([0b00011011, 0b11100100]) for _ in range(6)]
    put("image", "palette2_8x6.png",
        png(8, 6, 3, 2, rows, palette=[(0, 0, 0), (255, 0, 0), (0, 128, 255), (255, 255, 255)], trns=b"\xff\x80"))
    put("image", "bit1_16x4.png", png(16, 4, 0, 1, [b"\xf0\x0f", b"\xaa\x55", b"\x00\xff", b"\xff\x00"]))
    # Adam7: the passes' rows, each filtered with type 0, one zlib stream.
    w, h = 10, 10
    px = [255 if (x + y) % 3 else 20 for y in range(h) for x in range(w)]
    passes = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2)]
    raw = b""
    for x0, y0, dx, dy in passes:
        for y in range(y0, h, dy):
            row = bytes(px[y * w + x] for x in range(x0, w, dx))
            if row:
                raw += b"\x00" + row
    out = b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 1))
    out += png_chunk(b"IDAT", zlib.compress(raw)) + png_chunk(b"IEND", b"")
    put("image", "interlaced_10x10.png", out)
    good = png(24, 10, 0, 8, png_rows(24, 10, 1, 8))
    put("image", "truncated.png", good[: len(good) // 2])
    put("image", "bad_crc.png", good[:30] + b"\x00" + good[31:])
    # A header that claims 60000 x 60000 (refused from the header).
    put("image", "huge_header.png", png_chunk(b"", b"")[:0] + b"\x89PNG\r\n\x1a\n" +
        png_chunk(b"IHDR", struct.pack(">IIBBBBB", 60000, 60000, 8, 0, 0, 0, 0)) + png_chunk(b"IEND", b""))


# ---------------------------------------------------------------- BMP
def bmp(w, h, bpp, pixels_rows, palette=None, top_down=False):
    row_bytes = (w * bpp + 31) // 32 * 4
    data = b"".join(r.ljust(row_bytes, b"\x00") for r in (pixels_rows if top_down else reversed(pixels_rows)))
    pal = b"".join(bytes([b, g, r, 0]) for (r, g, b) in (palette or []))
    offset = 14 + 40 + len(pal)
    header = b"BM" + struct.pack("<IHHI", offset + len(data), 0, 0, offset)
    info = struct.pack("<IiiHHIIiiII", 40, w, -h if top_down else h, 1, bpp, 0, len(data), 2835, 2835,
                       len(palette or []), 0)
    return header + info + pal + data


def bmps():
    rows = [bytes(v for x in range(7) for v in ((30, 30, 30) if x % 3 == 1 else (250, 250, 250))) for _ in range(5)]
    put("image", "rgb24_7x5.bmp", bmp(7, 5, 24, rows))
    put("image", "rgb24_7x5_topdown.bmp", bmp(7, 5, 24, rows, top_down=True))
    put("image", "rgb24_1x1.bmp", bmp(1, 1, 24, [b"\x10\x20\x30"]))
    rows8 = [bytes((x + y) % 4 for x in range(9)) for y in range(6)]
    put("image", "pal8_9x6.bmp", bmp(9, 6, 8, rows8, palette=[(0, 0, 0), (90, 90, 90), (180, 180, 180), (255, 255, 255)]))
    rows1 = [bytes([0b10110010, 0b01000000]) for _ in range(4)]
    put("image", "bit1_10x4.bmp", bmp(10, 4, 1, rows1, palette=[(0, 0, 0), (255, 255, 255)]))
    rows32 = [bytes(v for x in range(4) for v in (200, 100, 50, 255)) for _ in range(3)]
    put("image", "bgra32_4x3.bmp", bmp(4, 3, 32, rows32))
    good = bmp(7, 5, 24, rows)
    put("image", "truncated.bmp", good[: len(good) - 20])
    # A 19-byte-long promise of 16000 x 16000 pixels.
    put("image", "huge_header.bmp", bmp(16000, 16000, 24, [])[:54] + b"\x00" * 64)


# ---------------------------------------------------------------- PNM
def pnms():
    put("image", "p5_1x1.pgm", b"P5\n1 1\n255\n\x7f")
    body = bytes(v[0] for v in pattern(12, 6))
    put("image", "p5_12x6.pgm", b"P5\n# a comment\n12 6\n255\n" + body)
    put("image", "p2_4x2.pgm", b"P2\n4 2\n15\n0 5 10 15\n15 10 5 0\n")
    put("image", "p6_5x3.ppm", b"P6\n5 3\n255\n" + bytes(v for p in pattern(5, 3, 3) for v in p))
    put("image", "p3_2x2.ppm", b"P3\n2 2\n255\n255 0 0  0 255 0\n0 0 255  255 255 255\n")
    put("image", "p5_16bit_4x2.pgm", b"P5\n4 2\n65535\n" + b"".join(struct.pack(">H", v) for v in
                                                                   (0, 1000, 30000, 65535, 65535, 30000, 1000, 0)))
    put("image", "truncated.pgm", b"P5\n12 6\n255\n" + body[:30])


# ---------------------------------------------------------------- TGA
def tga(w, h, image_type, bpp, data, cmap=None, top=True):
    desc = 0x20 if top else 0
    if bpp == 32:
        desc |= 8
    cm = cmap or b""
    header = struct.pack("<BBBHHBHHHHBB", 0, 1 if cmap else 0, image_type, 0, len(cm) // 3 if cmap else 0,
                         24 if cmap else 0, 0, 0, w, h, bpp, desc)
    return header + cm + data


def tgas():
    px = bytes(v for p in pattern(6, 4, 3) for v in p)
    put("image", "rgb24_6x4.tga", tga(6, 4, 2, 24, px))
    put("image", "rgb24_6x4_bottomup.tga", tga(6, 4, 2, 24, px, top=False))
    put("image", "gray8_5x3.tga", tga(5, 3, 3, 8, bytes(v[0] for v in pattern(5, 3))))
    put("image", "bgra32_3x2.tga", tga(3, 2, 2, 32, bytes([10, 20, 30, 128] * 6)))
    # RLE: a run packet of 4 pixels and a raw packet of 2, per row of 6.
    rle = (b"\x83" + b"\xff\xff\xff" + b"\x01" + b"\x00\x00\x00\x40\x40\x40") * 3
    put("image", "rle24_6x3.tga", tga(6, 3, 10, 24, rle))
    put("image", "cmap8_4x2.tga", tga(4, 2, 1, 8, bytes([0, 1, 1, 0, 1, 0, 0, 1]), cmap=b"\x00\x00\x00\xff\xff\xff"))
    put("image", "truncated.tga", tga(6, 4, 2, 24, px[:20]))


# ---------------------------------------------------------------- GIF
def lzw(indices, min_code=8):
    """LZW codes with a clear code often enough that the code width never grows."""
    clear, end = 1 << min_code, (1 << min_code) + 1
    width = min_code + 1
    codes = [clear]
    since_clear = 0
    for v in indices:
        if since_clear >= (1 << width) - (1 << min_code) - 4:
            codes.append(clear)
            since_clear = 0
        codes.append(v)
        since_clear += 1
    codes.append(end)
    bits, nbits, out = 0, 0, bytearray()
    for c in codes:
        bits |= c << nbits
        nbits += width
        while nbits >= 8:
            out.append(bits & 0xFF)
            bits >>= 8
            nbits -= 8
    if nbits:
        out.append(bits & 0xFF)
    blocks = b"".join(bytes([len(out[i:i + 255])]) + bytes(out[i:i + 255]) for i in range(0, len(out), 255))
    return bytes([min_code]) + blocks + b"\x00"


def gif(w, h, indices, frames=1, transparent=None):
    palette = bytes([0, 0, 0, 255, 255, 255, 128, 128, 128, 255, 0, 0]) + b"\x00" * (3 * 252)
    out = b"GIF89a" + struct.pack("<HHBBB", w, h, 0xF7, 0, 0) + palette
    for f in range(frames):
        if transparent is not None:
            out += b"\x21\xf9\x04\x01\x00\x00" + bytes([transparent]) + b"\x00"
        out += b"\x2c" + struct.pack("<HHHHB", 0, 0, w, h, 0) + lzw(indices)
    return out + b"\x3b"


def gifs():
    idx = [0 if (x % 4 == 1 and 1 <= y < 5) else 1 for y in range(6) for x in range(10)]
    put("image", "gif_10x6.gif", gif(10, 6, idx))
    put("image", "gif_1x1.gif", gif(1, 1, [2]))
    put("image", "gif_two_frames_transparent.gif", gif(10, 6, idx, frames=2, transparent=1))
    g = gif(10, 6, idx)
    put("image", "truncated.gif", g[: len(g) - 12])


# ---------------------------------------------------------------- PSD, HDR
def psd(w, h, channels, planes):
    out = b"8BPS" + struct.pack(">H6sHIIHH", 1, b"\x00" * 6, channels, h, w, 8, 3 if channels >= 3 else 1)
    out += struct.pack(">I", 0) * 3  # colour mode data, image resources, layer and mask info
    out += struct.pack(">H", 0) + b"".join(planes)  # raw data
    return out


def others():
    gray = bytes(v[0] for v in pattern(6, 3))
    put("image", "gray_6x3.psd", psd(6, 3, 1, [gray]))
    put("image", "rgb_6x3.psd", psd(6, 3, 3, [gray, gray, gray]))
    # Radiance HDR, flat (not run-length) scanlines of RGBE.
    hdr = b"#?RADIANCE\nFORMAT=32-bit_rle_rgbe\n\n-Y 2 +X 3\n" + bytes([128, 128, 128, 129] * 3 + [64, 64, 64, 128] * 3)
    put("image", "flat_3x2.hdr", hdr)


def jpegs():
    """Baseline JPEGs through stbi_write_jpg (gray and colour, 1x1 and a small line)."""
    src = r'''
#define STB_IMAGE_WRITE_IMPLEMENTATION
#include <stb_image_write.h>
#include <cstdio>
#include <string>
#include <vector>
int main(int argc, char** argv) {
  std::vector<unsigned char> g(40 * 12), c(16 * 8 * 3), one{90};
  for (int i = 0; i < 40 * 12; ++i) g[i] = (i % 40) % 5 < 2 ? 20 : 240;
  for (int i = 0; i < 16 * 8 * 3; ++i) c[i] = (unsigned char)(i * 7);
  std::string d = argv[1];
  stbi_write_jpg((d + "/seed_gray_40x12.jpg").c_str(), 40, 12, 1, g.data(), 75);
  stbi_write_jpg((d + "/seed_rgb_16x8.jpg").c_str(), 16, 8, 3, c.data(), 90);
  stbi_write_jpg((d + "/seed_gray_1x1.jpg").c_str(), 1, 1, 1, one.data(), 50);
  return 0;
}
'''
    with tempfile.TemporaryDirectory() as tmp:
        cpp, exe = os.path.join(tmp, "jpg.cpp"), os.path.join(tmp, "jpg")
        with open(cpp, "w") as f:
            f.write(src)
        subprocess.run(["g++", "-O1", "-I/usr/include/stb", cpp, "-o", exe], check=True)
        subprocess.run([exe, os.path.join(ROOT, "image")], check=True)
    with open(os.path.join(ROOT, "image", "seed_gray_40x12.jpg"), "rb") as f:
        good = f.read()
    put("image", "truncated.jpg", good[: len(good) // 2])


# ---------------------------------------------------------------- safetensors, model files
def safetensors(tensors, metadata=None, pad=True):
    """tensors: list of (name, dtype, shape, bytes)."""
    header, data = {}, b""
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header, separators=(",", ":")).encode()
    if pad:
        text += b" " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + data


def f32(*v):
    return struct.pack("<%df" % len(v), *v)


def model_meta(charset, arch="crnn", config=None):
    cfg = config if config is not None else {"channels": [2, 2, 2, 2, 2, 2, 2], "hidden": 2,
                                             "num_classes": len(charset) + 1, "batch_norm": True}
    return {"format": "ocrt-model-1", "arch": arch, "config": json.dumps(cfg), "charset": json.dumps(charset),
            "input": json.dumps({"height": 32, "channels": 1, "scale": 1 / 127.5, "offset": -1,
                                 "width_multiple": 4}),
            "training": json.dumps({"steps": 10})}


def tensor_files():
    t = [("w", "F32", [2, 3], f32(1, 2, 3, 4, 5, 6)), ("b", "I64", [2], struct.pack("<2q", -1, 7)),
         ("m", "U8", [3], b"\x01\x02\x03"), ("e", "F64", [0, 4], b""), ("flag", "BOOL", [2], b"\x00\x01"),
         ("i", "I32", [], struct.pack("<i", 5))]
    for target in ("safetensors", "model_file"):
        put(target, "tensors.safetensors", safetensors(t))
        put(target, "unpadded.safetensors", safetensors(t[:2], pad=False))
        put(target, "empty.safetensors", safetensors([]))
        put(target, "metadata.safetensors", safetensors(t[:1], metadata={"k": "v", "note": "\u00e9t\u00e9"}))
        good = safetensors(t)
        put(target, "truncated.safetensors", good[:-5])
        put(target, "header_past_end.safetensors", struct.pack("<Q", 1 << 40) + b"{}")
        put(target, "bad_offsets.safetensors", safetensors([("w", "F32", [2], f32(1, 2))])
            .replace(b"[0,8]", b"[4,12]"))
        put(target, "overlap.safetensors",
            safetensors([("a", "F32", [2], f32(1, 2)), ("b", "F32", [2], f32(3, 4))]).replace(b"[8,16]", b"[4,12]"))
        put(target, "short.safetensors", b"\x02\x00\x00")
    chars = list("abc ")
    put("model_file", "crnn_meta.safetensors", safetensors([("fc.weight", "F32", [2], f32(0.5, -1))],
                                                           metadata=model_meta(chars)))
    put("model_file", "svtr_meta.safetensors", safetensors([], metadata=model_meta(
        ["x", "\u00e9"], arch="svtr-lite", config={"dim": 8})))
    put("model_file", "nan_weight.safetensors", safetensors([("w", "F32", [2], f32(1, float("nan")))],
                                                             metadata=model_meta(chars)))
    bad = model_meta(chars)
    bad["charset"] = '["a", "a"]'
    put("model_file", "duplicate_charset.safetensors", safetensors([], metadata=bad))
    bad = model_meta(chars)
    bad["config"] = "{not json"
    put("model_file", "bad_config.safetensors", safetensors([], metadata=bad))
    put("model_file", "other_format.safetensors", safetensors([], metadata={"format": "pt", "arch": "crnn"}))


# ---------------------------------------------------------------- JSON
def jsons():
    put("json", "object.json", '{"a": 1, "b": [true, false, null], "c": {"d": "e\\u00e9\\n"}}')
    put("json", "numbers.json", "[0, -0, 1.5e10, -2.25E-3, 9007199254740992, 1e308, 0.1]")
    put("json", "strings.json", '["", "\\"\\\\\\/\\b\\f\\n\\r\\t", "\\ud83d\\ude00", "\u4e2d\u6587"]')
    put("json", "header.json", json.dumps({"__metadata__": {"format": "ocrt-model-1"},
                                           "w": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]}}))
    put("json", "deep.json", "[" * 40 + "]" * 40)
    put("json", "scalar.json", '  "just a string"  ')
    put("json", "bad_trailing.json", '{"a": 1} x')
    put("json", "bad_duplicate.json", '{"a": 1, "a": 2}')
    put("json", "bad_surrogate.json", '"\\ud800"')
    put("json", "bad_number.json", "[01, 1., .5, +1, 1e]")
    put("json", "bad_utf8.json", b'"\xc3\x28"')
    # ocrt-synth --pages truth (runtime/page_truth.h): a heading, a tick label, a word without text
    quad = lambda x0, y0, x1, y1: [[x0, y0], [x1, y0], [x1, y1], [x0, y1]]
    put("json", "page_truth.json", json.dumps({
        "width": 200, "height": 100, "dpi": 150, "layout": "chart", "skew": 0.5,
        "lines": [{"text": "Sales by year", "points": quad(10, 5, 120, 20), "heading": True,
                   "words": [{"text": "Sales", "points": quad(10, 5, 50, 20)},
                             {"text": "by", "points": quad(55, 5, 70, 20)},
                             {"text": "year", "points": quad(75, 5, 120, 20)}]},
                  {"text": "25%", "points": quad(5, 40, 25, 50), "heading": False,
                   "words": [{"text": "25%", "points": quad(5, 40, 25, 50)}]},
                  {"text": "x", "points": quad(5, 60, 9, 70), "words": [{"points": quad(5, 60, 9, 70)}]}]}))


# ---------------------------------------------------------------- labels, charsets, numbers
def texts():
    put("labels", "labels.txt", "img/a.png\thello world\nimg/b.png\tsecond line\n")
    put("labels", "crlf_empty_lines.txt", "a.png\tone\r\n\r\n\nb.png\ttwo\r\n")
    put("labels", "absolute_and_dots.txt", "/abs/x.png\tabs\n../up/y.png\tup\n./z.png\t\n")
    put("labels", "utf8.txt", "a.png\tna\u00efve caf\u00e9 \u20ac5\nb.png\t\u4e2d\u6587\n")
    put("labels", "no_tab.txt", "a.png\tok\nno tab here\n")
    put("labels", "empty_path.txt", "\ttext\n")
    put("labels", "tabs_in_text.txt", "a.png\tx\ty\tz\n")
    put("labels", "bad_utf8.txt", b"a.png\t\xff\xfe\n")
    put("labels", "gt_text.txt", "Just the text of a line.\r\n")
    put("labels", "repeats.txt", "a.png\taaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n")
    put("charset", "ascii.txt", "".join(chr(c) + "\n" for c in range(0x21, 0x7F)) + " \n")
    put("charset", "utf8.txt", "a\n\u00e9\n\u4e2d\n\U0001F600\n")
    put("charset", "crlf.txt", "a\r\nb\r\n \r\n")
    put("charset", "duplicate.txt", "a\nb\na\n")
    put("charset", "two_chars.txt", "ab\n")
    put("charset", "overlong.txt", b"\xc0\xaf\n")
    put("charset", "surrogate.txt", b"\xed\xa0\x80\n")
    put("charset", "truncated_utf8.txt", b"a\n\xe4\xb8")
    put("charset", "empty.txt", "\n\n")
    for name, v in [("int", "42"), ("negative", "-7"), ("big", "18446744073709551615"), ("over", "99999999999999999999"),
                    ("double", "3e-4"), ("inf", "inf"), ("nan", "nan"), ("hex", "0x1p-3"), ("space", " 5"),
                    ("junk", "12abc"), ("empty", ""), ("devices", "cpu,cuda:0,,cuda:12"), ("device", "cuda:0001"),
                    ("minus_seed", "-1")]:
        put("cli", name + ".txt", v)


def char_lms():
    """Language models written by ocrt-lm, less their 8-byte checksum (it must be built: build-fz/ or build/)."""
    for build in ("build-fz", "build", "build-asan"):
        exe = os.path.join(ROOT, "..", "..", build, "ocrt-lm")
        if os.path.exists(exe):
            break
    else:
        print("ocrt-lm not built: char_lm seeds not written", file=sys.stderr)
        return
    with tempfile.TemporaryDirectory() as tmp:
        text = os.path.join(tmp, "text.txt")
        with open(text, "w") as f:
            f.write("the cat sat on the mat. the dog ate the hat.\nabc abc abd\n\u00e9t\u00e9 caf\u00e9\n")
        for order in (1, 3):
            out = os.path.join(tmp, "lm%d.clm" % order)
            subprocess.run([exe, "--order", str(order), "--min-count", "1", "--out", out, text], check=True,
                           stdout=subprocess.DEVNULL)
            with open(out, "rb") as f:
                data = f.read()
            # Without the checksum, which the target appends (fuzz/char_lm.cpp).
            put("char_lm", "order%d.clm" % order, data[:-8])
            put("char_lm", "order%d_truncated.clm" % order, data[: len(data) * 2 // 3])


def line_shards():
    """Render cache shards (train/line_cache.h's layout), less their 8-byte checksum, behind the
    byte that picks the height the target reads them at (fuzz/line_shard.cpp)."""
    def shard(height, lines):
        b = b"OCRTLNS1" + struct.pack("<IIQ", 1, height, len(lines))
        for width, text, fill in lines:
            t = text.encode("utf-8")
            b += struct.pack("<II", width, len(t)) + t + bytes([fill]) * (width * height)
        return b
    for height in (4, 32):
        pick = bytes([height - 1])  # 1 + byte % 32 == height
        put("line_shard", "lines_h%d.bin" % height, pick + shard(height, [(7, "cat", 200), (3, "\u00e9t\u00e9", 17)]))
        put("line_shard", "empty_h%d.bin" % height, pick + shard(height, []))
        one = shard(height, [(5, "a b", 0)])
        put("line_shard", "truncated_h%d.bin" % height, pick + one[: len(one) - 3])
        put("line_shard", "bad_utf8_h%d.bin" % height, pick + one.replace(b"a b", b"a\xffb"))


if __name__ == "__main__":
    pngs()
    bmps()
    pnms()
    tgas()
    gifs()
    others()
    jpegs()
    tensor_files()
    jsons()
    texts()
    char_lms()
    line_shards()
