#include "replay/rss_parts.h"

#include <algorithm>

namespace heapsnap::replay {

RssPartsPoint rss_parts_of(const wire::Totals &t) {
  const wire::RssRollup &u = t.rss_parts();
  RssPartsPoint p;
  p.time_ns = t.time_ns();
  p.rss = u.rss();
  uint64_t anon = std::min(u.anonymous(), p.rss);
  p.clamped = u.anonymous() > p.rss;
  p.file = p.rss - anon;
  // The heap counts requested bytes, the pages hold them and more: below anonymous unless the
  // program's heap is in shared or file memory, or the two reads are apart in time.
  uint64_t heap = t.heap_bytes() > 0 ? uint64_t(t.heap_bytes()) : 0;
  p.heap = std::min(heap, anon);
  p.heapsnap = std::min(u.heapsnap_heap(), anon - p.heap);
  p.other_anon = anon - p.heap - p.heapsnap;
  p.shmem = std::min(u.shmem(), p.file);
  p.swap = u.swap();
  p.cost_ns = u.cost_ns();
  return p;
}

}  // namespace heapsnap::replay
