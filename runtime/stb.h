// The stb single-file libraries ocrt uses (Debian's libstb-dev headers): stb_image to decode,
// stb_image_write to write PNGs, stb_truetype to render fonts. Their implementations are
// compiled once, in runtime/stb.cpp.
#pragma once
#include <stb_image.h>
#include <stb_image_write.h>
#include <stb_truetype.h>
