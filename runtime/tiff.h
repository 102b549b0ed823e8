// TIFF, the format scanners write (often bilevel with CCITT Group 4 compression, often several
// pages in one file), read through libtiff from memory. runtime/image.h's decode_gray_image
// reads a TIFF's first page like any other image; a page reader asks for the others.
//
// A TIFF is hostile input like every file: the page's size is read from its directory and
// checked against the pixel budget before anything is allocated for it, libtiff's own
// allocations are capped, and libtiff's errors become one Error naming the file (never a
// message on stderr).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "runtime/image.h"

namespace ocrt {

// Whether the bytes start like a TIFF (classic or BigTIFF, either byte order).
bool is_tiff(const void* data, size_t size);

// The number of pages (image directories) of a TIFF. Throws naming the file when it is not a
// readable TIFF.
int64_t tiff_page_count(const void* data, size_t size, const std::string& name);

// Page `page` (from 0) of a TIFF as 8-bit gray: any photometric interpretation, bit depth and
// compression libtiff reads (bilevel min-is-white or min-is-black, gray, palette, RGB, CMYK,
// YCbCr; CCITT G3/G4, LZW, Deflate, PackBits, JPEG), oriented as its Orientation tag says.
// Throws naming the file (and page) for a page past the end, a page over max_pixels, a
// truncated or corrupt file.
GrayImage decode_tiff_page(const void* data, size_t size, const std::string& name, int64_t page,
                           int64_t max_pixels = kDefaultMaxImagePixels);

}  // namespace ocrt
