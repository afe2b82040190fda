// Memcheck's classification of a snapshot's blocks (mc_leakcheck.c, reproduced without recursion):
//   reachable      a chain of start pointers from a root
//   possible       reached, but some pointer on every chain points inside a block
//   indirect       unreachable, but pointed to by another unreachable block
//   definite       unreachable and pointed to by no other unreachable block (a "clique leader")
// With interior = false, interior pointers are ignored altogether (memcheck's view without
// --leak-check-heuristics: blocks held only by them count as lost).
#pragma once
#include <cstdint>
#include <vector>

#include "snapshot/heap_snapshot.h"

namespace heapsnap::snapshot {

enum class Reach : uint8_t { kUnreached = 0, kReachable, kPossible, kIndirect, kDefinite };
const char *reach_name(Reach r);

struct ReachTotals {
  uint64_t blocks[5] = {0, 0, 0, 0, 0};
  uint64_t bytes[5] = {0, 0, 0, 0, 0};
};

struct Reachability {
  std::vector<Reach> state;        // per block
  std::vector<uint32_t> leader;    // per indirect block: the definite block of its clique
  ReachTotals totals;
};

Reachability classify(const HeapSnapshot &s, bool follow_interior = true);

}  // namespace heapsnap::snapshot
