// The functions of a stack root's frames, as the snapshot stepped them (RootRange::frame_pc):
// what `heapsnap roots` lists for a thread and what a path from a stack word says it is "in the
// frame of", in the terminal and in the report alike.
#pragma once
#include <cstddef>

#include "replay/stack_symbolizer.h"
#include "snapshot/heap_snapshot.h"

namespace heapsnap::replay {

// Frame i of a stack root's range: its physical function (the last of its pc's inline chain;
// frame 0's pc is exact, the others are return addresses), or nullptr when i is not a frame of
// the range or its pc was not symbolized.
const DisplayFrame *stack_root_frame(StackSymbolizer &sym, const snapshot::RootRange &rr, size_t i);

}  // namespace heapsnap::replay
