#include "export/collapsed.h"

#include <cmath>

#include "export/stack_match.h"
#include "replay/frame_types.h"

namespace heapsnap::exporter {

std::optional<Metric> parse_metric(std::string_view name) {
  if (name == "alloc-bytes") return Metric::alloc_bytes;
  if (name == "alloc-calls") return Metric::alloc_calls;
  if (name == "leaked") return Metric::leaked;
  if (name == "peak") return Metric::peak;
  return std::nullopt;
}

double metric_value(const replay::StackFigures &f, Metric m) {
  switch (m) {
    case Metric::alloc_bytes: return f.alloc_bytes;
    case Metric::alloc_calls: return f.alloc_calls;
    case Metric::leaked: return f.live_bytes;
    case Metric::peak: return f.peak_bytes;
  }
  return 0;
}

std::string collapsed_frame_name(const replay::DisplayFrame &f) {
  std::string s = f.label(false);
  if (s.empty()) return "?";
  for (char &c : s) {
    if (c == ';') c = ':';
    else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';  // \n, \r, \t...
  }
  return s;
}

std::map<std::string, double> collapse_stacks(const replay::ReplayResult &r,
                                              replay::StackSymbolizer &sym,
                                              const CollapsedOptions &opts) {
  std::map<std::string, double> out;
  std::string line;
  for (uint32_t id = 1; id < r.by_stack.size(); ++id) {
    double v = metric_value(r.by_stack[id], opts.metric);
    if (!(v > 0)) continue;  // summed first, rounded in collapsed_text
    auto frames = sym.stack(r.stacks, id);
    if (frames.empty() || !stack_matches(frames, opts.match)) continue;
    line.clear();
    if (opts.by_type) {
      std::string type = replay::type_from_frames(frames);
      for (char &c : type)
        if (c == ';' || c == '\n') c = ',';
      line = type.empty() ? "[type unknown]" : "[" + type + "]";
    }
    for (auto f = frames.rbegin(); f != frames.rend(); ++f) {
      if (!line.empty()) line += ';';
      line += collapsed_frame_name(*f);
    }
    out[line] += v;
  }
  return out;
}

std::string collapsed_text(const std::map<std::string, double> &stacks) {
  std::string out;
  for (const auto &[stack, v] : stacks) {
    long long n = std::llround(v);
    if (n <= 0) continue;
    out += stack;
    out += ' ';
    out += std::to_string(n);
    out += '\n';
  }
  return out;
}

}  // namespace heapsnap::exporter
