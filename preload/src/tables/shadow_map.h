// One byte of shadow per granule of address space (16 bytes under glibc's chunk layout, 8 under
// any other allocator): what the shim knows about the block that starts there, without a hash
// table on the malloc/free fast path.
//
// Why: exact totals (current heap in requested bytes, live blocks) need each block's requested
// size at free time. A global hash table costs a cache miss and a lock per call; the shadow byte
// sits next to its neighbours' (8-16x denser than the heap itself), so it follows the program's
// own locality. Requested size = the block's base (usable_size.h: from glibc's chunk header, cheap;
// usable size + 1 or more) - the code kept here.
//
// Granule: no two blocks may start in one. glibc's chunks are 16-byte aligned; jemalloc, tcmalloc
// and mimalloc put 8-byte blocks 8 bytes apart (with 16-byte granules half their frees were
// "foreign" and those blocks stayed live for ever). usable::init() picks the granule (set_granule)
// before the first block is marked; the fast paths (interpose.cc) run only on glibc's layout and
// use the 16-byte granule as a constant.
//
// Encoding of a shadow byte:
//   0            no block the shim saw allocated starts here
//   bit 7        the block is sampled (its free is recorded as an event)
//   1..126       base - requested (usable_size.h: under glibc's layout, the slack + 8 for most
//                blocks; under other allocators the base is 126, the byte holds the size itself)
//   127          large: the next 8 shadow bytes hold the requested size (only for blocks of at
//                least 9 granules, whose shadow bytes past the first are otherwise unused)
//
// Layout: two levels, top[addr >> 30] -> leaf of 2^30 / granule bytes (one per 1 GiB of address
// space), leaves mmapped with MAP_NORESERVE on first use, so only touched pages cost memory. A top
// entry holds its leaf's address less (region index << (30 - granule shift)), so that the shadow
// byte of p is that entry + (p >> granule shift): no masking of p's offset within its region (one
// instruction of every malloc and free). leaf(t) gives the leaf's own address back.
#pragma once
#include <sys/mman.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "core/common.h"
#include "core/own_mappings.h"

namespace hs::shadow {

constexpr unsigned kGlibcGranuleShift = 4;  // the fast paths' granule (glibc's layout only)
constexpr unsigned kRegionShift = 30;
constexpr unsigned kAddressBits = 47;
constexpr size_t kTopEntries = size_t(1) << (kAddressBits - kRegionShift);

// The granule, as a shift: 4 (16 bytes) on glibc's layout, 3 (8 bytes) otherwise. Set once,
// before the first leaf is mapped.
extern unsigned granule_shift HS_HIDDEN;
void set_granule(unsigned shift);
HS_INLINE size_t granule_bytes() { return size_t(1) << granule_shift; }
HS_INLINE size_t leaf_bytes() { return size_t(1) << (kRegionShift - granule_shift); }
constexpr uint8_t kSampledBit = 0x80;
constexpr uint8_t kLargeSlack = 127;

// Biased leaf addresses (see Layout above), 0 where no leaf is mapped yet.
extern std::atomic<uintptr_t> top[kTopEntries] HS_HIDDEN;

HS_INLINE uintptr_t leaf_bias(size_t index) { return uintptr_t(index) << (kRegionShift - granule_shift); }

// The leaf of region `index` (its shadow bytes, first byte for the region's first granule), or
// nullptr if none is mapped.
HS_INLINE uint8_t *leaf(size_t index) {
  uintptr_t e = top[index].load(std::memory_order_acquire);
  return e ? reinterpret_cast<uint8_t *>(e + leaf_bias(index)) : nullptr;
}

// The table the allocation fast paths (interpose.cc) look blocks up in: `top` while they may run
// (tracing, glibc's chunk layout, no snapshot table: set_state), a table without leaves otherwise.
// One lookup then both finds the shadow byte and says whether the fast path applies, instead of a
// flag tested first on every call (4 instructions of each malloc and free).
extern std::atomic<const std::atomic<uintptr_t> *> fast_top HS_HIDDEN;
void enable_fast_paths(bool on);

// A leaf of `bytes` mapped on first use (MAP_NORESERVE) and published in `slot` as an entry: its
// address less `bias` (the byte shadow's biased entries, see Layout; WordMap's, word_map.h, are
// plain pointers). Threads that race each map one, one wins, the others unmap theirs. The winner's
// entry, or a null one if the mapping failed. A leaf mapped at exactly the bias would make the
// entry 0, "no leaf": it is not published (the kernel hands out addresses from the top of the
// address space down, far above any bias).
template <typename E>
E map_leaf(std::atomic<E> &slot, size_t bytes, uintptr_t bias = 0) {
  void *m = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED) return E{};
  uintptr_t bits = reinterpret_cast<uintptr_t>(m) - bias;
  E entry;
  if constexpr (std::is_pointer_v<E>) entry = reinterpret_cast<E>(bits);
  else entry = E(bits);
  E expected{};
  if (bits == 0 || !slot.compare_exchange_strong(expected, entry, std::memory_order_acq_rel)) {
    munmap(m, bytes);  // another thread won the race (or the unusable address above)
    return expected;
  }
  own_mappings::name(m, bytes);  // (the snapshot child knows the leaves from the tables)
  return entry;
}

// Slow path of find_or_create: maps p's leaf (if p is below the top of the address space and no
// other thread mapped it first) and returns p's shadow byte; nullptr if the mapping failed.
uint8_t *create_leaf(const void *p);

HS_INLINE uint8_t *find_in(const std::atomic<uintptr_t> *table, const void *p, unsigned shift) {
  uint64_t a = reinterpret_cast<uint64_t>(p);
  size_t t = a >> kRegionShift;
  if (HS_UNLIKELY(t >= kTopEntries)) return nullptr;
  uintptr_t e = table[t].load(std::memory_order_acquire);
  if (HS_UNLIKELY(!e)) return nullptr;
  uintptr_t s = e + (a >> shift);
  if (s == 0) __builtin_unreachable();  // a byte of a mapped leaf: callers' null tests fold away
  return reinterpret_cast<uint8_t *>(s);
}

// Shadow byte of p, or nullptr if p has none yet (read-only lookup).
HS_INLINE uint8_t *find(const void *p) { return find_in(top, p, granule_shift); }

// The same for a fast path: nullptr also whenever the fast paths are off (fast_top), which is
// always when the granule is not glibc's.
HS_INLINE uint8_t *find_fast(const void *p) {
  return find_in(fast_top.load(std::memory_order_relaxed), p, kGlibcGranuleShift);
}

// A shadow byte is handed from thread to thread through the allocator: one clears a block's byte
// before freeing it, another marks it once malloc returned that address to it. The allocator's
// own synchronisation orders the two; ThreadSanitizer cannot see it through an allocator it does
// not instrument (its own, in the shim's concurrency test) and reported the plain stores as a
// race. Relaxed atomic byte accesses say the sharing is meant: the same single mov on x86-64.
HS_INLINE uint8_t get(const uint8_t *s) { return __atomic_load_n(s, __ATOMIC_RELAXED); }
HS_INLINE void set(uint8_t *s, uint8_t v) { __atomic_store_n(s, v, __ATOMIC_RELAXED); }

// Shadow byte of p, creating the leaf if needed; nullptr only if memory is exhausted.
HS_INLINE uint8_t *find_or_create(const void *p) {
  if (uint8_t *s = find_in(top, p, granule_shift)) return s;
  return create_leaf(p);
}

// Records a block of `base` (usable_size.h: more than `requested`): its shadow byte (and, for large
// slack, the size in the following bytes). Returns false if the block could not be recorded (then
// it is simply untracked).
// Whether the shadow bytes of the 8 granules after a's lie in a's leaf (right after its byte): a
// large block's size bytes, unless a is in the last 9 granules of its 1 GiB region.
HS_INLINE bool size_bytes_in_leaf(uint64_t a) {
  return (a >> kRegionShift) == ((a + (uint64_t(8) << granule_shift)) >> kRegionShift);
}

// A large block's size, in the 8 shadow bytes after its own (size_bytes_in_leaf): one unaligned
// word. (Byte by byte, as relaxed atomics, under ThreadSanitizer: see get/set.)
HS_INLINE void put_size_bytes(uint8_t *s, uint64_t r) {
#if defined(__SANITIZE_THREAD__)
  for (int i = 0; i < 8; ++i) set(s + 1 + i, uint8_t(r >> (8 * i)));
#else
  memcpy(s + 1, &r, 8);
#endif
}
HS_INLINE uint64_t get_size_bytes(const uint8_t *s) {
  uint64_t r = 0;
#if defined(__SANITIZE_THREAD__)
  for (int i = 0; i < 8; ++i) r |= uint64_t(get(s + 1 + i)) << (8 * i);
#else
  memcpy(&r, s + 1, 8);
#endif
  return r;
}

HS_INLINE bool mark(void *p, size_t requested, size_t base, bool sampled) {
  uint8_t *s = find_or_create(p);
  if (HS_UNLIKELY(!s)) return false;
  size_t code = base - requested;
  if (HS_LIKELY(code - 1 < kLargeSlack - 1)) {  // 1..126 (0: a request of exactly the base)
    set(s, uint8_t(code) | (sampled ? kSampledBit : 0));
    return true;
  }
  // The usable size is at least base - 16 (an mmapped chunk's base is 16 above it, usable_size.h):
  // the size bytes, in the shadow of the next 8 granules, need a block of at least 9 granules.
  if (base < (size_t(9) << granule_shift) + 16) return false;  // cannot hold the size: left untracked
  uint64_t r = requested;
  uint64_t a = reinterpret_cast<uint64_t>(p);
  if (HS_LIKELY(size_bytes_in_leaf(a))) {
    put_size_bytes(s, r);
  } else {
    // The following 8 bytes cross into the next leaf (p is in the last 9 granules of a 1 GiB
    // region): find_or_create per byte.
    for (int i = 0; i < 8; ++i) {
      uint8_t *b = find_or_create(reinterpret_cast<void *>(a + (uint64_t(i + 1) << granule_shift)));
      if (!b) return false;
      set(b, uint8_t(r >> (8 * i)));
    }
  }
  set(s, kLargeSlack | (sampled ? kSampledBit : 0));
  return true;
}

// Requested size of the block of `base` whose shadow byte is v (non-zero).
HS_INLINE size_t requested_size(const void *p, uint8_t v, size_t base) {
  uint8_t code = v & 0x7f;
  if (HS_LIKELY(code != kLargeSlack)) return base - code;
  uint64_t a = reinterpret_cast<uint64_t>(p);
  uint64_t r = 0;
  if (HS_LIKELY(size_bytes_in_leaf(a))) {
    const uint8_t *s = find(p);
    return s ? get_size_bytes(s) : 0;
  }
  for (int i = 0; i < 8; ++i) {
    uint8_t *b = find(reinterpret_cast<void *>(a + (uint64_t(i + 1) << granule_shift)));
    r |= uint64_t(b ? get(b) : 0) << (8 * i);
  }
  return r;
}

// Forgets the block at p whose shadow byte s holds v (including a large block's size bytes, so
// that no stale byte is left for a later, untracked block at those addresses).
HS_INLINE void clear(const void *p, uint8_t *s, uint8_t v) {
  set(s, 0);
  if (HS_UNLIKELY((v & 0x7f) == kLargeSlack)) {
    uint64_t a = reinterpret_cast<uint64_t>(p);
    if (HS_LIKELY(size_bytes_in_leaf(a))) {
      put_size_bytes(s, 0);
      return;
    }
    for (int i = 0; i < 8; ++i)
      if (uint8_t *b = find(reinterpret_cast<void *>(a + (uint64_t(i + 1) << granule_shift)))) set(b, 0);
  }
}

}  // namespace hs::shadow
