// The snapshot child's internals (snapshot.h): the state of one walk of a frozen copy of the
// program, and the pieces that share it. Everything here runs in the forked copy: only system
// calls, the child arena and memory the parent owned at fork time.
//   child_enumerate.cc  the blocks, from the byte shadow
//   child_heap.cc   pool objects, the block index, block records
//   child_scan.cc   pointer edges between blocks, roots (module data, stacks, registers)
//   child_main.cc   the walk's phases, from the fork to the end record
#pragma once
#include <cstddef>
#include <cstdint>
#include <new>

#include "core/common.h"
#include "core/private_heap.h"
#include "core/proc_maps.h"
#include "intercept/usable_size.h"
#include "output/wire_encoder.h"
#include "snapshot/thread_regs.h"
#include "tables/shadow_map.h"

typedef struct ZSTD_CCtx_s ZSTD_CCtx;

namespace hs::snapshot::child {

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
// The index's granule: 16 bytes (glibc's alignment). Blocks of other allocators 8 bytes apart make
// their group irregular (searched).
constexpr unsigned kIndexGranuleShift = 4;
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
  uint64_t arena_lo, arena_hi;    // the child's own arena (heap::switch_to_child_arena): its memory

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
  // Per block, its glibc chunk's size as the enumeration read it from the header (0: not glibc's,
  // mmapped, or 4 GiB and more): the arena walk (child_arenas.cc) steps over live chunks with it
  // instead of reading each header a second time, a cache miss per block on a big heap. Valid
  // until merge_pool_objects reorders the blocks.
  uint32_t *chunk = nullptr;
  uint32_t n = 0, cap = 0;
  // Runs of live blocks whose chunks follow each other with no gap, as the enumeration found them
  // (blocks [first, first + count), their requested bytes that lie inside their chunks): the arena
  // walk steps over a run at once instead of chunk by chunk (the whole of a heap the program
  // filled is one run). Only chunks of a size the walk takes as such (32 bytes and more, a
  // multiple of 16) are in runs. Null when out of memory: the walk then goes chunk by chunk.
  struct LiveRun {
    uint32_t first, count;
    uint64_t live;
  };
  LiveRun *runs = nullptr;
  uint32_t nruns = 0, runs_cap = 0;
  uint64_t run_end = 0;  // where the latest run's last chunk ends (0: no run open)
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
  // A frame was cut or left out of the file (a failed or short write, records cut by the arena
  // running out): the file is not whole, whatever its last record says (child_main's exit 5).
  bool file_torn = false;
  struct TypeScan *types = nullptr;  // child_types.h
  const regs::Result *regs = nullptr;  // the threads' registers (scan_roots): their stacks' frames
  struct MemoryState *memory = nullptr;  // child_memory.h: the RSS breakdown between its two phases
  uint32_t scan_threads = 1;  // the threads the block scan ran on
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

// Tracer memory that must be neither enumerated nor scanned: shadow leaves, live-table leaves,
// the child's arena, the writer thread's stack and the ranges exclude_range() named. (mimalloc's
// own pages hold no pointer to a program block: every address the tracer keeps is disguised, see
// common.h.)
struct Range {
  uint64_t lo, hi;
};
extern Range *g_excluded;
extern size_t g_nexcluded;
void build_exclusions(const Child &c, uint64_t arena_lo, uint64_t arena_hi, const Range *extra, size_t nextra);

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

// --- child_heap.cc: the blocks, their index, their records -----------------------------------
long mapping_of(const Child &c, uint64_t a);
bool child_write(int fd, const void *p, size_t n);
void flush_frame(Child &c, bool force);
void *zalloc(void *, size_t n);
void zfree(void *, void *);
ZSTD_CCtx *make_zstd();  // a context at the snapshot's level, allocating from the child's arena
// A chunk's records compressed into a frame of their own by the scan thread that made them, so
// that compression (a tenth of the child's work) is not all left to thread 0, which writes the
// frames in chunk order (write_frame, after the records pending in Child::out). zstd computes
// only and allocates from the child's arena: safe on a scan thread (child_threads.h). A context
// per thread, made on first use.
constexpr uint32_t kFrameThreads = 64;
struct FrameContexts {
  ZSTD_CCtx *zstd[kFrameThreads] = {};
};
// Records (whole ones) into one frame on scan thread `thread`: *len its bytes. False when out of memory.
bool compress_chunk(FrameContexts &z, uint32_t thread, const wire::Buf &records, wire::Buf &frame, size_t *len);
void write_frame(Child &c, const wire::Buf &frame, size_t len);
bool is_ours(const Mapping &m);
bool reserve_blocks(Child &c, uint64_t want);  // (child_enumerate.cc)
// n value-initialised T in the child's arena, nullptr when it has no room (the scan threads'
// slots: threads::ordered's make_slots).
template <class T>
T *arena_array(size_t n) {
  auto *p = static_cast<T *>(heap::alloc_zeroed(n * sizeof(T)));
  if (p)
    for (size_t k = 0; k < n; ++k) new (&p[k]) T();
  return p;
}
void merge_pool_objects(Child &c);
const char *module_of(const Child &c, long i, uint64_t *data_end);
void mark_heap_mappings(Child &c);
void build_index(Child &c, uint32_t nthreads);
uint32_t search_block(const Child &c, uint64_t v);
struct BlockColumns {
  wire::Buf col[6];  // addresses, sizes, sites, stacks, sample ids, times
  wire::Buf pools;
};
bool encode_block_record(const Child &c, uint32_t first, uint32_t last, BlockColumns &cols, wire::Buf &out);
void write_blocks(Child &c, uint32_t nthreads);
void write_contents(Child &c);

// --- child_enumerate.cc: the blocks, on up to nthreads threads (glibc's layout)
void enumerate_blocks(Child &c, uint32_t nthreads);

// --- child_scan.cc: edges and roots ------------------------------------------------------------
uint64_t module_image_end(const Mapping &m);
void scan_blocks(Child &c);
// child_scan_parallel.cc: the same edges on up to nthreads threads (child_threads.h). Returns
// the threads that ran.
uint32_t scan_blocks_parallel(Child &c, uint32_t nthreads);
void scan_roots(Child &c, const regs::Result &rr);
void scan_registers(Child &c, const regs::Result &r);

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
      unsigned bit = unsigned(v >> kIndexGranuleShift) & 63;
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

}  // namespace hs::snapshot::child
