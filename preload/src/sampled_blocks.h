// Live sampled blocks: address -> sample id, so that a free (or realloc) names the block it ends
// by its id instead of by address. Addresses are reused by the allocator and are nearly random
// to a compressor; ids of short-lived blocks are close to the thread's latest id, so frees encode
// as small repeating numbers (the capture of a Python run shrinks several-fold).
//
// Two layers:
// - Sparse sampling (the default): striped open-addressing tables (linear probing,
//   backward-shift deletion), a free from another thread contending only on one of 64 stripes.
//   Keys are stored disguised (see common.h). A few dozen bytes per sampled block.
// - Dense sampling (--sample-bytes up to kDenseSampleBytes, every allocation at 1): a
//   direct-mapped word per unit of address space, where the block starts (the unit as in
//   info_shadow.h: 32 bytes on glibc, whose chunks are that far apart, else 16), holding the id
//   and the stack. No hash, no lock: the allocator hands an address to one thread at a time,
//   as for the byte shadow. The word sits next to its neighbours' words, so it follows the
//   program's own locality; the table's random slots made every insert and take a cache miss
//   (perf, python with every allocation: 22% of the samples). The table stays behind it for what
//   a word cannot hold (ids from 2^39, stacks from 2^24) and for address regions whose leaf could
//   not be mapped.
//   Cost: touched pages only, a quarter of the heap's extent for a glibc heap (half with 16-byte
//   units) when nearly every block is sampled; the table took 48 to 96 bytes per block.
#pragma once
#include <cstdint>

namespace hs::sampled_blocks {

// Mean sample gaps up to this many bytes use the direct-mapped layer: nearly every small block is
// sampled, and words for all of them cost less than table slots (see above).
constexpr uint64_t kDenseSampleBytes = 64;

struct Name {
  uint64_t id;     // sample id
  uint32_t stack;  // allocation stack
};
// Chooses the layers, before the first insert: direct words of 1 << unit_shift bytes when dense.
void init(bool dense, unsigned unit_shift);
bool insert(const void *p, Name n);             // false if out of memory (block stays unnamed)
void prefetch(const void *p);                    // hint: insert(p) or take(p) comes soon
bool take(const void *p, Name *n);              // removes; false if p is not a sampled block
bool peek(const void *p, Name *n);              // lock-free read (snapshot child only)
void lock_all();                                 // fork: the child must not inherit a torn stripe
void unlock_all();
void after_fork_child();

}  // namespace hs::sampled_blocks
