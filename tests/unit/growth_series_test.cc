// --snapshot-on-growth's bookkeeping (preload/src/snapshot/growth_series.h): when the next
// snapshot is due, and which ones stay when there are more than --max-snapshots.
#include <doctest/doctest.h>

#include <cstddef>
#include <vector>

#include "snapshot/growth_series.h"

using hs::snapshot::GrowthSeries;

namespace {

// Feeds a heap growing by `step` bytes at a time up to `top`, taking a snapshot each time the
// series says one is due; returns the kept snapshots' heaps.
std::vector<int64_t> grow(GrowthSeries &g, int64_t step, int64_t top, uint32_t *taken) {
  uint32_t index = 0, dropped[GrowthSeries::kMaxKept];
  *taken = 0;
  for (int64_t heap = 0; heap <= top; heap += step)
    if (heap >= g.next_level()) {
      g.taken(index++, heap, dropped);
      ++*taken;
    }
  std::vector<int64_t> out;
  for (uint32_t i = 0; i < g.size(); ++i) out.push_back(g.heap_at(i));
  return out;
}

}  // namespace

TEST_CASE("a size step: one snapshot per step, until the cap thins them evenly") {
  GrowthSeries g;
  g.configure(10 << 20, 0, 4);
  CHECK(g.next_level() == 10 << 20);
  uint32_t taken = 0;
  // Grows to 40 MiB: 4 snapshots, none dropped.
  std::vector<int64_t> kept = grow(g, 1 << 20, 40 << 20, &taken);
  CHECK(taken == 4);
  CHECK(kept == std::vector<int64_t>{10 << 20, 20 << 20, 30 << 20, 40 << 20});
  CHECK(g.thinned() == 0);
}

TEST_CASE("thinning keeps the first, every other one and the newest, and doubles the step") {
  GrowthSeries g;
  g.configure(10, 0, 4);
  uint32_t dropped[GrowthSeries::kMaxKept];
  for (uint32_t i = 0; i < 4; ++i) CHECK(g.taken(i, 10 * int64_t(i + 1), dropped) == 0);
  uint32_t gone = g.taken(4, 50, dropped);
  REQUIRE(gone == 2);
  CHECK(dropped[0] == 1);
  CHECK(dropped[1] == 3);
  REQUIRE(g.size() == 3);
  CHECK(g.index_at(0) == 0);
  CHECK(g.index_at(1) == 2);
  CHECK(g.index_at(2) == 4);
  CHECK(g.step_bytes() == 20);
  CHECK(g.next_level() == 70);
  CHECK(g.thinned() == 1);
}

TEST_CASE("a long growth ends with at most max snapshots spread over it, the first and the last among them") {
  GrowthSeries g;
  g.configure(1 << 20, 0, 6);
  uint32_t taken = 0;
  std::vector<int64_t> kept = grow(g, 1 << 18, int64_t(1000) << 20, &taken);
  CHECK(taken > 6);
  REQUIRE(kept.size() <= 6);
  REQUIRE(kept.size() >= 3);
  CHECK(kept.front() == 1 << 20);
  CHECK(kept.back() >= (int64_t(1000) << 20) / 2);  // the newest is within the last doubled step
  // Evenly: no gap between neighbours more than twice another's (the step doubles once at most
  // between two thinnings).
  for (size_t i = 2; i < kept.size(); ++i) CHECK(kept[i] - kept[i - 1] <= 2 * (kept[i - 1] - kept[i - 2]) + (1 << 20));
}

TEST_CASE("a percentage counts from 1 MiB and compounds when thinned") {
  GrowthSeries g;
  g.configure(0, 10, 3);
  CHECK(g.next_level() == GrowthSeries::kPercentFloor);
  uint32_t dropped[GrowthSeries::kMaxKept];
  g.taken(0, 100 << 20, dropped);
  CHECK(g.next_level() == (100 << 20) + (100 << 20) / 100 * 10 + 1);
  g.taken(1, 110 << 20, dropped);
  g.taken(2, 121 << 20, dropped);
  CHECK(g.taken(3, 134 << 20, dropped) == 1);
  CHECK(g.step_pct() == 21);  // 1.1^2 = 1.21
}

TEST_CASE("a failed snapshot is forgotten") {
  GrowthSeries g;
  g.configure(10, 0, 4);
  uint32_t dropped[GrowthSeries::kMaxKept];
  g.taken(0, 10, dropped);
  g.taken(1, 20, dropped);
  g.forget(0);
  REQUIRE(g.size() == 1);
  CHECK(g.index_at(0) == 1);
}
