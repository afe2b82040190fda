#include "shadow_map.h"

#include <sys/mman.h>

namespace hs::shadow {

std::atomic<uint8_t *> top[kTopEntries];

uint8_t *create_leaf(size_t index) {
  void *m = mmap(nullptr, kLeafBytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED) return nullptr;
  uint8_t *leaf = static_cast<uint8_t *>(m);
  uint8_t *expected = nullptr;
  if (!top[index].compare_exchange_strong(expected, leaf, std::memory_order_acq_rel)) {
    munmap(m, kLeafBytes);  // another thread won the race
    return expected;
  }
  return leaf;
}

}  // namespace hs::shadow
