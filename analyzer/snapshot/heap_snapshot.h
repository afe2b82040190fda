// A heap snapshot read back from a capture: live blocks (struct of arrays, numbered in address
// order; address, size and call site in columns of 4 bytes a block), their pointer edges as a
// CSR graph, and the root ranges with the blocks they point to.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "capture/capture_reader.h"
#include "util/flat_map.h"

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
// The trigger of a name trigger_name gives, or -1.
int trigger_from_name(const std::string &name);

// Lists the snapshots of a capture (one pass, block data skipped unparsed). Leaves the reader
// with no record filter.
// notes: the shim's markers about snapshots asked for and not taken, or an at-peak snapshot's
// outcome ("heapsnap: snapshot not taken (...)", "heapsnap: ... at-peak snapshot ...").
std::vector<SnapshotInfo> list_snapshots(capture::CaptureReader &reader, std::vector<std::string> *notes = nullptr);

// Whether a marker is one of those notes; if so, its text without the "heapsnap: " prefix.
bool snapshot_note(const wire::Marker &marker, std::string *text);
// Whether a note says a snapshot asked for is missing (not taken, lost, no at-peak snapshot),
// as opposed to an outcome ("growth snapshots: 3 kept of 7 taken").
bool snapshot_note_is_warning(const std::string &note);

enum RootKind : uint8_t { kGlobal = 0, kStack = 1, kRegisters = 2, kTls = 3, kAnon = 4 };
const char *root_kind_name(int kind);
// The register at a byte offset of a kRegisters root ("r12", "xmm3+8"; see proto/heapsnap.proto).
const char *register_name(uint64_t offset);

struct RootRange {
  RootKind kind;
  uint64_t detail;          // tid for stacks
  uint64_t start, length;
  std::string name;
  uint32_t first, count;    // into root_target / root_offset / root_interior
  std::string thread_name;  // stacks and registers: the thread's name at snapshot time ("" if not known)
  // Stacks: the thread's frames, innermost first (SnapshotRoots.frame_cfa/frame_pc): frame i holds
  // the words below frame_cfa[i] and runs the function at frame_pc[i] (exact for frame 0, a
  // return address after it). Empty when the registers were not known.
  std::vector<uint64_t> frame_cfa, frame_pc;
  // The frame holding stack word `addr` (its index), or -1.
  int frame_of(uint64_t addr) const;
};

// Columns of a snapshot's blocks, narrowed for 10^8-block snapshots: 4 bytes a block where a
// plain column would take 8. Each reads like a vector (operator[], size, empty, back) and gives
// the exact 64-bit value back; the rare values that do not fit are kept exactly in a side table.

// (index, value) pairs for the entries of a narrow column that do not fit, in index order.
class WideValues {
 public:
  void add(uint64_t index, uint64_t value) { entries_.push_back({index, value}); }
  uint64_t at(uint64_t index) const;  // index must have been added
  size_t count() const { return entries_.size(); }
  size_t memory_bytes() const { return entries_.capacity() * sizeof(Entry); }

 private:
  struct Entry {
    uint64_t index, value;
  };
  std::vector<Entry> entries_;
};

// Block addresses, ascending: a 64-bit base per 256 blocks (the first block's address) and each
// block's 32-bit offset from it. A chunk spanning 4 GiB or more (blocks in far-apart mappings)
// keeps its far addresses in the side table.
class AddressColumn {
 public:
  uint64_t operator[](size_t b) const {
    const uint32_t o = offset_[b];
    return o != kWide ? base_[b >> kChunkBits] + o : wide_.at(b);
  }
  size_t size() const { return offset_.size(); }
  bool empty() const { return offset_.empty(); }
  uint64_t back() const { return (*this)[size() - 1]; }
  void reserve(size_t n);
  void push_back(uint64_t a) {
    const size_t b = offset_.size();
    if ((b & kChunkMask) == 0) base_.push_back(a);
    const uint64_t o = a - base_.back();
    if (o < kWide) {
      offset_.push_back(uint32_t(o));
    } else {
      offset_.push_back(kWide);
      wide_.add(b, a);
    }
  }
  // The first block whose address is > a (size() if none), like std::upper_bound.
  size_t upper_bound(uint64_t a) const;
  size_t wide_count() const { return wide_.count(); }
  size_t memory_bytes() const;

 private:
  static constexpr unsigned kChunkBits = 8;
  static constexpr size_t kChunkMask = (size_t{1} << kChunkBits) - 1;
  static constexpr uint32_t kWide = UINT32_MAX;
  std::vector<uint64_t> base_;
  std::vector<uint32_t> offset_;
  WideValues wide_;
};

// Block sizes: 32 bits each; blocks of 4 GiB - 1 bytes or more are kept in the side table.
class SizeColumn {
 public:
  uint64_t operator[](size_t b) const {
    const uint32_t s = size_[b];
    return s != kWide ? s : wide_.at(b);
  }
  size_t size() const { return size_.size(); }
  bool empty() const { return size_.empty(); }
  uint64_t back() const { return (*this)[size() - 1]; }
  void reserve(size_t n) { size_.reserve(n); }
  void push_back(uint64_t s) {
    if (s < kWide) {
      size_.push_back(uint32_t(s));
    } else {
      wide_.add(size_.size(), s);
      size_.push_back(kWide);
    }
  }
  size_t wide_count() const { return wide_.count(); }
  size_t memory_bytes() const { return size_.capacity() * 4 + wide_.memory_bytes(); }

 private:
  static constexpr uint32_t kWide = UINT32_MAX;
  std::vector<uint32_t> size_;
  WideValues wide_;
};

// Allocation sites (return addresses): each block holds a 32-bit index into the table of the
// snapshot's distinct sites.
class SiteColumn {
 public:
  uint64_t operator[](size_t b) const { return sites_[index_[b]]; }
  uint32_t index(size_t b) const { return index_[b]; }
  const std::vector<uint64_t> &sites() const { return sites_; }  // in order of first appearance
  size_t size() const { return index_.size(); }
  bool empty() const { return index_.empty(); }
  uint64_t back() const { return (*this)[size() - 1]; }
  void reserve(size_t n) { index_.reserve(n); }
  void push_back(uint64_t site) {
    if (site != last_site_ || sites_.empty()) {
      last_site_ = site;
      last_index_ = intern(site);
    }
    index_.push_back(last_index_);
  }
  // Drops the lookup table that push_back uses (after loading).
  void done_loading() { lookup_ = {}; }
  size_t memory_bytes() const { return index_.capacity() * 4 + sites_.capacity() * 8 + lookup_.memory_bytes(); }

 private:
  uint32_t intern(uint64_t site);
  std::vector<uint32_t> index_;
  std::vector<uint64_t> sites_;
  util::FlatMap64<uint32_t> lookup_;  // site -> index + 1 (0: not seen yet)
  uint32_t zero_index_ = UINT32_MAX;  // index of site 0 (the map's keys must not be 0)
  uint64_t last_site_ = 0;
  uint32_t last_index_ = 0;
};

struct HeapSnapshot {
  SnapshotInfo info;
  // Blocks, by number (address order).
  AddressColumn addr;
  SizeColumn size;
  SiteColumn call_site;
  std::vector<uint64_t> id;
  std::vector<uint32_t> stack, time_ms, pool;
  // Edges: targets of block b are edge_target[edge_begin[b] .. edge_begin[b+1]). A snapshot
  // holds fewer than 2^32 edges (the loader rejects more): 32-bit positions.
  std::vector<uint32_t> edge_begin;  // blocks + 1 entries
  std::vector<uint32_t> edge_target;
  std::vector<uint32_t> edge_offset;   // byte offset of the pointer in the source block
  std::vector<bool> edge_interior;
  // Classes of polymorphic blocks, from their vtable pointers (format 3.2, SnapshotTypes):
  // type[b] is 0 (not known) or a number into type_names (1-based: type_names[type - 1] is the
  // mangled name std::type_info gives, e.g. "7Session"). type is empty when no block has one.
  std::vector<uint32_t> type;
  std::vector<std::string> type_names;
  // Roots.
  std::vector<RootRange> roots;
  std::vector<uint32_t> root_target;
  std::vector<uint64_t> root_offset;
  std::vector<bool> root_interior;
  // Vector-like headers the scan saw (format 3.5, SnapshotEdges/SnapshotRoots vector_*): the
  // edge (from_root false: an index into edge_target) or root pointer (true: into root_target)
  // whose word is a begin/finish/end_of_storage triple's begin, with finish - begin (size) and
  // end - begin (capacity) in bytes. As recorded: build_object_graph checks them.
  struct VectorHeader {
    uint32_t pointer;
    bool from_root;
    uint64_t size, capacity;
  };
  std::vector<VectorHeader> vectors;
  // Wall time load_snapshot took.
  double load_s = 0;

  uint32_t blocks() const { return uint32_t(addr.size()); }
  size_t edges() const { return edge_target.size(); }
  // Block containing address a (start or interior), or UINT32_MAX.
  uint32_t find(uint64_t a) const;
  size_t memory_bytes() const;
};

// Which columns to keep: a query over 10^8 blocks keeps only what it uses.
struct LoadOptions {
  bool identity = true;      // id, time_ms, pool
  bool edge_offsets = true;  // edge_offset (paths)
  bool types = true;         // type, type_names
  // Block and edge records decoded from their bytes (snapshot_columns.h) rather than parsed by
  // libprotobuf: the same snapshot and errors either way (tests compare them).
  bool raw_records = true;
  // Threads decoding block and edge records beside the reader: 0 chooses (as many as there are
  // CPUs, up to 3: a record's columns go to 3 lanes), 1 decodes on the reader's thread.
  unsigned threads = 0;
};

// Loads snapshot `index` (its records may be spread over the file). Problems with the data
// (inconsistent counts, out-of-range targets) are reported in *error and make it return false.
bool load_snapshot(capture::CaptureReader &reader, uint32_t index, HeapSnapshot *out, std::string *error,
                   const LoadOptions &opts = {});

}  // namespace heapsnap::snapshot
