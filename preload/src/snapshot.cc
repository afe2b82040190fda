#include "snapshot.h"

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
#include <cstring>

#include "call_sites.h"
#include "config.h"
#include "info_shadow.h"
#include "pools.h"
#include "private_heap.h"
#include "proc_maps.h"
#include "sampled_blocks.h"
#include "shadow_map.h"
#include "thread_state.h"
#include "tracer.h"
#include "usable_size.h"
#include "wire_encoder.h"

namespace hs::snapshot {
namespace {

std::atomic<bool> g_signal_flag{false};
std::atomic<bool> g_client_flag{false};
char g_client_label[256];
uint32_t g_taken = 0;            // snapshots started by this process
uint64_t g_last_periodic_ns = 0;
bool g_heap_fired = false, g_rss_fired = false;
// The running child, if any.
pid_t g_child = 0;
uint32_t g_child_index = 0;
uint64_t g_child_started_ns = 0;
int g_child_fd = -1;
char g_child_path[4400];

void on_signal(int) { g_signal_flag.store(true, std::memory_order_relaxed); }

// ---------------------------------------------------------------------------------------------
// The child. Everything below runs in the forked copy: only system calls, the child arena and
// memory the parent owned at fork time. It never returns.

constexpr size_t kChildArenaBytes = size_t(64) << 30;  // virtual; NORESERVE
constexpr uint32_t kBlocksPerRecord = 65536;
constexpr uint32_t kEdgesPerRecord = 1u << 20;
constexpr uint64_t kIndexMark = uint64_t(1) << 62;  // info slot overwritten with a block number

struct Child {
  uint32_t index;
  int fd;
  uint64_t t0;
  uint64_t self_sp;        // stack pointer of the thread that forked (scan its stack from here)
  uint64_t writer_lo, writer_hi;  // the writer thread's stack: tracer memory, not a root

  Mapping *maps = nullptr;
  long nmaps = 0;
  bool *has_blocks = nullptr;  // per mapping

  // Blocks in address order.
  uint64_t *addr = nullptr;
  uint64_t *size = nullptr;
  uint32_t n = 0, cap = 0;
  uint64_t lo = ~0ull, hi = 0;
  uint64_t skipped = 0, bytes = 0;
  // Objects of client-API pools, merged into the block list: pool_obj[i] indexes `objs` for a
  // pool object, UINT32_MAX for a malloc block.
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
constexpr size_t kMaxExcluded = 2 * shadow::kTopEntries + 8;
Range *g_excluded = nullptr;
size_t g_nexcluded = 0;

void build_exclusions(const Child &c, uint64_t arena_lo, uint64_t arena_hi) {
  g_excluded = static_cast<Range *>(heap::alloc(kMaxExcluded * sizeof(Range)));
  if (!g_excluded) return;
  for (size_t t = 0; t < shadow::kTopEntries; ++t) {
    if (uint8_t *l = shadow::top[t].load(std::memory_order_relaxed))
      g_excluded[g_nexcluded++] = {uint64_t(l), uint64_t(l) + shadow::kLeafBytes};
    if (uint64_t *l = info::top[t].load(std::memory_order_relaxed))
      g_excluded[g_nexcluded++] = {uint64_t(l), uint64_t(l) + info::kLeafBytes};
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

void add_block(Child &c, uint64_t a, uint64_t s) {
  if (c.n == c.cap) {
    uint32_t cap = c.cap ? c.cap * 2 : 1u << 16;
    auto *na = static_cast<uint64_t *>(heap::grow(c.addr, size_t(cap) * 8));
    auto *ns = static_cast<uint64_t *>(heap::grow(c.size, size_t(cap) * 8));
    if (!na || !ns) {
      c.error = "out of memory (blocks)";
      return;
    }
    c.addr = na;
    c.size = ns;
    c.cap = cap;
  }
  c.addr[c.n] = a;
  c.size[c.n] = s;
  ++c.n;
}

// Finds the blocks of one mapping from the byte shadow, in address order.
void enumerate_range(Child &c, long mi, uint64_t lo, uint64_t hi) {
  const Mapping &m = c.maps[mi];
  uint64_t g = (lo + 15) & ~uint64_t(15);
  while (g < hi && !c.error) {
    uint8_t *s = shadow::find(reinterpret_cast<void *>(g));
    uint64_t region_end = ((g >> shadow::kRegionShift) + 1) << shadow::kRegionShift;
    uint64_t stop = hi < region_end ? hi : region_end;
    if (!s) {
      g = stop;
      continue;
    }
    // Walk shadow bytes, eight at a time where they are all zero.
    uint64_t count = (stop - g) >> 4;
    uint64_t i = 0;
    while (i < count) {
      if ((reinterpret_cast<uint64_t>(s + i) & 7) == 0 && i + 8 <= count) {
        uint64_t w;
        memcpy(&w, s + i, 8);
        if (w == 0) {
          i += 8;
          continue;
        }
      }
      uint8_t v = s[i];
      if (v == 0) {
        ++i;
        continue;
      }
      uint64_t a = g + (i << 4);
      // Check the block against its glibc chunk header; a racing thread may have left it torn.
      uint64_t usable = (a >= m.start + 8) ? usable::of(reinterpret_cast<void *>(a)) : 0;
      uint64_t req = 0;
      bool ok = usable > 0 && usable < (uint64_t(1) << 46) && a + usable <= m.end;
      if (ok) {
        req = shadow::requested_size(reinterpret_cast<void *>(a), v, usable);
        ok = req <= usable;
      }
      if (!ok) {
        ++c.skipped;
        ++i;
        continue;
      }
      add_block(c, a, req);
      c.has_blocks[mi] = true;
      c.bytes += req;
      // Skip the granules inside this block: nothing else starts there.
      uint64_t span = (usable + 8 + 15) >> 4;
      i += span ? span : 1;
    }
    g = stop;
  }
}

// Adds the pools' objects to the (address-ordered) block list. A malloc block that holds pool
// objects is the pool's arena: it is dropped, its objects stand for it (otherwise it would seem
// to point to everything its objects point to).
void merge_pool_objects(Child &c) {
  uint64_t total = 0;
  for (uint32_t i = 0; pools::Pool *p = pools::pool_at(i); ++i) total += p->used;
  c.pool_obj = static_cast<uint32_t *>(heap::alloc((size_t(c.n) + total + 1) * 4));
  if (!c.pool_obj) {
    c.error = "out of memory (pools)";
    return;
  }
  if (total == 0) {
    for (uint32_t i = 0; i < c.n; ++i) c.pool_obj[i] = UINT32_MAX;
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
  if (!addr || !size) {
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
      c.bytes -= c.size[i];
      ++i;
      continue;
    }
    addr[out] = c.addr[i];
    size[out] = c.size[i];
    c.pool_obj[out++] = UINT32_MAX;
    ++i;
  }
  for (uint32_t k = 0; k < c.nobjs; ++k) c.bytes += c.objs[k].size;
  c.addr = addr;
  c.size = size;
  c.n = out;
}

// Mappings holding blocks or pool objects are heap, not roots.
void mark_heap_mappings(Child &c) {
  for (long m = 0; m < c.nmaps; ++m) {
    const uint64_t *first = std::lower_bound(c.addr, c.addr + c.n, c.maps[m].start);
    if (first != c.addr + c.n && *first < c.maps[m].end) c.has_blocks[m] = true;
  }
}

// Block number for an address that points into a block, or UINT32_MAX.
inline uint32_t lookup(const Child &c, uint64_t v, bool *interior) {
  if (v < c.lo || v >= c.hi) return UINT32_MAX;
  if ((v & 15) == 0) {
    uint8_t *s = shadow::find(reinterpret_cast<void *>(v));
    if (s && *s) {
      uint64_t *slot = info::slot(reinterpret_cast<void *>(v), false);
      if (slot && (*slot & kIndexMark) && !(*slot >> 63)) {
        *interior = false;
        return uint32_t(*slot);
      }
    }
  }
  // Interior pointer: the last block starting at or before v.
  uint32_t l = 0, r = c.n;
  while (l < r) {
    uint32_t mid = (l + r) / 2;
    if (c.addr[mid] <= v) l = mid + 1;
    else r = mid;
  }
  if (l == 0) return UINT32_MAX;
  uint32_t b = l - 1;
  uint64_t end = c.addr[b] + (c.size[b] ? c.size[b] : 1);
  if (v >= end) return UINT32_MAX;
  *interior = v != c.addr[b];
  return b;
}

void write_blocks(Child &c) {
  for (uint32_t first = 0; first < c.n && !c.error; first += kBlocksPerRecord) {
    uint32_t last = first + kBlocksPerRecord < c.n ? first + kBlocksPerRecord : c.n;
    wire::RecordMark m = wire::begin_record(c.out, wire::kSnapshotBlocks);
    c.out.u64(1, c.index);
    size_t at = c.out.open(2);
    uint64_t prev = 0;
    for (uint32_t i = first; i < last; ++i) {
      c.out.varint(wire::zigzag(int64_t(c.addr[i] - prev)));
      prev = c.addr[i];
    }
    c.out.close(at);
    at = c.out.open(3);
    for (uint32_t i = first; i < last; ++i) c.out.varint(c.size[i]);
    c.out.close(at);
    // Call site, sample identity and time from the live-block table and the sampled set.
    at = c.out.open(4);
    uint64_t prev_site = 0;
    for (uint32_t i = first; i < last; ++i) {
      uint64_t site;
      if (c.pool_obj[i] != UINT32_MAX) {
        site = call_sites::address(c.objs[c.pool_obj[i]].site);
      } else {
        uint64_t *slot = info::slot(reinterpret_cast<void *>(c.addr[i]), false);
        site = slot ? call_sites::address(info::site_of(*slot)) : 0;
      }
      c.out.varint(wire::zigzag(int64_t(site - prev_site)));
      prev_site = site;
    }
    c.out.close(at);
    size_t st = c.out.open(5);
    for (uint32_t i = first; i < last; ++i) {
      if (c.pool_obj[i] != UINT32_MAX) {
        c.out.varint(c.objs[c.pool_obj[i]].stack);
        continue;
      }
      uint8_t *s = shadow::find(reinterpret_cast<void *>(c.addr[i]));
      sampled_blocks::Name name{0, 0};
      if (s && (*s & shadow::kSampledBit)) sampled_blocks::peek(reinterpret_cast<void *>(c.addr[i]), &name);
      c.out.varint(name.stack);
    }
    c.out.close(st);
    size_t id = c.out.open(6);
    for (uint32_t i = first; i < last; ++i) {
      if (c.pool_obj[i] != UINT32_MAX) {
        c.out.varint(c.objs[c.pool_obj[i]].id);
        continue;
      }
      uint8_t *s = shadow::find(reinterpret_cast<void *>(c.addr[i]));
      sampled_blocks::Name name{0, 0};
      if (s && (*s & shadow::kSampledBit)) sampled_blocks::peek(reinterpret_cast<void *>(c.addr[i]), &name);
      c.out.varint(name.id);
    }
    c.out.close(id);
    size_t tm = c.out.open(7);
    for (uint32_t i = first; i < last; ++i) {
      if (c.pool_obj[i] != UINT32_MAX) {
        c.out.varint(c.objs[c.pool_obj[i]].time_ms);
        continue;
      }
      uint64_t *slot = info::slot(reinterpret_cast<void *>(c.addr[i]), false);
      c.out.varint(slot ? info::time_ms_of(*slot) : 0);
    }
    c.out.close(tm);
    if (c.nobjs) {
      size_t pl = c.out.open(8);
      for (uint32_t i = first; i < last; ++i) c.out.varint(c.pool_obj[i] != UINT32_MAX ? c.objs[c.pool_obj[i]].pool : 0);
      c.out.close(pl);
    }
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

// Replaces each block's live-table entry by its number (the child's copy only), so that a start
// pointer finds its block in O(1).
void index_blocks(Child &c) {
  for (uint32_t i = 0; i < c.n; ++i)
    if (c.pool_obj[i] == UINT32_MAX)
      if (uint64_t *slot = info::slot(reinterpret_cast<void *>(c.addr[i]), true)) *slot = kIndexMark | i;
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

void scan_blocks(Child &c) {
  EdgeRecord e;
  uint32_t targets[4096];
  uint32_t offsets[4096];
  bool inter[4096];
  for (uint32_t i = 0; i < c.n && !c.error; ++i) {
    uint64_t a = c.addr[i];
    uint64_t words = c.size[i] / 8;
    uint32_t k = 0;
    const uint64_t *w = reinterpret_cast<const uint64_t *>(a);
    for (uint64_t j = 0; j < words; ++j) {
      uint64_t v = w[j];
      if (v < c.lo || v >= c.hi) continue;
      bool interior = false;
      uint32_t t = lookup(c, v, &interior);
      if (t == UINT32_MAX) continue;
      if (k && targets[k - 1] == t) continue;  // the same block twice in a row: one edge
      targets[k] = t;
      offsets[k] = uint32_t(j * 8 > 0xffffffffu ? 0xffffffffu : j * 8);
      inter[k] = interior;
      if (++k == 4096) break;  // a huge pointer array: the first 4096 distinct runs are kept
    }
    if (!k) continue;
    if (!e.open) {
      e.open = true;
      e.base = i;
      e.prev_source = i;
      e.prev_interior = 0;
    }
    e.from.varint(i - e.prev_source);
    e.prev_source = i;
    e.count.varint(k);
    for (uint32_t q = 0; q < k; ++q) {
      e.to.varint(wire::zigzag(int64_t(targets[q]) - int64_t(i)));
      e.offset.varint(offsets[q]);
      if (inter[q]) {
        e.interior.varint(e.edges - e.prev_interior);
        e.prev_interior = e.edges;
        ++c.interior;
      }
      ++e.edges;
    }
    c.edges += k;
    if (e.edges >= kEdgesPerRecord) edge_record_flush(c, e);
  }
  edge_record_flush(c, e);
  if (e.from.failed() || e.to.failed()) c.error = "out of memory (edges)";
}

void scan_root(Child &c, int kind, uint64_t detail, uint64_t start, uint64_t end, const char *name) {
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
  if (!count) return;
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

void scan_roots(Child &c) {
  ThreadStackRange stacks[1024];
  size_t nstacks = thread_stacks(stacks, 1024);
  const char *prev_module = nullptr;
  uint64_t prev_end = 0;
  for (long i = 0; i < c.nmaps && !c.error; ++i) {
    const Mapping &m = c.maps[i];
    bool module_path = m.path[0] == '/';
    // An anonymous mapping right after a module's mapping is that module's .bss.
    const char *module = module_path ? m.path : (!m.path[0] && prev_module && m.start == prev_end ? prev_module : nullptr);
    if (module_path) prev_module = m.path;
    else if (!module) prev_module = nullptr;
    prev_end = m.end;
    if (!m.readable || !m.writable || c.has_blocks[i] || is_ours(m)) continue;
    if (module && strstr(module, "libheapsnap_preload")) continue;  // the shim's .bss
    if (m.path[0] == '[' && strcmp(m.path, "[stack]") != 0 && strcmp(m.path, "[heap]") != 0) continue;  // vvar, vdso
    if (strcmp(m.path, "[heap]") == 0) continue;  // the main arena: blocks, not roots
    uint64_t start = m.start, end = m.end;
    if (c.self_sp > start && c.self_sp < end) start = c.self_sp;  // the forking thread: live part only
    if (strcmp(m.path, "[stack]") == 0) {
      scan_root(c, 1, uint64_t(getpid()), start, end, "[stack] main thread");
      continue;
    }
    uint32_t tid = 0;
    for (size_t s = 0; s < nstacks; ++s)
      if (stacks[s].lo < m.end && stacks[s].hi > m.start) tid = stacks[s].tid;
    for_each_included(start, end, [&](uint64_t lo, uint64_t hi) {
      if (tid) scan_root(c, 1, tid, lo, hi, "thread stack");
      else if (module) scan_root(c, 0, 0, lo, hi, module);
      else scan_root(c, 4, 0, lo, hi, m.path[0] ? m.path : "anonymous");
    });
  }
}

[[noreturn]] void child_exit(int code) {
  syscall(SYS_exit_group, code);
  __builtin_unreachable();
}

void on_child_fault(int sig) {
  static const char msg[] = "heapsnap: snapshot child crashed\n";
  (void)!write(2, msg, sizeof(msg) - 1);
  child_exit(100 + sig);
}

[[noreturn]] void run_child(uint32_t index, int fd, uint64_t sp, uint64_t wlo, uint64_t whi) {
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
  c.writer_lo = wlo;
  c.writer_hi = whi;
  ZSTD_customMem mem = {zalloc, zfree, nullptr};
  c.zstd = ZSTD_createCCtx_advanced(mem);
  if (!c.zstd) child_exit(2);
  ZSTD_CCtx_setParameter(c.zstd, ZSTD_c_compressionLevel, 3);
  ZSTD_CCtx_setParameter(c.zstd, ZSTD_c_contentSizeFlag, 1);
  ZSTD_CCtx_setParameter(c.zstd, ZSTD_c_checksumFlag, 1);

  const size_t kMaxMaps = 1 << 16;
  c.maps = static_cast<Mapping *>(heap::alloc(kMaxMaps * sizeof(Mapping)));
  char *scratch = static_cast<char *>(heap::alloc(32u << 20));
  c.nmaps = c.maps && scratch ? read_proc_maps(c.maps, kMaxMaps, scratch, 32u << 20) : -1;
  if (c.nmaps < 0) child_exit(3);
  c.has_blocks = static_cast<bool *>(heap::alloc_zeroed(size_t(c.nmaps) + 1));

  build_exclusions(c, arena_lo, arena_hi);
  for (long i = 0; i < c.nmaps && !c.error; ++i)
    if (c.maps[i].readable && c.maps[i].writable && !is_ours(c.maps[i]))
      for_each_included(c.maps[i].start, c.maps[i].end,
                        [&](uint64_t lo, uint64_t hi) { enumerate_range(c, i, lo, hi); });
  merge_pool_objects(c);
  mark_heap_mappings(c);
  if (c.n) {
    c.lo = c.addr[0];
    c.hi = c.addr[c.n - 1] + (c.size[c.n - 1] ? c.size[c.n - 1] : 1);
  }
  write_blocks(c);
  if (config.snapshot_contents) write_contents(c);
  index_blocks(c);
  scan_blocks(c);
  scan_roots(c);
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

__attribute__((noinline)) uint64_t current_sp() {
  return reinterpret_cast<uint64_t>(__builtin_frame_address(0));
}

// Starts the child. Returns false if it could not (then nothing is pending).
bool start(int trigger, const char *label) {
  if (g_child || g_taken >= config.snapshot_max) return false;
  uint32_t index = g_taken++;
  snprintf(g_child_path, sizeof(g_child_path), "%s.snapshot-%u.tmp", writer_capture_path(), index);
  int fd = open(g_child_path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  TotalsView t = read_totals();
  uint64_t when = now_rel_ns();
  // Registers of this thread onto its stack, where the child's scan of it will find them.
  __builtin_unwind_init();
  uint64_t sp = current_sp();
  uint64_t t0 = mono_ns();
  // A raw fork: no atfork handlers (the program's would run in a context they do not expect),
  // and no SIGCHLD (exit signal 0), so the program's wait() never sees this child.
  long pid = syscall(SYS_clone, 0, nullptr, nullptr, nullptr, nullptr);
  if (pid == 0) run_child(index, fd, sp, g_writer_lo, g_writer_hi);
  uint64_t pause = mono_ns() - t0;
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
  if (n >= sizeof(g_client_label)) n = sizeof(g_client_label) - 1;
  if (n) memcpy(g_client_label, label, n);
  g_client_label[n] = '\0';
  g_client_flag.store(true, std::memory_order_release);
}

void set_writer_stack(uint64_t lo, uint64_t hi) {
  g_writer_lo = lo;
  g_writer_hi = hi;
}

void writer_tick(uint64_t heap_bytes, uint64_t rss_bytes) {
  if (!config.snapshots) return;
  finish(false);
  if (g_child) return;
  uint64_t now = now_rel_ns();
  if (g_signal_flag.exchange(false)) {
    start(kSignal, "signal");
  } else if (g_client_flag.exchange(false, std::memory_order_acquire)) {
    start(kClient, g_client_label);
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
  g_child = 0;
  g_child_fd = -1;
  g_taken = 0;
}

void at_exit() {
  if (!config.snapshots) return;
  finish(true);
  // A request the writer had no tick left to serve (the program asked, then exited).
  if (g_client_flag.exchange(false, std::memory_order_acquire) && start(kClient, g_client_label)) finish(true);
  if (g_signal_flag.exchange(false) && start(kSignal, "signal")) finish(true);
  if (config.snapshot_at_exit && start(kExit, "exit")) finish(true);
}

}  // namespace hs::snapshot
