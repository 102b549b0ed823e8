// int8 3x3 convolutions through Winograd's F(4x4, 3x3) or F(2x2, 3x3) in exact integers, for
// CPUs whose int8 product is the AVX2 one (vpmaddubsw: no VNNI, no AMX). docs/int8.md, "Winograd
// on AVX2".
//
// Why exact. Activation codes are 0..127 and weight codes -127..127 (int8_gemm.h). F(2x2, 3x3)'s
// input transform B^T d B adds and subtracts four codes of a 4x4 tile (-254..508); its weight
// transform, scaled by 2 on both sides so that it stays in integers ((2G) g (2G)^T, at most
// 9 x 127 = 1143 in size), fits int16 as well. The 16 products of a tile are int16 x int16
// pairs summed in int32 (vpmaddwd), and the output transform A^T M A gives 4 x the direct sum,
// exactly (int32 additions wrap, and the final value fits: 4 x 9 x 127 x 127 x C < 2^31 for the
// channel counts allowed below), so a shift by 2 gives the very integers that im2col's product
// sums, and the same epilogue (int8_store_tile) makes the same floats, bit for bit.
// F(4x4, 3x3) (6x6 tiles, 36 products for 16 outputs) keeps int16 too, its input transform at
// most 100 x 127 and its weight transform, G's rows scaled into integers, at most 49 x 127; its
// output transform gives 576 x the sum modulo 2^32, from which the sum comes back exactly when
// it lies in -2^25 .. 2^25 - 1 (int8_winograd.cpp's head). That depends on the weights: a layer
// takes F(4x4) when every output channel's sum is within the bound for any codes
// (int8_winograd4_fits: 127 x its positive weights' sum, and 127 x its negative ones'), F(2x2)
// otherwise. The shipped crnn models' widest sums are about half the bound.
//
// Why faster there. Without VNNI an int8 step is vpmaddubsw then vpmaddwd (two multiplies for
// 32 products), an int16 step one vpmaddwd for 16: the same multiplies a product, and F(2x2,
// 3x3) takes 16 products for 4 outputs where the direct sum takes 36, F(4x4, 3x3) 36 for 16.
// With VNNI (vpdpbusd, 64 products an instruction on 512 bits) the int8 product stays ahead,
// and this path is not taken.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "runtime/cpu/int8_gemm.h"

namespace ocrt::cpu {

// The most input channels the exact bound above allows.
constexpr int64_t kInt8WinogradMaxChannels = ((int64_t(1) << 31) - 1) / (4 * 9 * 127 * 127);
// F(4x4, 3x3)'s bound on a sum: it must lie in -kInt8Winograd4Bound .. kInt8Winograd4Bound - 1.
constexpr int64_t kInt8Winograd4Bound = int64_t(1) << 25;
// The fewest input channels for which Int8Conv2d takes this path: with fewer, a product step
// has few pairs of channels to sum, and im2col's 9 taps give its kernel the longer runs (Zen 3,
// one page's detector layers, bench_int8_winograd, F(4x4): 8 -> 8 channels 0.77x, 16 -> 16
// 1.05x, 32 -> 16 1.20x, 64 -> 64 1.73x; F(2x2): 0.61x, 0.91x, 1.03x, 1.16x. From 16 channels
// on, the 12 real scans read no faster).
constexpr int64_t kInt8WinogradMinChannels = 32;

// Whether every output channel of w (Cout, C, 3, 3), codes -127..127, keeps F(4x4, 3x3)'s sums
// within kInt8Winograd4Bound for any codes 0..127.
bool int8_winograd4_fits(int64_t Cout, int64_t C, const int8_t* w);

// A 3x3 layer's weights w (Cout, C, 3, 3), codes -127..127, transformed for F(4x4, 3x3) where
// max_tile is 4 and the bound allows (int8_winograd4_fits), for F(2x2, 3x3) otherwise, and
// packed as the products' B: for each of the points xi (36 or 16) and each panel of kInt8NR
// output channels, C/2 steps (C rounded up to pairs) of kInt8NR channel pairs (two int16 each,
// channels 2q and 2q + 1 of the step), zeros past C and past Cout.
class Int8WinogradWeights {
 public:
  Int8WinogradWeights(int64_t Cout, int64_t C, const int8_t* w, int max_tile = 4);
  int64_t out_channels() const { return cout_; }
  int64_t in_channels() const { return c_; }
  int64_t tile() const { return tile_; }  // outputs a side of a tile: 4 or 2
  int64_t points() const { return (tile_ + 2) * (tile_ + 2); }
  int64_t pairs() const { return pairs_; }
  const int16_t* panel(int64_t xi, int64_t p) const { return data_.get() + (xi * panels_ + p) * pairs_ * 2 * kInt8NR; }
  size_t bytes() const { return (size_t)(points() * panels_ * pairs_ * 2 * kInt8NR) * sizeof(int16_t); }

 private:
  int64_t cout_, c_, pairs_, panels_, tile_ = 2;
  std::unique_ptr<int16_t, void (*)(void*)> data_{nullptr, std::free};
};

// The transformed weights of w (as the constructor makes them), shared by every caller that asks
// for the same weights (the same shape, max_tile and codes, compared byte by byte) while one of
// them holds them: ocrt-infer's page lanes each load the recogniser, and one copy of its
// transformed weights (crnn-en: 36 MB) serves them all.
std::shared_ptr<const Int8WinogradWeights> shared_int8_winograd_weights(int64_t Cout, int64_t C, const int8_t* w,
                                                                        int max_tile);

// Whether Int8Conv2d takes this path: the int8 product here is the AVX2 one, and
// OCRT_INT8_WINOGRAD is not 0 (set_int8_winograd overrides both, for tests and benchmarks;
// forcing it on needs AVX2), for layers of at least int8_winograd_min_channels() input channels
// (kInt8WinogradMinChannels unless set_int8_winograd said otherwise: bench_int8_winograd times
// the layers below it too).
// The largest tile layers' weights are transformed for (int8_winograd_max_tile: 4, or 2 where
// OCRT_INT8_WINOGRAD is 2 or set_int8_winograd's max_tile says so; 0 there: the environment's).
bool int8_winograd_enabled();
// How int8 products run here, for summaries: "K kernel" (K: int8_gemm_kernel_name()), and where
// this path is on, ", 3x3 layers by integer Winograd F(4x4)" (or F(2x2) when that is the
// largest tile allowed).
std::string int8_path_description();
int64_t int8_winograd_min_channels();
int int8_winograd_max_tile();
void set_int8_winograd(bool on, int64_t min_channels = kInt8WinogradMinChannels, int max_tile = 0);

// count images' 3x3, stride-1, padding-1 convolutions, each into its ys[n] as int8_gemm writes
// it (output pixel i = oh * W + ow is row i of the product: ys[n][i * y_row + channel * y_col],
// through e). The images' codes lie channels last with their padding: (H + 2) x (W + 2) pixels
// of `pixel` codes (>= C, a multiple of 4, channels past C at any code 0..127: their weights are
// zero), the padding's pixels at pad_code (the code of 0). C at most kInt8WinogradMaxChannels.
// The images' tiles are worked in chunks across images, so several narrow images read the
// transformed weights once (give them together). Threads: as int8_gemm (chunks shared out with
// parallel set, outside a parallel region); the same result for any count.
void int8_winograd_conv(const uint8_t* const* images, float* const* ys, int64_t count, int64_t H, int64_t W,
                        int64_t pixel, uint8_t pad_code, const Int8WinogradWeights& U, const Int8Epilogue& e,
                        int64_t y_row, int64_t y_col, bool parallel = true);

// How many H x W images of `pixel` codes a pixel to give int8_winograd_conv at once: as many as
// fill one chunk of its tiles (at least 1), so that narrow images read U once for several.
int64_t int8_winograd_images_per_call(const Int8WinogradWeights& U, int64_t pixel, int64_t H, int64_t W);

}  // namespace ocrt::cpu
