#include "word_map.h"

#include <sys/mman.h>

namespace hs {

uint64_t *WordMap::create_leaf(size_t t) {
  void *m = mmap(nullptr, leaf_bytes(), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED) return nullptr;
  auto *l = static_cast<uint64_t *>(m);
  uint64_t *expected = nullptr;
  if (!top_[t].compare_exchange_strong(expected, l, std::memory_order_acq_rel)) {
    munmap(m, leaf_bytes());  // another thread won the race
    return expected;
  }
  return l;
}

void WordMap::clear() {
  for (auto &t : top_)
    if (uint64_t *l = t.load(std::memory_order_relaxed)) madvise(l, leaf_bytes(), MADV_DONTNEED);
}

}  // namespace hs
