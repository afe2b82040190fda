// The steps of a path from a root to a block, as `heapsnap path` and the report's paths show them:
// the root word the path starts from, and the offset of the pointer each hop holds to the next
// (which the block's type turns into a field name: symbolize::TypeLayouts::field_at). One place,
// so that the terminal and the page name the same word and the same field.
#pragma once
#include <cstdint>

#include "snapshot/heap_snapshot.h"
#include "snapshot/root_objects.h"

namespace heapsnap::snapshot {

struct RootWord {
  uint32_t range = 0;    // index into HeapSnapshot::roots (the object's own range when not found)
  uint64_t offset = 0;   // of the word in its range
  uint64_t address = 0;  // the word's own address
  bool found = false;    // a word of the object points at the block
  // A stack word: the frame holding it (RootRange::frame_of; frame_pc names its function), else -1.
  int frame = -1;
};

// The word of root object `object` that points at `block`: in one of the object's ranges (a
// thread object has its stack's, its registers' and its TLS's). Out-of-range indexes (a damaged
// capture) give found = false.
RootWord root_word(const HeapSnapshot &s, const RootObjects &roots, uint32_t object, uint32_t block);

// The byte offset, inside block `from`, of its pointer to block `to`; UINT32_MAX when not known:
// no such edge, or the snapshot was loaded without edge offsets (LoadOptions::edge_offsets) or has
// given its edge arrays to the graph (GraphOptions::release_edges).
constexpr uint32_t kNoOffset = UINT32_MAX;
uint32_t pointer_offset(const HeapSnapshot &s, uint32_t from, uint32_t to);

}  // namespace heapsnap::snapshot
