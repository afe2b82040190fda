// util::ZeroArray: growth keeps the values and adds zeros, shrinking clears what it drops, copies
// are deep, and untouched elements take no memory under any THP policy; util/thp_policy.h's
// advice as a pure function of the policy.
#include <doctest/doctest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <string>

#include "util/zero_array.h"

using heapsnap::util::ZeroArray;

namespace {
struct Figures {
  double a = 0, b = 0;
  uint64_t n = 0;
};
}  // namespace

TEST_CASE("zero array: growth keeps values and adds zeros; shrinking clears what it drops") {
  ZeroArray<Figures> z;
  CHECK(z.empty());
  z.resize(10);
  for (size_t i = 0; i < 10; ++i) z[i] = Figures{double(i), 2.0 * double(i), i};
  for (size_t n : {size_t(100), size_t(5000), size_t(300000)}) {  // several mremaps
    z.resize(n);
    REQUIRE(z.size() == n);
    for (size_t i = 0; i < 10; ++i) CHECK(z[i].n == i);
    CHECK(z[n - 1].a == 0);
    CHECK(z[n - 1].n == 0);
    z[n - 1].n = 7;
  }
  z.resize(4);
  z.resize(12);  // elements 4..11 were dropped: they come back as zeros
  CHECK(z[3].n == 3);
  CHECK(z[4].n == 0);
  CHECK(z[9].b == 0);
  ZeroArray<Figures> c = z;  // deep copy
  c[0].n = 99;
  CHECK(z[0].n == 0);
  CHECK(c.size() == 12);
  ZeroArray<Figures> m = std::move(c);
  CHECK(m[0].n == 99);
  CHECK(m.memory_bytes() == 12 * sizeof(Figures));
}

namespace {
// The mapping holding addr in /proc/self/smaps: its Rss (KiB, -1 if not found) and VmFlags line.
struct MappingInfo {
  long rss_kb = -1;
  std::string vm_flags;
};
MappingInfo mapping_of(const void *addr) {
  MappingInfo m;
  FILE *f = fopen("/proc/self/smaps", "r");
  if (!f) return m;
  char line[512];
  bool in = false;
  uintptr_t a = reinterpret_cast<uintptr_t>(addr);
  while (fgets(line, sizeof line, f)) {
    unsigned long lo, hi;
    char c;
    if (sscanf(line, "%lx-%lx %c", &lo, &hi, &c) == 3 && strchr(line, '-') < strchr(line, ' ')) {
      in = a >= lo && a < hi;
      continue;
    }
    if (!in) continue;
    long kb;
    if (sscanf(line, "Rss: %ld kB", &kb) == 1) m.rss_kb = kb;
    if (strncmp(line, "VmFlags:", 8) == 0) m.vm_flags = line + 8;
  }
  fclose(f);
  return m;
}
bool has_flag(const std::string &flags, const std::string &f) {
  std::istringstream in(flags);
  for (std::string w; in >> w;)
    if (w == f) return true;
  return false;
}

using heapsnap::util::HugeAdvice;
using heapsnap::util::ThpMode;
using heapsnap::util::ThpPolicy;
using heapsnap::util::huge_advice;
using heapsnap::util::kDenseTable;
using heapsnap::util::kSparseArray;
}  // namespace

// Holds under every THP policy: the array's own advice (below) keeps its mapping on 4 KiB pages
// wherever the kernel would back its faults with huge pages, and reads of untouched 4 KiB pages
// map the shared zero page, which no Rss counts. (It measured the process's maximum RSS, and a
// kernel with THP "always" or use_zero_page = 0 made it 517 MB.) Measured as the growth of the
// Rss of the mapping that holds the array, from before its first touch: a mapping the kernel
// merged with a neighbour (same flags, adjacent) counts the neighbour's pages both times.
TEST_CASE("zero array: elements never written take no memory, whatever the machine's THP policy") {
  ZeroArray<uint64_t> z;
  z.resize(size_t(64) << 20);  // 512 MB of elements
  MappingInfo before = mapping_of(z.data());
  REQUIRE(before.rss_kb >= 0);
  for (size_t i = 0; i < z.size(); i += size_t(1) << 20) z[i] = i;  // 64 pages written, 8 MB apart
  uint64_t sum = 0;
  for (size_t i = 0; i < z.size(); i += 512) sum += z[i];  // read everywhere
  CHECK(sum == (uint64_t(1) << 20) * (63 * 64 / 2));  // 2^20 * (0 + 1 + ... + 63)
  MappingInfo m = mapping_of(z.data());
  REQUIRE(m.rss_kb >= 0);
  long grew_kb = m.rss_kb - before.rss_kb;
  INFO("machine's THP mode " << int(heapsnap::util::thp_policy().mode) << ", huge zero page "
                             << heapsnap::util::thp_policy().huge_zero_page << ", Rss " << before.rss_kb
                             << " -> " << m.rss_kb << " kB, VmFlags" << m.vm_flags);
  CHECK(grew_kb >= 64 * 4);     // the written pages
  CHECK(grew_kb <= 64 * 4 * 4);  // and nothing like a huge page each (64 of them: 128 MB)
}

namespace {
// Whether this kernel takes MADV_NOHUGEPAGE (not where it was built without THP: EINVAL).
bool kernel_takes_nohuge() {
  size_t len = size_t(4) << 20;
  void *p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return false;
  bool ok = madvise(p, len, MADV_NOHUGEPAGE) == 0;
  munmap(p, len);
  return ok;
}
}  // namespace

TEST_CASE("zero array: its mapping carries the advice of the policy it was given") {
  for (ThpMode mode : {ThpMode::kNever, ThpMode::kMadvise, ThpMode::kAlways}) {
    for (bool zero_page : {false, true}) {
      ZeroArray<uint64_t> z(ThpPolicy{mode, zero_page});
      z.resize(size_t(1) << 20);  // 8 MB
      z[12345] = 1;
      z.resize(size_t(8) << 20);  // grown by mremap: the advice stays
      z[(size_t(8) << 20) - 1] = 2;
      MappingInfo m = mapping_of(z.data());
      CAPTURE(int(mode));
      CAPTURE(zero_page);
      CAPTURE(m.vm_flags);
      CHECK(z.advice() == huge_advice(ThpPolicy{mode, zero_page}, kSparseArray));
      CHECK(!has_flag(m.vm_flags, "hg"));  // never asks for huge pages
      // The flag shows the advice was given, where the kernel can take it.
      if (kernel_takes_nohuge()) CHECK(has_flag(m.vm_flags, "nh") == (mode == ThpMode::kAlways));
      CHECK(z[12345] == 1);
      CHECK(z[(size_t(8) << 20) - 1] == 2);
    }
  }
}

TEST_CASE("THP advice: a pure function of the kernel's policy and the memory's use") {
  // Sparse arrays (ZeroArray): never MADV_HUGEPAGE; MADV_NOHUGEPAGE where the kernel would back
  // faults with huge pages unasked, whether or not reads map the huge zero page (scattered writes
  // each take a huge page either way).
  for (bool zp : {false, true}) {
    CHECK(huge_advice(ThpPolicy{ThpMode::kAlways, zp}, kSparseArray) == HugeAdvice::kNoHuge);
    CHECK(huge_advice(ThpPolicy{ThpMode::kMadvise, zp}, kSparseArray) == HugeAdvice::kNone);
    CHECK(huge_advice(ThpPolicy{ThpMode::kNever, zp}, kSparseArray) == HugeAdvice::kNone);
  }
  // Read sparsely but written through: huge pages only where a read fault maps the huge zero page.
  constexpr heapsnap::util::MemoryUse read_sparse{false, true};
  CHECK(huge_advice(ThpPolicy{ThpMode::kMadvise, true}, read_sparse) == HugeAdvice::kHuge);
  CHECK(huge_advice(ThpPolicy{ThpMode::kMadvise, false}, read_sparse) == HugeAdvice::kNone);
  CHECK(huge_advice(ThpPolicy{ThpMode::kAlways, false}, read_sparse) == HugeAdvice::kNoHuge);
  CHECK(huge_advice(ThpPolicy{ThpMode::kAlways, true}, read_sparse) == HugeAdvice::kHuge);
  // Tables written through (live-table chunks, hash tables): huge pages unless THP is off.
  for (bool zp : {false, true}) {
    CHECK(huge_advice(ThpPolicy{ThpMode::kAlways, zp}, kDenseTable) == HugeAdvice::kHuge);
    CHECK(huge_advice(ThpPolicy{ThpMode::kMadvise, zp}, kDenseTable) == HugeAdvice::kHuge);
    CHECK(huge_advice(ThpPolicy{ThpMode::kNever, zp}, kDenseTable) == HugeAdvice::kNone);
  }
}

TEST_CASE("THP policy: the kernel's files, multi-size settings included") {
  using heapsnap::util::parse_thp_mode;
  CHECK(parse_thp_mode("always [madvise] never\n") == ThpMode::kMadvise);
  CHECK(parse_thp_mode("[always] madvise never\n") == ThpMode::kAlways);
  CHECK(parse_thp_mode("always madvise [never]\n") == ThpMode::kNever);
  CHECK(parse_thp_mode("always inherit madvise [never]\n") == ThpMode::kNever);
  CHECK(parse_thp_mode("always [inherit] madvise never\n", ThpMode::kAlways) == ThpMode::kAlways);
  CHECK(parse_thp_mode("garbage") == ThpMode::kNever);

  char dir[] = "/tmp/thp_policy_test.XXXXXX";
  REQUIRE(mkdtemp(dir));
  std::string d = dir;
  auto put = [&](const std::string &name, const char *text) {
    FILE *f = fopen((d + "/" + name).c_str(), "w");
    REQUIRE(f);
    fputs(text, f);
    fclose(f);
  };
  // No files: no THP.
  CHECK(heapsnap::util::thp_detail::read_policy(dir).mode == ThpMode::kNever);
  put("enabled", "always [madvise] never\n");
  put("use_zero_page", "0\n");
  ThpPolicy p = heapsnap::util::thp_detail::read_policy(dir);
  CHECK(p.mode == ThpMode::kMadvise);
  CHECK(!p.huge_zero_page);
  // A multi-size THP size set to "always" under a "madvise" top level: unadvised memory gets
  // (64 KiB) huge pages.
  REQUIRE(mkdir((d + "/hugepages-64kB").c_str(), 0700) == 0);
  put("hugepages-64kB/enabled", "[always] inherit madvise never\n");
  put("use_zero_page", "1\n");
  p = heapsnap::util::thp_detail::read_policy(dir);
  CHECK(p.mode == ThpMode::kAlways);
  CHECK(p.huge_zero_page);
  put("hugepages-64kB/enabled", "always [inherit] madvise never\n");
  CHECK(heapsnap::util::thp_detail::read_policy(dir).mode == ThpMode::kMadvise);
  unlink((d + "/hugepages-64kB/enabled").c_str());
  rmdir((d + "/hugepages-64kB").c_str());
  unlink((d + "/enabled").c_str());
  unlink((d + "/use_zero_page").c_str());
  rmdir(dir);
}
