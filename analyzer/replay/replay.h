// Streaming replay of a capture: sampled events scaled by their sampling weight into per-stack
// figures (allocations, what was live at the peak, what was never freed), the heap over time,
// and the exact totals beside them. Memory is bounded by the live sampled blocks, the interned
// stacks and the output; events are never all held at once.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "replay/rss_parts.h"
#include "capture/capture_reader.h"
#include "capture/stack_tree.h"
#include "util/zero_array.h"

namespace heapsnap::replay {

// Figures of one call stack (indexed by its leaf node id). "est" figures are sampled estimates:
// sum over sampled blocks of 1 / P(sampled); exact when every allocation was sampled.
struct StackFigures {
  double alloc_calls = 0, alloc_bytes = 0;  // allocations made from this stack (incl. realloc)
  double live_calls = 0, live_bytes = 0;    // live now (at the end: not freed)
  double peak_calls = 0, peak_bytes = 0;    // live at the peak
  uint64_t samples = 0;                     // sampled allocation events
  uint64_t reallocs = 0, realloc_moves = 0; // reallocs made from this stack
  uint32_t pool = 0;                        // client-API pool its objects belong to (0: malloc)

  // Nothing was allocated, resized or left live from this stack (an interior node, mostly).
  bool unused() const { return samples == 0 && live_calls <= 0 && reallocs == 0; }
  // Adds o's figures (a site's sum over its stacks); pool is not a figure and stays.
  StackFigures &operator+=(const StackFigures &o) {
    alloc_calls += o.alloc_calls;
    alloc_bytes += o.alloc_bytes;
    live_calls += o.live_calls;
    live_bytes += o.live_bytes;
    peak_calls += o.peak_calls;
    peak_bytes += o.peak_bytes;
    samples += o.samples;
    reallocs += o.reallocs;
    realloc_moves += o.realloc_moves;
    return *this;
  }
};

struct ModuleRecord {
  uint32_t id;
  std::string path;
  uint64_t load_bias;
  std::string build_id;
  struct Range { uint64_t start, end; };
  std::vector<Range> exec;  // runtime ranges of executable segments
  uint64_t loaded_ns, unloaded_ns;  // unloaded_ns = UINT64_MAX while loaded
};

struct TimePoint {
  uint64_t time_ns;
  int64_t heap_bytes;        // exact
  uint64_t rss_bytes;
  uint64_t alloc_calls;      // exact, cumulative
  double sampled_live_bytes; // estimate from the sampled blocks
};

// The heap estimate over time from the events themselves (ReplayOptions::heap_cells): the change
// of the live-bytes estimate summed per time cell, by each event's own time, so that the order in
// which the batches of several threads come does not matter. Exact in every-allocation mode.
// The Totals records are exact, but one per flush (100 ms), and late by what the threads have not
// folded into the shared counters yet: a short run has a handful.
struct HeapCells {
  uint32_t shift = 0;         // a cell is 2^shift ns: cell c covers [c << shift, (c + 1) << shift)
  std::vector<double> delta;  // per cell, from time 0: the change the events in it made
};

struct MarkerPoint {
  uint64_t time_ns;
  uint32_t tid;
  std::string text;
};

struct SnapshotPoint {
  uint32_t index;
  uint64_t time_ns;
  int trigger;
  std::string label;
};

struct PoolInfo {
  uint32_t id;
  std::string name;
  uint64_t moves = 0, ranges = 0, moved_objects = 0, compacted_away = 0;
};

// A live sampled object of a client-API pool, as the replay followed it through moves.
struct PoolObjectState {
  uint64_t id, addr, size;
  uint32_t stack;
};

struct ReplayOptions {
  std::function<void(uint64_t done, uint64_t total)> progress;
  // Only the context (process, modules, stacks, totals): what snapshot queries need to label
  // their blocks, without replaying the events.
  bool context_only = false;
  // Called as the replay reads a Module record, and after a Stack record added nodes
  // first_node..tree.nodes(): lets a caller start work that needs them while the replay goes on
  // (StackSymbolizer::follow prefetches debug information).
  std::function<void(const ModuleRecord &)> on_module;
  std::function<void(const capture::StackTree &, uint32_t first_node)> on_stack_nodes;
  // Fill ReplayResult::heap_cells (the report's heap line; at most kHeapCells cells, which widen
  // as the run goes on).
  bool heap_cells = false;
};
inline constexpr size_t kHeapCells = 4096;

struct ReplayResult {
  wire::ProcessInfo process;
  bool have_process = false;
  wire::Totals totals;  // final exact totals (EndOfCapture, else last Totals)
  bool have_totals = false;  // a Totals or End record was read (else totals are all zero)
  int64_t highest_heap = 0;  // the highest heap_bytes of those records (a lower bound of the peak)
  bool ended = false;
  bool truncated = false;
  std::vector<capture::Problem> problems;
  capture::StackTree stacks;
  // Index: stack (leaf node) id. Only the stacks that allocated are ever written: a ZeroArray
  // leaves the others' pages untouched (most node ids are callers, not leaves).
  util::ZeroArray<StackFigures> by_stack;
  std::vector<ModuleRecord> modules;
  std::vector<TimePoint> timeline;
  std::vector<RssPartsPoint> rss_parts;  // the Totals records that carry them (format 3.4), in stream order
  HeapCells heap_cells;  // empty unless ReplayOptions::heap_cells
  std::vector<MarkerPoint> markers;
  std::vector<SnapshotPoint> snapshots;
  std::vector<PoolInfo> pools;
  const PoolInfo *pool(uint32_t id) const {
    for (const auto &p : pools)
      if (p.id == id) return &p;
    return nullptr;
  }
  // Live sampled pool objects at the end, per pool id, sorted by address (tests, queries).
  std::vector<std::pair<uint32_t, PoolObjectState>> live_pool_objects;
  uint64_t end_time_ns = 0;
  uint64_t events = 0;
  uint64_t unknown_frees = 0;     // blocks freed or resized that no ALLOC defined (damaged capture)
  uint64_t live_blocks_peak = 0;  // most sampled blocks live at once (replay memory bound)
  size_t memory_bytes = 0;        // replay tables at the end
  // Where the sampled estimate of live bytes was highest: exact in every-allocation mode, and in
  // sampled mode the moment whose live set is shown as "the peak".
  uint64_t sampled_peak_event = UINT64_MAX;
  uint64_t sampled_peak_time_ns = 0;
  double sampled_peak_bytes = 0;
  uint64_t sampled_peak_blocks = 0;  // sampled blocks live then (the estimate's sample size)
  uint64_t live_sampled_blocks = 0;  // sampled blocks live at the end, pool objects not counted
  uint64_t sample_bytes() const { return process.sample_bytes(); }
};

// Weight of a sampled block of `size` bytes with mean sampling interval `mean`: 1/P(sampled).
double sample_weight(uint64_t size, uint64_t mean);
// The weight of a sampled block (weight: its current one) after a realloc to `size`. The shim
// samples a realloc of an unsampled block as an allocation of its new size, so each size a block
// has had was a chance for it to be sampled: P(tracked) = 1 - exp(-(sum of its sizes) / mean).
// Once tracked, every realloc is recorded, and the realloc call and the live block are weighted
// by 1 / P(tracked so far), which tends to 1 as the block grows; keeping the first small size's
// weight multiplied a 16-byte block grown to 1 MiB by ~4000. The sizes before the first sample
// are not in the capture: leaving them out makes P smaller, so the weight errs high, by less the
// more the block grows after.
double resized_weight(double weight, uint64_t size, uint64_t mean);

ReplayResult replay(capture::CaptureReader &reader, const ReplayOptions &opts = {});

// One pass over the file at path, with the per-stack figures at the highest peak.
ReplayResult replay_with_peak(const std::string &path, std::string *error,
                              std::function<void(uint64_t, uint64_t)> progress = {});
// The same, with options (opts.progress as given).
ReplayResult replay_with_peak(const std::string &path, std::string *error, const ReplayOptions &opts);

}  // namespace heapsnap::replay
