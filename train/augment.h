// Augmentations for training lines, applied on the CPU by the loader's workers (so a CPU run
// and a GPU run see exactly the same pixels). Each one takes its randomness from a SampleRng
// seeded per sample, so a sample's augmented image depends only on (seed, sample), never on
// the thread that made it.
//
// Every augmentation validates its parameters against the image it is given: a blur radius,
// an erosion kernel or a rotation that would not fit a tiny image (down to 1x1) is clamped or
// skipped, never a crash or an out-of-bounds read.
#pragma once
#include <cstdint>

#include "runtime/image.h"
#include "train/synth.h"

namespace ocrt::train {

struct AugmentOptions {
  double p_blur = 0.3;           // Gaussian blur, sigma in [0.3, max_blur_sigma]
  double max_blur_sigma = 1.2;
  double p_noise = 0.3;          // additive Gaussian noise, stddev in [2, max_noise] gray levels
  double max_noise = 12;
  double p_contrast = 0.5;       // contrast in [1 - c, 1 + c] (c < 1) and brightness shift in [-b, b]
  double contrast = 0.35, brightness = 30;
  double p_geometry = 0.4;       // small rotation (degrees, <= 45) and horizontal shear (<= 1)
  double max_rotate_deg = 1.5, max_shear = 0.25;
  double p_morph = 0.15;         // erosion (bolder ink) or dilation (thinner ink), equally likely
  int64_t morph_kernel = 2;      // its square kernel, 1..5 (3 already erases 2-pixel strokes)
  double p_pad = 0.5;            // padding jitter: 0..max_pad px of background on each side
  int64_t max_pad = 6;           // 0..1000
  // Throws naming the field when a probability is outside [0, 1] or a magnitude is negative,
  // not finite, or beyond the limit stated above.
  void validate() const;
};

// One augmented copy of `image` (any size from 1x1 up; a width or height of 0 throws).
// The steps run in this fixed order, each with its probability: pad, rotate/shear, morph,
// blur, contrast, noise. Every step draws its coin and its parameters from `rng` whether it
// runs or not (noise draws a seed for its own SampleRng), so augment() always takes the same
// number of draws and the result is a pure function of (image, options, rng state).
GrayImage augment(const GrayImage& image, const AugmentOptions& opt, SampleRng& rng);

// The paper (background) value of a line: the median of its border pixels. The median, not
// the maximum, so that noise does not push it to 255 and light-on-dark lines get dark paper.
uint8_t paper_value(const GrayImage& image);

// Shared by these steps and the scan simulation (train/scan.h): throw naming `op` for an
// empty image or one whose pixel count does not match its size, and for a parameter that is
// not finite; round a value to the nearest gray level, clamped to 0..255.
void check_image(const GrayImage& image, const char* op);
void check_finite(double v, const char* op, const char* name);
uint8_t to_u8(double v);

// The single steps, exposed for tests. Each returns a new image of a size stated in its comment
// and throws for an empty image or a parameter that is not finite.
// gaussian_blur (a blur of sigma pixels) is runtime/image.h's: the page reader descreens with it too.
// Same size; stddev >= 0 gray levels (0: a copy). Takes one normal number per pixel from
// rng.normals() (so ceil(pixels / 256) chunks, each advancing the stream by its half).
GrayImage add_noise(const GrayImage& image, double stddev, SampleRng& rng);
// Same size: v -> (v - mean) * contrast + mean + brightness, clamped to [0, 255]; contrast >= 0.
GrayImage adjust_contrast(const GrayImage& image, double contrast, double brightness);
// Rotation (degrees, counter-clockwise as seen on screen, |degrees| <= 90) after a horizontal
// shear (x += shear * y, |shear| <= 2), about the centre, with bilinear sampling; pixels from
// outside the source are `background`. The canvas is the bounding box of the transformed image,
// so no ink is cut (both keep the area, so one side may shrink when they work against each
// other, e.g. turning a tall sheared column on its side); 0 and 0 return an exact copy.
GrayImage rotate_shear(const GrayImage& image, double degrees, double shear, uint8_t background);
// Same size. Gray-scale erosion (min filter: dark ink grows) or dilation (max filter: ink thins)
// over a kernel x kernel window (kernel >= 1), clamped to the image's width and height; taps
// outside the image are ignored.
GrayImage morph(const GrayImage& image, bool erode, int64_t kernel);
// (width + left + right) x (height + top + bottom); every amount in [0, 100000].
GrayImage pad(const GrayImage& image, int64_t left, int64_t right, int64_t top, int64_t bottom, uint8_t background);

}  // namespace ocrt::train
