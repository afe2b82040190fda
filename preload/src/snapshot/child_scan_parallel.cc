// The blocks' edges on several threads (child_threads.h for how they are made, what they may do,
// and the ordered chunks this uses). The blocks are cut into chunks of consecutive blocks (about
// kChunkBytes of heap each, the cut depending on the blocks alone, never on the thread count);
// a thread scans a chunk into its slot: finished SnapshotEdges records, and the first words that
// may be vtable pointers. Thread 0 consumes the slots in chunk order: notes their types (the type
// table and its numbering stay single-threaded, in block order, as on one thread), appends their
// records to the snapshot's output and compresses. So the capture is the same bytes for any
// thread count above one; against one thread only where records and frames are cut differs (a
// chunk starts a record and is a frame of its own, compressed by the thread that made it), which
// the reader does not see: each block's edges are one group, sources increasing, in either case.
#include <atomic>
#include <new>

#include "core/private_heap.h"
#include "snapshot/child_edges.h"
#include "snapshot/child_threads.h"
#include "snapshot/child_types.h"

namespace hs::snapshot::child {
namespace {

// A chunk: at most this many bytes of blocks (a few milliseconds of a core), or blocks (few, small
// ones: the chunk's own cost, a claim and a merge, stays small against its scan).
constexpr uint64_t kChunkBytes = uint64_t(2) << 20;
constexpr uint32_t kChunkBlocks = 16384;

struct Slot {
  EdgeRecord e;
  wire::Buf out;     // the chunk's finished records
  wire::Buf frame;   // ... compressed (frame_len bytes)
  size_t frame_len = 0;
  wire::Buf firsts;  // (block, first word) pairs that may be vtable pointers
  bool failed = false;
};

struct Scan {
  Child *c;
  const ScanBounds sb;
  VtableFilter filter[64];  // one per thread (its gap changes)
  uint32_t *bounds = nullptr;  // chunk k is blocks [bounds[k], bounds[k + 1])
  Slot *slots = nullptr;
  FrameContexts zstd;
  explicit Scan(Child &child) : c(&child), sb(child) {}
};

bool make_slots(void *ctx, uint32_t n) {
  Scan &s = *static_cast<Scan *>(ctx);
  s.slots = arena_array<Slot>(n);
  return s.slots != nullptr;
}

HS_POPCNT_CLONES void scan_chunk(void *ctx, uint32_t k, uint32_t slot, uint32_t thread) {
  Scan &s = *static_cast<Scan *>(ctx);
  const Child &c = *s.c;
  VtableFilter &filter = s.filter[thread];
  Slot &sl = s.slots[slot];
  sl.out.clear();
  sl.firsts.clear();
  EdgeRecord &e = sl.e;
  e.out = &sl.out;
  e.index = c.index;
  e.total = e.total_interior = 0;
  auto keep = [&](uint32_t i, uint64_t w) {
    if (HS_UNLIKELY(filter.maybe(w))) {
      uint64_t pair[2] = {i, w};
      sl.firsts.bytes(pair, sizeof(pair));
    }
  };
  for (uint32_t i = s.bounds[k]; i < s.bounds[k + 1]; ++i)
    if (scan_block(c, s.sb, e, i, keep)) edge_record_flush(e);
  edge_record_flush(e);
  sl.failed = e.failed() || sl.firsts.failed() || !compress_chunk(s.zstd, thread, sl.out, sl.frame, &sl.frame_len);
}

void merge_chunk(void *ctx, uint32_t, uint32_t slot) {
  Scan &s = *static_cast<Scan *>(ctx);
  Child &c = *s.c;
  Slot &sl = s.slots[slot];
  if (sl.failed && !c.error) c.error = "out of memory (edges)";
  if (c.error) return;
  const auto *p = reinterpret_cast<const uint64_t *>(sl.firsts.data());
  for (size_t j = 0; j + 1 < sl.firsts.size() / 8; j += 2) type_note(c, uint32_t(p[j]), p[j + 1]);
  write_frame(c, sl.frame, sl.frame_len);
  c.edges += sl.e.total;
  c.interior += sl.e.total_interior;
}

}  // namespace

// (Declared in child_internal.h.) Used when threads::wanted() is more than one.
uint32_t scan_blocks_parallel(Child &c, uint32_t nthreads) {
  auto *mem = static_cast<Scan *>(heap::alloc_zeroed(sizeof(Scan)));
  threads::Ordered *o = static_cast<threads::Ordered *>(heap::alloc_zeroed(sizeof(threads::Ordered)));
  // (Room for a chunk per block at worst: the arena's untouched pages cost nothing.)
  uint32_t *bounds = static_cast<uint32_t *>(heap::alloc((size_t(c.n) + 2) * 4));
  if (!mem || !o || !bounds) {
    c.error = "out of memory (edges)";
    return 1;
  }
  Scan &s = *new (mem) Scan(c);
  new (o) threads::Ordered();
  for (VtableFilter &f : s.filter) f = types_filter(c);
  s.bounds = bounds;
  uint32_t i = 0;
  while (i < c.n) {
    bounds[o->nchunks++] = i;
    uint64_t bytes = 0;
    uint32_t end = c.n - i > kChunkBlocks ? i + kChunkBlocks : c.n;
    while (i < end && bytes < kChunkBytes) bytes += c.size[i++];
  }
  bounds[o->nchunks] = c.n;
  o->ctx = &s;
  o->produce = scan_chunk;
  o->consume = merge_chunk;
  uint32_t ran = threads::ordered(*o, nthreads, make_slots);
  if (!ran) c.error = "out of memory (edges)";
  return ran ? ran : 1;
}

}  // namespace hs::snapshot::child
