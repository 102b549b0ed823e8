// Host memory for CPU tensors: 64-byte aligned blocks, with a cache for large ones.
//
// Why a cache: glibc returns big freed blocks (>= 128 KiB by default) to the kernel, so an op
// that allocates a large output touches fresh pages every time and pays a page fault per 4 KiB.
// Training allocates the same activation sizes every step; keeping freed large blocks and
// handing them out again removes that cost (measured: allocating elementwise ops on 16M floats
// ran several times faster; bench/results/core.md). Small blocks go straight to malloc, which
// already recycles them.
//
// Sizes of cached blocks are rounded up to 4 steps per power of two (at most 25% slack), so
// tensors of slightly different widths (text lines!) still reuse each other's blocks, and a
// request takes the smallest cached block of its size class or larger, up to twice its size.
// The cache holds at most the peak of the blocks live tensors hold at once (at least 64 MiB),
// counted at the blocks' real sizes, and at most a fixed limit (cpu_set_cache_limit), and can
// be emptied. (Counted at the requests' sizes instead, as until 2026-11-29, the bound fell
// short of the blocks a training step needs back by the rounding and the best fits: bench_train
// crnn in bf16 on 2 AMX Xeon cores mapped blocks afresh every step, 44k page faults and 1.0 s of
// system time in 12 steps; 28k and 0.2 s with the blocks counted, peak RSS 597 -> 581 MiB.)
// Blocks of the cached sizes are mapped from the kernel (mmap) and unmapped when they leave the
// cache, not taken from malloc: glibc raises its mmap threshold after such frees and then keeps
// freed large blocks in its heaps, which held a page read at 860 MiB RSS for 490 MiB of tensors
// (600 MiB mapped here).
//
// So live and cached bytes together can reach twice the largest working set, and do where the
// sizes keep changing: ocrt-infer's batches of lines of other widths left the last batch's
// blocks in the cache beside their own (160 lines: 477 MiB of tensors at most, 1078 MiB RSS).
// cpu_set_cache_trim(true) bounds the sum by the working set instead: a request that no cached
// block fits first gives cached blocks back, largest first, while the sum is above it (516 MiB
// RSS there, at the same speed; bench/results/infer-cpu.md). ocrt-infer turns it on. Training
// leaves it off: a step repeats the last step's sizes, and its natural footprint is above its
// peak of live bytes (blocks needed at other moments of the step), so trimming gave back blocks
// the next step allocated again (bench_train crnn: 830 fresh blocks in 12 steps instead of 210).
// Two other bounds were tried on training and not kept (2026-11-29, AMX Xeon, ocrt-train crnn-s
// bf16, 30 and 90 steps): twice the peak removed the ~500 page faults a step (2.5 s less system
// time in 60 steps, about 8% of the step's CPU time) but raised peak RSS from 970 to 1,280 MiB;
// evicting the oldest cached block instead of the one just freed made it 2,700 faults a step.
// Real training's line widths change from batch to batch by more than the best fit's factor of
// two (the loader sorts the lines of 8 batches by width and hands those batches out in a random
// order: a narrow one may follow a wide one and the other way round). A request that no cached block fits therefore
// takes the largest smaller cached block and grows it (Linux's mremap, which keeps the pages the
// block had: only the new ones fault in and are zeroed) instead of mapping a block afresh.
// ocrt-train crnn-s bf16, 90 steps, 2 AMX Xeon cores: system time 3.1-4.3 -> 2.0 s (of ~40 s
// CPU time), peak RSS 1,031 -> 875 MiB; without growing, it mapped 6.8 GB in 90 steps for a
// working set of 656 MiB of blocks.
#pragma once
#include <cstddef>
#include <string>

namespace ocrt {

struct CpuMemoryStats {
  size_t allocated = 0;  // bytes of live CPU tensors (as requested)
  size_t cached = 0;     // bytes held in the cache, free for reuse
  size_t peak = 0;       // highest `allocated` so far
  size_t held = 0;       // bytes of the cached-size blocks that live tensors hold (their real sizes)
  size_t peak_held = 0;  // highest `held` so far: the cache's bound
};

void* cpu_alloc(size_t nbytes);          // never null: throws on out-of-memory
void cpu_free(void* ptr, size_t nbytes);  // nbytes as passed to cpu_alloc
CpuMemoryStats cpu_memory_stats();
void cpu_empty_cache();                  // frees every cached block
void cpu_set_cache_limit(size_t bytes);  // default 2 GiB; 0 disables caching
void cpu_set_cache_trim(bool on);        // default off; see above
// Host memory that is not tensors (decoded images, a page's crops, vectors) comes from malloc.
// glibc maps blocks of 128 KiB and more from the kernel, but each time it frees such a block
// it raises that threshold to the block's size (up to 32 MiB), and blocks below the threshold
// are then kept in its heaps after free, where pages of other sizes fragment them: reading 17
// document pages, ocrt-infer's RSS grew page by page from 314 to 427 MiB. This fixes the
// threshold at 128 KiB (mallopt M_MMAP_THRESHOLD, which also turns the raising off) for the
// whole process: 315 MiB at the same speed there, and 225 instead of 255 MiB reading 300 lines
// (bench/results/pages.md). ocrt-infer calls it; a program that links ocrt decides for
// itself, since it changes malloc for all of that program. Does nothing where the C library is
// not glibc.
void cpu_fix_malloc_mmap_threshold();
// Starts `peak` again from the bytes live now (a benchmark measures what one step holds at
// most); with trimming on, the cache's bound starts again from there too.
void cpu_reset_peak();

// While it lives, the CPU tensors this thread allocates may add up to at most `bytes` (counting
// every allocation, frees not subtracted); one past that throws Error("<what>: ..."). For work
// whose size comes from a file: a model file whose config asks for a model far larger than the
// weights it carries is refused before the model's memory is taken (models/model_file.h,
// ModelSizeGuard). Scopes nest; the innermost one counts.
class CpuAllocationCap {
 public:
  CpuAllocationCap(size_t bytes, std::string what);
  ~CpuAllocationCap();
  CpuAllocationCap(const CpuAllocationCap&) = delete;
  CpuAllocationCap& operator=(const CpuAllocationCap&) = delete;

 private:
  friend void* cpu_alloc(size_t);
  size_t cap_, used_ = 0;
  std::string what_;
  CpuAllocationCap* outer_;
};

}  // namespace ocrt
