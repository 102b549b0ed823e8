// Scan simulation: what printing, a scanner and its software do to a text line, applied to a
// rendered line at its source resolution (glyphs 16 to 80 px high), before the resize to the
// model's height. The loader's augmentations (train/augment.h) are small jitters on the
// resized line; these are the larger, structured effects of real scans: ink spread, uneven
// paper, optics blur, a lower scan resolution, sensor noise and dust, thresholding to pure
// black and white, JPEG blocking, a skewed or curved baseline, and crops that cut into the
// ascenders or leave wide margins. docs/data.md lists them with their ranges.
//
// Like augment(), degrade() draws every coin and parameter from the sample's SampleRng in a
// fixed order and count, so a line's result depends only on (image, options, seed), and every
// step is safe on any image down to 1x1.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/image.h"
#include "train/synth.h"

namespace ocrt::train {

struct ScanOptions {
  // Geometry, relative to the line's height h where it says so.
  double p_crop = 0.12;          // tight crop: up to max_crop * h rows cut from the top and the bottom
  double max_crop = 0.12;        //   (<= 0.3): ascenders and descenders lose their tips
  double p_margin = 0.2;         // wide margins: up to max_margin * h of paper on each side
  double max_margin = 0.8;       //   (<= 4)
  double p_skew = 0.3;           // rotation by up to max_skew_deg degrees (<= 10)
  double max_skew_deg = 1.5;
  double p_curve = 0.2;          // a bowed baseline: vertical shift A sin(2 pi x / P + phase),
  double max_curve = 0.06;       //   A up to max_curve * h (<= 0.5), P from 1 to 4 line widths
  // Print and paper.
  double p_ink = 0.25;           // ink spread (erosion) or thinning (dilation), equally likely,
  double max_ink = 0.06;         //   square kernel up to 1 + max_ink * h pixels (<= 0.2)
  double p_paper = 0.25;         // uneven paper: a smooth shading up to max_shade gray levels
  double max_shade = 60;         //   (<= 255), ink and paper darkened alike
  // The scanner.
  double p_blur = 0.4;           // optics blur, sigma up to max_blur * h (<= 0.2)
  double max_blur = 0.04;
  double p_lowres = 0.3;         // a lower scan resolution: the line is resampled to a height of
  double min_lowres_height = 10; //   min_lowres_height (>= 4) to 0.8 h (only for lines taller than that)
  double p_noise = 0.4;          // sensor noise, stddev up to max_noise gray levels (<= 64)
  double max_noise = 18;
  double p_speckle = 0.15;       // dust and toner specks: up to max_speckle of the pixels (<= 0.05)
  double max_speckle = 0.004;
  double p_binarize = 0.3;       // thresholded to pure black and white (what many scans deliver),
                                 //   at 35-65% of the way from ink to paper
  double p_jpeg = 0.15;          // 8x8 DCT blocking at quality 15 to 70
  // Throws naming the field when a probability is outside [0, 1] or a magnitude is negative,
  // not finite, or beyond its limit above.
  void validate() const;
  // Named presets, for validation sets that isolate one effect: "none" (nothing), "scan" (the
  // defaults above: the mix training sees), and one effect at a time, always applied at a
  // fixed, moderate strength: "binarized", "lowres", "blur-noise", "jpeg", "speckle",
  // "warped" (skew and curve), "paper", "ink", "crop". Throws listing the names for any other.
  static ScanOptions preset(const std::string& name);
  static std::vector<std::string> preset_names();
  // True for presets whose steps always run at a fixed strength (everything but "scan").
  bool fixed_strength = false;
};

// One degraded copy of `image` (ink dark on light paper, any size from 1x1 up). The steps run
// in this order, each with its probability: crop or margins, skew, curve, ink, paper, blur,
// lower resolution, noise, speckle, binarize, JPEG. The size changes with crop, margins, skew,
// curve and lower resolution; the caller resizes to the model height afterwards.
//
// text_height: the height h that the magnitudes are relative to; 0 (the default) means the
// image's height, right for a line; a page passes its text's height.
GrayImage degrade(const GrayImage& image, const ScanOptions& opt, SampleRng& rng, double text_height = 0);

// The single steps, exposed for tests. Each throws for an empty image or a parameter that is
// not finite, and is safe on a 1x1 image.
// Vertical shift of each column x by amplitude * sin(2 pi x / period + phase) with bilinear
// sampling, on a canvas 2 * ceil(|amplitude|) rows taller; `background` fills what the shift
// uncovers. amplitude 0: an exact copy. period > 0.
GrayImage curve_baseline(const GrayImage& image, double amplitude, double period, double phase, uint8_t background);
// Same size: v -> v * (1 - s(x, y)) with s a smooth field in [0, shade / 255] (a ramp across the
// line in direction `angle` radians plus a broad bump centred at (cx, cy), in fractions of the
// width and height). shade in [0, 255].
GrayImage shade_paper(const GrayImage& image, double shade, double angle, double cx, double cy);
// Same size: `count` specks of 1x1 or 2x2 pixels at random places, dark (ink) or light (paper)
// with equal odds; draws 4 numbers per speck.
GrayImage speckle(const GrayImage& image, int64_t count, uint8_t ink, uint8_t paper, SampleRng& rng);
// Same size: pixels at or below ink + fraction * (paper - ink) become 0, the others 255, with
// ink and paper the line's 2nd-percentile and median values; fraction in [0, 1]. A line with no
// contrast (ink == paper) becomes all paper.
GrayImage binarize(const GrayImage& image, double fraction);
// Same size: each 8x8 block transformed by the DCT, quantised with the JPEG luminance table at
// `quality` (1..100, the IJG scaling), and transformed back; edge blocks are completed by
// repeating the last row and column.
GrayImage jpeg_blocks(const GrayImage& image, int quality);
// Rows [top, height - bottom) of the image; top + bottom < height.
GrayImage crop_rows(const GrayImage& image, int64_t top, int64_t bottom);

}  // namespace ocrt::train
