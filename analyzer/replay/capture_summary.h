// The figures `heapsnap summary` prints: process, exact totals, sampling, threads, integrity.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "capture/capture_reader.h"

namespace heapsnap::replay {

struct CaptureSummary {
  bool have_process = false;
  wire::ProcessInfo process;
  bool have_totals = false;
  wire::Totals totals;        // from EndOfCapture if present, else the last Totals record
  int64_t highest_heap = 0;   // the highest heap_bytes of the Totals and End records (a lower bound of the peak)
  bool ended = false;         // an EndOfCapture record was read
  std::string end_reason;
  uint64_t sampled_allocs = 0, sampled_frees = 0, sampled_reallocs = 0;
  uint64_t stacks = 0, modules = 0, snapshots = 0, markers = 0;
  // The shim's notes on snapshots asked for and not taken, and the at-peak and growth outcomes
  // (snapshot::snapshot_note).
  std::vector<std::string> snapshot_notes;
  uint32_t threads = 0;
  uint64_t last_time_ns = 0;
  bool truncated = false;     // cut off mid-frame, or no EndOfCapture
  std::vector<capture::Problem> problems;
  uint64_t file_bytes = 0, frames = 0, records = 0;
};

CaptureSummary summarize(capture::CaptureReader &reader);

}  // namespace heapsnap::replay
