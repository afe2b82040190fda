// Human-readable figures for terminal output.
#pragma once
#include <cstdint>
#include <string>

namespace heapsnap::cli {

std::string human_bytes(double bytes);          // "1.50 MiB"
std::string human_count(uint64_t n);            // "1,234,567"
std::string human_duration(double seconds);     // "1.25 s", "340 ms"
bool stdout_is_terminal();
bool stderr_is_terminal();

}  // namespace heapsnap::cli
