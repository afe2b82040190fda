// The registry of the tracer's own mappings (preload/src/core/own_mappings.h): what the snapshot
// child reads back after ranges are noted, partly unmapped and reused.
#include "core/own_mappings.h"

#include <doctest/doctest.h>
#include <sys/mman.h>

#include <algorithm>
#include <utility>
#include <vector>

using namespace hs;

namespace {

std::vector<std::pair<uint64_t, uint64_t>> ranges() {
  uint64_t lo[64], hi[64];
  size_t n = own_mappings::copy(lo, hi, 64);
  std::vector<std::pair<uint64_t, uint64_t>> v;
  for (size_t i = 0; i < n; ++i) v.emplace_back(lo[i], hi[i]);
  std::sort(v.begin(), v.end());
  return v;
}

}  // namespace

TEST_CASE("own_mappings: noted ranges come back; unmapping trims, splits and removes them") {
  const size_t page = 4096;
  auto *m = static_cast<uint8_t *>(own_mappings::mmap_noted(nullptr, 8 * page, PROT_READ | PROT_WRITE,
                                                             MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  REQUIRE(m != MAP_FAILED);
  const uint64_t a = reinterpret_cast<uint64_t>(m);
  CHECK(ranges() == std::vector<std::pair<uint64_t, uint64_t>>{{a, a + 8 * page}});
  // A file or shared mapping is not noted (smaps gives it its own kind by its path).
  void *s = own_mappings::mmap_noted(nullptr, page, PROT_READ, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  CHECK(ranges().size() == 1);
  munmap(s, page);
  // The front, a page in the middle, the back (mimalloc trims an aligned reservation so).
  CHECK(own_mappings::munmap_noted(m, page) == 0);
  CHECK(own_mappings::munmap_noted(m + 4 * page, page) == 0);
  CHECK(own_mappings::munmap_noted(m + 7 * page, page) == 0);
  CHECK(ranges() == std::vector<std::pair<uint64_t, uint64_t>>{{a + page, a + 4 * page}, {a + 5 * page, a + 7 * page}});
  // A length that is not a whole page covers its last page, as munmap does.
  own_mappings::forget(m + page, 100);
  CHECK(ranges() == std::vector<std::pair<uint64_t, uint64_t>>{{a + 2 * page, a + 4 * page}, {a + 5 * page, a + 7 * page}});
  CHECK(own_mappings::munmap_noted(m + page, 6 * page) == 0);
  CHECK(ranges().empty());
  // Freed slots are taken again.
  own_mappings::note(m, page);
  CHECK(ranges() == std::vector<std::pair<uint64_t, uint64_t>>{{a, a + page}});
  own_mappings::forget(m, page);
  CHECK(ranges().empty());
  CHECK(own_mappings::dropped() == 0);
}
