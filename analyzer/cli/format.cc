#include "cli/format.h"

#include <sys/stat.h>
#include <unistd.h>

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

}  // namespace heapsnap::cli
