// Random EventBatch records for the decoder tests (raw_events_test.cc, batch_decoder_test.cc):
// kinds of both formats (and now and then an unknown one), values of every varint length,
// columns sometimes too short (a damaged batch).
#pragma once
#include <cstdint>
#include <random>

#include "heapsnap.pb.h"

namespace heapsnap::testing {

inline uint64_t wide(std::mt19937_64 &rng) {
  switch (rng() % 5) {
    case 0: return rng() % 128;
    case 1: return rng() % 20000;
    case 2: return rng() % (1ull << 21);
    case 3: return rng() % (1ull << 35);
    default: return rng();
  }
}

// Format 1's kinds (ALLOC, REALLOC with alloc_fn and moved columns) beside format 2's; with
// shim_only, only the kinds the shim writes for ordinary blocks (the batch decoder's unchecked
// loop takes batches of those alone).
inline uint32_t random_kind(std::mt19937_64 &rng, bool shim_only = false) {
  if (shim_only) {
    static constexpr uint32_t kShim[] = {wire::FREE,         wire::FREE,           wire::REALLOC_IN_PLACE,
                                         wire::REALLOC_MOVED, wire::ALLOC_MALLOC,   wire::ALLOC_CALLOC,
                                         wire::ALLOC_REALLOC, wire::ALLOC_MEMALIGN, wire::ALLOC_NEW,
                                         wire::ALLOC_NEW_ARRAY};
    return kShim[rng() % (sizeof kShim / sizeof kShim[0])];
  }
  static constexpr uint32_t kKnown[] = {
      wire::ALLOC,        wire::FREE,          wire::REALLOC,      wire::POOL_ALLOC,    wire::POOL_FREE,
      wire::REALLOC_IN_PLACE, wire::REALLOC_MOVED, wire::ALLOC_MALLOC, wire::ALLOC_CALLOC, wire::ALLOC_REALLOC,
      wire::ALLOC_MEMALIGN, wire::ALLOC_NEW,   wire::ALLOC_NEW_ARRAY};
  if (rng() % 1000 == 0) return uint32_t(rng() % 20);  // unknown ones too (7, 14..19)
  return kKnown[rng() % (sizeof kKnown / sizeof kKnown[0])];
}

inline wire::EventBatch random_batch(std::mt19937_64 &rng, bool shim_only = false) {
  wire::EventBatch b;
  b.set_tid(uint32_t(rng()));
  b.set_base_time_ns(wide(rng));
  b.set_base_id(wide(rng));
  int n = int(rng() % 300);
  bool damaged = rng() % 4 == 0;
  bool few_sites = rng() % 2;  // FREE cursors hit often
  for (int i = 0; i < n; ++i) {
    b.add_kind(random_kind(rng, shim_only));
    b.add_time_delta_ns(wide(rng));
  }
  int m = damaged ? int(rng() % (n + 1)) : n;
  for (int i = 0; i < m; ++i) {
    if (rng() % 8) b.add_addr_delta(int64_t(wide(rng)) * (rng() % 2 ? 1 : -1));
    b.add_size(wide(rng));
    b.add_stack(few_sites ? uint32_t(rng() % 5) : uint32_t(rng() % 3 ? rng() % 200000 : rng()));
    if (rng() % 8) b.add_alloc_fn(uint32_t(rng() % 6));
    if (rng() % 8) b.add_pool(uint32_t(rng() % 4));
    b.add_id_delta(int64_t(wide(rng)) * (rng() % 2 ? 1 : -1));
    b.add_ref(int64_t(few_sites ? rng() % 4 : wide(rng)) * (rng() % 2 ? 1 : -1));
    if (rng() % 8) b.add_moved(uint32_t(rng() % 2));
  }
  return b;
}

}  // namespace heapsnap::testing
