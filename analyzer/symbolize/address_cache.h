// Open-addressing hash map from (module, pc, kind) to a result index; the results themselves
// live in stable storage owned by the caller. Addresses are aligned and clustered, so keys are
// mixed before probing.
#pragma once

#include <cstdint>
#include <vector>

namespace heapsnap::symbolize {

class AddressCache {
 public:
  static constexpr uint32_t kAbsent = UINT32_MAX;

  uint32_t find(uint64_t pc, uint32_t tag) const {
    if (slots_.empty()) return kAbsent;
    for (size_t i = hash(pc, tag) & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.value == kAbsent) return kAbsent;
      if (s.pc == pc && s.tag == tag) return s.value;
    }
  }

  // Inserts a key known to be absent.
  void insert(uint64_t pc, uint32_t tag, uint32_t value) {
    if ((size_ + 1) * 4 > slots_.size() * 3) grow();
    place(pc, tag, value);
    ++size_;
  }

  size_t size() const { return size_; }

 private:
  struct Slot {
    uint64_t pc = 0;
    uint32_t tag = 0;
    uint32_t value = kAbsent;
  };

  static uint64_t hash(uint64_t pc, uint32_t tag) {
    uint64_t x = pc ^ (static_cast<uint64_t>(tag) * 0x9E3779B97F4A7C15ull);
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
  }

  void place(uint64_t pc, uint32_t tag, uint32_t value) {
    size_t i = hash(pc, tag) & mask_;
    while (slots_[i].value != kAbsent) i = (i + 1) & mask_;
    slots_[i] = Slot{pc, tag, value};
  }

  void grow() {
    std::vector<Slot> old;
    old.swap(slots_);
    slots_.assign(old.empty() ? 1024 : old.size() * 2, Slot{});
    mask_ = slots_.size() - 1;
    for (const Slot& s : old)
      if (s.value != kAbsent) place(s.pc, s.tag, s.value);
  }

  std::vector<Slot> slots_;
  size_t mask_ = 0;
  size_t size_ = 0;
};

}  // namespace heapsnap::symbolize
