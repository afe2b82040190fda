// RSS over time, coarsely (issue 32): the Totals records' rss_parts (the shim's read of
// /proc/self/smaps_rollup about once a second) split into parts that add up to the RSS read with
// them. The capture is untrusted: figures that cannot hold (anonymous above rss) are clamped and
// the point says so. The fine breakdown at a snapshot is memory/memory_breakdown.h.
#pragma once
#include <cstdint>

#include "heapsnap.pb.h"

namespace heapsnap::replay {

struct RssPartsPoint {
  uint64_t time_ns = 0;
  uint64_t rss = 0;          // smaps_rollup's Rss; heap + heapsnap + other_anon + file == rss
  uint64_t heap = 0;         // the exact live heap (requested bytes), at most the anonymous pages
  uint64_t heapsnap = 0;     // heapsnap's private heap (a floor for its own RSS), within what is left
  uint64_t other_anon = 0;   // anonymous pages neither of those: allocator overhead and free memory, stacks, ...
  uint64_t file = 0;         // rss - anonymous: code, mapped files, shared memory
  uint64_t shmem = 0;        // of file: shared memory (Pss_Shmem; 0 when the kernel lacks it)
  uint64_t swap = 0;
  uint64_t cost_ns = 0;      // the read's time in the shim
  bool clamped = false;      // the record's figures did not fit together and were cut to fit
};

// t's parts (t.has_rss_parts() must hold).
RssPartsPoint rss_parts_of(const wire::Totals &t);

}  // namespace heapsnap::replay
