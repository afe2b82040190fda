#include "graph/retained.h"

#include <stdexcept>

namespace heapsnap::graph {

namespace {
// Prefetch distance, in nodes, for the retained sweep.
constexpr size_t kAhead = 16;
}  // namespace

RetainedSizes compute_retained(const DominatorTree& tree, std::span<const uint64_t> shallow_size) {
  if (shallow_size.size() != tree.idom.size())
    throw std::invalid_argument("compute_retained: shallow_size has the wrong length");
  return compute_retained_with(tree, [&](uint32_t v) { return shallow_size[v]; });
}

namespace detail {

void accumulate_retained(const DominatorTree& tree, RetainedSizes& r) {
  uint64_t* bytes = r.bytes.data();
  uint32_t* count = r.count.data();
  const uint32_t* idom = tree.idom.data();
  const uint32_t* order = tree.preorder.data();
  // Reverse preorder reaches every node after all of its dominator-tree descendants (an idom
  // precedes its children in preorder), so one sweep can add each finished node into its idom.
  // The sweep is sequential in preorder but scattered in node ids. The nodes it will reach are
  // known in advance, so their entries are prefetched in two stages: a node's own entries
  // first, then, once its idom id has arrived, the idom's.
  for (size_t i = tree.preorder.size(); i-- > 1;) {
    if (i >= kAhead) {
      const uint32_t far = order[i - kAhead];
      __builtin_prefetch(&idom[far]);
      __builtin_prefetch(&bytes[far], 1);
      __builtin_prefetch(&count[far], 1);
      const uint32_t near_idom = idom[order[i - kAhead / 2]];
      __builtin_prefetch(&bytes[near_idom], 1);
      __builtin_prefetch(&count[near_idom], 1);
    }
    const uint32_t v = order[i];
    bytes[idom[v]] += bytes[v];
    count[idom[v]] += count[v];
  }
}

}  // namespace detail

DomChildren dominator_children(const DominatorTree& tree) {
  const uint32_t num = static_cast<uint32_t>(tree.idom.size());
  if (tree.preorder.size() <= 1) {
    std::vector<uint32_t> none;
    return build_csr(num, none, none);
  }
  // Edges idom(v) -> v for every non-root reachable v, listed in preorder; the counting sort
  // in build_csr is stable, so children come out in preorder too.
  std::span<const uint32_t> children(tree.preorder.data() + 1, tree.preorder.size() - 1);
  std::vector<uint32_t> parents(children.size());
  for (size_t i = 0; i < children.size(); ++i) parents[i] = tree.idom[children[i]];
  return build_csr(num, parents, children);
}

}  // namespace heapsnap::graph
