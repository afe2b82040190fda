// An open-addressing hash map from non-zero 64-bit keys to small values: linear probing over
// one flat array, mixed hash bits (sequential ids and aligned addresses would otherwise cluster),
// backward-shift deletion (no tombstones). For the replay's live-block table, where
// std::unordered_map's node per entry costs 3x the memory and a cache miss per lookup.
#pragma once
#include <cstdint>
#include <cstdlib>
#include <utility>
#include <vector>

#include "util/huge_pages.h"

namespace heapsnap::util {

inline uint64_t mix64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return x;
}

template <typename V>
class FlatMap64 {
 public:
  FlatMap64() { rehash(16); }

  size_t size() const { return used_; }
  size_t memory_bytes() const { return slots_.capacity() * sizeof(Slot); }

  // Returns the value for key, inserting a default one if absent. key must not be 0.
  V &operator[](uint64_t key) {
    if ((used_ + 1) * 4 > slots_.size() * 3) rehash(slots_.size() * 2);  // load <= 3/4
    size_t i = find_slot(key);
    if (slots_[i].key != key) {
      slots_[i].key = key;
      slots_[i].value = V{};
      ++used_;
    }
    return slots_[i].value;
  }
  V *find(uint64_t key) {
    size_t i = find_slot(key);
    return slots_[i].key == key ? &slots_[i].value : nullptr;
  }
  bool erase(uint64_t key, V *out = nullptr) {
    size_t i = find_slot(key);
    if (slots_[i].key != key) return false;
    if (out) *out = std::move(slots_[i].value);
    size_t hole = i;
    for (size_t k = (i + 1) & mask_; slots_[k].key; k = (k + 1) & mask_) {
      size_t home = mix64(slots_[k].key) & mask_;
      bool between = hole <= k ? (home > hole && home <= k) : (home > hole || home <= k);
      if (!between) {
        slots_[hole] = std::move(slots_[k]);
        hole = k;
      }
    }
    slots_[hole].key = 0;
    --used_;
    return true;
  }
  template <typename F>
  void for_each(F &&f) const {
    for (const Slot &s : slots_)
      if (s.key) f(s.key, s.value);
  }
  void clear() {
    slots_.assign(slots_.size(), Slot{});
    used_ = 0;
  }

 private:
  struct Slot {
    uint64_t key = 0;
    V value{};
  };
  size_t find_slot(uint64_t key) const {
    size_t i = mix64(key) & mask_;
    while (slots_[i].key && slots_[i].key != key) i = (i + 1) & mask_;
    return i;
  }
  void rehash(size_t cap) {
    Slots old = std::move(slots_);
    slots_.assign(cap, Slot{});
    mask_ = cap - 1;
    used_ = 0;
    for (Slot &s : old)
      if (s.key) {
        size_t i = find_slot(s.key);
        slots_[i] = std::move(s);
        ++used_;
      }
  }
  // Big tables (the replay's overflow of long-lived blocks) get huge pages: see huge_pages.h.
  using Slots = std::vector<Slot, HugePageAllocator<Slot>>;
  Slots slots_;
  size_t mask_ = 0;
  size_t used_ = 0;
};

}  // namespace heapsnap::util
