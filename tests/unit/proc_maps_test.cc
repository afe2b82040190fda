// The shim's allocation-free reading of /proc/self/maps (preload/src/core/proc_maps.h): the
// whole list, and the one mapping holding an address (how a thread learns its stack's bounds
// without pthread_getattr_np, which mallocs under the thread's own lock).
#include <doctest/doctest.h>
#include <sys/mman.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "core/proc_maps.h"

using hs::Mapping;

TEST_CASE("proc_maps: find_mapping gives the mapping read_proc_maps lists for the same address") {
  std::vector<Mapping> maps(65536);
  std::vector<char> scratch(8 << 20);
  long n = hs::read_proc_maps(maps.data(), maps.size(), scratch.data(), scratch.size());
  REQUIRE(n > 5);
  int local = 0;
  void *anon = mmap(nullptr, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(anon != MAP_FAILED);
  for (uint64_t a : {uint64_t(reinterpret_cast<uintptr_t>(&local)), uint64_t(reinterpret_cast<uintptr_t>(anon)) + 12345,
                     uint64_t(reinterpret_cast<uintptr_t>(&hs::find_mapping))}) {
    Mapping m;
    REQUIRE(hs::find_mapping(a, &m));
    CHECK(m.start <= a);
    CHECK(a < m.end);
    n = hs::read_proc_maps(maps.data(), maps.size(), scratch.data(), scratch.size());
    bool listed = false;
    for (long i = 0; i < n; ++i)
      listed = listed || (maps[size_t(i)].start == m.start && maps[size_t(i)].end == m.end &&
                          strcmp(maps[size_t(i)].path, m.path) == 0 && maps[size_t(i)].writable == m.writable);
    CHECK(listed);
  }
  Mapping m;
  CHECK(!hs::find_mapping(16, &m));  // the first page is never mapped
  CHECK(!hs::find_mapping(uint64_t(1) << 62, &m));
  munmap(anon, 1 << 20);
}

TEST_CASE("proc_maps: find_mapping reads past its buffer when the maps are long") {
  // Hundreds of mappings (every other page of a region made read-only, so none merge): the
  // last one lies far past the first 4 KiB of the file.
  const size_t pages = 600;
  auto *base = static_cast<uint8_t *>(mmap(nullptr, pages * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  REQUIRE(base != MAP_FAILED);
  for (size_t i = 0; i < pages; i += 2) REQUIRE(mprotect(base + i * 4096, 4096, PROT_READ) == 0);
  // (Not the region's last page: a writable mapping right after the region may merge with it.)
  for (size_t i : {size_t(1), pages / 2 + 1, pages - 3}) {
    Mapping m;
    REQUIRE(hs::find_mapping(uint64_t(reinterpret_cast<uintptr_t>(base + i * 4096 + 100)), &m));
    CHECK(m.start == uint64_t(reinterpret_cast<uintptr_t>(base + i * 4096)));
    CHECK(m.end == m.start + 4096);
    CHECK(m.writable);
  }
  munmap(base, pages * 4096);
}
