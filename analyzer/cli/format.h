// Human-readable figures for terminal output, and a capture's problems as commands report them.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "capture/capture_reader.h"

namespace heapsnap::cli {

std::string human_bytes(double bytes);          // "1.50 MiB"
inline std::function<std::string(double)> human_bytes_fn() { return [](double b) { return human_bytes(b); }; }
// "block" for exactly one, else "blocks" ("1 block", "0 blocks", "~2.5 blocks").
inline const char *blocks_word(double n) { return n == 1 ? "block" : "blocks"; }
std::string human_count(uint64_t n);            // "1,234,567"
std::string human_duration(double seconds);     // "1.25 s", "340 ms"
bool stdout_is_terminal();
bool stderr_is_terminal();

// Why a capture that was read has no process record, naming a file offset: the reader's first
// problem (a lost first frame), or the end of the file when nothing was readable.
std::string no_process_record_message(const std::string &file, const std::vector<capture::Problem> &problems);

// The "problems" array of every --json output: [{"offset": N, "what": "..."}, ...].
nlohmann::ordered_json problems_json(const std::vector<capture::Problem> &problems);

// The peak heap as the shim measured it. With one thread it is exact. With several, each thread
// batches its heap changes (up to 256 KiB) before the shared figure sees them, and the shim sums
// the threads' batched highs: the figure is then an estimate whose true value lies in [low, high]
// (the shim's accuracy either way; low also at least the highest heap any Totals record read).
// `summary`, `peak`, `top-allocators` and `timeline` print it with peak_text, so that they agree.
struct PeakFigure {
  uint64_t bytes = 0, time_ns = 0;
  uint64_t low = 0, high = 0;  // bytes when exact
  bool exact = true;
};
// highest_heap_seen: the highest heap_bytes of the capture's Totals records (0 if unknown).
PeakFigure peak_figure(const wire::Totals &t, int64_t highest_heap_seen);
// "1.50 MiB at 120 ms", or when not exact "1.50 MiB at 120 ms (estimate, several threads: between
// 1.20 MiB and 3.75 MiB)"; sizes as `size` formats them (plain text, no colour).
std::string peak_text(const PeakFigure &p, const std::function<std::string(double)> &size = human_bytes_fn());
// The peak fields of every --json output that shows the peak: peak_heap_bytes, peak_time_s,
// peak_exact, peak_heap_min_bytes, peak_heap_max_bytes.
void add_peak_json(nlohmann::ordered_json &j, const PeakFigure &p);

}  // namespace heapsnap::cli
