// The blocks' edges on several threads (child_threads.h for how they are made and what they may
// do). The blocks are cut into chunks of consecutive blocks (about kChunkBytes of heap each, the
// cut depending on the blocks alone, never on the thread count); each thread claims the next chunk
// (an atomic counter: a thread that gets less CPU simply claims fewer) and scans it into a slot of
// its own: finished SnapshotEdges records, and the first words that may be vtable pointers. The
// starting thread (k = 0) scans too and merges: it takes the slots in chunk order, notes their
// types (the type table and its numbering stay single-threaded, in block order, as on one thread),
// appends their records to the snapshot's output and compresses. So the capture is the same bytes
// for any thread count above one; against one thread only where records are cut differs (a chunk
// starts a record), which the reader does not see: each block's edges are one group, sources
// increasing, in either case. A ring of 4 slots per thread bounds the memory held: a thread waits
// for the merge when it would run more than that ahead.
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
constexpr uint32_t kSlotsPerThread = 4;

struct Slot {
  EdgeRecord e;
  wire::Buf out;     // the chunk's finished records
  wire::Buf firsts;  // (block, first word) pairs that may be vtable pointers
  bool failed = false;
  std::atomic<uint32_t> done{0};  // the chunk number + 1, once its scan is in the slot
};

struct Scan {
  Child *c;
  const ScanBounds sb;
  VtableFilter filter;  // a copy per thread is taken from it
  uint32_t *bounds = nullptr;  // chunk k is blocks [bounds[k], bounds[k + 1])
  uint32_t nchunks = 0;
  Slot *slots = nullptr;
  uint32_t nslots = 0;
  std::atomic<uint32_t> next{0};       // the next chunk to claim
  std::atomic<uint32_t> emitted{0};    // chunks merged (written by thread 0 only)
  std::atomic<uint32_t> completed{0};  // chunks scanned (thread 0 waits on it)
  explicit Scan(Child &child) : c(&child), sb(child) {}
};

HS_POPCNT_CLONES void scan_chunk(Scan &s, uint32_t k, VtableFilter &filter) {
  const Child &c = *s.c;
  Slot &sl = s.slots[k % s.nslots];
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
  sl.failed = e.failed() || sl.firsts.failed();
  sl.done.store(k + 1, std::memory_order_release);
  s.completed.fetch_add(1, std::memory_order_release);
  threads::wake_all(s.completed);
}

// Thread 0: merges the chunks scanned since the last call, in order. True if it merged any.
bool merge_ready(Scan &s) {
  Child &c = *s.c;
  bool any = false;
  for (uint32_t k = s.emitted.load(std::memory_order_relaxed); k < s.nchunks; ++k) {
    Slot &sl = s.slots[k % s.nslots];
    if (sl.done.load(std::memory_order_acquire) != k + 1) break;
    if (sl.failed && !c.error) c.error = "out of memory (edges)";
    if (!c.error) {
      const auto *p = reinterpret_cast<const uint64_t *>(sl.firsts.data());
      for (size_t j = 0; j + 1 < sl.firsts.size() / 8; j += 2) type_note(c, uint32_t(p[j]), p[j + 1]);
      c.out.bytes(sl.out.data(), sl.out.size());
      c.edges += sl.e.total;
      c.interior += sl.e.total_interior;
      flush_frame(c, false);
    }
    s.emitted.store(k + 1, std::memory_order_release);
    threads::wake_all(s.emitted);
    any = true;
  }
  return any;
}

// Thread 0 waits for the next chunk in order to be scanned, merging meanwhile.
void merge_or_wait(Scan &s) {
  uint32_t seen = s.completed.load(std::memory_order_acquire);  // (before the check: no lost wake)
  if (!merge_ready(s)) threads::wait_while(s.completed, seen);
}

void work(void *arg, uint32_t k) {
  Scan &s = *static_cast<Scan *>(arg);
  VtableFilter filter = s.filter;
  const bool merger = k == 0;
  for (;;) {
    if (merger) merge_ready(s);
    uint32_t n = s.next.fetch_add(1, std::memory_order_relaxed);
    if (n >= s.nchunks) break;
    // Chunk n's slot is free once chunk n - nslots is merged.
    for (uint32_t e; n >= (e = s.emitted.load(std::memory_order_acquire)) + s.nslots;) {
      if (merger) merge_or_wait(s);
      else threads::wait_while(s.emitted, e);
    }
    scan_chunk(s, n, filter);
  }
  if (merger)
    while (s.emitted.load(std::memory_order_relaxed) < s.nchunks) merge_or_wait(s);
}

}  // namespace

// (Declared in child_internal.h.) Used when threads::wanted() is more than one.
uint32_t scan_blocks_parallel(Child &c, uint32_t nthreads) {
  auto *mem = static_cast<Scan *>(heap::alloc_zeroed(sizeof(Scan)));
  if (!mem) {
    c.error = "out of memory (edges)";
    return 1;
  }
  Scan &s = *new (mem) Scan(c);
  s.filter = types_filter(c);
  // (Room for a chunk per block at worst: the arena's untouched pages cost nothing.)
  s.bounds = static_cast<uint32_t *>(heap::alloc((size_t(c.n) + 2) * 4));
  if (!s.bounds) {
    c.error = "out of memory (edges)";
    return 1;
  }
  uint32_t i = 0;
  while (i < c.n) {
    s.bounds[s.nchunks++] = i;
    uint64_t bytes = 0;
    uint32_t end = c.n - i > kChunkBlocks ? i + kChunkBlocks : c.n;
    while (i < end && bytes < kChunkBytes) bytes += c.size[i++];
  }
  s.bounds[s.nchunks] = c.n;
  if (nthreads > s.nchunks) nthreads = s.nchunks ? s.nchunks : 1;  // (a thread without a chunk is no help)
  s.nslots = kSlotsPerThread * nthreads;
  auto *slots = static_cast<Slot *>(heap::alloc_zeroed(size_t(s.nslots) * sizeof(Slot)));
  if (!slots) {
    c.error = "out of memory (edges)";
    return 1;
  }
  for (uint32_t k = 0; k < s.nslots; ++k) new (&slots[k]) Slot();
  s.slots = slots;
  return threads::run(nthreads, work, &s);
}

}  // namespace hs::snapshot::child
