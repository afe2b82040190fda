// --snapshot-on-growth: which snapshots of a growing heap to keep. A snapshot is due each time the
// heap has grown by the step (a size, or a percentage) since the last one; at most `max` are kept:
// when one more comes, every other one of the older ones goes (the first and the newest stay) and
// the step doubles, so that a long run ends with snapshots spread evenly over its growth.
// Bookkeeping only (no allocation, no system call): snapshot.cc takes, keeps and deletes the files.
#pragma once
#include <algorithm>
#include <cstdint>

namespace hs::snapshot {

class GrowthSeries {
 public:
  static constexpr uint32_t kMaxKept = 256;
  static constexpr int64_t kPercentFloor = 1 << 20;  // a percentage counts from 1 MiB

  // step_bytes > 0: a size; else pct (1..1000) percent of the heap at the last one.
  void configure(uint64_t step_bytes, uint32_t pct, uint32_t max) {
    bytes_ = int64_t(step_bytes);
    pct_ = pct;
    max_ = max < 2 ? 2 : max > kMaxKept ? kMaxKept : max;
    n_ = 0;
    last_heap_ = 0;
  }
  bool enabled() const { return bytes_ > 0 || pct_ > 0; }

  // The heap at which the next snapshot is due.
  int64_t next_level() const {
    if (bytes_ > 0) return last_heap_ + bytes_;
    int64_t next = last_heap_ + last_heap_ / 100 * int64_t(pct_);  // (pct_ <= 10^6: no overflow below 2^43 B)
    return next < kPercentFloor ? kPercentFloor : next + 1;
  }

  // A snapshot was taken with the heap at `heap`; its number is `index`. `dropped` receives the
  // numbers of the ones that go (at most max/2 + 1); returns how many.
  uint32_t taken(uint32_t index, int64_t heap, uint32_t *dropped) {
    last_heap_ = heap;
    if (n_ < kMaxKept) entries_[n_++] = {index, heap};
    if (n_ <= max_) return 0;
    // Thin: keep positions 0, 2, 4, ... of the older ones, and the newest.
    uint32_t kept = 0, gone = 0;
    for (uint32_t i = 0; i + 1 < n_; ++i) {
      if (i % 2 == 0) entries_[kept++] = entries_[i];
      else dropped[gone++] = entries_[i].index;
    }
    entries_[kept++] = entries_[n_ - 1];
    n_ = kept;
    // (Bounded: a step past the address space, or past 10^6 %, means no more snapshots anyway.)
    if (bytes_ > 0) bytes_ = bytes_ < (int64_t(1) << 56) ? bytes_ * 2 : bytes_;
    else pct_ = uint32_t(std::min<uint64_t>((100ull + pct_) * (100ull + pct_) / 100 - 100, 1000000));  // (1 + p)^2 - 1
    ++thinned_;
    return gone;
  }

  // A taken one that failed: no longer kept (the level stays where `taken` put it).
  void forget(uint32_t index) {
    uint32_t k = 0;
    for (uint32_t i = 0; i < n_; ++i)
      if (entries_[i].index != index) entries_[k++] = entries_[i];
    n_ = k;
  }

  uint32_t size() const { return n_; }
  uint32_t index_at(uint32_t i) const { return entries_[i].index; }
  int64_t heap_at(uint32_t i) const { return entries_[i].heap; }
  uint32_t thinned() const { return thinned_; }
  uint64_t step_bytes() const { return uint64_t(bytes_); }
  uint32_t step_pct() const { return pct_; }

 private:
  struct Entry {
    uint32_t index;
    int64_t heap;
  };
  Entry entries_[kMaxKept + 1] = {};
  uint32_t n_ = 0, max_ = 10, pct_ = 0, thinned_ = 0;
  int64_t bytes_ = 0, last_heap_ = 0;
};

}  // namespace hs::snapshot
