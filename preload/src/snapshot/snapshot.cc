#include "snapshot/snapshot.h"

#include <elf.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#define ZSTD_STATIC_LINKING_ONLY  // ZSTD_createCCtx_advanced: the child allocates from its arena
#include <zstd.h>

#include <atomic>
#include <cstdio>
#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "tables/call_sites.h"
#include "core/config.h"
#include "tables/info_shadow.h"
#include "tables/pools.h"
#include "core/private_heap.h"
#include "core/proc_maps.h"
#include "tables/sampled_blocks.h"
#include "tables/shadow_map.h"
#include "core/spinlock.h"
#include "snapshot/thread_regs.h"
#include "core/thread_state.h"
#include "core/tracer.h"
#include "intercept/usable_size.h"
#include "output/wire_encoder.h"

namespace hs::snapshot {
namespace {

std::atomic<bool> g_signal_flag{false};
// heapsnap_snapshot()'s requests, oldest first: made by any thread of the program, served one a
// tick by the writer (a snapshot's child must end before the next starts). Requests made while
// kClientQueue wait are dropped and counted (their labels would otherwise be merged silently).
constexpr uint32_t kClientQueue = 16;
std::atomic<uint32_t> g_client_pending{0};
SpinLock g_client_lock;
constexpr size_t kClientLabelBytes = 256;  // a label's bytes kept, its terminating null included
char g_client_queue[kClientQueue][kClientLabelBytes];
uint32_t g_client_head = 0, g_client_count = 0;
std::atomic<uint64_t> g_client_dropped{0};
uint32_t g_taken = 0;            // snapshots started by this process
uint64_t g_last_periodic_ns = 0;
bool g_heap_fired = false, g_rss_fired = false;
// The running child, if any.
pid_t g_child = 0;
uint32_t g_child_index = 0;
uint64_t g_child_started_ns = 0;
int g_child_fd = -1;
char g_child_path[4400];
// The other threads' registers, captured before the clone (the child reads its copy).
regs::Result g_regs;
uint64_t g_program_pid = 0;

void on_signal(int) { g_signal_flag.store(true, std::memory_order_relaxed); }

// ---------------------------------------------------------------------------------------------
// The child. Everything below runs in the forked copy: only system calls, the child arena and
// memory the parent owned at fork time. It never returns.

constexpr size_t kChildArenaBytes = size_t(64) << 30;  // virtual; NORESERVE
constexpr uint32_t kBlocksPerRecord = 65536;
constexpr uint32_t kEdgesPerRecord = 1u << 18;  // about 1.5 MiB of columns: they stay in cache
// zstd level of the snapshot's frames. Level 1 compresses a 10-million-block snapshot about 45 ms
// (of one core) faster than level 3; the capture is 0-20% bigger, well under a byte per block.
constexpr int kZstdLevel = 1;

// The block index: the number of the block holding any address, in O(1), in the child's own
// memory (about 16 bytes per KiB of heap). Address space is cut into regions of 64 MiB and each
// region into groups of 64 granules (1 KiB): a group keeps a bit per granule where a block starts
// and the number of blocks that start before the group. The block holding v is then the last one
// starting at or before v: rank + popcount(bits up to v's granule) - 1, with one check of its end.
// Only the groups between a region's first and last block start are stored; a region no block
// starts in but a large block covers keeps just its rank.
constexpr unsigned kIndexRegionShift = 26;
constexpr unsigned kGroupShift = 10;
constexpr uint32_t kGroupsPerRegion = 1u << (kIndexRegionShift - kGroupShift);
constexpr size_t kIndexRegions = size_t(1) << (shadow::kAddressBits - kIndexRegionShift);
struct Group {
  uint64_t bits;      // granules where a block starts
  uint32_t rank;      // blocks starting before this group
  uint32_t irregular; // a start not on a granule, or two in one (client pools): search instead
};
struct IndexRegion {
  Group *groups;                  // groups [first, end) of the region
  uint32_t first, end;
  uint32_t rank_before, rank_after;  // blocks starting before the region, and before its end
};

struct Child {
  uint32_t index;
  int fd;
  uint64_t t0;
  uint64_t self_sp;        // stack pointer of the thread that forked (scan its stack from here)
  uint64_t main_tid;       // the program's pid (its main thread), not the child's
  uint64_t writer_lo, writer_hi;  // the writer thread's stack: tracer memory, not a root

  Mapping *maps = nullptr;
  long nmaps = 0;
  // Per mapping: what of the heap it holds (Holds). Blocks may run on into the mappings after
  // theirs: a brk heap the kernel split in two (in a forked child), or a block crossing them.
  uint8_t *holds = nullptr;
  uint64_t inside_end = 0;  // the end of the latest block found: no block starts before it

  // Blocks in address order; a bit per block for the sampled ones.
  uint64_t *addr = nullptr;
  uint64_t *size = nullptr;
  uint64_t *sampled = nullptr;
  uint32_t n = 0, cap = 0;
  IndexRegion *regions = nullptr;  // the block index: kIndexRegions entries (only touched pages cost)
  uint64_t lo = 0, hi = 0;  // [first block, end of the last): the pointer candidates
  uint64_t skipped = 0, bytes = 0;
  // Objects of client-API pools, merged into the block list: pool_obj[i] indexes `objs` for a
  // pool object, UINT32_MAX for a malloc block (pool_obj is null when there are no pools).
  struct PoolObj {
    uint64_t addr, size, id;
    uint32_t pool, stack, site, time_ms;
  };
  PoolObj *objs = nullptr;
  uint32_t nobjs = 0;
  uint32_t *pool_obj = nullptr;

  wire::Buf out;  // records not yet compressed
  ZSTD_CCtx *zstd = nullptr;
  wire::Buf frame;
  uint64_t edges = 0, interior = 0, root_edges = 0, roots = 0, root_bytes = 0;
  const char *error = nullptr;
};

// What a mapping holds, for the root scan: nothing of the heap (a root); only blocks whose extent
// is known, glibc's mmapped chunks and pool objects (the kernel merges a chunk with an adjacent
// anonymous mapping of the program's; a pool's arena may be a static array in the program's
// .bss): the rest of it is the program's memory, a root; or heap proper (an arena of glibc's, a
// malloc block that holds pool objects): not a root.
enum Holds : uint8_t { kHoldsNothing = 0, kHoldsBlocksOnly = 1, kHoldsHeap = 2 };

HS_INLINE void note_holds(Child &c, long mi, uint8_t what) {
  if (c.holds[mi] < what) c.holds[mi] = what;
}

// The mapping holding address a, or -1.
long mapping_of(const Child &c, uint64_t a) {
  const Mapping *m = std::upper_bound(c.maps, c.maps + c.nmaps, a, [](uint64_t v, const Mapping &x) { return v < x.start; });
  if (m == c.maps) return -1;
  --m;
  return a < m->end ? long(m - c.maps) : -1;
}

// The memory a malloc block of the snapshot takes in its mapping: its glibc chunk (header
// included) under glibc's layout, else the block itself.
HS_INLINE void block_extent(uint64_t a, uint64_t *lo, uint64_t *hi) {
  uint64_t usable = usable::of(reinterpret_cast<void *>(a));
  if (usable::g_glibc_layout) {
    uint64_t head = reinterpret_cast<const uint64_t *>(a)[-1];
    *lo = a - ((head & 2) ? 16 : 8);
  } else {
    *lo = a;
  }
  *hi = a + usable;
}

bool child_write(int fd, const void *p, size_t n) {
  const auto *c = static_cast<const uint8_t *>(p);
  while (n) {
    ssize_t w = write(fd, c, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    c += w;
    n -= size_t(w);
  }
  return true;
}

// Compresses the pending records into one frame once they are big enough (or when forced).
void flush_frame(Child &c, bool force) {
  if (c.out.size() == 0 || (!force && c.out.size() < (4u << 20))) return;
  size_t bound = ZSTD_compressBound(c.out.size());
  c.frame.clear();
  if (!c.frame.reserve(bound)) {
    c.error = "out of memory";
    return;
  }
  size_t z = ZSTD_compress2(c.zstd, c.frame.data(), bound, c.out.data(), c.out.size());
  if (ZSTD_isError(z) || !child_write(c.fd, c.frame.data(), z)) c.error = "cannot write";
  c.out.clear();
}

void *zalloc(void *, size_t n) { return heap::alloc(n); }
void zfree(void *, void *) {}

// Tracer memory that must be neither enumerated nor scanned: shadow leaves, live-table leaves,
// the child's arena and the writer thread's stack. (mimalloc's own pages hold no pointer to a
// program block: every address the tracer keeps is disguised, see common.h.)
struct Range {
  uint64_t lo, hi;
};
constexpr size_t kMaxExcluded = 3 * shadow::kTopEntries + 8;
Range *g_excluded = nullptr;
size_t g_nexcluded = 0;

void build_exclusions(const Child &c, uint64_t arena_lo, uint64_t arena_hi) {
  g_excluded = static_cast<Range *>(heap::alloc(kMaxExcluded * sizeof(Range)));
  if (!g_excluded) return;
  for (size_t t = 0; t < shadow::kTopEntries; ++t) {
    if (uint8_t *l = shadow::leaf(t))
      g_excluded[g_nexcluded++] = {uint64_t(l), uint64_t(l) + shadow::kLeafBytes};
    // (Their words never look like pointers, bit 63 set; left out so as not to read them at all.)
    for (const WordMap *m : {&info::words, &sampled_blocks::detail::g_words})
      if (uint64_t *l = m->leaf(t)) g_excluded[g_nexcluded++] = {uint64_t(l), uint64_t(l) + m->leaf_bytes()};
  }
  g_excluded[g_nexcluded++] = {arena_lo, arena_hi};
  if (c.writer_hi) g_excluded[g_nexcluded++] = {c.writer_lo, c.writer_hi};
}

// Calls fn(lo, hi) for the parts of [lo, hi) outside every excluded range.
template <typename F>
void for_each_included(uint64_t lo, uint64_t hi, F fn) {
  while (lo < hi) {
    uint64_t cut = hi, skip_to = lo;
    for (size_t i = 0; i < g_nexcluded; ++i) {
      const Range &r = g_excluded[i];
      if (r.hi <= lo || r.lo >= hi) continue;
      if (r.lo <= lo) {
        if (r.hi > skip_to) skip_to = r.hi;
      } else if (r.lo < cut) {
        cut = r.lo;
      }
    }
    if (skip_to > lo) {
      lo = skip_to;
      continue;
    }
    fn(lo, cut);
    lo = cut;
  }
}

// The shim's own data, and mimalloc's pages (the tracer's heap: nothing in it is a program root).
bool is_ours(const Mapping &m) {
  if (strstr(m.path, "libheapsnap_preload") || strstr(m.path, "libmimalloc")) return true;
  // mimalloc answers for addresses past a segment's first page.
  if (m.path[0] || m.end - m.start <= 4096) return false;
  return heap::owns(reinterpret_cast<void *>(m.start + 4096));
}

// Room for `want` blocks in the block arrays (grown by copying: the child's arena never frees).
bool reserve_blocks(Child &c, uint64_t want) {
  if (want <= c.cap) return true;
  if (want > UINT32_MAX - 1) want = UINT32_MAX - 1;
  if (want <= c.cap) {
    c.error = "too many blocks";
    return false;
  }
  auto *na = static_cast<uint64_t *>(heap::grow(c.addr, size_t(want) * 8));
  auto *ns = static_cast<uint64_t *>(heap::grow(c.size, size_t(want) * 8));
  auto *ni = static_cast<uint64_t *>(heap::grow(c.sampled, size_t(want + 63) / 64 * 8));
  if (!na || !ns || !ni) {
    c.error = "out of memory (blocks)";
    return false;
  }
  c.addr = na;
  c.size = ns;
  c.sampled = ni;
  c.cap = uint32_t(want);
  return true;
}

// 0x80 in each non-zero byte of x, 0 elsewhere.
HS_INLINE uint64_t nonzero_bytes(uint64_t x) {
  constexpr uint64_t k7f = 0x7f7f7f7f7f7f7f7full;
  return (((x & k7f) + k7f) | x) & ~k7f;
}

// Finds the blocks of one mapping from the byte shadow, in address order. The shadow gives
// candidate starts (its non-zero bytes, eight at a time) without reading the heap, so that the
// chunk headers that confirm them can be fetched ahead; following the chunk sizes from one block
// to the next instead would wait for memory at every block.
HS_NOINLINE void enumerate_range(Child &c, long mi, uint64_t lo, uint64_t hi) {
  const Mapping &m = c.maps[mi];
  // A block may end in a mapping that follows this one with no gap.
  long last = mi;
  uint64_t limit = m.end;
  while (last + 1 < c.nmaps && c.maps[last + 1].start == limit && c.maps[last + 1].readable && c.maps[last + 1].writable) {
    ++last;
    limit = c.maps[last].end;
  }
  uint64_t g = (lo + 15) & ~uint64_t(15);
  constexpr uint32_t kCandidates = 1024, kAhead = 16;  // 4 KiB of stack
  uint32_t cand[kCandidates];
  while (g < hi && !c.error) {
    uint64_t region = g & ~((uint64_t(1) << shadow::kRegionShift) - 1);
    uint64_t region_end = region + (uint64_t(1) << shadow::kRegionShift);
    uint64_t stop = hi < region_end ? hi : region_end;
    const uint8_t *leaf = shadow::find(reinterpret_cast<void *>(region));
    if (!leaf) {
      g = stop;
      continue;
    }
    // Granule numbers within the region (below 2^26): [first, end).
    const uint64_t first = (g - region) >> shadow::kGranuleShift;
    const uint64_t end = first + ((stop - g) >> shadow::kGranuleShift);
    uint64_t bytes = 0;
    uint64_t w = first & ~uint64_t(7);
    while (w < end && !c.error) {
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
      // Confirm them against the heap, fetching ahead.
      for (uint32_t k = 0; k < nc; ++k) {
        if (k + kAhead < nc) __builtin_prefetch(reinterpret_cast<const void *>(region + (uint64_t(cand[k + kAhead]) << 4) - 8));
        uint64_t i = cand[k];
        uint64_t a = region + (i << 4);
        if (a < c.inside_end) continue;  // inside the previous block (a large block's size bytes, or stale)
        uint8_t v = leaf[i];
        // Check the block against its glibc chunk header; a racing thread may have left it torn.
        uint64_t usable = (a >= m.start + 8) ? usable::of(reinterpret_cast<void *>(a)) : 0;
        uint64_t req = 0;
        bool ok = usable > 0 && usable < (uint64_t(1) << 46) && a + usable <= limit;
        if (HS_LIKELY(ok)) {
          req = shadow::requested_size(reinterpret_cast<void *>(a), v, usable::shadow_base(reinterpret_cast<void *>(a), usable));
          ok = req <= usable;
        }
        if (HS_UNLIKELY(!ok)) {
          ++c.skipped;
          continue;
        }
        if (HS_UNLIKELY(c.n == c.cap) && !reserve_blocks(c, uint64_t(c.cap) * 2 + 65536)) return;
        c.addr[c.n] = a;
        c.size[c.n] = req;
        uint64_t &word = c.sampled[c.n >> 6];
        if (!(c.n & 63)) word = 0;
        word |= uint64_t(v >> 7) << (c.n & 63);
        ++c.n;
        bytes += req;
        // Nothing else starts inside this block.
        c.inside_end = a + (((usable + 8 + 15) >> 4) << 4);
        // An mmapped chunk (IS_MMAPPED in its header) is all glibc's; any other block is in an
        // arena, and so is everything around it.
        uint8_t what = usable::g_glibc_layout && (reinterpret_cast<const uint64_t *>(a)[-1] & 2) ? kHoldsBlocksOnly : kHoldsHeap;
        note_holds(c, mi, what);
        for (long j = mi + 1; j <= last && c.maps[j].start < a + usable; ++j) note_holds(c, j, what);
      }
    }
    c.bytes += bytes;
    g = stop;
  }
}

// Adds the pools' objects to the (address-ordered) block list. A malloc block that holds pool
// objects is the pool's arena: it is dropped, its objects stand for it (otherwise it would seem
// to point to everything its objects point to).
void merge_pool_objects(Child &c) {
  uint64_t total = 0;
  for (uint32_t i = 0; pools::Pool *p = pools::pool_at(i); ++i) total += p->used;
  if (total == 0) return;
  c.pool_obj = static_cast<uint32_t *>(heap::alloc((size_t(c.n) + total + 1) * 4));
  if (!c.pool_obj) {
    c.error = "out of memory (pools)";
    return;
  }
  c.objs = static_cast<Child::PoolObj *>(heap::alloc(size_t(total) * sizeof(Child::PoolObj)));
  if (!c.objs) {
    c.error = "out of memory (pools)";
    return;
  }
  for (uint32_t i = 0; pools::Pool *p = pools::pool_at(i); ++i)
    for (uint64_t k = 0; p->slots && k <= p->mask && c.nobjs < total; ++k) {
      const pools::Object &o = p->slots[k];
      if (!o.addr_d) continue;
      c.objs[c.nobjs++] = {reveal(o.addr_d), o.size, o.id, p->id, o.stack, o.site, o.time_ms};
    }
  std::sort(c.objs, c.objs + c.nobjs, [](const Child::PoolObj &a, const Child::PoolObj &b) { return a.addr < b.addr; });
  uint32_t n = c.n + c.nobjs;
  auto *addr = static_cast<uint64_t *>(heap::alloc(size_t(n) * 8));
  auto *size = static_cast<uint64_t *>(heap::alloc(size_t(n) * 8));
  auto *sampled = static_cast<uint64_t *>(heap::alloc_zeroed(size_t(n + 63) / 64 * 8));
  if (!addr || !size || !sampled) {
    c.error = "out of memory (pools)";
    return;
  }
  uint32_t i = 0, j = 0, out = 0;
  while (i < c.n || j < c.nobjs) {
    bool take_obj = i == c.n || (j < c.nobjs && c.objs[j].addr < c.addr[i]);
    if (take_obj) {
      addr[out] = c.objs[j].addr;
      size[out] = c.objs[j].size;
      c.pool_obj[out++] = j++;
      continue;
    }
    // An arena: a malloc block with a pool object inside it.
    uint64_t end = c.addr[i] + c.size[i];
    auto *first = std::lower_bound(c.objs, c.objs + c.nobjs, c.addr[i],
                                   [](const Child::PoolObj &o, uint64_t v) { return o.addr < v; });
    if (first != c.objs + c.nobjs && first->addr < end) {
      // Its free room is the pool's, not a root: its mappings are heap.
      for (long m = mapping_of(c, c.addr[i]); m >= 0 && m < c.nmaps && c.maps[m].start < end; ++m) note_holds(c, m, kHoldsHeap);
      c.bytes -= c.size[i];
      ++i;
      continue;
    }
    addr[out] = c.addr[i];
    size[out] = c.size[i];
    sampled[out >> 6] |= (c.sampled[i >> 6] >> (i & 63) & 1) << (out & 63);
    c.pool_obj[out++] = UINT32_MAX;
    ++i;
  }
  for (uint32_t k = 0; k < c.nobjs; ++k) c.bytes += c.objs[k].size;
  c.addr = addr;
  c.size = size;
  c.sampled = sampled;
  c.n = out;
}

uint64_t module_image_end(const Mapping &m);

// The module whose data mapping i holds: one of its own (file-backed) mappings, or an anonymous
// mapping that follows them with no gap (its .bss), as far as the module's program headers reach
// when they can be read: *data_end is where that ends in the mapping (the kernel merges what
// ld.so maps next, the main thread's static TLS, into the same mapping). nullptr for any other
// mapping. Shared by the root scan (names, the shim's own .bss) and the pool rule below.
const char *module_of(const Child &c, long i, uint64_t *data_end) {
  const Mapping &m = c.maps[i];
  *data_end = m.end;
  if (m.path[0] == '/') return m.path;
  if (m.path[0]) return nullptr;
  long j = i;  // back over the anonymous mappings before it with no gap, to the module's last one
  while (j > 0 && c.maps[j - 1].end == c.maps[j].start && !c.maps[j - 1].path[0]) --j;
  if (j == 0 || c.maps[j - 1].end != c.maps[j].start || c.maps[j - 1].path[0] != '/') return nullptr;
  const char *path = c.maps[j - 1].path;
  long first = j - 1;
  while (first > 0 && c.maps[first - 1].end == c.maps[first].start && strcmp(c.maps[first - 1].path, path) == 0) --first;
  uint64_t end = module_image_end(c.maps[first]);
  if (end && end <= m.start) return nullptr;
  if (end && end < m.end) *data_end = end;
  return path;
}

// Mappings holding pool objects: a pool's arena (a GC heap the runtime mapped, whose free room
// and bookkeeping are no roots) is heap; but an arena that is a static array lies in a module's
// data, where the program's other globals must stay roots: there only the objects are left out
// (the arena's free room is scanned with the globals; the pool API does not say where its arena
// is). enumerate_range and merge_pool_objects marked the malloc blocks' mappings.
void mark_heap_mappings(Child &c) {
  if (!c.pool_obj) return;
  for (long m = 0; m < c.nmaps; ++m) {
    const uint64_t *p = std::lower_bound(c.addr, c.addr + c.n, c.maps[m].start);
    for (; p != c.addr + c.n && *p < c.maps[m].end; ++p)
      if (c.pool_obj[p - c.addr] != UINT32_MAX) {
        uint64_t data_end;
        note_holds(c, m, module_of(c, m, &data_end) ? kHoldsBlocksOnly : kHoldsHeap);
        break;
      }
  }
}

// Calls fn(lo, hi) for the parts of [lo, hi) that no block's extent covers.
template <typename Fn>
void for_each_outside_blocks(const Child &c, uint64_t lo, uint64_t hi, Fn fn) {
  const uint64_t *p = std::lower_bound(c.addr, c.addr + c.n, lo);
  if (p != c.addr) --p;  // a block starting before lo may reach into it
  uint64_t at = lo;
  for (; p != c.addr + c.n && at < hi; ++p) {
    uint64_t b_lo = *p, b_hi = *p + c.size[p - c.addr];  // a pool object: no chunk header
    if (!c.pool_obj || c.pool_obj[p - c.addr] == UINT32_MAX) block_extent(*p, &b_lo, &b_hi);
    if (b_lo >= hi) break;
    if (b_hi <= at) continue;
    if (b_lo > at) fn(at, b_lo);
    at = b_hi;
  }
  if (at < hi) fn(at, hi);
}

// The scans that look pointers up are built twice, for baseline x86-64 and with the popcnt
// instruction, and the loader picks one (GCC function multiversioning).
#if defined(__x86_64__) && !defined(__POPCNT__)
#define HS_POPCNT_CLONES __attribute__((target_clones("popcnt", "default")))
#else
#define HS_POPCNT_CLONES
#endif
HS_INLINE uint32_t popcount64(uint64_t x) { return uint32_t(__builtin_popcountll(x)); }

// Builds the block index (see IndexRegion) from the address-ordered block list.
void build_index(Child &c) {
  c.regions = static_cast<IndexRegion *>(heap::alloc_zeroed(kIndexRegions * sizeof(IndexRegion)));
  if (!c.regions) {
    c.error = "out of memory (index)";
    return;
  }
  // Blocks past the 47-bit address space (only a client pool could claim one) are never targets.
  uint32_t n = uint32_t(std::lower_bound(c.addr, c.addr + c.n, uint64_t(1) << shadow::kAddressBits) - c.addr);
  if (c.hi > (uint64_t(1) << shadow::kAddressBits)) c.hi = uint64_t(1) << shadow::kAddressBits;
  IndexRegion *cur = nullptr;
  uint64_t cur_r = 0;
  Group *g = nullptr;  // the group of the latest block start
  uint32_t gi = 0;     // its number in the region
  for (uint32_t b = 0; b < n; ++b) {
    uint64_t a = c.addr[b];
    uint64_t r = a >> kIndexRegionShift;
    uint32_t want = uint32_t(a >> kGroupShift) & (kGroupsPerRegion - 1);
    if (!cur || r != cur_r) {
      if (cur) {
        cur->rank_after = b;
        // Regions after it that the previous block covers (a large block): rank only.
        uint64_t prev_end = c.addr[b - 1] + c.size[b - 1];
        for (uint64_t q = cur_r + 1; q < r && q < kIndexRegions && (q << kIndexRegionShift) < prev_end; ++q)
          c.regions[q].rank_before = c.regions[q].rank_after = b;
      }
      cur = &c.regions[r];
      cur_r = r;
      cur->groups = static_cast<Group *>(heap::alloc(size_t(kGroupsPerRegion - want) * sizeof(Group)));
      if (!cur->groups) {
        c.error = "out of memory (index)";
        return;
      }
      cur->first = want;
      cur->end = want + 1;
      cur->rank_before = b;
      g = cur->groups;
      gi = want;
      *g = {0, b, 0};
    }
    while (gi < want) {  // groups between two block starts: none starts there
      ++gi;
      *++g = {0, b, 0};
    }
    cur->end = gi + 1;
    uint64_t bit = uint64_t(1) << ((a >> shadow::kGranuleShift) & 63);
    if ((a & 15) || (g->bits & bit)) g->irregular = 1;
    g->bits |= bit;
  }
  if (cur) {
    cur->rank_after = n;
    uint64_t last_end = c.addr[n - 1] + c.size[n - 1];
    for (uint64_t q = cur_r + 1; q < kIndexRegions && (q << kIndexRegionShift) < last_end; ++q)
      c.regions[q].rank_before = c.regions[q].rank_after = n;
  }
}

// The last block starting at or before v, by binary search (irregular groups only).
HS_NOINLINE uint32_t search_block(const Child &c, uint64_t v) {
  uint32_t l = 0, r = c.n;
  while (l < r) {
    uint32_t mid = (l + r) / 2;
    if (c.addr[mid] <= v) l = mid + 1;
    else r = mid;
  }
  return l;  // number of blocks starting at or before v
}

// Block number for an address that points into a block, or UINT32_MAX.
HS_INLINE uint32_t lookup(const Child &c, uint64_t v, bool *interior) {
  if (v - c.lo >= c.hi - c.lo) return UINT32_MAX;
  const IndexRegion &r = c.regions[v >> kIndexRegionShift];
  uint32_t gi = uint32_t(v >> kGroupShift) & (kGroupsPerRegion - 1);
  uint32_t rank;
  if (gi < r.first) {
    rank = r.rank_before;
  } else if (gi >= r.end) {
    rank = r.rank_after;
  } else {
    const Group &g = r.groups[gi - r.first];
    if (HS_UNLIKELY(g.irregular)) {
      rank = search_block(c, v);
    } else {
      unsigned bit = unsigned(v >> shadow::kGranuleShift) & 63;
      uint64_t upto = g.bits & (~uint64_t(0) >> (63 - bit));
      rank = g.rank + popcount64(upto);
      if ((v & 15) == 0 && (g.bits >> bit & 1)) {  // a block's first byte
        *interior = false;
        return rank - 1;
      }
    }
  }
  if (rank == 0) return UINT32_MAX;
  uint32_t b = rank - 1;
  uint64_t end = c.addr[b] + (c.size[b] ? c.size[b] : 1);
  if (v >= end) return UINT32_MAX;
  *interior = v != c.addr[b];
  return b;
}

// Block records, kBlocksPerRecord blocks each: every column in one pass over the blocks.
void write_blocks(Child &c) {
  wire::Buf col[6];  // addresses, sizes, sites, stacks, sample ids, times
  wire::Buf pools;
  for (uint32_t first = 0; first < c.n && !c.error; first += kBlocksPerRecord) {
    uint32_t last = first + kBlocksPerRecord < c.n ? first + kBlocksPerRecord : c.n;
    for (wire::Buf &b : col) {
      b.clear();
      if (!b.reserve(size_t(last - first) * 10)) c.error = "out of memory (blocks)";
    }
    if (c.error) return;
    pools.clear();
    uint8_t *p[6];
    for (int k = 0; k < 6; ++k) p[k] = col[k].data();
    uint64_t prev = 0, prev_site = 0;
    uint32_t site_index = 0;
    uint64_t site_address = 0;  // of site_index (most blocks in a row share their call site)
    for (uint32_t i = first; i < last; ++i) {
      uint64_t a = c.addr[i];
      if (i + 16 < last) __builtin_prefetch(info::slot(reinterpret_cast<void *>(c.addr[i + 16]), false));
      p[0] = wire::put_varint(p[0], wire::zigzag(int64_t(a - prev)));
      prev = a;
      p[1] = wire::put_varint(p[1], c.size[i]);
      uint64_t site, stack = 0, id = 0, time_ms;
      if (HS_UNLIKELY(c.pool_obj != nullptr) && c.pool_obj[i] != UINT32_MAX) {
        const Child::PoolObj &o = c.objs[c.pool_obj[i]];
        site = call_sites::address(o.site);
        stack = o.stack;
        id = o.id;
        time_ms = o.time_ms;
      } else {
        // Call site and time from the live-block table, sample identity from the sampled set.
        const uint64_t *slot = info::slot(reinterpret_cast<void *>(a), false);
        uint64_t e = slot ? *slot : 0;
        if (info::site_of(e) != site_index) {
          site_index = info::site_of(e);
          site_address = call_sites::address(site_index);
        }
        site = site_address;
        time_ms = info::time_ms_of(e);
        if (HS_UNLIKELY(c.sampled[i >> 6] >> (i & 63) & 1)) {
          sampled_blocks::Name name{0, 0};
          sampled_blocks::peek(reinterpret_cast<void *>(a), &name);
          stack = name.stack;
          id = name.id;
        }
      }
      p[2] = wire::put_varint(p[2], wire::zigzag(int64_t(site - prev_site)));
      prev_site = site;
      p[3] = wire::put_varint(p[3], stack);
      p[4] = wire::put_varint(p[4], id);
      p[5] = wire::put_varint(p[5], time_ms);
      if (HS_UNLIKELY(c.nobjs)) pools.varint(c.pool_obj[i] != UINT32_MAX ? c.objs[c.pool_obj[i]].pool : 0);
    }
    wire::RecordMark m = wire::begin_record(c.out, wire::kSnapshotBlocks);
    c.out.u64(1, c.index);
    for (int k = 0; k < 6; ++k) {
      size_t len = size_t(p[k] - col[k].data());
      c.out.len(uint32_t(2 + k), col[k].data(), len);
    }
    if (c.nobjs) c.out.len(8, pools.data(), pools.size());
    c.out.u64(9, first);
    wire::end_record(c.out, m);
    flush_frame(c, false);
  }
}

// --snapshot-contents: the blocks' bytes, in records of about 4 MiB.
void write_contents(Child &c) {
  uint32_t first = 0;
  while (first < c.n && !c.error) {
    uint32_t last = first;
    uint64_t bytes = 0;
    while (last < c.n && (last == first || bytes + c.size[last] <= (4u << 20))) bytes += c.size[last++];
    wire::RecordMark m = wire::begin_record(c.out, wire::kSnapshotContents);
    c.out.u64(1, c.index);
    c.out.u64(2, first);
    c.out.tag(3, wire::kLen);
    c.out.varint(bytes);
    for (uint32_t i = first; i < last; ++i) c.out.bytes(reinterpret_cast<const void *>(c.addr[i]), c.size[i]);
    wire::end_record(c.out, m);
    flush_frame(c, false);
    first = last;
  }
}

struct EdgeRecord {
  wire::Buf from, count, to, interior, offset;
  uint32_t base = 0, prev_source = 0, edges = 0, prev_interior = 0;
  bool open = false;
};

void edge_record_flush(Child &c, EdgeRecord &e) {
  if (!e.open) return;
  wire::RecordMark m = wire::begin_record(c.out, wire::kSnapshotEdges);
  c.out.u64(1, c.index);
  c.out.len(2, e.from.data(), e.from.size());
  c.out.len(3, e.count.data(), e.count.size());
  c.out.len(4, e.to.data(), e.to.size());
  if (e.interior.size()) c.out.len(5, e.interior.data(), e.interior.size());
  c.out.len(6, e.offset.data(), e.offset.size());
  c.out.u64(7, e.base);
  wire::end_record(c.out, m);
  e.from.clear();
  e.count.clear();
  e.to.clear();
  e.interior.clear();
  e.offset.clear();
  e.open = false;
  e.edges = 0;
  flush_frame(c, false);
}

// Appends block i's edges to the open edge record.
// A block's edges go straight into the record's columns as the scan finds them; its source and
// count follow once the block is done (they are columns of their own). A record is only cut
// between blocks: the reader wants each block's edges in one group, sources increasing.
HS_INLINE void edge_add(Child &c, EdgeRecord &e, uint32_t i, uint32_t target, uint64_t offset, bool interior) {
  if (!e.open) {
    e.open = true;
    e.base = i;
    e.prev_source = i;
    e.prev_interior = 0;
  }
  e.to.varint(wire::zigzag(int64_t(target) - int64_t(i)));
  e.offset.varint(offset);
  if (interior) {
    e.interior.varint(e.edges - e.prev_interior);
    e.prev_interior = e.edges;
    ++c.interior;
  }
  ++e.edges;
}

HS_INLINE void edge_end_block(Child &c, EdgeRecord &e, uint32_t i, uint32_t k) {
  e.from.varint(i - e.prev_source);
  e.prev_source = i;
  e.count.varint(k);
  c.edges += k;
  if (e.edges >= kEdgesPerRecord) edge_record_flush(c, e);
}

HS_POPCNT_CLONES void scan_blocks(Child &c) {
  EdgeRecord e;
  // Every pointer run of a block is an edge (a 60,000-entry pointer array has 60,000): a cap of
  // 4096 made the rest of a big array's targets look lost. This one only keeps one block's group
  // well inside a record the reader takes (16 Mi edges, about 100 MB of columns).
  constexpr uint32_t kMaxEdgesPerBlock = 1u << 24;
  const uint64_t lo = c.lo, span = c.hi - c.lo;
  for (uint32_t i = 0; i < c.n && !c.error; ++i) {
    uint64_t a = c.addr[i];
    uint64_t words = c.size[i] / 8;
    uint32_t k = 0, last = UINT32_MAX;
    const uint64_t *w = reinterpret_cast<const uint64_t *>(a);
    for (uint64_t j = 0; j < words; ++j) {
      uint64_t v = w[j];
      if (v - lo >= span) continue;
      bool interior = false;
      uint32_t t = lookup(c, v, &interior);
      if (t == UINT32_MAX || t == last) continue;  // the same block twice in a row: one edge
      last = t;
      edge_add(c, e, i, t, j * 8 > 0xffffffffu ? 0xffffffffu : j * 8, interior);
      if (++k == kMaxEdgesPerBlock) break;
    }
    if (k) edge_end_block(c, e, i, k);
  }
  edge_record_flush(c, e);
  if (e.from.failed() || e.to.failed()) c.error = "out of memory (edges)";
}

HS_POPCNT_CLONES void scan_root(Child &c, int kind, uint64_t detail, uint64_t start, uint64_t end, const char *name,
                                bool always = false) {
  start = (start + 7) & ~uint64_t(7);
  if (end <= start) return;
  wire::Buf targets, offs, inter;
  uint64_t prev_t = 0, prev_off = 0, count = 0, prev_inter = 0;
  // Pages never touched (most of an 8 MiB thread stack) hold only zeros: mincore() tells which
  // are resident, so the scan reads only those (and does not fault the rest in).
  constexpr uint64_t kPage = 4096, kChunk = 256;
  unsigned char resident[kChunk];
  uint64_t chunk_lo = 0, chunk_hi = 0;
  bool have_mincore = true;
  for (uint64_t p = start; p + 8 <= end; p += 8) {
    if (have_mincore && (p < chunk_lo || p >= chunk_hi)) {
      chunk_lo = p & ~(kPage - 1);
      chunk_hi = chunk_lo + kChunk * kPage;
      if (chunk_hi > ((end + kPage - 1) & ~(kPage - 1))) chunk_hi = (end + kPage - 1) & ~(kPage - 1);
      if (mincore(reinterpret_cast<void *>(chunk_lo), chunk_hi - chunk_lo, resident) != 0) have_mincore = false;
    }
    if (have_mincore && !(resident[(p - chunk_lo) / kPage] & 1)) {
      p = ((p / kPage) + 1) * kPage - 8;  // next page
      continue;
    }
    uint64_t v = *reinterpret_cast<const uint64_t *>(p);
    if (v < c.lo || v >= c.hi) continue;
    bool interior = false;
    uint32_t t = lookup(c, v, &interior);
    if (t == UINT32_MAX) continue;
    targets.varint(wire::zigzag(int64_t(t) - int64_t(prev_t)));
    prev_t = t;
    offs.varint(p - start - prev_off);
    prev_off = p - start;
    if (interior) {
      inter.varint(count - prev_inter);
      prev_inter = count;
    }
    ++count;
  }
  ++c.roots;
  c.root_bytes += end - start;
  c.root_edges += count;
  if (!count && !always) return;
  wire::RecordMark m = wire::begin_record(c.out, wire::kSnapshotRoots);
  c.out.u64(1, c.index);
  c.out.u64(2, uint64_t(kind));
  c.out.u64(3, detail);
  c.out.u64(4, start);
  c.out.u64(5, end - start);
  c.out.len(6, targets.data(), targets.size());
  c.out.len(7, offs.data(), offs.size());
  if (inter.size()) c.out.len(8, inter.data(), inter.size());
  c.out.str(9, name);
  wire::end_record(c.out, m);
  flush_frame(c, false);
}

// A register root that holds nothing to scan: a thread whose registers were not captured, and why.
void write_missing_registers(Child &c, uint32_t tid, const char *name) {
  wire::RecordMark m = wire::begin_record(c.out, wire::kSnapshotRoots);
  c.out.u64(1, c.index);
  c.out.u64(2, uint64_t(2));
  c.out.u64(3, tid);
  c.out.str(9, name);
  wire::end_record(c.out, m);
}

// The registers of the program's other threads (thread_regs.h): a root of their own kind per
// thread ("registers of thread T"), from the copy the parent made before the clone.
void scan_registers(Child &c, const regs::Result &r) {
  for (uint32_t i = 0; i < r.n && !c.error; ++i) {
    const regs::ThreadRegs &t = r.threads[i];
    char name[160];
    if (t.how == regs::kSignal) {
      snprintf(name, sizeof(name), "of thread %u%s", t.tid,
               t.interrupted == 2   ? " (its signal interrupted a system call, which it then continued)"
               : t.interrupted == 1 ? " (its signal may have interrupted a system call: EINTR)"
                                    : "");
      uint64_t lo = reinterpret_cast<uint64_t>(t.words);
      scan_root(c, 2, t.tid, lo, lo + t.nwords * 8, name, true);
    } else if (t.how == regs::kSyscall) {
      const char *sys = regs::syscall_name(t.syscall_nr);
      char nr[24];
      if (!sys) snprintf(nr, sizeof(nr), "%d", int(t.syscall_nr));
      snprintf(name, sizeof(name), "of thread %u (blocked in %s%s: stack pointer and pc only)", t.tid,
               t.syscall_nr < 0 ? "the kernel, not in a system call" : sys ? sys : "system call ",
               t.syscall_nr < 0 || sys ? "" : nr);
      uint64_t lo = reinterpret_cast<uint64_t>(t.words);
      scan_root(c, 2, t.tid, lo, lo + t.nwords * 8, name, true);
    } else {
      snprintf(name, sizeof(name), "of thread %u not captured: %s", t.tid, t.why ? t.why : "unknown");
      write_missing_registers(c, t.tid, name);
    }
  }
  flush_frame(c, false);
}

// The stack pointer of thread `tid` when the handshake learnt it, else 0.
uint64_t known_sp(const regs::Result &r, uint32_t tid) {
  for (uint32_t i = 0; i < r.n; ++i)
    if (r.threads[i].tid == tid) return r.threads[i].sp;
  return 0;
}

// The thread whose known stack pointer lies in [lo, hi), else 0.
uint32_t thread_with_sp_in(const regs::Result &r, uint64_t lo, uint64_t hi, uint64_t *sp) {
  for (uint32_t i = 0; i < r.n; ++i)
    if (r.threads[i].sp >= lo && r.threads[i].sp < hi) {
      *sp = r.threads[i].sp;
      return r.threads[i].tid;
    }
  return 0;
}

// Below a thread's stack pointer: the 128-byte red zone (live), then dead words and, for a thread
// parked by the register signal, its signal frame (the registers, a root of their own kind).
constexpr uint64_t kRedZone = 128;

// The end of the memory a module's program headers ask for (its .bss ends there), read from the
// ELF header at the start of its first mapping (m: that mapping, offset 0); 0 if unreadable.
uint64_t module_image_end(const Mapping &m) {
  if (m.offset != 0 || !m.readable || m.end - m.start < sizeof(Elf64_Ehdr)) return 0;
  const auto *eh = reinterpret_cast<const Elf64_Ehdr *>(m.start);
  if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
      eh->e_phentsize != sizeof(Elf64_Phdr) || eh->e_phoff + uint64_t(eh->e_phnum) * sizeof(Elf64_Phdr) > m.end - m.start)
    return 0;
  const auto *ph = reinterpret_cast<const Elf64_Phdr *>(m.start + eh->e_phoff);
  uint64_t lo = UINT64_MAX, hi = 0;
  for (unsigned i = 0; i < eh->e_phnum; ++i) {
    if (ph[i].p_type != PT_LOAD) continue;
    if (ph[i].p_vaddr < lo) lo = ph[i].p_vaddr;
    if (ph[i].p_vaddr + ph[i].p_memsz > hi) hi = ph[i].p_vaddr + ph[i].p_memsz;
  }
  if (lo == UINT64_MAX) return 0;
  // The first mapping holds the lowest segment's page: the load bias follows.
  return m.start - (lo & ~uint64_t(4095)) + hi;
}

void scan_roots(Child &c, const regs::Result &rr) {
  ThreadStackRange stacks[1024];
  size_t nstacks = thread_stacks(stacks, 1024);
  for (long i = 0; i < c.nmaps && !c.error; ++i) {
    const Mapping &m = c.maps[i];
    if (!m.readable || !m.writable || c.holds[i] == kHoldsHeap || is_ours(m)) continue;
    bool module_path = m.path[0] == '/';
    uint64_t module_end;
    const char *module = module_of(c, i, &module_end);
    uint64_t from = m.start;
    if (module && strstr(module, "libheapsnap_preload")) {
      if (module_path || module_end >= m.end) continue;  // the shim's .bss
      module = nullptr;  // past it, what ld.so mapped next (the main thread's static TLS)
      from = module_end;
    }
    if (m.path[0] == '[' && strcmp(m.path, "[stack]") != 0 && strcmp(m.path, "[heap]") != 0) continue;  // vvar, vdso
    if (strcmp(m.path, "[heap]") == 0) continue;  // the main arena: blocks, not roots
    uint64_t start = from, end = m.end;
    if (c.self_sp > start && c.self_sp < end) start = c.self_sp;  // the forking thread: live part only
    if (strcmp(m.path, "[stack]") == 0) {
      uint64_t sp = known_sp(rr, uint32_t(c.main_tid));
      if (sp > start + kRedZone && sp < end) start = sp - kRedZone;
      scan_root(c, 1, c.main_tid, start, end, "[stack] main thread");
      continue;
    }
    uint32_t tid = 0;
    for (size_t s = 0; s < nstacks; ++s)
      if (stacks[s].lo < m.end && stacks[s].hi > m.start) tid = stacks[s].tid;
    // Another thread's stack: from its stack pointer when the handshake learnt it (a thread the
    // registry does not know is found by its stack pointer too).
    uint64_t sp = tid ? known_sp(rr, tid) : 0;
    if (!tid && !module && !m.path[0]) tid = thread_with_sp_in(rr, m.start, m.end, &sp);
    if (sp > start + kRedZone && sp < end) start = sp - kRedZone;
    auto scan = [&](uint64_t lo, uint64_t hi) {
      if (tid) {
        scan_root(c, 1, tid, lo, hi, "thread stack");
      } else if (module) {
        if (lo < module_end) scan_root(c, 0, 0, lo, hi < module_end ? hi : module_end, module);
        if (hi > module_end) scan_root(c, 4, 0, lo > module_end ? lo : module_end, hi, "anonymous");
      } else {
        scan_root(c, 4, 0, lo, hi, m.path[0] ? m.path : "anonymous");
      }
    };
    // A mapping the kernel merged with glibc's mmapped chunks, or holding pool objects: the rest
    // of it is the program's.
    if (c.holds[i] == kHoldsBlocksOnly)
      for_each_included(start, end, [&](uint64_t lo, uint64_t hi) { for_each_outside_blocks(c, lo, hi, scan); });
    else
      for_each_included(start, end, scan);
  }
}

// HEAPSNAP_DEBUG=1: the child's phases on stderr, wall and CPU milliseconds (a profile that a
// loaded machine does not blur as much as wall time alone).
struct Phases {
  const char *name[16];
  uint64_t wall[16], cpu[16];
  int n = 0;
  static uint64_t cpu_ns() {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
  }
  void mark(const char *what) {
    if (!config.debug || n == 16) return;
    name[n] = what;
    wall[n] = mono_ns();
    cpu[n++] = cpu_ns();
  }
  void print(uint64_t t0) const {
    char msg[1024];
    size_t len = size_t(snprintf(msg, sizeof(msg), "heapsnap: snapshot child, ms wall/cpu:"));
    for (int i = 0; i < n && len < sizeof(msg); ++i) {
      uint64_t w = wall[i] - (i ? wall[i - 1] : t0), c = i ? cpu[i] - cpu[i - 1] : 0;
      len += size_t(snprintf(msg + len, sizeof(msg) - len, " %s %lu.%lu/%lu.%lu", name[i], (unsigned long)(w / 1000000),
                             (unsigned long)(w / 100000 % 10), (unsigned long)(c / 1000000), (unsigned long)(c / 100000 % 10)));
    }
    if (len < sizeof(msg)) len += size_t(snprintf(msg + len, sizeof(msg) - len, "\n"));
    if (len > sizeof(msg)) len = sizeof(msg);
    (void)!write(2, msg, len);
  }
};

[[noreturn]] void child_exit(int code) {
  syscall(SYS_exit_group, code);
  __builtin_unreachable();
}

void on_child_fault(int sig) {
  static const char msg[] = "heapsnap: snapshot child crashed\n";
  (void)!write(2, msg, sizeof(msg) - 1);
  child_exit(100 + sig);
}

// Not inlined into start(): its frame would sit between the forking thread's stack pointer and
// the program's frames, and a conservative scan of stale words there finds false roots.
[[noreturn]] HS_NOINLINE void run_child(uint32_t index, int fd, uint64_t sp, uint64_t wlo, uint64_t whi, uint64_t live_blocks) {
  // The program's signal handlers are not ours to run here.
  sigset_t all;
  sigfillset(&all);
  sigdelset(&all, SIGSEGV);
  sigdelset(&all, SIGBUS);
  sigprocmask(SIG_SETMASK, &all, nullptr);
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = on_child_fault;
  sigaction(SIGSEGV, &sa, nullptr);
  sigaction(SIGBUS, &sa, nullptr);
  uint64_t arena_lo = 0, arena_hi = 0;
  if (!heap::switch_to_child_arena(kChildArenaBytes, &arena_lo, &arena_hi)) child_exit(2);

  Child *cp = static_cast<Child *>(heap::alloc_zeroed(sizeof(Child)));
  if (!cp) child_exit(2);
  Child &c = *new (cp) Child();
  c.index = index;
  c.fd = fd;
  c.t0 = mono_ns();
  c.self_sp = sp;
  c.main_tid = g_program_pid;
  c.writer_lo = wlo;
  c.writer_hi = whi;
  ZSTD_customMem mem = {zalloc, zfree, nullptr};
  c.zstd = ZSTD_createCCtx_advanced(mem);
  if (!c.zstd) child_exit(2);
  ZSTD_CCtx_setParameter(c.zstd, ZSTD_c_compressionLevel, kZstdLevel);
  ZSTD_CCtx_setParameter(c.zstd, ZSTD_c_contentSizeFlag, 1);
  ZSTD_CCtx_setParameter(c.zstd, ZSTD_c_checksumFlag, 1);

  const size_t kMaxMaps = 1 << 16;
  c.maps = static_cast<Mapping *>(heap::alloc(kMaxMaps * sizeof(Mapping)));
  char *scratch = static_cast<char *>(heap::alloc(32u << 20));
  c.nmaps = c.maps && scratch ? read_proc_maps(c.maps, kMaxMaps, scratch, 32u << 20) : -1;
  if (c.nmaps < 0) child_exit(3);
  c.holds = static_cast<uint8_t *>(heap::alloc_zeroed(size_t(c.nmaps) + 1));

  Phases ph;
  ph.mark("maps");
  build_exclusions(c, arena_lo, arena_hi);
  // Room for the blocks the totals count, and some (the arena is virtual: unused room is free).
  if (live_blocks > (uint64_t(1) << 28)) live_blocks = uint64_t(1) << 28;
  if (!reserve_blocks(c, live_blocks + live_blocks / 8 + 65536)) child_exit(2);
  for (long i = 0; i < c.nmaps && !c.error; ++i)
    if (c.maps[i].readable && c.maps[i].writable && !is_ours(c.maps[i]))
      for_each_included(c.maps[i].start, c.maps[i].end,
                        [&](uint64_t lo, uint64_t hi) { enumerate_range(c, i, lo, hi); });
  ph.mark("enumerate");
  merge_pool_objects(c);
  mark_heap_mappings(c);
  if (c.n) {
    c.lo = c.addr[0];
    c.hi = c.addr[c.n - 1] + (c.size[c.n - 1] ? c.size[c.n - 1] : 1);
  }
  ph.mark("pools");
  write_blocks(c);
  ph.mark("blocks");
  if (config.snapshot_contents) write_contents(c);
  ph.mark("contents");
  build_index(c);
  ph.mark("index");
  scan_blocks(c);
  ph.mark("edges");
  scan_roots(c, g_regs);
  scan_registers(c, g_regs);
  ph.mark("roots");
  uint64_t scan_ns = mono_ns() - c.t0;

  wire::RecordMark m = wire::begin_record(c.out, wire::kSnapshotEnd);
  c.out.u64(1, c.index);
  c.out.u64(2, c.n);
  c.out.u64(3, c.bytes);
  c.out.u64(4, c.edges);
  c.out.u64(5, c.root_edges);
  c.out.u64(6, scan_ns);
  c.out.u64(7, mono_ns() - c.t0);
  c.out.boolean(8, c.error == nullptr);
  c.out.str(9, c.error);
  c.out.u64(10, c.roots);
  c.out.u64(11, c.root_bytes);
  c.out.u64(12, c.skipped);
  c.out.u64(13, c.interior);
  wire::end_record(c.out, m);
  flush_frame(c, true);
  ph.mark("end");
  if (config.debug) ph.print(c.t0);
  child_exit(c.error ? 4 : 0);
}

// ---------------------------------------------------------------------------------------------
// The parent side.

uint64_t g_writer_lo = 0, g_writer_hi = 0;

void append_record_begin(uint32_t index, int trigger, const char *label, uint64_t pause,
                         const TotalsView &t, uint64_t when) {
  outbox_lock();
  wire::RecordMark m = wire::begin_record(outbox(), wire::kSnapshotBegin);
  outbox().u64(1, index);
  outbox().u64(2, when);
  outbox().u64(3, uint64_t(trigger));
  outbox().str(4, label);
  outbox().u64(5, pause);
  size_t at = outbox().open(6);
  encode_totals(outbox(), t);
  outbox().close(at);
  wire::end_record(outbox(), m);
  outbox_unlock();
}

void append_failure(uint32_t index, const char *why) {
  outbox_lock();
  wire::RecordMark m = wire::begin_record(outbox(), wire::kSnapshotEnd);
  outbox().u64(1, index);
  outbox().boolean(8, false);
  outbox().str(9, why);
  wire::end_record(outbox(), m);
  outbox_unlock();
}

// HEAPSNAP_DEBUG: this thread's time spent runnable but waiting for a CPU (schedstat's
// run_delay, ns), to tell a pause stretched by preemption from one stretched by work or a lock.
uint64_t run_delay_ns() {
  char buf[128];
  if (read_small_file("/proc/thread-self/schedstat", buf, sizeof(buf)) <= 0) return 0;
  const char *p = strchr(buf, ' ');
  return p ? strtoull(p + 1, nullptr, 10) : 0;
}

__attribute__((noinline)) uint64_t current_sp() {
  return reinterpret_cast<uint64_t>(__builtin_frame_address(0));
}

// Starts the child. Returns false if it could not (then nothing is pending).
bool start(int trigger, const char *label) {
  if (g_child || g_taken >= config.snapshot_max) return false;
  uint32_t index = g_taken++;
  uint64_t prep0 = mono_ns();
  snprintf(g_child_path, sizeof(g_child_path), "%s.snapshot-%u.tmp", writer_capture_path(), index);
  int fd = open(g_child_path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  TotalsView t = read_totals();
  uint64_t when = now_rel_ns();
  g_program_pid = uint64_t(getpid());
  // The other threads' registers: the running ones are parked in the register signal's handler
  // from here until release() (thread_regs.h). Nothing below takes a lock one of them may hold.
  g_regs = regs::handshake();
  // Registers of this thread onto its stack, where the child's scan of it will find them.
  __builtin_unwind_init();
  uint64_t sp = current_sp();
  uint64_t cpu0 = config.debug ? Phases::cpu_ns() : 0;
  uint64_t delay0 = config.debug ? run_delay_ns() : 0;
  uint64_t t0 = mono_ns();
  // A raw fork: no atfork handlers (the program's would run in a context they do not expect),
  // and no SIGCHLD (exit signal 0), so the program's wait() never sees this child.
  long pid = syscall(SYS_clone, 0, nullptr, nullptr, nullptr, nullptr);
  if (pid == 0) run_child(index, fd, sp, g_writer_lo, g_writer_hi, t.live_blocks);
  uint64_t t1 = mono_ns();
  regs::release();
  // The recorded pause: from the first thread parked (or the clone when none was) to the end of
  // the clone.
  uint64_t pause = t1 - (g_regs.first_signal_ns ? g_regs.first_signal_ns : t0);
  if (config.debug) {
    // The clone is the kernel copying the page tables; its CPU time leaves out any wait for a CPU
    // on a busy machine.
    uint64_t cpu = Phases::cpu_ns() - cpu0;
    uint64_t delay = run_delay_ns() - delay0;
    char msg[640];
    int n = snprintf(msg, sizeof(msg),
                     "heapsnap: snapshot %u: pause %lu us = handshake %lu us (%u threads: %u signaled, %u registers, "
                     "%u blocked sp/pc, %u missing) + clone %lu us (%lu us of CPU, %lu us waiting for a CPU); file and totals "
                     "before it %lu us\n",
                     index, (unsigned long)(pause / 1000), (unsigned long)((t0 - (g_regs.first_signal_ns ? g_regs.first_signal_ns : t0)) / 1000),
                     g_regs.n, g_regs.signaled, g_regs.captured, g_regs.blocked, g_regs.missing,
                     (unsigned long)((t1 - t0) / 1000), (unsigned long)(cpu / 1000), (unsigned long)(delay / 1000),
                     (unsigned long)(((g_regs.first_signal_ns ? g_regs.first_signal_ns : t0) - prep0) / 1000));
    if (n > 0) (void)!write(2, msg, size_t(n) < sizeof(msg) ? size_t(n) : sizeof(msg) - 1);
  }
  if (pid < 0) {
    close(fd);
    unlink(g_child_path);
    append_failure(index, "fork failed");
    return false;
  }
  g_child = pid_t(pid);
  g_child_index = index;
  g_child_fd = fd;
  g_child_started_ns = t0;
  append_record_begin(index, trigger, label, pause, t, when);
  return true;
}

// Appends the child's file to the capture once it has exited. Returns true when nothing is
// pending any more.
bool finish(bool block) {
  if (!g_child) return true;
  int status = 0;
  pid_t r;
  do {
    r = waitpid(g_child, &status, (block ? 0 : WNOHANG) | __WCLONE);
  } while (r < 0 && errno == EINTR);
  if (r == 0) return false;
  close(g_child_fd);
  g_child_fd = -1;
  bool ok = r == g_child && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  if (!writer_append_file(g_child_path) || !ok) {
    char why[96];
    if (r == g_child && WIFSIGNALED(status)) snprintf(why, sizeof(why), "snapshot child killed by signal %d", WTERMSIG(status));
    else snprintf(why, sizeof(why), "snapshot child failed (status %d)", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    if (!ok) append_failure(g_child_index, why);
  }
  unlink(g_child_path);
  g_child = 0;
  return true;
}

}  // namespace

void init() {
  if (!config.snapshots) return;
  regs::init();
  info::init(usable::g_glibc_layout);
  info::enabled = true;
  if (config.snapshot_signal) {
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART;
    sigaction(config.snapshot_signal, &sa, nullptr);
  }
  g_last_periodic_ns = now_rel_ns();
}

bool enabled() { return config.snapshots; }

void request(const char *label) {
  if (!config.snapshots || !config.snapshot_client) return;
  size_t n = label ? strlen(label) : 0;
  if (n >= kClientLabelBytes) n = kClientLabelBytes - 1;
  SpinGuard g(g_client_lock);
  if (g_client_count == kClientQueue) {
    g_client_dropped.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  char *slot = g_client_queue[(g_client_head + g_client_count++) % kClientQueue];
  if (n) memcpy(slot, label, n);
  slot[n] = '\0';
  g_client_pending.store(g_client_count, std::memory_order_release);
}

namespace {
// The label of the pending client request, copied out under its lock (another request may be
// rewriting it while the snapshot starts).
bool take_client_request(char (&label)[kClientLabelBytes]) {
  if (!g_client_pending.load(std::memory_order_acquire)) return false;
  SpinGuard g(g_client_lock);
  if (!g_client_count) return false;
  memcpy(label, g_client_queue[g_client_head], sizeof(label));
  g_client_head = (g_client_head + 1) % kClientQueue;
  g_client_pending.store(--g_client_count, std::memory_order_release);
  return true;
}
}  // namespace

void set_writer_stack(uint64_t lo, uint64_t hi) {
  regs::set_writer_tid(uint32_t(syscall(SYS_gettid)));  // called on the writer thread
  g_writer_lo = lo;
  g_writer_hi = hi;
}

void writer_tick(uint64_t heap_bytes, uint64_t rss_bytes) {
  if (!config.snapshots) return;
  info::advise_hugepages();
  finish(false);
  if (g_child) return;
  uint64_t now = now_rel_ns();
  char label[kClientLabelBytes];
  if (g_signal_flag.exchange(false)) {
    start(kSignal, "signal");
  } else if (take_client_request(label)) {
    start(kClient, label);
  } else if (config.snapshot_every_ns && now - g_last_periodic_ns >= config.snapshot_every_ns) {
    g_last_periodic_ns = now;
    start(kPeriodic, "periodic");
  } else if (config.snapshot_heap_above && !g_heap_fired && heap_bytes >= config.snapshot_heap_above) {
    g_heap_fired = true;
    start(kHeap, "heap threshold");
  } else if (config.snapshot_rss_above && !g_rss_fired && rss_bytes >= config.snapshot_rss_above) {
    g_rss_fired = true;
    start(kRss, "rss threshold");
  }
}

void drain() { finish(true); }

void after_fork_child() {
  regs::set_writer_tid(0);  // the parent's writer; a writer of this process says so when it starts
  g_child = 0;
  g_child_fd = -1;
  g_taken = 0;
}

void at_exit() {
  if (!config.snapshots) return;
  // What the threads recorded goes into the file before the exit snapshot is taken: a process
  // killed while it waits for the snapshot child keeps it, and the last frame then holds only
  // what came after (a capture cut short lost every event of a short program with it).
  writer_flush_now();
  finish(true);
  // Requests the writer had no tick left to serve (the program asked, then exited).
  char label[kClientLabelBytes];
  while (take_client_request(label) && start(kClient, label)) finish(true);
  if (uint64_t dropped = g_client_dropped.exchange(0)) {
    // Said where the timeline shows the program's own markers.
    char text[128];
    int n = snprintf(text, sizeof(text), "heapsnap: %llu snapshot request(s) dropped: %u were already waiting",
                     (unsigned long long)dropped, kClientQueue);
    outbox_append_marker(0, text, n > 0 && size_t(n) < sizeof(text) ? size_t(n) : strlen(text));
  }
  if (g_signal_flag.exchange(false) && start(kSignal, "signal")) finish(true);
  if (config.snapshot_at_exit && start(kExit, "exit")) finish(true);
}

}  // namespace hs::snapshot
