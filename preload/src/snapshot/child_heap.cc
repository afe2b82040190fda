#include "snapshot/child_internal.h"

#include <sys/syscall.h>
#include <unistd.h>
#define ZSTD_STATIC_LINKING_ONLY  // ZSTD_createCCtx_advanced: the child allocates from its arena
#include <zstd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

#include "core/own_mappings.h"
#include "core/private_heap.h"
#include "snapshot/child_threads.h"
#include "tables/call_sites.h"
#include "tables/info_shadow.h"
#include "tables/pools.h"
#include "tables/sampled_blocks.h"
#include "../../../proto/flush_hash.h"
#include "../../../proto/frame_hint.h"

namespace hs::snapshot::child {

// The mapping holding address a, or -1.
long mapping_of(const Child &c, uint64_t a) {
  const Mapping *m = std::upper_bound(c.maps, c.maps + c.nmaps, a, [](uint64_t v, const Mapping &x) { return v < x.start; });
  if (m == c.maps) return -1;
  --m;
  return a < m->end ? long(m - c.maps) : -1;
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

// A frame cut or left out: the file ends at the last whole one (Child::file_torn).
static void tear(Child &c, const char *why) {
  if (!c.error) c.error = why;
  c.file_torn = true;
}

// records compressed into frame, after the frame hint (proto/frame_hint.h) that lets a reader
// that wants none of their fields step over the frame undecompressed: *len bytes in all.
static bool hinted_frame(ZSTD_CCtx *z, const wire::Buf &records, wire::Buf &frame, size_t *len) {
  using namespace heapsnap_format;
  const size_t bound = ZSTD_compressBound(records.size());
  frame.clear();
  if (!frame.reserve(kFrameHintBytes + bound)) return false;
  uint8_t *out = frame.data();
  const size_t n = ZSTD_compress2(z, out + kFrameHintBytes, bound, records.data(), records.size());
  if (ZSTD_isError(n)) return false;
  put_frame_hint(out, FrameHint{record_fields(records.data(), records.size()), n, flush_hash(out + kFrameHintBytes, n)});
  *len = kFrameHintBytes + n;
  return true;
}

// Compresses the pending records into one frame once they are big enough (or when forced).
// Records cut by the arena running out (out.failed(), sticky) are not compressed: their lengths
// would be wrong. Nothing is written after a frame that failed: the file ends at the last whole one.
void flush_frame(Child &c, bool force) {
  if (c.file_torn) {
    c.out.clear();
    return;
  }
  if (c.out.failed()) return tear(c, "out of memory (records)");
  if (c.out.size() == 0 || (!force && c.out.size() < (4u << 20))) return;
  size_t len = 0;
  if (!hinted_frame(c.zstd, c.out, c.frame, &len)) return tear(c, "out of memory");
  if (!child_write(c.fd, c.frame.data(), len)) tear(c, "cannot write");
  c.out.clear();
}

void *zalloc(void *, size_t n) { return heap::alloc(n); }
void zfree(void *, void *) {}

ZSTD_CCtx *make_zstd() {
  ZSTD_customMem mem = {zalloc, zfree, nullptr};
  ZSTD_CCtx *z = ZSTD_createCCtx_advanced(mem);
  if (!z) return nullptr;
  ZSTD_CCtx_setParameter(z, ZSTD_c_compressionLevel, kZstdLevel);
  ZSTD_CCtx_setParameter(z, ZSTD_c_contentSizeFlag, 1);
  ZSTD_CCtx_setParameter(z, ZSTD_c_checksumFlag, 1);
  return z;
}

bool compress_chunk(FrameContexts &z, uint32_t thread, const wire::Buf &records, wire::Buf &frame, size_t *len) {
  *len = 0;
  if (!records.size()) return true;
  if (thread >= kFrameThreads) return false;
  if (!z.zstd[thread] && !(z.zstd[thread] = make_zstd())) return false;
  return hinted_frame(z.zstd[thread], records, frame, len);
}

void write_frame(Child &c, const wire::Buf &frame, size_t len) {
  if (!len) return;
  flush_frame(c, true);  // (the records before the chunk's first)
  if (!c.error && !c.file_torn && !child_write(c.fd, frame.data(), len)) tear(c, "cannot write");
}

constexpr size_t kMaxExcluded = 3 * shadow::kTopEntries + 8;
Range *g_excluded = nullptr;
size_t g_nexcluded = 0;

void build_exclusions(const Child &c, uint64_t arena_lo, uint64_t arena_hi, const Range *extra, size_t nextra) {
  // The tracer's own small mappings (own_mappings.h: mimalloc's thread data, libunwind's pools,
  // side tables), which the kernel may have merged with the program's.
  constexpr size_t kMaxOwn = 4096;
  auto *own_lo = static_cast<uint64_t *>(heap::alloc(kMaxOwn * 2 * sizeof(uint64_t)));
  const size_t nown = own_lo ? own_mappings::copy(own_lo, own_lo + kMaxOwn, kMaxOwn) : 0;
  g_excluded = static_cast<Range *>(heap::alloc((kMaxExcluded + nextra + nown) * sizeof(Range)));
  if (!g_excluded) return;
  for (size_t i = 0; i < nown; ++i) g_excluded[g_nexcluded++] = {own_lo[i], own_lo[kMaxOwn + i]};
  for (size_t t = 0; t < shadow::kTopEntries; ++t) {
    if (uint8_t *l = shadow::leaf(t))
      g_excluded[g_nexcluded++] = {uint64_t(l), uint64_t(l) + shadow::leaf_bytes()};
    // (Their words never look like pointers, bit 63 set; left out so as not to read them at all.)
    for (const WordMap *m : {&info::words, &sampled_blocks::detail::g_words})
      if (uint64_t *l = m->leaf(t)) g_excluded[g_nexcluded++] = {uint64_t(l), uint64_t(l) + m->leaf_bytes()};
  }
  g_excluded[g_nexcluded++] = {arena_lo, arena_hi};
  if (c.writer_hi) g_excluded[g_nexcluded++] = {c.writer_lo, c.writer_hi};
  for (size_t i = 0; i < nextra; ++i) g_excluded[g_nexcluded++] = extra[i];
}

// The shim's own data, and mimalloc's pages (the tracer's heap: nothing in it is a program root).
bool is_ours(const Mapping &m) {
  if (strstr(m.path, "libheapsnap_preload") || strstr(m.path, "libmimalloc")) return true;
  if (strncmp(m.path, "[anon:", 6) == 0 && strncmp(m.path + 6, own_mappings::kName, sizeof(own_mappings::kName) - 1) == 0)
    return true;  // (named by own_mappings.h)
  // mimalloc answers for addresses past a segment's first page.
  if (m.path[0] || m.end - m.start <= 4096) return false;
  return heap::owns(reinterpret_cast<void *>(m.start + 4096));
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
  c.chunk = nullptr;  // (not carried over: only the arena walk, before this, uses it)
  c.n = out;
}

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

namespace {

// The index's groups are filled in runs of about this many blocks, a run never splitting a group
// (threads::run shares the runs out).
constexpr uint32_t kIndexRun = 65536;

struct IndexFill {
  Child *c;
  uint32_t n;                     // the blocks below the 47-bit address space
  std::atomic<uint32_t> next{0};  // the next run to claim
};

// The first block at or after b whose group is not block b - 1's (n if none).
uint32_t group_start(const Child &c, uint32_t b, uint32_t n) {
  while (b > 0 && b < n && (c.addr[b] >> kGroupShift) == (c.addr[b - 1] >> kGroupShift)) ++b;
  return b < n ? b : n;
}

// Fills the groups of blocks [b, e): each group from the one after the previous block's (in the
// same region) up to the block's own, so that every group between a region's first and last is
// written by exactly one run.
void fill_groups(const Child &c, uint32_t b, uint32_t e) {
  uint64_t prev_group = ~uint64_t(0);
  Group *g = nullptr;
  for (; b < e; ++b) {
    const uint64_t a = c.addr[b];
    const uint64_t group = a >> kGroupShift;
    if (group != prev_group) {
      const IndexRegion &r = c.regions[a >> kIndexRegionShift];
      const uint32_t gi = uint32_t(group) & (kGroupsPerRegion - 1);
      const bool same_region = b > 0 && (c.addr[b - 1] >> kIndexRegionShift) == (a >> kIndexRegionShift);
      uint32_t from = same_region ? (uint32_t(c.addr[b - 1] >> kGroupShift) & (kGroupsPerRegion - 1)) + 1 : r.first;
      for (; from <= gi; ++from) r.groups[from - r.first] = {0, b, 0};  // (none starts before b there)
      g = &r.groups[gi - r.first];
      prev_group = group;
    }
    uint64_t bit = uint64_t(1) << ((a >> kIndexGranuleShift) & 63);
    if ((a & 15) || (g->bits & bit)) g->irregular = 1;
    g->bits |= bit;
  }
}

void fill_runs(void *arg, uint32_t) {
  IndexFill &f = *static_cast<IndexFill *>(arg);
  const Child &c = *f.c;
  for (;;) {
    const uint64_t k = f.next.fetch_add(1, std::memory_order_relaxed);
    if (k * kIndexRun >= f.n) return;
    const uint32_t b = group_start(c, uint32_t(k * kIndexRun), f.n);
    const uint32_t e = group_start(c, uint32_t(k * kIndexRun + kIndexRun < f.n ? k * kIndexRun + kIndexRun : f.n), f.n);
    if (b < e) fill_groups(c, b, e);
  }
}

}  // namespace

// Builds the block index (see IndexRegion) from the address-ordered block list: each region's
// bounds and ranks here, its groups on up to nthreads threads (they depend on the blocks alone).
void build_index(Child &c, uint32_t nthreads) {
  c.regions = static_cast<IndexRegion *>(heap::alloc_zeroed(kIndexRegions * sizeof(IndexRegion)));
  if (!c.regions) {
    c.error = "out of memory (index)";
    return;
  }
  // Blocks past the 47-bit address space (only a client pool could claim one) are never targets.
  uint32_t n = uint32_t(std::lower_bound(c.addr, c.addr + c.n, uint64_t(1) << shadow::kAddressBits) - c.addr);
  if (c.hi > (uint64_t(1) << shadow::kAddressBits)) c.hi = uint64_t(1) << shadow::kAddressBits;
  for (uint32_t b = 0; b < n;) {
    const uint64_t q = c.addr[b] >> kIndexRegionShift;
    const uint32_t e = uint32_t(std::lower_bound(c.addr + b, c.addr + n, (q + 1) << kIndexRegionShift) - c.addr);
    IndexRegion &r = c.regions[q];
    r.first = uint32_t(c.addr[b] >> kGroupShift) & (kGroupsPerRegion - 1);
    r.end = (uint32_t(c.addr[e - 1] >> kGroupShift) & (kGroupsPerRegion - 1)) + 1;
    r.rank_before = b;
    r.rank_after = e;
    r.groups = static_cast<Group *>(heap::alloc(size_t(r.end - r.first) * sizeof(Group)));
    if (!r.groups) {
      c.error = "out of memory (index)";
      return;
    }
    // Regions after it that its last block covers (a large block), up to the next with blocks: rank only.
    const uint64_t last_end = c.addr[e - 1] + c.size[e - 1];
    const uint64_t next_q = e < n ? c.addr[e] >> kIndexRegionShift : kIndexRegions;
    for (uint64_t p = q + 1; p < next_q && p < kIndexRegions && (p << kIndexRegionShift) < last_end; ++p)
      c.regions[p].rank_before = c.regions[p].rank_after = e;
    b = e;
  }
  auto *f = static_cast<IndexFill *>(heap::alloc_zeroed(sizeof(IndexFill)));
  if (nthreads > 1 && n > kIndexRun && f) {
    new (f) IndexFill();
    f->c = &c;
    f->n = n;
    threads::run(nthreads, fill_runs, f);
  } else {
    fill_groups(c, 0, n);
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

// One block record: blocks [first, last), every column in one pass over them, into out (cols:
// the columns' buffers, reused). False when out of memory. Reads only the frozen image and the
// tracer's tables, lock-free (info_shadow, call_sites, sampled_blocks::peek): no thread-local
// state, so that a scan thread may run it (child_threads.h).
bool encode_block_record(const Child &c, uint32_t first, uint32_t last, BlockColumns &cols, wire::Buf &out) {
  wire::Buf *col = cols.col;
  wire::Buf &pools = cols.pools;
  for (int k = 0; k < 6; ++k) {
    col[k].clear();
    if (!col[k].reserve(size_t(last - first) * 10)) return false;
  }
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
  wire::RecordMark m = wire::begin_record(out, wire::kSnapshotBlocks);
  out.u64(1, c.index);
  for (int k = 0; k < 6; ++k) {
    size_t len = size_t(p[k] - col[k].data());
    out.len(uint32_t(2 + k), col[k].data(), len);
  }
  if (c.nobjs) out.len(8, pools.data(), pools.size());
  out.u64(9, first);
  wire::end_record(out, m);
  return !pools.failed() && !out.failed();
}

namespace {

// The block records on several threads: a record is a chunk (threads::ordered), the same bytes
// as on one thread (each record's deltas start afresh), each in a frame of its own.
struct BlockWork {
  Child *c;
  struct Slot {
    BlockColumns cols;
    wire::Buf out;
    wire::Buf frame;  // out compressed (frame_len bytes)
    size_t frame_len;
    bool ok;
  } *slots;
  FrameContexts zstd;
};

bool make_block_slots(void *ctx, uint32_t n) {
  BlockWork &w = *static_cast<BlockWork *>(ctx);
  w.slots = arena_array<BlockWork::Slot>(n);
  return w.slots != nullptr;
}

void encode_chunk(void *ctx, uint32_t k, uint32_t slot, uint32_t thread) {
  BlockWork &w = *static_cast<BlockWork *>(ctx);
  const Child &c = *w.c;
  BlockWork::Slot &s = w.slots[slot];
  uint32_t first = k * kBlocksPerRecord, last = c.n - first > kBlocksPerRecord ? first + kBlocksPerRecord : c.n;
  s.out.clear();
  s.ok = encode_block_record(c, first, last, s.cols, s.out) && compress_chunk(w.zstd, thread, s.out, s.frame, &s.frame_len);
}

void write_chunk(void *ctx, uint32_t, uint32_t slot) {
  BlockWork &w = *static_cast<BlockWork *>(ctx);
  Child &c = *w.c;
  BlockWork::Slot &s = w.slots[slot];
  if (!s.ok && !c.error) c.error = "out of memory (blocks)";
  if (c.error) return;
  write_frame(c, s.frame, s.frame_len);
}

}  // namespace

// Block records, kBlocksPerRecord blocks each, on up to nthreads threads.
void write_blocks(Child &c, uint32_t nthreads) {
  uint32_t records = uint32_t((uint64_t(c.n) + kBlocksPerRecord - 1) / kBlocksPerRecord);
  if (nthreads > 1 && records > 1) {
    auto *w = static_cast<BlockWork *>(heap::alloc_zeroed(sizeof(BlockWork)));
    auto *o = static_cast<threads::Ordered *>(heap::alloc_zeroed(sizeof(threads::Ordered)));
    if (w && o) {
      new (o) threads::Ordered();
      w->c = &c;
      o->ctx = w;
      o->nchunks = records;
      o->produce = encode_chunk;
      o->consume = write_chunk;
      if (!threads::ordered(*o, nthreads, make_block_slots)) c.error = "out of memory (blocks)";
      return;
    }
  }
  BlockColumns cols;
  for (uint32_t first = 0; first < c.n && !c.error; first += kBlocksPerRecord) {
    uint32_t last = first + kBlocksPerRecord < c.n ? first + kBlocksPerRecord : c.n;
    if (!encode_block_record(c, first, last, cols, c.out)) c.error = "out of memory (blocks)";
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
}  // namespace hs::snapshot::child
