// util::ZeroArray: growth keeps the values and adds zeros, shrinking clears what it drops, copies
// are deep, and untouched elements take no memory.
#include <doctest/doctest.h>
#include <sys/resource.h>

#include <cstdint>

#include "util/zero_array.h"

using heapsnap::util::ZeroArray;

namespace {
struct Figures {
  double a = 0, b = 0;
  uint64_t n = 0;
};
long max_rss_kb() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss;
}
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

TEST_CASE("zero array: elements never written take no memory") {
  long before = max_rss_kb();
  ZeroArray<uint64_t> z;
  z.resize(size_t(64) << 20);  // 512 MB of elements
  for (size_t i = 0; i < z.size(); i += size_t(1) << 20) z[i] = i;  // 64 pages written
  uint64_t sum = 0;
  for (size_t i = 0; i < z.size(); i += 512) sum += z[i];  // read everywhere: zero pages
  CHECK(sum == (uint64_t(1) << 20) * (63 * 64 / 2));  // 2^20 * (0 + 1 + ... + 63)
  CHECK(max_rss_kb() - before < 64 * 1024);  // far below 512 MB
}
