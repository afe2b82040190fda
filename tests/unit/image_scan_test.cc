// The snapshot child's own figures by PAGEMAP_SCAN (preload/src/snapshot/image_scan.h) on a mapping
// made here: written pages are Rss and anonymous, a page only read (the zero page) is not, as smaps
// counts them; the split comes from the program's entry.
#include "snapshot/image_scan.h"

#include <doctest/doctest.h>
#include <sys/mman.h>

#include <cstring>

using namespace hs;
using namespace hs::snapshot::memory;

TEST_CASE("scan_image: Rss and anonymous bytes of written pages, not of the zero page; the arena cut out") {
  const size_t page = 4096;
  auto *m = static_cast<volatile uint8_t *>(mmap(nullptr, 8 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  REQUIRE(reinterpret_cast<uintptr_t>(m) != reinterpret_cast<uintptr_t>(MAP_FAILED));
  m[0] = 1;  // three pages written
  m[page] = 1;
  m[5 * page] = 1;
  uint8_t sum = m[3 * page];               // one read: the zero page
  CHECK(sum == 0);
  Mapping map{};
  map.start = reinterpret_cast<uint64_t>(m);
  map.end = map.start + 8 * page;
  map.readable = map.writable = true;
  SmapsEntry e[3];
  // [skip_lo, skip_hi): the last two pages, as the child's arena would be when merged with it.
  static PageRegion regions[kScanRegions];
  long n = scan_image(&map, 1, map.end - 2 * page, map.end, e, 3, regions);
  if (n < 0) {
    MESSAGE("no PAGEMAP_SCAN in this kernel (before 6.7): the child reads its smaps instead");
    munmap(const_cast<uint8_t *>(m), 8 * page);
    return;
  }
  REQUIRE(n == 1);
  CHECK(e[0].start == map.start);
  CHECK(e[0].end == map.end - 2 * page);
  CHECK(e[0].rss == 3 * page);
  CHECK(e[0].anonymous == 3 * page);
  CHECK(e[0].swap == 0);
  // The split from the program's entry of the same start, in proportion.
  SmapsEntry program = e[0];
  program.shared_bytes = 2 * page;
  program.private_bytes = 2 * page;
  program.wipe_on_fork = true;
  take_split(e, 1, &program, 1);
  CHECK(e[0].shared_bytes + e[0].private_bytes == e[0].rss);
  CHECK(e[0].shared_bytes == 3 * page / 2);
  CHECK(e[0].wipe_on_fork);
  munmap(const_cast<uint8_t *>(m), 8 * page);
}
