#include "snapshot/group_retained.h"

#include <utility>

namespace heapsnap::snapshot {

GroupFigures retained_by_group(const ObjectGraph &g, const HeapSnapshot &s, const std::vector<uint32_t> &group_of,
                               size_t groups) {
  GroupFigures f;
  f.retained.assign(groups, 0);
  f.shallow.assign(groups, 0);
  f.count.assign(groups, 0);
  f.instances.assign(groups, 0);
  f.first_block.assign(groups, UINT32_MAX);
  std::vector<uint32_t> active(groups, 0);  // members of each group on the current chain
  // Iterative walk of the dominator tree (no recursion: a 10^7-node list is a chain that deep):
  // an entry and a leave event per node keep the per-group nesting counts.
  std::vector<std::pair<uint32_t, bool>> stack{{0, false}};
  while (!stack.empty()) {
    auto [v, leaving] = stack.back();
    stack.pop_back();
    if (g.is_block(v)) {  // root objects and the leak node only lead to blocks
      uint32_t b = ObjectGraph::block_of(v);
      uint32_t grp = group_of[b];
      if (leaving) {
        --active[grp];
        continue;
      }
      if (!active[grp]) {
        f.retained[grp] += g.retained.bytes[v];
        ++f.instances[grp];
      }
      ++active[grp];
      f.shallow[grp] += s.size[b];
      ++f.count[grp];
      if (f.first_block[grp] == UINT32_MAX) f.first_block[grp] = b;
      stack.push_back({v, true});
    }
    for (uint32_t ch : g.children.successors(v)) stack.push_back({ch, false});
  }
  return f;
}

}  // namespace heapsnap::snapshot
