// Human-readable figures for terminal output.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "capture/capture_reader.h"

namespace heapsnap::cli {

std::string human_bytes(double bytes);          // "1.50 MiB"
std::string human_count(uint64_t n);            // "1,234,567"
std::string human_duration(double seconds);     // "1.25 s", "340 ms"
bool stdout_is_terminal();
bool stderr_is_terminal();

// Why a capture that was read has no process record, naming a file offset: the reader's first
// problem (a lost first frame), or the end of the file when nothing was readable.
std::string no_process_record_message(const std::string &file, const std::vector<capture::Problem> &problems);

}  // namespace heapsnap::cli
