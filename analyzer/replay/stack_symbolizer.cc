#include "replay/stack_symbolizer.h"

#include <algorithm>
#include <cstdio>

namespace heapsnap::replay {
namespace {

std::string basename_of(const std::string &p) {
  auto s = p.rfind('/');
  return s == std::string::npos ? p : p.substr(s + 1);
}

}  // namespace

std::string DisplayFrame::label(bool with_location) const {
  if (address == 0 && module.empty()) return "[truncated]";
  char off[32];
  snprintf(off, sizeof(off), "+0x%llx", static_cast<unsigned long long>(module_offset));
  if (function.empty()) return (module.empty() ? std::string("?") : module) + off;
  if (!with_location) return function;
  if (!file.empty()) return function + " (" + basename_of(file) + ":" + std::to_string(line) + ")";
  return function + " (" + module + ")";
}

StackSymbolizer::StackSymbolizer(const std::vector<ModuleRecord> &modules,
                                 symbolize::SymbolizerOptions opts)
    : sym_(std::move(opts)) {
  for (const auto &m : modules) {
    symbolize::ModuleInfo info;
    info.path = m.path;
    info.load_bias = m.load_bias;
    info.build_id = m.build_id;
    uint32_t h = sym_.add_module(info);
    for (const auto &r : m.exec) ranges_.push_back({r.start, r.end, h, basename_of(m.path)});
  }
  // Later modules win where ranges overlap (a library loaded where an unloaded one had been).
  std::stable_sort(ranges_.begin(), ranges_.end(),
                   [](const Range &a, const Range &b) { return a.start < b.start; });
}

const std::vector<DisplayFrame> &StackSymbolizer::frames_of(uint64_t address) {
  auto it = cache_.find(address);
  if (it != cache_.end()) return it->second;
  std::vector<DisplayFrame> out;
  if (address == 0) {
    out.push_back(DisplayFrame{});
    return cache_[address] = out;
  }
  // The last range starting at or before the address that contains it.
  const Range *hit = nullptr;
  auto ub = std::upper_bound(ranges_.begin(), ranges_.end(), address,
                             [](uint64_t a, const Range &r) { return a < r.start; });
  for (auto r = ub; r != ranges_.begin();) {
    --r;
    if (address < r->end) {
      hit = &*r;
      break;
    }
    if (r->end + (1ull << 32) < address) break;
  }
  if (!hit) {
    DisplayFrame f;
    f.module = "?";
    f.address = address;
    f.module_offset = address;
    out.push_back(f);
    return cache_[address] = out;
  }
  const symbolize::Symbolized &s = sym_.symbolize(hit->handle, address, true);
  for (const auto &sf : s.frames) {
    DisplayFrame f;
    f.function = sf.function;
    f.file = sf.file;
    f.line = sf.line;
    f.module = hit->name;
    f.address = address;
    f.module_offset = s.module_offset;
    f.inlined = sf.inlined;
    out.push_back(std::move(f));
  }
  if (out.empty()) {
    DisplayFrame f;
    f.module = hit->name;
    f.address = address;
    f.module_offset = s.module_offset;
    out.push_back(f);
  }
  return cache_[address] = out;
}

std::vector<DisplayFrame> StackSymbolizer::stack(const capture::StackTree &tree, uint32_t leaf) {
  std::vector<DisplayFrame> out;
  std::vector<uint64_t> addrs;
  tree.frames(leaf, &addrs);
  for (uint64_t a : addrs)
    for (const auto &f : frames_of(a)) out.push_back(f);
  return out;
}

}  // namespace heapsnap::replay
