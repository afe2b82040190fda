// RSS explained in the report (issue 32): a snapshot's breakdown (memory/memory_breakdown.h, read
// and checked there; the parts are not re-derived here) as the page draws it, and the coarse RSS
// parts over time (replay/rss_parts.h) as series under the heap line.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "replay/replay.h"

namespace heapsnap::report {

// Snapshot `index`'s breakdown: {rss_bytes, vm_rss_bytes, parts: [{kind, name, rss_bytes, ...}]
// in MemoryKind order (heapsnap's own flagged "own"), arenas, stacks (at most 16 each, biggest
// first), diagnoses [{id, bytes, text}]}; null when the snapshot has none (a capture from before
// format 3.3, or a child that failed first: *why says so).
nlohmann::ordered_json memory_json(const std::string &file, uint32_t index, std::string *why);

// {t: [s], rss, heap, heapsnap, other_anon, file, shmem}: the Totals records' RSS parts; null
// when the capture has none (before format 3.4, or HEAPSNAP_RSS_PARTS_TICKS=0).
nlohmann::ordered_json rss_parts_json(const replay::ReplayResult &r);

}  // namespace heapsnap::report
