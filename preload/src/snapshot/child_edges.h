// The block scan's edge records (SnapshotEdges) and the scan of one block's words, shared by the
// scan on one thread (scan_blocks, child_scan.cc) and on several (child_scan_parallel.cc).
// Everything here reads the frozen image and the block index and writes only the EdgeRecord it
// is given: no thread-local state, no system call (see child_threads.h).
#pragma once
#include <cstdint>

#include "snapshot/child_internal.h"

namespace hs::snapshot::child {

// Every pointer run of a block is an edge (a 60,000-entry pointer array has 60,000): a cap of
// 4096 made the rest of a big array's targets look lost. This one only keeps one block's group
// well inside a record the reader takes (16 Mi edges, about 100 MB of columns).
constexpr uint32_t kMaxEdgesPerBlock = 1u << 24;

struct EdgeRecord {
  wire::Buf *out = nullptr;   // where finished records go
  uint32_t index = 0;         // the snapshot's number
  wire::Buf from, count, to, interior, offset;
  wire::Buf vec_edge, vec_size, vec_cap;  // vector-like triples (vector_note)
  uint32_t base = 0, prev_source = 0, edges = 0, prev_interior = 0, prev_vector = 0;
  bool open = false;
  bool lost = false;  // a record's column could not grow: it was not written (sticky: clear() forgets)
  uint64_t total = 0, total_interior = 0, total_vectors = 0;  // edges, interior ones, triples: every record
  bool columns_failed() const {
    return from.failed() || count.failed() || to.failed() || interior.failed() || offset.failed() ||
           vec_edge.failed() || vec_size.failed() || vec_cap.failed();
  }
  bool failed() const { return lost || columns_failed() || out->failed(); }
};

// Writes the open record's columns to e.out.
inline void write_edge_record(EdgeRecord &e) {
  wire::Buf &o = *e.out;
  wire::RecordMark m = wire::begin_record(o, wire::kSnapshotEdges);
  o.u64(1, e.index);
  o.len(2, e.from.data(), e.from.size());
  o.len(3, e.count.data(), e.count.size());
  o.len(4, e.to.data(), e.to.size());
  if (e.interior.size()) o.len(5, e.interior.data(), e.interior.size());
  o.len(6, e.offset.data(), e.offset.size());
  o.u64(7, e.base);
  if (e.vec_edge.size()) {
    o.len(8, e.vec_edge.data(), e.vec_edge.size());
    o.len(9, e.vec_size.data(), e.vec_size.size());
    o.len(10, e.vec_cap.data(), e.vec_cap.size());
  }
  wire::end_record(o, m);
}


// Writes the open record to e.out (or, when a column could not grow, notes it lost). True if
// there was one.
inline bool edge_record_flush(EdgeRecord &e) {
  if (!e.open) return false;
  if (e.columns_failed()) {  // (out of memory: a record with a column cut short would be refused)
    e.lost = true;
    e.total -= e.edges;
  } else {
    write_edge_record(e);
  }
  e.from.clear();
  e.count.clear();
  e.to.clear();
  e.interior.clear();
  e.offset.clear();
  e.vec_edge.clear();
  e.vec_size.clear();
  e.vec_cap.clear();
  e.open = false;
  e.edges = 0;
  return true;
}

// Appends an edge of block i to the open edge record.
// A block's edges go straight into the record's columns as the scan finds them; its source and
// count follow once the block is done (they are columns of their own). A record is only cut
// between blocks: the reader wants each block's edges in one group, sources increasing.
HS_INLINE void edge_add(EdgeRecord &e, uint32_t i, uint32_t target, uint64_t offset, bool interior) {
  if (!e.open) {
    e.open = true;
    e.base = i;
    e.prev_source = i;
    e.prev_interior = 0;
    e.prev_vector = 0;
  }
  e.to.varint(wire::zigzag(int64_t(target) - int64_t(i)));
  e.offset.varint(offset);
  if (interior) {
    e.interior.varint(e.edges - e.prev_interior);
    e.prev_interior = e.edges;
    ++e.total_interior;
  }
  ++e.edges;
}

// Whether three words at a pointer's place, begin (== block t's start), finish and end, are a
// std::vector's header (libstdc++'s _M_start, _M_finish, _M_end_of_storage; libc++ has the same
// three): begin <= finish < end, end one past t's requested size (a vector's buffer is exactly
// its capacity: allocator<T>::allocate(n) asks for n * sizeof(T)). A finish at end leaves no spare
// capacity: nothing to say. *size: finish - begin. Cheap tests first: most start pointers are
// followed by words that are no pointers at all, and t's size is only read when these pass.
HS_INLINE bool vector_triple(const Child &c, uint32_t t, uint64_t begin, uint64_t finish, uint64_t end,
                             uint64_t *size) {
  if (finish < begin || end <= finish || end - begin != c.size[t]) return false;
  *size = finish - begin;
  return true;
}

// Notes the last edge added (ordinal e.edges - 1) as the start of a vector-like triple.
HS_INLINE void vector_note(EdgeRecord &e, uint64_t size, uint64_t capacity) {
  const uint32_t ordinal = e.edges - 1;
  e.vec_edge.varint(ordinal - e.prev_vector);
  e.prev_vector = ordinal;
  e.vec_size.varint(size);
  e.vec_cap.varint(capacity);
  ++e.total_vectors;
}

// Ends block i's group of k edges. True when the record is full (the caller flushes it).
HS_INLINE bool edge_end_block(EdgeRecord &e, uint32_t i, uint32_t k) {
  e.from.varint(i - e.prev_source);
  e.prev_source = i;
  e.count.varint(k);
  e.total += k;
  return e.edges >= kEdgesPerRecord;
}

// What the scan of every block compares words against.
struct ScanBounds {
  uint64_t lo, span;  // [c.lo, c.lo + span): the blocks' addresses
  // Under glibc, a block's own chunk address (16 bytes before it) is never the program's pointer:
  // a word holding it is what glibc left in the memory when it was a free chunk (a large bin's
  // fd_nextsize / bk_nextsize of a chunk alone in its size class point at the chunk itself), and it
  // falls in the block before, whose last 8 bytes overlap the chunk's header: a leaked block would
  // hold its leaked neighbour "indirectly" (memcheck, on fresh memory, sees neither).
  uint64_t own_chunk;
  explicit ScanBounds(const Child &c) : lo(c.lo), span(c.hi - c.lo), own_chunk(usable::g_glibc_layout ? 16 : 0) {}
};

// Scans block i's words for pointers into blocks, adding its edges to e; first_word(i, w) is
// given the block's first word (a polymorphic object's vtable pointer, child_types.h). True when
// the record is full.
template <typename FirstWord>
HS_INLINE bool scan_block(const Child &c, const ScanBounds &sb, EdgeRecord &e, uint32_t i, FirstWord first_word) {
  uint64_t a = c.addr[i];
  uint64_t words = c.size[i] / 8;
  uint32_t k = 0, last = UINT32_MAX;
  bool last_interior = false;
  const uint64_t *w = reinterpret_cast<const uint64_t *>(a);
  if (words) first_word(i, w[0]);
  for (uint64_t j = 0; j < words; ++j) {
    uint64_t v = w[j];
    if (v - sb.lo >= sb.span) continue;
    bool interior = false;
    uint32_t t = lookup(c, v, &interior);
    // The same block twice in a row: one edge, unless this word is a start pointer after an
    // interior one (a {cursor, start} pair: git's mem pools). Dropped, it left only the interior
    // edge, and the block "possibly lost" where memcheck sees it reachable.
    if (t == UINT32_MAX || (t == last && (interior || !last_interior))) continue;
    if (HS_UNLIKELY(v == a - sb.own_chunk) && sb.own_chunk) continue;
    last = t;
    last_interior = interior;
    edge_add(e, i, t, j * 8 > 0xffffffffu ? 0xffffffffu : j * 8, interior);
    uint64_t live;
    if (!interior && j + 2 < words && vector_triple(c, t, v, w[j + 1], w[j + 2], &live)) vector_note(e, live, c.size[t]);
    if (++k == kMaxEdgesPerBlock) break;
  }
  return k && edge_end_block(e, i, k);
}

}  // namespace hs::snapshot::child
