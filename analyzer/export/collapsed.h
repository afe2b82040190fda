// Collapsed stacks, the text format of flamegraph.pl and speedscope: one line per distinct
// stack, "outer;...;leaf VALUE", outermost frame first, integer values. Inlined callees are
// frames of their own, so a flame graph shows them as the source reads.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "replay/replay.h"
#include "replay/stack_symbolizer.h"

namespace heapsnap::exporter {

enum class Metric { alloc_bytes, alloc_calls, leaked, peak };

// "alloc-bytes", "alloc-calls", "leaked", "peak"; nullopt for anything else.
std::optional<Metric> parse_metric(std::string_view name);
// The weighted figure a metric reads from one stack's figures.
double metric_value(const replay::StackFigures &f, Metric m);

// One frame's name as a collapsed-stack element: the function name (module+offset when
// unknown). ';' separates frames and a line break ends the record, so those are replaced;
// spaces stay, because readers split the value off at the last space only.
std::string collapsed_frame_name(const replay::DisplayFrame &f);

struct CollapsedOptions {
  Metric metric = Metric::alloc_bytes;
  std::string match;  // see stack_matches()
  // By type: each stack under a root frame naming the type its frames give (replay/frame_types.h),
  // "[type unknown]" when they name none, so that a flame graph's first level splits by type.
  bool by_type = false;
};

// Joined stack -> summed figure. Different leaves can symbolize to the same names (two calls
// from one function), so stacks are summed before rounding.
std::map<std::string, double> collapse_stacks(const replay::ReplayResult &r,
                                              replay::StackSymbolizer &sym,
                                              const CollapsedOptions &opts);

// The lines, sorted by stack; stacks whose figure rounds to 0 are left out.
std::string collapsed_text(const std::map<std::string, double> &stacks);

}  // namespace heapsnap::exporter
