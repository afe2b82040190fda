#include "shadow_map.h"

namespace hs::shadow {

std::atomic<uint8_t *> top[kTopEntries];

uint8_t *create_leaf(size_t index) { return map_leaf(top[index], kLeafBytes); }

}  // namespace hs::shadow
