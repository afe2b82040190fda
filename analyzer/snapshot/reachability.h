// Memcheck's classification of a snapshot's blocks (mc_leakcheck.c, reproduced without recursion):
//   reachable      a chain of start pointers from a root
//   possible       reached, but some pointer on every chain points inside a block
//   indirect       unreachable, but pointed to by another unreachable block
//   definite       unreachable and pointed to by no other unreachable block (a "clique leader")
// With interior = false, interior pointers are ignored altogether (memcheck's view without
// --leak-check-heuristics: blocks held only by them count as lost).
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "graph/csr_graph.h"
#include "graph/dominators.h"
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

// The same leak cliques over an object graph (snapshot/object_graph.h), for blocks that nodes
// first_block .. first_block + num_blocks - 1 stand for, in address order: what `root` does not
// reach is unreachable, and the unreachable blocks fall into cliques as classify() makes them
// (an unclaimed block leads the clique of what it reaches; an earlier leader reached later joins
// the later clique). The graph's edges are the ones to follow (interior ones or not, as it was
// built). Memory: two bits a node and the walk's stack.
struct LeakCliques {
  std::vector<uint32_t> leader;  // nodes of the definite blocks, ascending
  std::vector<bool> cycle;       // per leader: a block of its clique points back at it
  uint64_t unreachable = 0;      // unreachable block nodes
};
LeakCliques leak_cliques(const graph::CsrGraph &g, uint32_t first_block, uint32_t num_blocks, uint32_t root = 0);
// The same cliques when the reachable nodes are known already: those the dominators' DFS has
// entered (graph::LateNode). Reads the edges of unreached nodes only.
LeakCliques leak_cliques_unreached(const graph::DfsView &dfs, uint32_t first_block, uint32_t num_blocks);

}  // namespace heapsnap::snapshot
