// load_snapshot: a snapshot's records into a HeapSnapshot.
//
// Block and edge records (all but a few hundred of a snapshot's records, and nearly all its bytes)
// are decoded from their bytes in place (snapshot_columns.h) into the snapshot's columns, by the
// same code that decodes a message libprotobuf parsed (a record not in the shim's layout). Each
// record's columns are split over lanes (util/work_lanes.h), each owning some of the snapshot's
// columns, so that with several CPUs they are filled at the same time, while the reader's thread
// goes on locating the next records and its read-ahead thread decompresses the next frame:
//   block records: lane 0 addresses and sizes, lane 1 call sites and stacks, lane 2 ids, times, pools;
//   edge records:  lane 0 targets (and the sources' ranges), lane 1 offsets and interior marks.
// A lane's work on a frame's records ends before the reader reuses the frame's buffer (the frame
// done callback). Every check is the one the serial reader made, in the same place; a record's
// checks are numbered (record, then step) and the first failure in that order is the one
// reported, whichever lane found it first, so that the error is the same however the lanes ran.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <sched.h>

#include "snapshot/heap_snapshot.h"
#include "snapshot/snapshot_columns.h"
#include "util/work_lanes.h"

namespace heapsnap::snapshot {

namespace {

unsigned decode_threads(unsigned asked) {
  if (asked == 1) return 0;
  if (asked == 0) {
    cpu_set_t set;
    asked = sched_getaffinity(0, sizeof(set), &set) == 0 ? unsigned(CPU_COUNT(&set)) : 1;
    if (asked < 2) return 0;
  }
  return std::min(asked, 3u);
}

// The first failure found in one place (a lane, or the reader's thread), and where it stands in
// the order of the serial reader's checks.
struct Failure {
  bool set = false;
  uint64_t record = 0;  // the record's number among this snapshot's records
  int step = 0;         // 0: the reader's checks of the whole record; 1: the lanes', as they read
  capture::RecordPos pos{};
  std::string what;
  bool before(const Failure &o) const { return set && (!o.set || record < o.record || (record == o.record && step < o.step)); }
};

class Loader {
 public:
  Loader(capture::CaptureReader &reader, uint32_t index, HeapSnapshot &s, const LoadOptions &opts)
      : reader_(reader), index_(index), s_(s), opts_(opts), lanes_(decode_threads(opts.threads)) {}

  // A block or edge record: false ends the pass (a failure). now: its columns may be read only
  // during this call (a parsed message): the lanes' work runs on this thread before returning.
  template <typename Blocks>
  bool blocks(const Blocks &b, const capture::RecordPos &pos, bool now);
  template <typename Edges>
  bool edges(const Edges &e, const capture::RecordPos &pos, bool now);

  // Waits for the lanes; false if any failed.
  bool settle() {
    lanes_.drain();
    return failed_at_.load(std::memory_order_relaxed) == UINT64_MAX;
  }
  // A failure of the reader's thread in the record being read (settle() first).
  void fail(const capture::RecordPos &pos, const std::string &what) { note(serial_, record_++, 0, pos, what); }
  // The error message of the first failure (after settle()), "" if none.
  std::string error() const;
  bool found = false;
  // Edge state (lane 0, then the reader's thread after settle()).
  uint64_t last_source = 0;
  bool any_source = false;

 private:
  void note(Failure &f, uint64_t record, int step, const capture::RecordPos &pos, const std::string &what) {
    if (f.set) return;
    f = Failure{true, record, step, pos, what};
    uint64_t at = failed_at_.load(std::memory_order_relaxed);
    while (record < at && !failed_at_.compare_exchange_weak(at, record, std::memory_order_relaxed)) {
    }
  }
  template <typename F>
  void run(unsigned lane, bool now, F &&fn) {
    if (now)
      fn();
    else
      lanes_.post(lane, std::forward<F>(fn));
  }
  // Whether a record's work can be skipped: a record before it failed. (Not one after it: the
  // reader's thread finds a later record's failure while the lanes are still at this one, whose
  // failure, if any, comes first.)
  bool stopped(uint64_t record) const { return failed_at_.load(std::memory_order_relaxed) < record; }

  capture::CaptureReader &reader_;
  uint32_t index_;
  HeapSnapshot &s_;
  const LoadOptions &opts_;
  util::WorkLanes lanes_;
  std::atomic<uint64_t> failed_at_{UINT64_MAX};  // the first record that failed
  Failure serial_, lane_[3];
  uint64_t record_ = 0;        // records of this snapshot so far
  uint64_t blocks_taken_ = 0;  // blocks in the block records so far (what s_.addr will hold)
  bool edges_started_ = false;
};

std::string Loader::error() const {
  const Failure *first = &serial_;
  for (const Failure &f : lane_)
    if (f.before(*first)) first = &f;
  if (!first->set) return "";
  return "snapshot " + std::to_string(index_) + ", record in frame at offset " + std::to_string(first->pos.frame_offset) +
         ": " + first->what;
}

template <typename Blocks>
bool Loader::blocks(const Blocks &b, const capture::RecordPos &pos, bool now) {
  if (b.index() != index_) return true;
  found = true;
  const uint64_t n = b.addr_count();
  if (edges_started_) {
    // Edges are numbered against the blocks read before them: later blocks cannot follow.
    fail(pos, "block records after edge records");
    return false;
  }
  if (b.first_block() != blocks_taken_ || b.size_count() != n || b.site_count() != n || b.stack_count() != n ||
      b.id_count() != n || b.time_count() != n) {
    fail(pos, "block columns out of order or of unequal length");
    return false;
  }
  blocks_taken_ += n;
  const uint64_t record = record_++;
  run(0, now, [this, b = Blocks(b), n, record, pos]() mutable {
    if (stopped(record)) return;
    uint64_t a = 0;
    for (uint64_t i = 0; i < n; ++i) {
      a += uint64_t(b.addr_delta());
      if (!s_.addr.empty() && a <= s_.addr.back()) {
        note(lane_[0], record, 1, pos, "block addresses not ascending");
        return;
      }
      s_.addr.push_back(a);
      s_.size.push_back(b.size());
    }
  });
  run(1, now, [this, b = Blocks(b), n, record]() mutable {
    if (stopped(record)) return;
    uint64_t site = 0;
    for (uint64_t i = 0; i < n; ++i) {
      site += uint64_t(b.site_delta());
      s_.call_site.push_back(site);
      s_.stack.push_back(b.stack());
    }
  });
  if (opts_.identity)
    run(2, now, [this, b = Blocks(b), n, record]() mutable {
      if (stopped(record)) return;
      const uint64_t pools = b.pool_count();
      for (uint64_t i = 0; i < n; ++i) {
        s_.id.push_back(b.id());
        s_.time_ms.push_back(b.time_ms());
        s_.pool.push_back(i < pools ? b.pool() : 0);
      }
    });
  return true;
}

template <typename Edges>
bool Loader::edges(const Edges &e, const capture::RecordPos &pos, bool now) {
  if (e.index() != index_) return true;
  if (!edges_started_) {
    // The blocks are all in: their count sizes the edge ranges.
    if (!settle()) return false;
    edges_started_ = true;
    // One spare entry: the object graph takes these arrays over for its own offsets
    // (one more node, the super root) and targets (the root edges go in front).
    s_.edge_begin.reserve(s_.addr.size() + 2);
    s_.edge_begin.assign(s_.addr.size() + 1, 0);
    // About two edges per block in real heaps; the vectors grow past that if needed. (Grown from
    // empty, the offsets and interior marks were a tenth of the read's time at 10^7 blocks, in
    // copies and page faults, and ended up to twice their size.)
    const uint64_t edges = std::min<uint64_t>(2 * s_.addr.size() + 4096, reader_.file_size() * 4);
    s_.edge_target.reserve(edges);
    if (opts_.edge_offsets) s_.edge_offset.reserve(edges);
    s_.edge_interior.reserve(edges);
  }
  if (e.from_count() != e.count_count()) {
    fail(pos, "edge columns of unequal length");
    return false;
  }
  if (e.vector_edge_count() != e.vector_size_count() || e.vector_edge_count() != e.vector_capacity_count()) {
    fail(pos, "vector columns of unequal length");
    return false;
  }
  const uint64_t record = record_++;
  const uint64_t sources = e.from_count(), targets = e.to_count(), offsets = e.offset_count();
  run(0, now, [this, e = Edges(e), record, pos, sources, targets, offsets]() mutable {
    if (stopped(record)) return;
    if (s_.edge_target.size() + targets >= UINT32_MAX) {
      note(lane_[0], record, 1, pos, "more than 2^32 - 2 edges in one snapshot (not supported)");
      return;
    }
    const uint64_t blocks = s_.addr.size();
    uint64_t source = e.base_block(), t = 0;
    for (uint64_t k = 0; k < sources; ++k) {
      source += e.from_delta();
      if (source >= blocks || (any_source && source <= last_source)) {
        note(lane_[0], record, 1, pos, "edge source " + std::to_string(source) + " out of range or order");
        return;
      }
      // Sources without edges between the previous one and this one: empty ranges.
      const uint32_t at = uint32_t(s_.edge_target.size());
      for (uint64_t q = any_source ? last_source + 1 : 0; q <= source; ++q) s_.edge_begin[q] = at;
      any_source = true;
      last_source = source;
      const uint32_t count = e.count();
      if (t + count > targets || t + count > offsets) {
        note(lane_[0], record, 1, pos, "edge targets run short");
        return;
      }
      for (uint32_t c = 0; c < count; ++c, ++t) {
        // (Summed as unsigned: a hostile delta must not overflow. Where a signed sum would, the
        // wrapped one is negative too, so refused alike.)
        const int64_t target = int64_t(source + uint64_t(e.to_delta()));
        if (target < 0 || uint64_t(target) >= blocks) {
          note(lane_[0], record, 1, pos, "edge target out of range");
          return;
        }
        s_.edge_target.push_back(uint32_t(target));
      }
    }
  });
  run(1, now, [this, e = Edges(e), record, pos, sources, targets, offsets]() mutable {
    if (stopped(record)) return;
    const uint64_t first_edge = s_.edge_interior.size();
    const uint64_t interiors = e.interior_count();
    uint64_t interior_at = 0, next_interior = interiors ? e.interior_edge() : UINT64_MAX, t = 0;
    for (uint64_t k = 0; k < sources; ++k) {
      const uint32_t count = e.count();
      if (t + count > targets || t + count > offsets) return;  // (lane 0 says so)
      for (uint32_t c = 0; c < count; ++c, ++t) {
        const uint32_t offset = e.offset();
        if (opts_.edge_offsets) s_.edge_offset.push_back(offset);
        const bool interior = t == next_interior;
        if (interior) {
          ++interior_at;
          next_interior = interior_at < interiors ? next_interior + e.interior_edge() : UINT64_MAX;
        }
        s_.edge_interior.push_back(interior);
      }
    }
    // The vector headers: ordinals ascending, each an edge of this record.
    uint64_t ordinal = 0;
    for (uint64_t i = 0, n = e.vector_edge_count(); i < n; ++i) {
      const uint64_t delta = e.vector_edge();
      ordinal += delta;
      if ((i && !delta) || ordinal < delta || ordinal >= t) {
        note(lane_[1], record, 2, pos, "vector edge " + std::to_string(ordinal) + " out of range or order");
        return;
      }
      const uint64_t size = e.vector_size(), capacity = e.vector_capacity();
      s_.vectors.push_back({uint32_t(first_edge + ordinal), false, size, capacity});
    }
  });
  return true;
}

// A root range and the blocks it points to (the reader's thread, lanes settled).
bool load_roots(const wire::SnapshotRoots &rt, HeapSnapshot &s, Loader &l, const capture::RecordPos &pos) {
  // (A heap without blocks may still have roots: a thread's stack is written even when it
  // points at nothing. Targets past the blocks are refused below.)
  if (rt.target_delta_size() != rt.root_offset_size()) {
    l.fail(pos, "root columns of unequal length");
    return false;
  }
  RootRange range{RootKind(rt.kind() <= 4 ? rt.kind() : 4), rt.detail(), rt.start(), rt.length(), rt.name(),
                  uint32_t(s.root_target.size()), uint32_t(rt.target_delta_size()), rt.thread_name(), {}, {}};
  // (Frames that do not go up the stack, or columns of unequal length, are dropped: they
  // only name the functions of stack roots.)
  if (rt.frame_cfa_size() == rt.frame_pc_size() && rt.frame_cfa_size() <= 4096 &&
      std::is_sorted(rt.frame_cfa().begin(), rt.frame_cfa().end())) {
    range.frame_cfa.assign(rt.frame_cfa().begin(), rt.frame_cfa().end());
    range.frame_pc.assign(rt.frame_pc().begin(), rt.frame_pc().end());
  }
  int64_t t = 0;
  uint64_t off = 0;
  int inter_at = 0;
  uint64_t next_inter = rt.interior_edge_size() ? rt.interior_edge(0) : UINT64_MAX;
  for (int i = 0; i < rt.target_delta_size(); ++i) {
    t = int64_t(uint64_t(t) + uint64_t(rt.target_delta(i)));  // (wraps rather than overflows)
    off += rt.root_offset(i);
    if (t < 0 || uint64_t(t) >= s.addr.size()) {
      l.fail(pos, "root target out of range");
      return false;
    }
    s.root_target.push_back(uint32_t(t));
    s.root_offset.push_back(off);
    bool interior = uint64_t(i) == next_inter;
    if (interior) {
      ++inter_at;
      next_inter = inter_at < rt.interior_edge_size() ? next_inter + rt.interior_edge(inter_at) : UINT64_MAX;
    }
    s.root_interior.push_back(interior);
  }
  if (rt.vector_root_size() != rt.vector_size_size() || rt.vector_root_size() != rt.vector_capacity_size()) {
    l.fail(pos, "root vector columns of unequal length");
    return false;
  }
  uint64_t ordinal = 0;
  for (int i = 0; i < rt.vector_root_size(); ++i) {
    const uint64_t delta = rt.vector_root(i);
    ordinal += delta;
    if ((i && !delta) || ordinal < delta || ordinal >= uint64_t(rt.target_delta_size())) {
      l.fail(pos, "root vector pointer " + std::to_string(ordinal) + " out of range or order");
      return false;
    }
    s.vectors.push_back({uint32_t(range.first + ordinal), true, rt.vector_size(i), rt.vector_capacity(i)});
  }
  s.roots.push_back(std::move(range));
  return true;
}

// The classes of polymorphic blocks (the reader's thread, lanes settled).
bool load_types(const wire::SnapshotTypes &t, HeapSnapshot &s, Loader &l, const capture::RecordPos &pos) {
  if (t.first_type() != s.type_names.size() + 1 || t.name_size() != t.vtable_size() ||
      t.block_delta_size() != t.block_type_size()) {
    l.fail(pos, "type records out of order or of unequal length");
    return false;
  }
  for (const std::string &n : t.name()) s.type_names.push_back(n);
  if (t.block_delta_size() && s.type.empty()) s.type.assign(s.addr.size(), 0);
  uint64_t b = t.base_block();
  for (int i = 0; i < t.block_delta_size(); ++i) {
    b += t.block_delta(i);
    if (b >= s.type.size() || t.block_type(i) == 0 || t.block_type(i) > s.type_names.size()) {
      l.fail(pos, "a typed block or its type out of range");
      return false;
    }
    s.type[b] = t.block_type(i);
  }
  return true;
}

}  // namespace

bool load_snapshot(capture::CaptureReader &reader, uint32_t index, HeapSnapshot *out, std::string *error,
                   const LoadOptions &opts) {
  const auto t0 = std::chrono::steady_clock::now();
  HeapSnapshot &s = *out;
  s = HeapSnapshot{};
  s.info.index = index;
  Loader l(reader, index, s, opts);
  reader.set_record_filter([](uint32_t f) {
    return (f >= wire::Record::kSnapshotBegin && f < wire::Record::kSnapshotContents) || f == wire::Record::kSnapshotTypes;
  });
  // Capacity hint from the exact live-block count in the Begin record, bounded by what the file
  // could possibly describe (a hostile count must not drive a giant allocation).
  auto reserve = [&](uint64_t blocks) {
    uint64_t cap = std::min<uint64_t>(blocks, reader.file_size() * 4);
    s.addr.reserve(cap);
    s.size.reserve(cap);
    s.call_site.reserve(cap);
    s.stack.reserve(cap);
    if (opts.identity) {
      s.id.reserve(cap);
      s.time_ms.reserve(cap);
      s.pool.reserve(cap);
    }
  };
  using Raw = capture::CaptureReader::RawRecord;
  if (opts.raw_records) {
    reader.set_raw_record_handler([&](uint32_t field, const uint8_t *m, size_t n, const capture::RecordPos &pos) {
      if (field == wire::Record::kSnapshotBlocksFieldNumber) {
        RawBlocks b;
        if (!b.parse(m, n)) return Raw::parse;
        return l.blocks(b, pos, false) ? Raw::taken : Raw::stop;
      }
      if (field == wire::Record::kSnapshotEdgesFieldNumber) {
        RawEdges e;
        if (!e.parse(m, n)) return Raw::parse;
        return l.edges(e, pos, false) ? Raw::taken : Raw::stop;
      }
      return Raw::parse;
    });
    reader.set_frame_done([&] { return l.settle(); });
  }
  reader.for_each_record([&](const wire::Record &r, const capture::RecordPos &pos) {
    // The lanes first: this record's checks see what the records before it left.
    if (!l.settle()) return false;
    switch (r.body_case()) {
      case wire::Record::kSnapshotBegin:
        if (r.snapshot_begin().index() != index) break;
        if (s.addr.empty()) reserve(r.snapshot_begin().totals().live_blocks());
        l.found = true;
        s.info.have_begin = true;
        s.info.time_ns = r.snapshot_begin().time_ns();
        s.info.trigger = r.snapshot_begin().trigger();
        s.info.label = r.snapshot_begin().label();
        s.info.pause_ns = r.snapshot_begin().pause_ns();
        s.info.totals = r.snapshot_begin().totals();
        break;
      case wire::Record::kSnapshotBlocks: return l.blocks(ProtoBlocks(r.snapshot_blocks()), pos, true);
      case wire::Record::kSnapshotEdges: return l.edges(ProtoEdges(r.snapshot_edges()), pos, true);
      case wire::Record::kSnapshotRoots:
        if (r.snapshot_roots().index() != index) break;
        return load_roots(r.snapshot_roots(), s, l, pos);
      case wire::Record::kSnapshotTypes:
        if (r.snapshot_types().index() != index || !opts.types) break;
        return load_types(r.snapshot_types(), s, l, pos);
      case wire::Record::kSnapshotEnd:
        if (r.snapshot_end().index() != index) break;
        s.info.have_end = true;
        s.info.end = r.snapshot_end();
        return !s.info.have_begin;  // the Begin (written by the parent) may come after the End
      default: break;
    }
    return true;
  });
  l.settle();
  reader.set_raw_record_handler(nullptr);
  reader.set_frame_done(nullptr);
  std::string err = l.error();
  if (!err.empty()) {
    *error = err;
    return false;
  }
  if (!l.found) {
    *error = "no snapshot " + std::to_string(index) + " in " + reader.path();
    return false;
  }
  if (s.edge_begin.empty()) {
    s.edge_begin.reserve(s.addr.size() + 2);
    s.edge_begin.assign(s.addr.size() + 1, 0);
  }
  for (uint64_t q = l.any_source ? l.last_source + 1 : 0; q <= s.addr.size(); ++q)
    s.edge_begin[q] = uint32_t(s.edge_target.size());
  s.call_site.done_loading();
  s.load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!s.info.have_end) *error = "snapshot " + std::to_string(index) + " has no end record (the snapshot child did not finish)";
  return true;
}

}  // namespace heapsnap::snapshot
