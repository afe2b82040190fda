#include "snapshot/path_steps.h"

#include <algorithm>

namespace heapsnap::snapshot {

RootWord root_word(const HeapSnapshot &s, const RootObjects &roots, uint32_t object, uint32_t block) {
  RootWord w;
  if (object < roots.objects.size()) w.range = roots.objects[object].range;
  const size_t words = std::min({s.root_target.size(), s.root_offset.size(), roots.object_of_word.size()});
  for (uint32_t r = 0; r < s.roots.size() && !w.found; ++r) {
    const RootRange &rr = s.roots[r];
    for (uint64_t k = rr.first; k < uint64_t(rr.first) + rr.count && k < words; ++k)
      if (roots.object_of_word[k] == object && s.root_target[k] == block) {
        w.range = r;
        w.offset = s.root_offset[k];
        w.found = true;
        break;
      }
  }
  if (w.range < s.roots.size()) {
    const RootRange &rr = s.roots[w.range];
    w.address = rr.start + w.offset;
    if (w.found && rr.kind == kStack) w.frame = rr.frame_of(w.address);
  }
  return w;
}

uint32_t pointer_offset(const HeapSnapshot &s, uint32_t from, uint32_t to) {
  if (size_t(from) + 1 >= s.edge_begin.size()) return kNoOffset;
  const uint64_t end = std::min<uint64_t>({s.edge_begin[from + 1], s.edge_target.size(), s.edge_offset.size()});
  for (uint64_t k = s.edge_begin[from]; k < end; ++k)
    if (s.edge_target[k] == to) return s.edge_offset[k];
  return kNoOffset;
}

}  // namespace heapsnap::snapshot
