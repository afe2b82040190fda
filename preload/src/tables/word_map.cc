#include "tables/word_map.h"

#include <sys/mman.h>

namespace hs {

uint64_t *WordMap::create_leaf(size_t t) { return shadow::map_leaf(top_[t], leaf_bytes()); }

void WordMap::clear() {
  for (auto &t : top_)
    if (uint64_t *l = t.load(std::memory_order_relaxed)) madvise(l, leaf_bytes(), MADV_DONTNEED);
}

}  // namespace hs
