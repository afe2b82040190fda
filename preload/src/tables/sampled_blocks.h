// Live sampled blocks: address -> sample id, so that a free (or realloc) names the block it ends
// by its id instead of by address. Addresses are reused by the allocator and are nearly random
// to a compressor; ids of short-lived blocks are close to the thread's latest id, so frees encode
// as small repeating numbers (the capture of a Python run shrinks several-fold).
//
// Two layers:
// - Sparse sampling (the default): striped open-addressing tables (linear probing,
//   backward-shift deletion), 64 stripes chosen by the block's 2 MiB address region, so that a
//   thread mostly meets the stripes of its own allocator regions (sampled_blocks.cc).
//   Keys are stored disguised (see common.h). A few dozen bytes per sampled block.
// - Dense sampling (--sample-bytes up to kDenseSampleBytes, every allocation at 1): a
//   direct-mapped word per unit of address space, where the block starts (a WordMap,
//   word_map.h: 32-byte units on glibc, whose chunks are that far apart, else 16), holding the id
//   and the stack. No hash, no lock: the allocator hands an address to one thread at a time,
//   as for the byte shadow. The word sits next to its neighbours' words, so it follows the
//   program's own locality; the table's random slots made every insert and take a cache miss
//   (perf, python with every allocation: 22% of the samples). The table stays behind it for what
//   a word cannot hold (ids from 2^39, stacks from 2^24) and for address regions whose leaf could
//   not be mapped.
//   Cost: touched pages only, a quarter of the heap's extent for a glibc heap (half with 16-byte
//   units) when nearly every block is sampled; the table took 48 to 96 bytes per block.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "core/common.h"
#include "tables/word_map.h"

namespace hs::sampled_blocks {

// Mean sample gaps up to this many bytes use the direct-mapped layer: nearly every small block is
// sampled, and words for all of them cost less than table slots (see above).
constexpr uint64_t kDenseSampleBytes = 64;

struct Name {
  uint64_t id;     // sample id
  uint32_t stack;  // allocation stack
};
// Chooses the layers, before the first insert: direct words of 1 << unit_shift bytes when dense.
// (Once: the leaves' size follows from the unit.)
void init(bool dense, unsigned unit_shift);
HS_INLINE bool insert(const void *p, Name n);   // false if out of memory (block stays unnamed)
HS_INLINE void prefetch(const void *p);         // hint: insert(p) or take(p) comes soon
HS_INLINE bool take(const void *p, Name *n);    // removes; false if p is not a sampled block
bool peek(const void *p, Name *n);              // lock-free read (snapshot child only)
void lock_all();                                 // fork: the child must not inherit a torn stripe
void unlock_all();
void after_fork_child();

// --- the direct-mapped layer, inline: a sampled allocation and its free each make one call less
// (the table's out-of-line path saves registers the direct one does not need) -----------------
namespace detail {

// A word is kMark | id << kStackBits | stack: bit 63 keeps it from ever looking like a pointer to
// a conservative scan of the tracer's memory (as info_shadow.h's entries), and from being 0.
constexpr unsigned kStackBits = 24, kIdBits = 39;
constexpr uint64_t kMark = uint64_t(1) << 63;

extern bool g_direct;
extern WordMap g_words;
// Set once anything went to the table in dense mode: until then a take that finds no word is
// done without looking at the table (and its lock).
extern std::atomic<bool> g_table_used;

bool insert_table(const void *p, Name n, uint64_t *stale_word);
bool take_table(const void *p, Name *n);
void prefetch_table(const void *p);

HS_INLINE bool fits(Name n) { return n.id < (uint64_t(1) << kIdBits) && n.stack < (1u << kStackBits); }
HS_INLINE uint64_t encode(Name n) { return kMark | n.id << kStackBits | n.stack; }
HS_INLINE Name decode(uint64_t w) {
  return {(w & ~kMark) >> kStackBits, uint32_t(w & ((1u << kStackBits) - 1))};
}
}  // namespace detail

HS_INLINE void prefetch(const void *p) {
  using namespace detail;
  if (!g_direct) return prefetch_table(p);
  if (uint64_t *w = g_words.word(p, false)) __builtin_prefetch(w, 1);
}

HS_INLINE bool insert(const void *p, Name n) {
  using namespace detail;
  if (!g_direct) return insert_table(p, n, nullptr);
  uint64_t *w = g_words.word(p, true);
  if (HS_LIKELY(w && fits(n))) {
    store_word(w, encode(n));
    return true;
  }
  return insert_table(p, n, w);
}

HS_INLINE bool take(const void *p, Name *n) {
  using namespace detail;
  if (!g_direct) return take_table(p, n);
  if (uint64_t *w = g_words.word(p, false)) {
    if (uint64_t v = load_word(w)) {
      store_word(w, 0);
      *n = decode(v);
      return true;
    }
  }
  if (!g_table_used.load(std::memory_order_relaxed)) return false;
  return take_table(p, n);
}

}  // namespace hs::sampled_blocks
