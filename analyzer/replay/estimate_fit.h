// Sampled estimates beside exact totals. A sampled block of s bytes stands for 1/P(sampled) blocks,
// so a few small sampled blocks can stand for far more than the program had: "66 KiB in 17 blocks"
// estimated beside an exact "5.38 KiB in 5 blocks" not freed. Where the exact total of a figure is
// known, the per-stack estimates are scaled so that their sum is that total: the split by stack
// stays an estimate (from the sampled blocks), the total is the exact one. Pool objects of the
// client API are not in the shim's exact totals: their figures are never scaled.
#pragma once
#include <algorithm>
#include <cstdint>

#include "replay/replay.h"

namespace heapsnap::replay {

// One figure's fit over the stacks it covers: the sum of their sampled estimates (raw), and the
// factor that brings that sum to the exact total.
struct Fit {
  double raw = 0;       // sum of the sampled estimates
  double fitted = 0;    // raw * factor: what the stacks add up to once scaled
  double factor = 1;
  bool scaled = false;  // factor != 1 applies
  double operator()(double v) const { return v * factor; }
};

// raw scaled to exactly `exact`. A raw sum of 0 has nothing to spread (factor 1, fitted 0).
inline Fit fit_to(double raw, double exact) {
  Fit f;
  f.raw = raw;
  exact = std::max(exact, 0.0);
  if (raw > 0) {
    f.factor = exact / raw;
    f.scaled = true;
  }
  f.fitted = raw * f.factor;
  return f;
}

// raw brought into [low, high] (unchanged inside): for a total only known within bounds.
inline Fit fit_within(double raw, double low, double high) {
  if (low >= high) return fit_to(raw, low);
  if (raw > high) return fit_to(raw, high);
  if (raw < low) return fit_to(raw, low);
  Fit f;
  f.raw = f.fitted = raw;
  return f;
}

struct EstimateFits {
  bool sampled = false;  // the per-stack figures are sampled estimates
  bool fitted = false;   // ... with exact totals known: the fits below apply to them
  Fit alloc_calls, alloc_bytes;  // to the exact allocation calls and bytes allocated
  Fit live_blocks, live_bytes;   // to the exact blocks and bytes not freed at the end
  Fit peak_bytes;                // into the peak's bounds (to the peak when it is exact)
  Fit peak_blocks;               // no exact count: by the peak bytes' factor
  uint64_t live_samples = 0;     // the sampled blocks the live split is estimated from
  uint64_t peak_samples = 0;     // the sampled blocks the peak split is estimated from

  // A stack's figures as shown beside the exact totals.
  StackFigures apply(const StackFigures &f) const {
    if (!fitted || f.pool) return f;
    StackFigures g = f;
    g.alloc_calls = alloc_calls(f.alloc_calls);
    g.alloc_bytes = alloc_bytes(f.alloc_bytes);
    g.live_calls = live_blocks(f.live_calls);
    g.live_bytes = live_bytes(f.live_bytes);
    g.peak_calls = peak_blocks(f.peak_calls);
    g.peak_bytes = peak_bytes(f.peak_bytes);
    return g;
  }
};

// The fits of r's per-stack figures. peak_low, peak_high: the peak's bounds (equal when exact;
// cli::peak_figure).
inline EstimateFits fit_estimates(const ReplayResult &r, double peak_low, double peak_high) {
  EstimateFits e;
  e.sampled = r.sample_bytes() > 1;
  e.live_samples = r.live_sampled_blocks;
  e.peak_samples = r.sampled_peak_blocks;
  StackFigures sum;
  for (size_t id = 1; id < r.by_stack.size(); ++id)
    if (!r.by_stack[id].pool) sum += r.by_stack[id];
  auto raw = [](double v) {
    Fit f;
    f.raw = f.fitted = v;
    return f;
  };
  e.alloc_calls = raw(sum.alloc_calls);
  e.alloc_bytes = raw(sum.alloc_bytes);
  e.live_blocks = raw(sum.live_calls);
  e.live_bytes = raw(sum.live_bytes);
  e.peak_blocks = raw(sum.peak_calls);
  e.peak_bytes = raw(sum.peak_bytes);
  e.fitted = e.sampled && r.have_totals;
  if (!e.fitted) return e;
  const wire::Totals &t = r.totals;
  e.alloc_calls = fit_to(sum.alloc_calls, double(t.alloc_calls()));
  e.alloc_bytes = fit_to(sum.alloc_bytes, double(t.bytes_allocated()));
  e.live_blocks = fit_to(sum.live_calls, double(t.live_blocks()));
  e.live_bytes = fit_to(sum.live_bytes, double(t.heap_bytes()));
  e.peak_bytes = fit_within(sum.peak_bytes, peak_low, peak_high);
  e.peak_blocks = fit_to(sum.peak_calls, sum.peak_calls * e.peak_bytes.factor);
  return e;
}

}  // namespace heapsnap::replay
