// Human-readable figures for terminal output, and a capture's problems as commands report them.
#pragma once
#include <nlohmann/json.hpp>

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

// The "problems" array of every --json output: [{"offset": N, "what": "..."}, ...].
nlohmann::ordered_json problems_json(const std::vector<capture::Problem> &problems);

}  // namespace heapsnap::cli
