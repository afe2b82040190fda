#include "replay/capture_summary.h"

#include <algorithm>
#include <cstdio>
#include <unordered_set>

#include "capture/batch_decoder.h"
#include "capture/event_decoder.h"
#include "snapshot/heap_snapshot.h"

namespace heapsnap::replay {

CaptureSummary summarize(capture::CaptureReader &reader) {
  CaptureSummary s;
  std::unordered_set<uint32_t> tids;
  auto note_time = [&](uint64_t t) {
    if (t > s.last_time_ns) s.last_time_ns = t;
  };
  // The writer puts a Totals record (and last the End record) in every flush, in time order, and
  // a SnapshotBegin between the totals before and after it: times that do not increase mean
  // frames that were swapped or repeated.
  // Likewise a snapshot's records: its SnapshotBegin, then its child's records up to its
  // SnapshotEnd, all before the next snapshot begins; and nothing after the EndOfCapture.
  uint64_t totals_ns = 0, totals_frame = 0;
  bool any_totals = false, order_reported = false, first_record = true;
  auto out_of_order = [&](uint64_t frame, const std::string &why) {
    if (order_reported) return;  // one is enough: the rest follows from it
    order_reported = true;
    char at[40];
    snprintf(at, sizeof(at), "frame at 0x%llx: ", (unsigned long long)frame);
    s.problems.push_back({frame, at + why + ": frames out of order or repeated"});
  };
  auto check_order = [&](uint64_t t, uint64_t frame) {
    if (any_totals && t <= totals_ns) {
      char what[160];
      snprintf(what, sizeof(what), "a record of %.6f s comes after one of %.6f s (frame at 0x%llx)",
               double(t) / 1e9, double(totals_ns) / 1e9, (unsigned long long)totals_frame);
      out_of_order(frame, what);
    }
    any_totals = true;
    totals_ns = t;
    totals_frame = frame;
  };
  enum SnapState : uint8_t { kNone = 0, kBegun = 1, kEnded = 2 };
  std::vector<uint8_t> snap_state;
  int64_t open_snapshot = -1;  // begun, not yet ended
  auto snapshot_record = [&](uint32_t index, bool begin, bool end, uint64_t frame) {
    if (index >= (1u << 20)) return;  // not a real index (the snapshot readers say so)
    if (snap_state.size() <= index) snap_state.resize(size_t(index) + 1, kNone);
    uint8_t &st = snap_state[index];
    std::string n = std::to_string(index);
    if (begin) {
      if (st != kNone) out_of_order(frame, "snapshot " + n + " begins twice");
      else if (open_snapshot >= 0) out_of_order(frame, "snapshot " + n + " begins before snapshot " + std::to_string(open_snapshot) + " ended");
      st = kBegun;
      open_snapshot = index;
      return;
    }
    if (st == kEnded) out_of_order(frame, "a record of snapshot " + n + " after its end");
    else if (st == kNone && !end)  // (an End alone: the snapshot could not start, e.g. fork failed)
      out_of_order(frame, "a record of snapshot " + n + " before its SnapshotBegin");
    if (end) {
      st = kEnded;
      if (open_snapshot == int64_t(index)) open_snapshot = -1;
    }
  };
  // Checks every record takes, whatever its kind.
  auto any_record = [&](wire::Record::BodyCase kind, const capture::RecordPos &pos) {
    if (first_record && kind != wire::Record::kProcess && reader.problems().empty()) {
      // (When frames before this one were lost, the reader has said so already.)
      char what[120];
      snprintf(what, sizeof(what), "frame at 0x%llx: the first record is not the process record: frames out of order",
               (unsigned long long)pos.frame_offset);
      s.problems.push_back({pos.frame_offset, what});
    }
    first_record = false;
    if (s.ended && kind != wire::Record::kEnd) out_of_order(pos.frame_offset, "a record after the end record");
  };
  // Event batches straight from their bytes, as the replay reads them (libprotobuf's parse of
  // every batch was three quarters of this command's time); other layouts come parsed, below.
  struct Counts {
    CaptureSummary &s;
    uint64_t last = 0;
    void alloc(uint64_t t, uint64_t, uint64_t, uint32_t) { ++s.sampled_allocs; last = t; }
    void free(uint64_t t, uint64_t) { ++s.sampled_frees; last = t; }
    void realloc(uint64_t t, uint64_t, uint64_t, uint32_t, bool) { ++s.sampled_reallocs; last = t; }
    void pool_alloc(uint64_t t, uint64_t, uint64_t, uint64_t, uint32_t, uint32_t) { ++s.sampled_allocs; last = t; }
    void pool_free(uint64_t t, uint64_t, uint32_t) { ++s.sampled_frees; last = t; }
  };
  capture::SiteCursors cursors;
  reader.set_raw_events_handler([&](const uint8_t *p, size_t n, const capture::RecordPos &pos) {
    static_assert(capture::kRawEventsPadding >= capture::kDecodePadding);
    capture::RawColumns cols;
    if (!cols.parse(p, n)) return false;
    any_record(wire::Record::kEvents, pos);
    Counts c{s};
    std::string err = capture::decode_batch(cols, cursors, c);
    note_time(c.last);  // times only grow within a batch
    if (!err.empty()) s.problems.push_back({pos.frame_offset, "event batch: " + err});
    tids.insert(cols.tid());
    return true;
  });
  reader.for_each_record([&](const wire::Record &r, const capture::RecordPos &pos) {
    any_record(r.body_case(), pos);
    switch (r.body_case()) {
      case wire::Record::kProcess:
        if (!s.have_process) {
          s.have_process = true;
          s.process = r.process();
        }
        break;
      case wire::Record::kModule: ++s.modules; break;
      case wire::Record::kStack: ++s.stacks; break;
      case wire::Record::kThread:
        if (r.thread().started()) tids.insert(r.thread().tid());
        note_time(r.thread().time_ns());
        break;
      case wire::Record::kMarker: {
        ++s.markers;
        note_time(r.marker().time_ns());
        std::string note;
        if (snapshot::snapshot_note(r.marker(), &note)) s.snapshot_notes.push_back(std::move(note));
        break;
      }
      case wire::Record::kSnapshotBegin:
        ++s.snapshots;
        snapshot_record(r.snapshot_begin().index(), true, false, pos.frame_offset);
        // Started after the totals before it; a deferred one (an at-peak snapshot, appended at the
        // end) was taken earlier.
        if (!r.snapshot_begin().deferred()) check_order(r.snapshot_begin().time_ns(), pos.frame_offset);
        break;
      case wire::Record::kSnapshotBlocks: snapshot_record(r.snapshot_blocks().index(), false, false, pos.frame_offset); break;
      case wire::Record::kSnapshotEdges: snapshot_record(r.snapshot_edges().index(), false, false, pos.frame_offset); break;
      case wire::Record::kSnapshotRoots: snapshot_record(r.snapshot_roots().index(), false, false, pos.frame_offset); break;
      case wire::Record::kSnapshotContents: snapshot_record(r.snapshot_contents().index(), false, false, pos.frame_offset); break;
      case wire::Record::kSnapshotEnd: snapshot_record(r.snapshot_end().index(), false, true, pos.frame_offset); break;
      case wire::Record::kTotals:
        s.highest_heap = std::max(s.highest_heap, r.totals().heap_bytes());
        if (!s.ended) {
          s.totals = r.totals();
          s.have_totals = true;
        }
        note_time(r.totals().time_ns());
        check_order(r.totals().time_ns(), pos.frame_offset);
        break;
      case wire::Record::kEnd:
        // A capture may go on after an End (an exec that failed); the last one wins.
        s.ended = true;
        s.end_reason = r.end().reason();
        s.highest_heap = std::max(s.highest_heap, r.end().totals().heap_bytes());
        s.totals = r.end().totals();
        s.have_totals = true;
        note_time(r.end().totals().time_ns());
        check_order(r.end().totals().time_ns(), pos.frame_offset);
        break;
      case wire::Record::kEvents: {
        capture::EventDecoder dec(r.events());
        capture::Event e;
        while (dec.next(&e)) {
          switch (e.kind) {
            case wire::ALLOC: case wire::POOL_ALLOC: ++s.sampled_allocs; break;
            case wire::FREE: case wire::POOL_FREE: ++s.sampled_frees; break;
            case wire::REALLOC: ++s.sampled_reallocs; break;
            default: break;
          }
          note_time(e.time_ns);
        }
        if (!dec.error().empty())
          s.problems.push_back({pos.frame_offset, "event batch: " + dec.error()});
        tids.insert(r.events().tid());
        break;
      }
      default: break;
    }
    return true;
  });
  s.threads = uint32_t(tids.size());
  s.truncated = reader.truncated() || !s.ended;
  for (const auto &p : reader.problems()) s.problems.push_back(p);
  s.file_bytes = reader.file_size();
  s.frames = reader.frames_read();
  s.records = reader.records_read();
  return s;
}

}  // namespace heapsnap::replay
