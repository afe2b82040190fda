// Heap over time for the report, thinned to a point budget without losing its shape: the time
// axis is cut into buckets and each keeps its lowest and highest heap and its highest RSS, so
// spikes and dips survive; the exact peak from the shim's totals is always a point of the line,
// and the line starts at time 0 with an empty heap.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "replay/replay.h"

namespace heapsnap::report {

struct SeriesPoint {
  uint64_t time_ns;
  int64_t heap_bytes;
  uint64_t rss_bytes;  // 0: not known at this point
};

// At most 3 * buckets + 2 points, in time order.
std::vector<SeriesPoint> thin_timeline(const std::vector<replay::TimePoint> &points, uint64_t peak_time_ns,
                                       uint64_t peak_bytes, size_t buckets);

}  // namespace heapsnap::report
