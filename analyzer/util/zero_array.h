// A growable array of trivially copyable values whose zero bytes are their default value, kept in
// an anonymous mapping: growing it maps more (mremap moves the pages, copies nothing) and new
// elements are the kernel's zero pages, never written. Only the pages of elements a program
// writes take memory.
//
// Why: the replay's per-stack figures are indexed by stack node id, and only leaf nodes that
// allocated ever get written. A std::vector zeroed every element it grew by and copied the rest
// at each growth; on a compiler's every-allocation capture (110,000 stacks among a million
// nodes) that zeroing was half the replay's time (clear_page in the kernel).
#pragma once
#include <sys/mman.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <new>
#include <type_traits>
#include <utility>

namespace heapsnap::util {

template <typename T>
class ZeroArray {
  static_assert(std::is_trivially_copyable_v<T>, "ZeroArray holds plain values");

 public:
  ZeroArray() = default;
  ZeroArray(const ZeroArray &o) {
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
  }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T &operator[](size_t i) { return data_[i]; }
  const T &operator[](size_t i) const { return data_[i]; }
  // Bytes of its elements (what a std::vector of them would hold; untouched pages take none).
  size_t memory_bytes() const { return size_ * sizeof(T); }

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
  }

  T *data_ = nullptr;
  size_t size_ = 0;
  size_t mapped_ = 0;
};

}  // namespace heapsnap::util
