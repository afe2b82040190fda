// Memory for the analyzer's big tables (the replay's live-block pages and per-stack figures, large
// hash tables): anonymous mappings advised MADV_HUGEPAGE, so the kernel backs them with 2 MiB
// pages where it can.
//
// Why: a first touch of a 4 KiB page costs about 1.8 us on this kind of machine; replaying an
// every-allocation capture of 12.5 M events touched 18,800 such pages, 35 ms of a 210 ms run
// (perf record -e page-faults: live-table pages being zeroed, per-stack figures being regrown).
// With THP in "madvise" mode (Debian's default) only advised memory gets huge pages, and the
// process-wide alternatives (GLIBC_TUNABLES=glibc.malloc.hugetlb=1, mimalloc with large OS pages)
// must be set before the program starts and cost 2-26 MB more peak memory.
//
// Small requests (below kHugeMin) go to malloc: a huge page for them would waste more memory
// than the faults it saves.
#pragma once
#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <new>

#include "util/thp_policy.h"

namespace heapsnap::util {

inline constexpr size_t kHugePage = size_t(2) << 20;
inline constexpr size_t kHugeMin = size_t(1) << 20;

// Bytes a huge_map of `bytes` maps: whole 4 KiB pages. The kernel backs the 2 MiB-aligned
// stretches of the mapping with huge pages and its tail with small ones, so nothing is rounded
// up to 2 MiB (a 4.3 MB table would take 6 MB).
inline size_t huge_round(size_t bytes) { return (bytes + 4095) & ~size_t(4095); }

// Zeroed memory of `bytes` bytes, 2 MiB aligned, advised MADV_HUGEPAGE (for tables written through:
// not for sparse arrays, see util/zero_array.h); nullptr when the mapping fails.
inline void *huge_map(size_t bytes) {
  size_t len = huge_round(bytes);
  // Over-map by one huge page and trim, so the start is 2 MiB aligned whatever the kernel picks.
  void *raw = mmap(nullptr, len + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  uintptr_t start = (uintptr_t(raw) + kHugePage - 1) & ~(uintptr_t(kHugePage) - 1);
  size_t head = start - uintptr_t(raw);
  if (head) munmap(raw, head);
  size_t tail = kHugePage - head;
  if (tail) munmap(reinterpret_cast<void *>(start + len), tail);  // len is 4 KiB aligned
  // Written through before it is read (util/thp_policy.h): MADV_HUGEPAGE unless THP is off. A
  // hint: failure only costs speed.
  apply_huge_advice(reinterpret_cast<void *>(start), len, huge_advice(thp_policy(), kDenseTable));
  return reinterpret_cast<void *>(start);
}

inline void huge_unmap(void *p, size_t bytes) {
  if (p) munmap(p, huge_round(bytes));
}

// A std allocator: requests of kHugeMin bytes or more are huge_map'd, smaller ones malloc'd.
template <typename T>
struct HugePageAllocator {
  using value_type = T;
  HugePageAllocator() = default;
  template <typename U>
  HugePageAllocator(const HugePageAllocator<U> &) {}

  T *allocate(size_t n) {
    size_t bytes = n * sizeof(T);
    if (n > SIZE_MAX / sizeof(T)) throw std::bad_alloc();
    void *p = bytes >= kHugeMin ? huge_map(bytes) : std::malloc(bytes ? bytes : 1);
    if (!p) throw std::bad_alloc();
    return static_cast<T *>(p);
  }
  void deallocate(T *p, size_t n) {
    size_t bytes = n * sizeof(T);
    if (bytes >= kHugeMin) huge_unmap(p, bytes);
    else std::free(p);
  }
  template <typename U>
  bool operator==(const HugePageAllocator<U> &) const { return true; }
};

}  // namespace heapsnap::util
