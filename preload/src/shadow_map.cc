#include "shadow_map.h"

namespace hs::shadow {

std::atomic<uint8_t *> top[kTopEntries];

namespace {
// Never written: its pages stay the kernel's zero page.
std::atomic<uint8_t *> no_leaves[kTopEntries];
}  // namespace

std::atomic<std::atomic<uint8_t *> *> fast_top{no_leaves};

void enable_fast_paths(bool on) { fast_top.store(on ? top : no_leaves, std::memory_order_relaxed); }

uint8_t *create_leaf(size_t index) { return map_leaf(top[index], kLeafBytes); }

}  // namespace hs::shadow
