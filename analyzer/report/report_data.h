// Everything the HTML report shows, gathered from one capture and aggregated to a size budget
// before it is embedded: exact totals, the heap over time, the allocation flame graph, top
// allocation sites, leaks, and per snapshot the dominator tree by site, the top retainers and a
// per-site table for diffs. The result is the JSON document the page's script reads (schema in
// analyzer/report/web/core.js, `DATA SCHEMA`).
#pragma once
#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "report/dominator_icicle.h"
#include "report/flame_tree.h"
#include "snapshot/heap_snapshot.h"
#include "symbolize/frame_filter.h"

namespace heapsnap::report {

struct ReportOptions {
  std::string file;               // the capture
  std::string title;              // "" = the program's command line
  FlameBudget flame;              // flame graph nodes
  IcicleBudget icicle;            // dominator icicle nodes, per snapshot
  size_t table_rows = 50;         // rows per table
  size_t stack_frames = 16;       // frames per stack in the tables
  size_t timeline_buckets = 1000; // the heap line keeps at most ~3 points per bucket
  size_t max_snapshots = 10;      // snapshots analysed (evenly spread; first and last kept)
  size_t max_sites = 4000;        // per-snapshot site table rows (the rest merge into "other")
  bool follow_interior = true;
  std::vector<std::string> debug_dirs;
  // Which frames are the library's, so that a site is the program's frame (--hide-frames,
  // --all-frames; replay/stack_symbolizer.h).
  symbolize::FrameFilter frame_filter;
  // Long phases: ("replaying", done, total), ("snapshot 3/10", done, total).
  std::function<void(const std::string &phase, uint64_t done, uint64_t total)> progress;
};

// Fills *out, or returns false with *error set when the capture cannot be read at all. Problems
// that leave a usable capture (truncation, a damaged snapshot) become notes in the data.
bool build_report_data(const ReportOptions &opts, nlohmann::ordered_json *out, std::string *error);

// The indexes of the complete snapshots of `list` the report analyses: at most `max`, evenly
// spread, first and last kept, the at-peak snapshot always among them; in the order they were
// taken.
std::vector<uint32_t> choose_snapshots(const std::vector<snapshot::SnapshotInfo> &list, size_t max);

}  // namespace heapsnap::report
