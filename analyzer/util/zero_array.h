// A growable array of trivially copyable values whose zero bytes are their default value, kept in
// an anonymous mapping: growing it maps more (mremap moves the pages, copies nothing) and new
// elements are the kernel's zero pages, never written. Only the pages of elements a program
// writes take memory.
//
// Why: the replay's per-stack figures are indexed by stack node id, and only leaf nodes that
// allocated ever get written. A std::vector zeroed every element it grew by and copied the rest
// at each growth; on a compiler's every-allocation capture (110,000 stacks among a million
// nodes) that zeroing was half the replay's time (clear_page in the kernel).
//
// Untouched pages cost nothing only where the kernel backs faults with 4 KiB pages: under THP
// "always" a scattered write takes 2 MiB, and a read too when use_zero_page is 0. The mapping gets
// the advice util/thp_policy.h decides for sparse arrays: MADV_NOHUGEPAGE where the kernel would
// give huge pages unasked, none elsewhere.
#pragma once
#include <sys/mman.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <new>
#include <type_traits>
#include <utility>

#include "util/thp_policy.h"

namespace heapsnap::util {

template <typename T>
class ZeroArray {
  static_assert(std::is_trivially_copyable_v<T>, "ZeroArray holds plain values");

 public:
  ZeroArray() = default;
  // With the huge-page advice of `policy` rather than this machine's (tests).
  explicit ZeroArray(ThpPolicy policy) : advice_(int8_t(huge_advice(policy, kSparseArray))) {}
  ZeroArray(const ZeroArray &o) : advice_(o.advice_) {
    resize(o.size_);
    if (size_) memcpy(static_cast<void *>(data_), o.data_, size_ * sizeof(T));
  }
  ZeroArray(ZeroArray &&o) noexcept { swap(o); }
  ZeroArray &operator=(ZeroArray o) noexcept {
    swap(o);
    return *this;
  }
  ~ZeroArray() {
    if (data_) munmap(data_, mapped_);
  }
  void swap(ZeroArray &o) noexcept {
    std::swap(data_, o.data_);
    std::swap(size_, o.size_);
    std::swap(mapped_, o.mapped_);
    std::swap(advice_, o.advice_);
  }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T &operator[](size_t i) { return data_[i]; }
  const T &operator[](size_t i) const { return data_[i]; }
  // Bytes of its elements (what a std::vector of them would hold; untouched pages take none).
  size_t memory_bytes() const { return size_ * sizeof(T); }
  // The advice its mapping got (kNone until it first maps).
  HugeAdvice advice() const { return advice_ < 0 ? HugeAdvice::kNone : HugeAdvice(advice_); }
  const T *data() const { return data_; }

  // Elements past the old size are zero bytes; shrinking zeroes what it drops (a later growth
  // must find zeros there). Throws std::bad_alloc when the mapping cannot grow.
  void resize(size_t n) {
    if (n <= size_) {
      if (n < size_) memset(static_cast<void *>(data_ + n), 0, (size_ - n) * sizeof(T));
      size_ = n;
      return;
    }
    if (n > SIZE_MAX / sizeof(T) / 2) throw std::bad_alloc();
    size_t bytes = n * sizeof(T);
    if (bytes > mapped_) grow(bytes);
    size_ = n;
  }

 private:
  void grow(size_t bytes) {
    // Twice the need: mapped but untouched address space costs nothing, and fewer mremaps.
    size_t len = (std::max(bytes, mapped_ * 2) + 4095) & ~size_t(4095);
    void *p = data_ ? mremap(data_, mapped_, len, MREMAP_MAYMOVE)
                    : mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    data_ = static_cast<T *>(p);
    mapped_ = len;
    if (advice_ < 0) advice_ = int8_t(huge_advice(thp_policy(), kSparseArray));
    // The whole mapping each time: mremap keeps a moved mapping's advice, but an extension in
    // place may be a neighbouring mapping merged in.
    apply_huge_advice(p, len, HugeAdvice(advice_));
  }

  T *data_ = nullptr;
  size_t size_ = 0;
  size_t mapped_ = 0;
  int8_t advice_ = -1;  // HugeAdvice; -1: this machine's policy's, decided at the first mapping
};

}  // namespace heapsnap::util
