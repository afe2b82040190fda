// The snapshot's blocks, found from the byte shadow (shadow_map.h) and confirmed against the
// heap, in address order: on one thread, or on several (child_threads.h) under glibc's layout.
//
// On several threads the mappings' ranges are cut into pieces of address space; each thread
// enumerates a piece into a list of its own as if nothing came before it, and thread 0 appends
// the lists in address order (threads::ordered). A piece's list is what one thread would have
// found there unless a block of the pieces before it reaches past the piece's first candidate
// (a large block's size bytes, stale shadow bytes inside a block): then thread 0 enumerates that
// piece again, carrying on from the blocks before it, as one thread does. So the block list, its
// runs and its counts are the same for any thread count.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <new>

#include "core/config.h"
#include "core/private_heap.h"
#include "snapshot/child_internal.h"
#include "snapshot/child_threads.h"
#include "tables/shadow_map.h"

namespace hs::snapshot::child {
namespace {

// A block list being built: the Child's own (one thread), or a piece's (several). The fields are
// Child's of the same names.
struct Blocks {
  uint64_t *addr = nullptr, *size = nullptr, *sampled = nullptr;
  uint32_t *chunk = nullptr;
  uint32_t n = 0, cap = 0;
  Child::LiveRun *runs = nullptr;
  uint32_t nruns = 0, runs_cap = 0;
  uint64_t run_end = 0, inside_end = 0, skipped = 0, bytes = 0;
  uint64_t first_candidate = UINT64_MAX;  // the first candidate looked at
  const char *error = nullptr;
  // A piece's list (a scan thread's slot): what its blocks say the mappings from holds_base on
  // hold, kept here and noted in c.holds only once thread 0 keeps the piece (append_piece). A
  // piece enumerated again had marked c.holds from candidates its second run rejects (bytes
  // inside an earlier piece's block that looked like a header), and marks only go up: roots
  // could then differ with the thread count. (holds_over: a block reached past the kLocalHolds
  // mappings kept; the piece is enumerated again by thread 0.) Off (local false): c.holds itself.
  static constexpr long kLocalHolds = 8;
  bool local = false, holds_over = false;
  long holds_base = 0;
  uint8_t holds[kLocalHolds] = {};
};

Blocks take(const Child &c) {
  Blocks b;
  b.addr = c.addr;
  b.size = c.size;
  b.sampled = c.sampled;
  b.chunk = c.chunk;
  b.n = c.n;
  b.cap = c.cap;
  b.runs = c.runs;
  b.nruns = c.nruns;
  b.runs_cap = c.runs_cap;
  b.run_end = c.run_end;
  b.inside_end = c.inside_end;
  b.skipped = c.skipped;
  b.bytes = c.bytes;
  return b;
}

void give(Child &c, const Blocks &b) {
  c.addr = b.addr;
  c.size = b.size;
  c.sampled = b.sampled;
  c.chunk = b.chunk;
  c.n = b.n;
  c.cap = b.cap;
  c.runs = b.runs;
  c.nruns = b.nruns;
  c.runs_cap = b.runs_cap;
  c.run_end = b.run_end;
  c.inside_end = b.inside_end;
  c.skipped = b.skipped;
  c.bytes = b.bytes;
  if (b.error && !c.error) c.error = b.error;
}

// Room for `want` blocks (grown by copying: the child's arena never frees).
bool reserve(Blocks &b, uint64_t want) {
  if (want <= b.cap) return true;
  if (want > UINT32_MAX - 1) want = UINT32_MAX - 1;
  if (want <= b.cap) {
    b.error = "too many blocks";
    return false;
  }
  auto *na = static_cast<uint64_t *>(heap::grow(b.addr, size_t(want) * 8));
  auto *ns = static_cast<uint64_t *>(heap::grow(b.size, size_t(want) * 8));
  auto *ni = static_cast<uint64_t *>(heap::grow(b.sampled, size_t(want + 63) / 64 * 8));
  auto *nk = static_cast<uint32_t *>(heap::grow(b.chunk, size_t(want) * 4));
  if (!na || !ns || !ni || !nk) {
    b.error = "out of memory (blocks)";
    return false;
  }
  b.addr = na;
  b.size = ns;
  b.sampled = ni;
  b.chunk = nk;
  b.cap = uint32_t(want);
  return true;
}

// Room for `want` runs; false (and no runs from now on: the arena walk then goes chunk by chunk)
// when out of memory.
bool reserve_runs(Blocks &b, uint64_t want) {
  if (b.runs_cap == UINT32_MAX) return false;
  if (want <= b.runs_cap) return true;
  uint64_t cap = b.runs_cap ? b.runs_cap : 65536;
  while (cap < want) cap *= 2;
  auto *more = cap < UINT32_MAX ? static_cast<Child::LiveRun *>(heap::grow(b.runs, size_t(cap) * sizeof(Child::LiveRun)))
                                : nullptr;
  if (!more) {
    b.runs_cap = UINT32_MAX;  // (never tried again)
    b.runs = nullptr;
    b.nruns = 0;
    return false;
  }
  b.runs = more;
  b.runs_cap = uint32_t(cap);
  return true;
}

// The latest block (at a, req bytes requested) into the runs: it extends the open run when its
// chunk starts where the run's last one ends.
HS_INLINE void note_run(Blocks &b, uint64_t a, uint64_t req) {
  const uint32_t ch = b.chunk[b.n - 1];
  if (ch < 32 || (ch & 15)) {
    b.run_end = 0;
    return;
  }
  // (live: what the walk counts as live of the chunk: the next chunk's prev_size word is usable)
  const uint64_t live = req < ch - 16 ? req : ch - 16;
  if (b.run_end && b.run_end == a - 16) {
    Child::LiveRun &r = b.runs[b.nruns - 1];
    ++r.count;
    r.live += live;
  } else {
    if (b.nruns == b.runs_cap && !reserve_runs(b, uint64_t(b.nruns) + 1)) {
      b.run_end = 0;
      return;
    }
    b.runs[b.nruns++] = {b.n - 1, 1, live};
  }
  b.run_end = a - 16 + ch;
}

// What a mapping holds (note_holds), from any thread: the highest value noted wins.
HS_INLINE void note_holds_shared(uint8_t *h, uint8_t what) {
  uint8_t cur = __atomic_load_n(h, __ATOMIC_RELAXED);
  while (cur < what && !__atomic_compare_exchange_n(h, &cur, what, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
  }
}

// What mapping j holds, as a block of b says (see Blocks::local).
HS_INLINE void note_hold(const Child &c, Blocks &b, long j, uint8_t what) {
  if (!b.local) return note_holds_shared(&c.holds[j], what);
  const long k = j - b.holds_base;
  if (k < 0 || k >= Blocks::kLocalHolds) {
    b.holds_over = true;
    return;
  }
  if (b.holds[k] < what) b.holds[k] = what;
}

// 0x80 in each non-zero byte of x, 0 elsewhere.
HS_INLINE uint64_t nonzero_bytes(uint64_t x) {
  constexpr uint64_t k7f = 0x7f7f7f7f7f7f7f7full;
  return (((x & k7f) + k7f) | x) & ~k7f;
}

// A forked child's page table entries start "old" (the kernel clears their accessed bit at the
// fork), and the first access to each page sets it: in a virtual machine that costs about 0.4 us
// per page, and a prefetch of a page not yet accessed is dropped. The chunk headers' prefetches
// only work on pages already accessed: so one word of each new page is read some candidates
// ahead of them (a's page; a itself lies in the range being enumerated, readable).
HS_INLINE void touch_page_ahead(uint64_t a, uint64_t &touched) {
  const uint64_t page = a >> 12;
  if (page == touched) return;
  touched = page;
  uint64_t word = *reinterpret_cast<const volatile uint64_t *>(a);
  asm volatile("" : : "r"(word));
}

// Finds the blocks of [lo, hi) in mapping mi from the byte shadow, in address order, into b. The
// shadow gives candidate starts (its non-zero bytes, eight at a time) without reading the heap,
// so that the chunk headers that confirm them can be fetched ahead; following the chunk sizes
// from one block to the next instead would wait for memory at every block. Reads the frozen
// image, the shadow and c's mappings; writes b and (shared, by note_holds_shared) c.holds: safe
// on a scan thread under glibc's layout (usable::of then reads the chunk header itself).
HS_NOINLINE void enumerate_into(const Child &c, Blocks &b, long mi, uint64_t lo, uint64_t hi) {
  const Mapping &m = c.maps[mi];
  // A block may end in a mapping that follows this one with no gap.
  long last = mi;
  uint64_t limit = m.end;
  while (last + 1 < c.nmaps && c.maps[last + 1].start == limit && c.maps[last + 1].readable && c.maps[last + 1].writable) {
    ++last;
    limit = c.maps[last].end;
  }
  const unsigned gs = shadow::granule_shift;
  const bool glibc = usable::g_glibc_layout;
  const uint64_t granule = uint64_t(1) << gs;
  uint64_t g = (lo + granule - 1) & ~(granule - 1);
  constexpr uint32_t kCandidates = 1024, kAhead = 16, kTouchAhead = 48;  // 4 KiB of stack
  uint32_t cand[kCandidates];
  uint64_t touched = 0;  // the page touch_page_ahead read last
  while (g < hi && !b.error) {
    uint64_t region = g & ~((uint64_t(1) << shadow::kRegionShift) - 1);
    uint64_t region_end = region + (uint64_t(1) << shadow::kRegionShift);
    uint64_t stop = hi < region_end ? hi : region_end;
    const uint8_t *leaf = shadow::find(reinterpret_cast<void *>(region));
    if (!leaf) {
      g = stop;
      continue;
    }
    // Granule numbers within the region (below 2^26): [first, end).
    const uint64_t first = (g - region) >> gs;
    const uint64_t end = first + ((stop - g) >> gs);
    uint64_t w = first & ~uint64_t(7);
    while (w < end && !b.error) {
      // Gather candidates: the non-zero shadow bytes of the next words.
      uint32_t nc = 0;
      for (; w < end && nc <= kCandidates - 8; w += 8) {
        uint64_t x;
        memcpy(&x, leaf + w, 8);
        if (!x) continue;
        uint64_t nz = nonzero_bytes(x);
        if (w < first) nz &= ~uint64_t(0) << ((first - w) * 8);
        if (w + 8 > end) nz &= ~uint64_t(0) >> ((w + 8 - end) * 8);
        while (nz) {
          cand[nc++] = uint32_t(w + (uint64_t(__builtin_ctzll(nz)) >> 3));
          nz &= nz - 1;
        }
      }
      if (nc && b.first_candidate == UINT64_MAX) b.first_candidate = region + (uint64_t(cand[0]) << gs);
      // Confirm them against the heap, fetching ahead.
      for (uint32_t k = 0; k < nc; ++k) {
        if (k + kTouchAhead < nc) touch_page_ahead(region + (uint64_t(cand[k + kTouchAhead]) << gs), touched);
        if (k + kAhead < nc) __builtin_prefetch(reinterpret_cast<const void *>(region + (uint64_t(cand[k + kAhead]) << gs) - 8));
        uint64_t i = cand[k];
        uint64_t a = region + (i << gs);
        if (a < b.inside_end) continue;  // inside the previous block (a large block's size bytes, or stale)
        uint8_t v = leaf[i];
        // Check the block against its glibc chunk header (another allocator's own answer); a racing
        // thread may have left it torn. (Only glibc's blocks have a header word before them: other
        // allocators put blocks at the start of a mapping.)
        uint64_t usable = (!glibc || a >= m.start + 8) ? usable::of(reinterpret_cast<void *>(a)) : 0;
        uint64_t req = 0;
        bool ok = usable > 0 && usable < (uint64_t(1) << 46) && a + usable <= limit;
        if (HS_LIKELY(ok)) {
          req = shadow::requested_size(reinterpret_cast<void *>(a), v, usable::shadow_base(reinterpret_cast<void *>(a), usable));
          ok = req <= usable;
        }
        if (HS_UNLIKELY(!ok)) {
          ++b.skipped;
          continue;
        }
        if (HS_UNLIKELY(b.n == b.cap) && !reserve(b, uint64_t(b.cap) * 2 + 65536)) return;
        b.addr[b.n] = a;
        b.size[b.n] = req;
        uint64_t &word = b.sampled[b.n >> 6];
        if (!(b.n & 63)) word = 0;
        word |= uint64_t(v >> 7) << (b.n & 63);
        ++b.n;
        b.bytes += req;
        // Nothing else starts inside this block (a glibc chunk: up to the next 16 bytes after its
        // usable size plus its header word; other allocators' blocks end at their usable size).
        b.inside_end = glibc ? a + (((usable + 8 + 15) >> 4) << 4) : a + ((usable + granule - 1) & ~(granule - 1));
        // An mmapped chunk (IS_MMAPPED in its header) is all glibc's; any other block is in an
        // arena, and so is everything around it.
        const uint64_t head = glibc ? reinterpret_cast<const uint64_t *>(a)[-1] : 0;
        uint8_t what = head & 2 ? kHoldsBlocksOnly : kHoldsHeap;
        b.chunk[b.n - 1] = head & 2 || head >> 32 ? 0 : uint32_t(head & ~uint64_t(7));
        note_run(b, a, req);
        note_hold(c, b, mi, what);
        for (long j = mi + 1; j <= last && c.maps[j].start < a + usable; ++j) note_hold(c, b, j, what);
      }
    }
    g = stop;
  }
}

// Calls fn(mapping, lo, hi) for every range the blocks are looked for in, in address order.
template <typename Fn>
void for_each_range(const Child &c, Fn fn) {
  for (long i = 0; i < c.nmaps && !c.error; ++i)
    if (c.maps[i].readable && c.maps[i].writable && !is_ours(c.maps[i]))
      for_each_included(c.maps[i].start, c.maps[i].end, [&](uint64_t lo, uint64_t hi) { fn(i, lo, hi); });
}

// --- several threads ---------------------------------------------------------------------------

// A piece of address space: at most this many bytes (and at most kMaxPieces of them), cut on
// multiples of it, so that a granule is never split and a piece costs a claim and a merge against
// about a millisecond of enumeration on a full heap.
constexpr uint64_t kPieceBytes = uint64_t(8) << 20;
constexpr uint64_t kMaxPieces = uint64_t(1) << 16;

struct Piece {
  long mi;
  uint64_t lo, hi;
};

struct Enumeration {
  Child *c;
  Piece *pieces;
  Blocks *slots;
  uint32_t redone;  // pieces thread 0 enumerated again (HEAPSNAP_DEBUG)
  std::atomic<uint32_t> by_thread[2];  // pieces enumerated by thread 0 and by the others (HEAPSNAP_DEBUG)
};

bool make_slots(void *ctx, uint32_t n) {
  Enumeration &e = *static_cast<Enumeration *>(ctx);
  e.slots = arena_array<Blocks>(n);
  return e.slots != nullptr;
}

void enumerate_piece(void *ctx, uint32_t k, uint32_t slot, uint32_t thread) {
  Enumeration &e = *static_cast<Enumeration *>(ctx);
  e.by_thread[thread ? 1 : 0].fetch_add(1, std::memory_order_relaxed);
  Blocks &b = e.slots[slot];
  // (The slot's arrays are kept for its next piece; the rest starts afresh.)
  b.n = b.nruns = 0;
  b.run_end = b.inside_end = b.skipped = b.bytes = 0;
  b.first_candidate = UINT64_MAX;
  b.error = nullptr;
  if (b.runs_cap == UINT32_MAX) b.runs_cap = 0;
  const Piece &p = e.pieces[k];
  b.local = true;
  b.holds_over = false;
  b.holds_base = p.mi;
  memset(b.holds, 0, sizeof(b.holds));
  enumerate_into(*e.c, b, p.mi, p.lo, p.hi);
}

// Appends the n sampled bits of `from` (bit j: block j) to `to` after its first `at` bits.
void append_bits(uint64_t *to, uint32_t at, const uint64_t *from, uint32_t n) {
  const uint32_t last_word = (at + n - 1) >> 6;
  for (uint32_t j = 0; j < n; j += 64) {
    uint64_t w = from[j >> 6];
    if (n - j < 64) w &= (uint64_t(1) << (n - j)) - 1;
    const uint32_t pos = at + j;
    const unsigned shift = pos & 63;
    uint64_t &lo = to[pos >> 6];
    if (!shift) {
      lo = w;
      continue;
    }
    lo = (lo & ((uint64_t(1) << shift) - 1)) | (w << shift);
    if ((pos >> 6) + 1 <= last_word) to[(pos >> 6) + 1] = w >> (64 - shift);
  }
}

void append_piece(void *ctx, uint32_t k, uint32_t slot) {
  Enumeration &e = *static_cast<Enumeration *>(ctx);
  Child &c = *e.c;
  const Blocks &b = e.slots[slot];
  if (c.error) return;
  if (b.first_candidate < c.inside_end || b.holds_over) {
    // A block before the piece reaches into it: what one thread finds there depends on it. (Or
    // its blocks reach more mappings than the slot noted: see Blocks::local.)
    Blocks all = take(c);
    const Piece &p = e.pieces[k];
    enumerate_into(c, all, p.mi, p.lo, p.hi);
    give(c, all);
    ++e.redone;
    return;
  }
  if (b.error) {
    c.error = b.error;
    return;
  }
  for (long k = 0; k < Blocks::kLocalHolds; ++k)
    if (b.holds[k]) note_holds_shared(&c.holds[b.holds_base + k], b.holds[k]);
  if (!b.n) {
    c.skipped += b.skipped;
    return;
  }
  Blocks all = take(c);
  // (Doubling: growing to the exact size copied the whole list at every piece past the first
  // reservation, and the arena never frees.)
  const uint64_t need = uint64_t(all.n) + b.n;
  if (need > all.cap && !reserve(all, std::max<uint64_t>(need, 2 * uint64_t(all.cap) + 65536))) {
    give(c, all);
    return;
  }
  memcpy(all.addr + all.n, b.addr, size_t(b.n) * 8);
  memcpy(all.size + all.n, b.size, size_t(b.n) * 8);
  memcpy(all.chunk + all.n, b.chunk, size_t(b.n) * 4);
  append_bits(all.sampled, all.n, b.sampled, b.n);
  // The piece's runs, numbered from its first block; its first run continues the last one when
  // its first block's chunk follows that run's last chunk (as note_run would have found).
  uint32_t r = 0;
  if (b.runs_cap == UINT32_MAX) {  // (out of memory there: no runs at all, as on one thread)
    all.runs_cap = UINT32_MAX;
    all.runs = nullptr;
    all.nruns = 0;
  } else if (all.runs_cap != UINT32_MAX) {
    if (b.nruns && b.runs[0].first == 0 && all.run_end && all.run_end == b.addr[0] - 16) {
      all.runs[all.nruns - 1].count += b.runs[0].count;
      all.runs[all.nruns - 1].live += b.runs[0].live;
      r = 1;
    }
    if (reserve_runs(all, uint64_t(all.nruns) + (b.nruns - r)))
      for (; r < b.nruns; ++r) all.runs[all.nruns++] = {b.runs[r].first + all.n, b.runs[r].count, b.runs[r].live};
  }
  all.n += b.n;
  all.run_end = all.runs_cap == UINT32_MAX ? 0 : b.run_end;
  all.inside_end = b.inside_end;
  all.skipped += b.skipped;
  all.bytes += b.bytes;
  give(c, all);
}

// False when the pieces could not be made (then one thread does it all).
bool enumerate_parallel(Child &c, uint32_t nthreads) {
  uint64_t total = 0;
  for_each_range(c, [&](long, uint64_t lo, uint64_t hi) { total += hi - lo; });
  uint64_t piece = kPieceBytes;
  while (total / piece > kMaxPieces) piece *= 2;
  if (config.test_snapshot_piece_bytes) piece = config.test_snapshot_piece_bytes;
  uint64_t npieces = 0;
  auto cuts = [&](uint64_t lo, uint64_t hi, auto emit) {
    while (lo < hi) {
      uint64_t cut = (lo / piece + 1) * piece;
      if (cut > hi || cut < lo) cut = hi;
      emit(lo, cut);
      lo = cut;
    }
  };
  for_each_range(c, [&](long, uint64_t lo, uint64_t hi) { cuts(lo, hi, [&](uint64_t, uint64_t) { ++npieces; }); });
  if (npieces < 2 || npieces > UINT32_MAX / 2) return false;
  auto *e = static_cast<Enumeration *>(heap::alloc_zeroed(sizeof(Enumeration)));
  auto *o = static_cast<threads::Ordered *>(heap::alloc_zeroed(sizeof(threads::Ordered)));
  auto *pieces = static_cast<Piece *>(heap::alloc(size_t(npieces) * sizeof(Piece)));
  if (!e || !o || !pieces) return false;
  uint32_t n = 0;
  for_each_range(c, [&](long mi, uint64_t lo, uint64_t hi) {
    cuts(lo, hi, [&](uint64_t a, uint64_t z) { pieces[n++] = {mi, a, z}; });
  });
  new (o) threads::Ordered();
  e->c = &c;
  e->pieces = pieces;
  o->ctx = e;
  o->nchunks = n;
  o->produce = enumerate_piece;
  o->consume = append_piece;
  if (!threads::ordered(*o, nthreads, make_slots)) c.error = "out of memory (blocks)";
  if (config.debug) {
    char msg[128];
    int len = snprintf(msg, sizeof(msg),
                       "heapsnap: snapshot child, enumeration: %u pieces of %llu bytes (%u on thread 0), %u enumerated again\n", n,
                       (unsigned long long)piece, e->by_thread[0].load(std::memory_order_relaxed), e->redone);
    if (len > 0) (void)!write(2, msg, size_t(len) < sizeof(msg) ? size_t(len) : sizeof(msg) - 1);
  }
  return true;
}

}  // namespace

// Room for `want` blocks in c's block arrays: reserve's growth, on the Child's own list.
bool reserve_blocks(Child &c, uint64_t want) {
  Blocks b = take(c);
  const bool ok = reserve(b, want);
  give(c, b);
  return ok;
}

// (Declared in child_internal.h.)
void enumerate_blocks(Child &c, uint32_t nthreads) {
  // Other allocators answer usable sizes through their own malloc_usable_size, a call the scan
  // threads may not make (child_threads.h): one thread.
  if (nthreads > 1 && usable::g_glibc_layout && enumerate_parallel(c, nthreads)) return;
  Blocks all = take(c);
  for_each_range(c, [&](long mi, uint64_t lo, uint64_t hi) {
    if (!all.error) enumerate_into(c, all, mi, lo, hi);
  });
  give(c, all);
}

}  // namespace hs::snapshot::child
