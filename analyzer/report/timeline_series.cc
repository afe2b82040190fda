#include "report/timeline_series.h"

#include <algorithm>

namespace heapsnap::report {

std::vector<SeriesPoint> thin_timeline(const std::vector<replay::TimePoint> &points, uint64_t peak_time_ns,
                                       uint64_t peak_bytes, size_t buckets) {
  std::vector<SeriesPoint> out;
  size_t n = points.size();
  buckets = std::max<size_t>(buckets, 1);
  if (n <= 3 * buckets) {
    for (const auto &p : points) out.push_back({p.time_ns, p.heap_bytes, p.rss_bytes});
  } else {
    uint64_t t0 = points.front().time_ns, t1 = points.back().time_ns;
    double span = double(t1 - t0) + 1;
    size_t i = 0;
    for (size_t b = 0; b < buckets && i < n; ++b) {
      uint64_t end = t0 + uint64_t(span * double(b + 1) / double(buckets));
      size_t lo = i, hi = i, rss = i, first = i;
      for (; i < n && (points[i].time_ns < end || b + 1 == buckets); ++i) {
        if (points[i].heap_bytes < points[lo].heap_bytes) lo = i;
        if (points[i].heap_bytes > points[hi].heap_bytes) hi = i;
        if (points[i].rss_bytes > points[rss].rss_bytes) rss = i;
      }
      if (i == first) continue;  // an empty bucket
      size_t idx[3] = {lo, hi, rss};
      std::sort(idx, idx + 3);
      for (int k = 0; k < 3; ++k)
        if (k == 0 || idx[k] != idx[k - 1]) out.push_back({points[idx[k]].time_ns, points[idx[k]].heap_bytes, points[idx[k]].rss_bytes});
    }
  }
  // The capture starts with an empty heap: the line starts there, not at the first flush.
  if (!out.empty() && out.front().time_ns > 0) out.insert(out.begin(), SeriesPoint{0, 0, 0});
  // The exact peak (it may fall between two Totals records).
  if (peak_bytes > 0) {
    auto at = std::lower_bound(out.begin(), out.end(), peak_time_ns,
                               [](const SeriesPoint &p, uint64_t t) { return p.time_ns < t; });
    if (at != out.end() && at->time_ns == peak_time_ns) {
      at->heap_bytes = std::max<int64_t>(at->heap_bytes, int64_t(peak_bytes));
    } else {
      out.insert(at, SeriesPoint{peak_time_ns, int64_t(peak_bytes), 0});
    }
  }
  return out;
}

}  // namespace heapsnap::report
