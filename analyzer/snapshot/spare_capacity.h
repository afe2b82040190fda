// A std::vector's spare capacity: the words of its buffer between size and capacity still hold
// what was there (elements popped, erased or moved out; a reused block's old contents) and a
// conservative scan takes the pointers among them as edges (issue 29: stale_app's g_vec kept the
// 990 nodes its list owns shared, so g_list retained none of them). The snapshot child notes each
// begin/finish/end_of_storage triple it sees (SnapshotEdges/SnapshotRoots vector_*, read into
// HeapSnapshot::vectors); here they are checked, and the edges from the words of a confirmed
// buffer at or past its size are the ones to drop.
//
// A drop that is wrong makes live memory look unreachable, so a buffer is confirmed only when
// everything agrees: the triple's begin is a start pointer to the buffer, its capacity is the
// buffer's requested size exactly (allocator<T>::allocate(n) asks for n * sizeof(T)), its size
// below that and above 0 (an empty vector's buffer is left as it is: a std::deque iterator at the
// start of a chunk has the same three words); exactly one triple names the buffer (one owner: a second header, or a stale copy
// of one, makes it no vector); the buffer has no vtable (a polymorphic object is no buffer);
// and the triple's own word does not lie in another confirmed buffer's spare capacity (a stale
// header inside a vector<vector<T>>'s spare room names a block that may since be something else).
#pragma once
#include <cstdint>
#include <vector>

#include "snapshot/heap_snapshot.h"

namespace heapsnap::snapshot {

struct SpareCapacity {
  std::vector<bool> drop;   // per edge (HeapSnapshot::edge_target): from a buffer's spare capacity; empty: none
  uint64_t buffers = 0;     // vector buffers confirmed
  uint64_t dropped = 0;     // edges to drop
  uint64_t triples = 0;     // triples the snapshot holds (checked or not)
};

// Needs the edge offsets (LoadOptions::edge_offsets): without them nothing is dropped.
SpareCapacity spare_capacity_edges(const HeapSnapshot &s);

}  // namespace heapsnap::snapshot
