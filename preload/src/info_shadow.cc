#include "info_shadow.h"

#include <sys/mman.h>

namespace hs::info {

std::atomic<uint64_t *> top[shadow::kTopEntries];
bool enabled = false;
unsigned unit_shift = shadow::kGranuleShift;

void init(bool glibc_layout) { unit_shift = glibc_layout ? 5 : shadow::kGranuleShift; }

uint64_t *create_leaf(size_t index) {
  void *m = mmap(nullptr, leaf_bytes(), PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED) return nullptr;
  auto *leaf = static_cast<uint64_t *>(m);
  uint64_t *expected = nullptr;
  if (!top[index].compare_exchange_strong(expected, leaf, std::memory_order_acq_rel)) {
    munmap(m, leaf_bytes());
    return expected;
  }
  return leaf;
}

}  // namespace hs::info
