"""Writes the small image fixtures that ocrt's own PNG writer cannot make (stb_image_write has
no 16-bit PNG): tests/fixtures/images/gray16.png, a 5 x 3 16-bit gray image whose pixel (x, y)
is 65535 * (x + 5 y) / 14, and rgba16.png, 2 x 1 16-bit RGBA. Plain Python (zlib, struct).

    python3 tools/reference/images.py
"""
import os
import struct
import zlib


def png(path, width, height, color_type, rows):
    """rows: list of bytes (one filter-0 scanline each, without the filter byte)."""
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    raw = b"".join(b"\x00" + r for r in rows)
    ihdr = struct.pack(">IIBBBBB", width, height, 16, color_type, 0, 0, 0)
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def main():
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "fixtures", "images")
    os.makedirs(out, exist_ok=True)
    rows = [b"".join(struct.pack(">H", round(65535 * (x + 5 * y) / 14)) for x in range(5)) for y in range(3)]
    png(os.path.join(out, "gray16.png"), 5, 3, 0, rows)
    # RGBA16: pixel 0 pure red, opaque; pixel 1 black at alpha 0.5 (composited over white: 127.5).
    rgba = [struct.pack(">HHHH", 65535, 0, 0, 65535) + struct.pack(">HHHH", 0, 0, 0, 32768)]
    png(os.path.join(out, "rgba16.png"), 2, 1, 6, rgba)
    print("wrote gray16.png and rgba16.png to", os.path.normpath(out))


if __name__ == "__main__":
    main()
