// A heap snapshot read back from a capture: live blocks (struct of arrays, numbered in address
// order), their pointer edges as a CSR graph, and the root ranges with the blocks they point to.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "capture/capture_reader.h"

namespace heapsnap::snapshot {

struct SnapshotInfo {
  uint32_t index = 0;
  bool have_begin = false, have_end = false;
  uint64_t time_ns = 0;
  int trigger = 0;
  std::string label;
  uint64_t pause_ns = 0;
  wire::Totals totals;
  wire::SnapshotEnd end;
};

const char *trigger_name(int trigger);

// Lists the snapshots of a capture (one pass, block data skipped).
std::vector<SnapshotInfo> list_snapshots(capture::CaptureReader &reader);

enum RootKind : uint8_t { kGlobal = 0, kStack = 1, kRegisters = 2, kTls = 3, kAnon = 4 };
const char *root_kind_name(int kind);

struct RootRange {
  RootKind kind;
  uint64_t detail;          // tid for stacks
  uint64_t start, length;
  std::string name;
  uint32_t first, count;    // into root_target / root_offset / root_interior
};

struct HeapSnapshot {
  SnapshotInfo info;
  // Blocks, by number (address order).
  std::vector<uint64_t> addr, size, call_site, id;
  std::vector<uint32_t> stack, time_ms, pool;
  // Edges: targets of block b are edge_target[edge_begin[b] .. edge_begin[b+1]).
  std::vector<uint64_t> edge_begin;  // blocks + 1 entries
  std::vector<uint32_t> edge_target;
  std::vector<uint32_t> edge_offset;   // byte offset of the pointer in the source block
  std::vector<bool> edge_interior;
  // Roots.
  std::vector<RootRange> roots;
  std::vector<uint32_t> root_target;
  std::vector<uint64_t> root_offset;
  std::vector<bool> root_interior;

  uint32_t blocks() const { return uint32_t(addr.size()); }
  size_t edges() const { return edge_target.size(); }
  // Block containing address a (start or interior), or UINT32_MAX.
  uint32_t find(uint64_t a) const;
  size_t memory_bytes() const;
};

// Which columns to keep: a query over 10^8 blocks keeps only what it uses.
struct LoadOptions {
  bool identity = true;      // id, stack, time_ms, pool
  bool edge_offsets = true;  // edge_offset (paths)
};

// Loads snapshot `index` (its records may be spread over the file). Problems with the data
// (inconsistent counts, out-of-range targets) are reported in *error and make it return false.
bool load_snapshot(capture::CaptureReader &reader, uint32_t index, HeapSnapshot *out, std::string *error,
                   const LoadOptions &opts = {});

}  // namespace heapsnap::snapshot
