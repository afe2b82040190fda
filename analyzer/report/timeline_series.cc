#include "report/timeline_series.h"

#include <algorithm>
#include <cmath>

namespace heapsnap::report {

// A level held this long before a change is drawn as a step. Shorter gaps are the clock's: event
// times come from a coarse clock (a tick of 1 to 4 ms), so a steady climb has changes one tick
// apart and empty cells between, which would otherwise draw a staircase.
constexpr uint64_t kHoldNs = 10'000'000;

std::vector<replay::TimePoint> heap_points(const std::vector<replay::TimePoint> &totals, const replay::HeapCells &cells,
                                           bool exact, uint64_t end_ns, uint64_t peak_bytes) {
  const std::vector<double> &delta = cells.delta;
  if (delta.empty()) return totals;
  const uint32_t shift = cells.shift;
  // The events' running sum after each cell.
  std::vector<double> sum(delta.size());
  double acc = 0;
  for (size_t c = 0; c < delta.size(); ++c) sum[c] = acc += delta[c];
  auto events_at = [&](uint64_t t) {  // after every event of t's cell
    uint64_t c = t >> shift;
    return c < sum.size() ? sum[c] : acc;
  };
  // Sampled: the correction at each Totals record (0 at time 0, when the heap is empty and no
  // event came), interpolated between them.
  std::vector<std::pair<uint64_t, double>> fix{{0, 0.0}};
  if (!exact)
    for (const auto &p : totals)
      if (p.time_ns >= fix.back().first) fix.push_back({p.time_ns, double(p.heap_bytes) - events_at(p.time_ns)});
  auto correction = [&](uint64_t t) {
    auto at = std::upper_bound(fix.begin(), fix.end(), t, [](uint64_t v, const auto &f) { return v < f.first; });
    if (at == fix.end()) return fix.back().second;
    const auto &lo = *(at - 1), &hi = *at;  // lo.first <= t < hi.first
    return lo.second + (hi.second - lo.second) * double(t - lo.first) / double(hi.first - lo.first);
  };
  const double top = peak_bytes ? double(peak_bytes) : std::max(acc, 0.0) + 1e18;
  auto heap = [&](uint64_t t, double events) { return int64_t(std::clamp(std::round(events + correction(t)), 0.0, top)); };
  std::vector<replay::TimePoint> from_events;
  uint64_t last = 0;  // the end of the last cell with a change
  for (size_t c = 0; c < delta.size(); ++c) {
    if (delta[c] == 0) continue;
    uint64_t start = uint64_t(c) << shift, end = std::max(start, std::min(uint64_t(c + 1) << shift, end_ns));
    if (c > 0 && start - last >= kHoldNs) from_events.push_back({start, heap(start, sum[c - 1]), 0, 0, 0});
    from_events.push_back({end, heap(end, sum[c]), 0, 0, 0});
    last = end;
  }
  std::vector<replay::TimePoint> records = totals;
  if (exact)  // the events' heap at the records too: theirs lags by what the threads had not folded in yet
    for (auto &p : records) p.heap_bytes = heap(p.time_ns, events_at(p.time_ns));
  std::vector<replay::TimePoint> out(records.size() + from_events.size());
  std::merge(records.begin(), records.end(), from_events.begin(), from_events.end(), out.begin(),
             [](const replay::TimePoint &a, const replay::TimePoint &b) { return a.time_ns < b.time_ns; });
  return out;
}

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
