// Heap over time for the report. The shim writes a Totals record (exact heap, RSS) once per flush,
// every 100 ms: a short run has a handful. heap_points adds what the events say between them; then
// thin_timeline cuts the line to a point budget without losing its shape: the time axis is cut
// into buckets and each keeps its lowest and highest heap and its highest RSS, so spikes and dips
// survive; the exact peak from the shim's totals is always a point of the line, and the line
// starts at time 0 with an empty heap.
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

// The Totals records (in time order) with, where the replay counted the events' changes per time
// cell (replay::HeapCells), a point at the end of each cell with a change, and one at its start
// when no cell had a change for 10 ms before (the heap held its level until then: a step, not a
// slope). Its
// RSS is 0 (not known there). exact (every allocation recorded): the heap is the events' running
// sum, at the Totals records too (a Totals record's heap lags by what the threads have not folded
// into the shared counters yet). Sampled: the events' running sum corrected to pass through the
// Totals records (the correction interpolated between them), since the events are an estimate.
// Heaps are kept within [0, peak_bytes]; no point is later than end_ns (unless its cell starts
// later).
std::vector<replay::TimePoint> heap_points(const std::vector<replay::TimePoint> &totals, const replay::HeapCells &cells,
                                           bool exact, uint64_t end_ns, uint64_t peak_bytes);

// At most 3 * buckets + 2 points, in time order; every point kept when there are no more than
// 3 * buckets.
std::vector<SeriesPoint> thin_timeline(const std::vector<replay::TimePoint> &points, uint64_t peak_time_ns,
                                       uint64_t peak_bytes, size_t buckets);

}  // namespace heapsnap::report
