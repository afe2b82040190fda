#include "cli/format.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace heapsnap::cli {

std::string human_bytes(double bytes) {
  static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = std::fabs(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) { v /= 1024; ++u; }
  char b[48];
  if (u == 0) snprintf(b, sizeof(b), "%s%.0f B", bytes < 0 ? "-" : "", v);
  else snprintf(b, sizeof(b), "%s%.2f %s", bytes < 0 ? "-" : "", v, units[u]);
  return b;
}

std::string human_count(uint64_t n) {
  std::string s = std::to_string(n);
  for (int i = int(s.size()) - 3; i > 0; i -= 3) s.insert(size_t(i), ",");
  return s;
}

std::string human_duration(double s) {
  char b[48];
  if (s >= 1) snprintf(b, sizeof(b), "%.2f s", s);
  else snprintf(b, sizeof(b), "%.0f ms", s * 1000);
  return b;
}

bool stdout_is_terminal() { return isatty(1); }
bool stderr_is_terminal() { return isatty(2); }

nlohmann::ordered_json problems_json(const std::vector<capture::Problem> &problems) {
  nlohmann::ordered_json a = nlohmann::ordered_json::array();
  for (const auto &p : problems) a.push_back({{"offset", p.offset}, {"what", p.what}});
  return a;
}

std::string no_process_record_message(const std::string &file, const std::vector<capture::Problem> &problems) {
  char b[64];
  if (!problems.empty()) {
    snprintf(b, sizeof(b), "offset 0x%llx: ", (unsigned long long)problems[0].offset);
    std::string more = problems.size() > 1 ? " (and " + std::to_string(problems.size() - 1) + " more problems)" : "";
    return file + ": no process record: not a usable capture (" + b + problems[0].what + more + ")";
  }
  struct stat st;
  unsigned long long size = stat(file.c_str(), &st) == 0 ? (unsigned long long)st.st_size : 0;
  snprintf(b, sizeof(b), "0x%llx", size);
  return file + ": no process record before the end of the file at offset " + b + ": not a usable capture";
}

PeakFigure peak_figure(const wire::Totals &t, int64_t highest_heap_seen) {
  PeakFigure p;
  p.bytes = t.peak_heap_bytes();
  p.time_ns = t.peak_time_ns();
  p.low = p.high = p.bytes;
  uint64_t acc = t.peak_accuracy_bytes();
  if (acc == 0) return p;
  p.exact = false;
  p.low = p.bytes > acc ? p.bytes - acc : 0;
  // A heap a Totals record read was reached (the shim's peak is never below one).
  if (highest_heap_seen > 0 && uint64_t(highest_heap_seen) > p.low) p.low = std::min(uint64_t(highest_heap_seen), p.bytes);
  if (t.heap_bytes() > 0 && uint64_t(t.heap_bytes()) > p.low) p.low = std::min(uint64_t(t.heap_bytes()), p.bytes);
  p.high = p.bytes + acc;
  return p;
}

std::string peak_text(const PeakFigure &p, const std::function<std::string(double)> &size) {
  std::string s = size(double(p.bytes)) + " at " + human_duration(double(p.time_ns) / 1e9);
  if (!p.exact)
    s += " (estimate, several threads: between " + size(double(p.low)) + " and " + size(double(p.high)) + ")";
  return s;
}

void add_peak_json(nlohmann::ordered_json &j, const PeakFigure &p) {
  j["peak_heap_bytes"] = p.bytes;
  j["peak_time_s"] = double(p.time_ns) / 1e9;
  j["peak_exact"] = p.exact;
  j["peak_heap_min_bytes"] = p.low;
  j["peak_heap_max_bytes"] = p.high;
}

}  // namespace heapsnap::cli
