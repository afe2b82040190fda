// The byte sampler's weighted estimates are unbiased: simulate the shim's countdown over a known
// mix of allocation sizes and check the estimates of bytes and counts against the truth.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "sampling/sampler.h"

namespace {

struct Estimate {
  double bytes = 0, count = 0, small_bytes = 0;
};

// Same logic as the shim's fast path: subtract, sample when the countdown is used up, redraw.
Estimate run(uint64_t seed, uint64_t mean, const std::vector<uint64_t> &sizes) {
  uint64_t rng = seed | 1;
  int64_t countdown = hs::draw_sample_gap(rng, mean);
  Estimate e;
  for (uint64_t s : sizes) {
    countdown -= int64_t(s);
    if (countdown > 0) continue;
    countdown = hs::draw_sample_gap(rng, mean);
    double p = 1.0 - std::exp(-double(s) / double(mean));
    e.bytes += double(s) / p;
    e.count += 1.0 / p;
    if (s <= 64) e.small_bytes += double(s) / p;
  }
  return e;
}

std::vector<uint64_t> workload(uint64_t seed, size_t n) {
  // 70% tiny (16..64 B), 25% medium (100..4000 B), 5% large (10 KiB..1 MiB).
  std::vector<uint64_t> v;
  v.reserve(n);
  uint64_t r = seed | 1;
  for (size_t i = 0; i < n; ++i) {
    uint64_t x = hs::next_random(r);
    uint64_t bucket = x % 100;
    uint64_t y = hs::next_random(r);
    if (bucket < 70) v.push_back(16 + y % 49);
    else if (bucket < 95) v.push_back(100 + y % 3901);
    else v.push_back(10240 + y % (1048576 - 10240));
  }
  return v;
}

}  // namespace

TEST_CASE("sampler: weighted estimates of bytes and counts are unbiased within stated error") {
  const auto sizes = workload(42, 400000);
  double true_bytes = 0, true_count = double(sizes.size()), true_small = 0;
  for (uint64_t s : sizes) {
    true_bytes += double(s);
    if (s <= 64) true_small += double(s);
  }
  const uint64_t mean = 64 * 1024;
  // Averaged over 40 independent runs, the estimates must land within 2% (bytes) and 5% (count,
  // dominated by rarely sampled tiny blocks) of the truth; each single run within 10% / 30%.
  double sum_b = 0, sum_c = 0, sum_s = 0;
  const int runs = 40;
  for (int i = 0; i < runs; ++i) {
    Estimate e = run(1000 + uint64_t(i) * 7919, mean, sizes);
    CHECK(std::fabs(e.bytes / true_bytes - 1) < 0.10);
    CHECK(std::fabs(e.count / true_count - 1) < 0.30);
    sum_b += e.bytes;
    sum_c += e.count;
    sum_s += e.small_bytes;
  }
  CHECK(std::fabs(sum_b / runs / true_bytes - 1) < 0.02);
  CHECK(std::fabs(sum_c / runs / true_count - 1) < 0.05);
  CHECK(std::fabs(sum_s / runs / true_small - 1) < 0.15);
}

TEST_CASE("sampler: mean 1 samples every allocation") {
  uint64_t rng = 7;
  int64_t countdown = hs::draw_sample_gap(rng, 1);
  int sampled = 0;
  for (int i = 0; i < 1000; ++i) {
    countdown -= int64_t(i % 3);  // sizes 0, 1, 2: even zero-byte allocations are sampled
    if (countdown <= 0) {
      ++sampled;
      countdown = hs::draw_sample_gap(rng, 1);
    }
  }
  CHECK(sampled == 1000);
}

TEST_CASE("sampler: gaps are exponential with the requested mean") {
  uint64_t rng = 99;
  const uint64_t mean = 4096;
  double sum = 0, sum_sq = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    double g = double(hs::draw_sample_gap(rng, mean));
    CHECK(g >= 1);
    sum += g;
    sum_sq += g * g;
  }
  double m = sum / n, var = sum_sq / n - m * m;
  CHECK(std::fabs(m / double(mean) - 1) < 0.01);            // mean
  CHECK(std::fabs(std::sqrt(var) / double(mean) - 1) < 0.02);  // exponential: stddev == mean
}
