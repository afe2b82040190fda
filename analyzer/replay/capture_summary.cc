#include "replay/capture_summary.h"

#include <unordered_set>

#include "capture/event_decoder.h"

namespace heapsnap::replay {

CaptureSummary summarize(capture::CaptureReader &reader) {
  CaptureSummary s;
  std::unordered_set<uint32_t> tids;
  auto note_time = [&](uint64_t t) {
    if (t > s.last_time_ns) s.last_time_ns = t;
  };
  reader.for_each_record([&](const wire::Record &r, const capture::RecordPos &pos) {
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
      case wire::Record::kMarker: ++s.markers; note_time(r.marker().time_ns()); break;
      case wire::Record::kSnapshotBegin: ++s.snapshots; break;
      case wire::Record::kTotals:
        if (!s.ended) {
          s.totals = r.totals();
          s.have_totals = true;
        }
        note_time(r.totals().time_ns());
        break;
      case wire::Record::kEnd:
        // A capture may go on after an End (an exec that failed); the last one wins.
        s.ended = true;
        s.end_reason = r.end().reason();
        s.totals = r.end().totals();
        s.have_totals = true;
        note_time(r.end().totals().time_ns());
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
