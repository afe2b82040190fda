// The allocation flame graph of a report: the capture's call stacks merged by frame name into
// one tree (outermost frame at the root, inlined callees as frames of their own, as in the
// collapsed-stack export), each node carrying its inclusive figures for every metric the page
// can switch between. Then cut to a node budget: the nodes that matter most for any metric stay,
// the rest of each parent's children merge into one "[other]" node, so the figures still add up.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "replay/replay.h"
#include "replay/stack_symbolizer.h"

namespace heapsnap::report {

// The metrics of the flame graph, in the order of FlameTree::value.
enum FlameMetric { kAllocBytes = 0, kAllocCalls = 1, kLeakedBytes = 2, kPeakBytes = 3, kFlameMetrics = 4 };
const char *flame_metric_name(int m);  // "alloc_bytes", "alloc_calls", "leaked_bytes", "peak_bytes"

// What kind of code a frame is, which the page's colours show: the program's own (its executable,
// not a library frame by the frame filter), a library's (any other module, the C and C++ run
// times, what --hide-frames names), the allocator's (the allocation API, operator new, an
// allocator class's allocate, an allocator's module), or unknown (no symbol).
enum FrameKind : uint8_t { kProgramFrame = 0, kLibraryFrame = 1, kAllocatorFrame = 2, kUnknownFrame = 3, kFrameKinds = 4 };
const char *frame_kind_name(int k);  // "program", "library", "allocator", "unknown"
// exe: the basename of the program's executable (DisplayFrame::module is a basename).
FrameKind frame_kind(const replay::DisplayFrame &f, const std::string &exe);
// A frame's source location for the page: "file.c:12" (the file's basename), or "".
std::string frame_location(const replay::DisplayFrame &f);

struct FlameTree {
  std::vector<std::string> names;             // interned frame names
  std::vector<uint32_t> parent;               // per node; node 0 is the root ("all"), parent[0] = 0
  std::vector<uint32_t> name;                 // per node: index into names
  std::vector<std::array<double, kFlameMetrics>> value;  // per node: inclusive (self + descendants)
  std::vector<bool> other;                    // per node: an "[other]" node of merged children
  // Per name: its kind and module (index into modules), from the first frame of that name.
  std::vector<FrameKind> name_kind;
  std::vector<uint32_t> name_module;
  std::vector<std::string> modules;
  // Per node: 1 + index into locs, 0 when not known. A node merges every return address of its
  // name under its caller: when they are on several lines of one file, "file.c (several lines)".
  std::vector<uint32_t> loc;
  std::vector<std::string> locs;
  size_t nodes() const { return parent.size(); }
  uint32_t add(uint32_t parent_node, uint32_t name_id);
};

// Merges every stack of the replay (node ids: parents before children). Frames whose names agree
// under the same parent are one node, so the tree is usually much smaller than the stack tree.
FlameTree build_flame_tree(const replay::ReplayResult &r, replay::StackSymbolizer &sym);

struct FlameBudget {
  size_t max_nodes = 10000;  // nodes in the result, "[other]" nodes included (at least 2)
  size_t max_name = 300;     // characters per frame name (longer ones are cut, with "...")
};

// The top of `full` within the budget. A node's importance is its largest share of the root's
// total over the metrics; a parent is never less important than its child, so taking nodes by
// importance keeps the result a tree. Node order stays parents-first.
FlameTree prune_flame_tree(const FlameTree &full, const FlameBudget &budget);

}  // namespace heapsnap::report
