#include "replay/stack_symbolizer.h"

#include <algorithm>
#include <cstdio>

#include "symbolize/readable_name.h"

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

std::string DisplayFrame::readable_function() const {
  return function.empty() ? std::string() : symbolize::readable_name(function);
}

std::string DisplayFrame::readable_label(bool with_location) const {
  if (function.empty()) return label(with_location);
  std::string name = symbolize::readable_name(function);
  if (!with_location) return name;
  if (!file.empty()) return name + " (" + basename_of(file) + ":" + std::to_string(line) + ")";
  return name + " (" + module + ")";
}

StackSymbolizer::StackSymbolizer(const std::vector<ModuleRecord> &modules,
                                 symbolize::SymbolizerOptions opts)
    : sym_(std::move(opts)) {
  for (const auto &m : modules) add_module(m);
}

StackSymbolizer::StackSymbolizer(symbolize::SymbolizerOptions opts) : sym_(std::move(opts)) {}

void StackSymbolizer::add_module(const ModuleRecord &m) {
  symbolize::ModuleInfo info;
  info.path = m.path;
  info.load_bias = m.load_bias;
  info.build_id = m.build_id;
  uint32_t h = sym_.add_module(info);
  for (const auto &r : m.exec) ranges_.push_back({r.start, r.end, h, basename_of(m.path), m.path, m.load_bias});
  sorted_ = false;
  last_watched_ = nullptr;
}

void StackSymbolizer::follow(ReplayOptions &o) {
  o.on_module = [this](const ModuleRecord &m) { add_module(m); };
  o.on_stack_nodes = [this](const capture::StackTree &t, uint32_t first) { watch(t, first); };
}

void StackSymbolizer::watch(const capture::StackTree &tree, uint32_t first_node) {
  for (size_t n = first_node; n <= tree.nodes(); ++n) {
    uint64_t a = tree.address(uint32_t(n));
    if (last_watched_ && a >= last_watched_->start && a < last_watched_->end) continue;
    const Range *r = range_of(a);
    if (!r) continue;
    last_watched_ = r;
    if (r->handle >= prefetched_.size()) prefetched_.resize(r->handle + 1, false);
    if (!prefetched_[r->handle]) {
      prefetched_[r->handle] = true;
      sym_.prefetch(r->handle);
    }
  }
}

// The last range starting at or before the address that contains it.
const StackSymbolizer::Range *StackSymbolizer::range_of(uint64_t address) {
  if (!sorted_) {
    // Later modules win where ranges overlap (a library loaded where an unloaded one had been).
    std::stable_sort(ranges_.begin(), ranges_.end(),
                     [](const Range &a, const Range &b) { return a.start < b.start; });
    sorted_ = true;
  }
  auto ub = std::upper_bound(ranges_.begin(), ranges_.end(), address,
                             [](uint64_t a, const Range &r) { return a < r.start; });
  for (auto r = ub; r != ranges_.begin();) {
    --r;
    if (address < r->end) return &*r;
    if (r->end + (1ull << 32) < address) break;
  }
  return nullptr;
}

const std::vector<DisplayFrame> &StackSymbolizer::frames_of(uint64_t address) {
  auto it = cache_.find(address);
  if (it != cache_.end()) return it->second;
  std::vector<DisplayFrame> out;
  if (address == 0) {
    out.push_back(DisplayFrame{});
    return cache_[address] = out;
  }
  const Range *hit = range_of(address);
  if (!hit) {
    DisplayFrame f;
    f.module = "?";
    f.address = address;
    f.module_offset = address;
    f.library = filter_.library("", "", "");
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
    f.library = filter_.library(f.function, f.file, hit->path);
    out.push_back(std::move(f));
  }
  if (out.empty()) {
    DisplayFrame f;
    f.module = hit->name;
    f.address = address;
    f.module_offset = s.module_offset;
    f.library = filter_.library("", "", hit->path);
    out.push_back(f);
  }
  return cache_[address] = out;
}

std::string StackSymbolizer::stable_site(uint64_t address) {
  char buf[40];
  const Range *r = address ? range_of(address) : nullptr;
  snprintf(buf, sizeof(buf), "%s0x%llx", r ? "+" : "", static_cast<unsigned long long>(r ? address - r->load_bias : address));
  return r ? r->path + buf : std::string(buf);
}

void StackSymbolizer::set_frame_filter(symbolize::FrameFilter f) {
  filter_ = std::move(f);
  cache_.clear();
  site_tree_ = nullptr;
  site_memo_.clear();
  call_site_tree_ = nullptr;
  unknown_sites_.clear();
  site_id_of_address_.clear();
  site_id_of_label_.clear();
  site_id_address_.clear();
}

bool StackSymbolizer::has_program_frame(uint64_t address) {
  if (address == 0) return false;  // the truncation marker
  for (const auto &f : frames_of(address))
    if (!f.library) return true;
  return false;
}

const DisplayFrame &StackSymbolizer::site_frame(uint64_t address) {
  const auto &frames = frames_of(address);
  if (all_frames()) return frames[0];
  for (const auto &f : frames)
    if (!f.library) return f;
  return frames.back();
}

uint64_t StackSymbolizer::site_address(const capture::StackTree &tree, uint32_t stack, uint64_t call_site) {
  if (!tree.valid(stack)) return call_site_address(tree, call_site);
  if (call_site == 0) call_site = tree.address(stack);
  if (all_frames()) return call_site;
  if (site_tree_ != &tree) {
    site_tree_ = &tree;
    site_memo_.clear();
  }
  if (site_memo_.size() <= tree.nodes()) site_memo_.resize(tree.nodes() + 1, 0);
  // Up to the first node already known (or the root), then back down filling in.
  std::vector<uint32_t> path;
  uint32_t n = stack;
  uint64_t above = 1;
  while (n != 0) {
    if (site_memo_[n]) {
      above = site_memo_[n];
      break;
    }
    path.push_back(n);
    n = tree.parent(n);
  }
  for (size_t i = path.size(); i-- > 0;) {
    uint32_t node = path[i];
    uint64_t a = tree.address(node);
    if (has_program_frame(a)) above = a;
    site_memo_[node] = above;
  }
  uint64_t site = site_memo_[stack];
  return site > 1 ? site : call_site;
}

uint64_t StackSymbolizer::call_site_address(const capture::StackTree &, uint64_t call_site, bool *unknown) {
  if (unknown) *unknown = false;
  if (call_site == 0 || all_frames() || has_program_frame(call_site)) return call_site;
  unknown_sites_.insert(call_site);
  if (unknown) *unknown = true;
  return call_site;
}

std::vector<std::pair<uint64_t, uint32_t>> StackSymbolizer::sampled_callers(const capture::StackTree &tree,
                                                                            uint64_t call_site) {
  if (call_site_tree_ != &tree) {
    call_site_tree_ = &tree;
    nodes_of_address_.clear();
    nodes_of_address_.reserve(tree.nodes());
    for (uint32_t n = 1; n <= tree.nodes(); ++n) nodes_of_address_.push_back({tree.address(n), n});
    std::sort(nodes_of_address_.begin(), nodes_of_address_.end());
  }
  std::unordered_map<uint32_t, std::pair<uint64_t, uint32_t>> by_id;  // site id -> (an address, stacks)
  for (auto n = std::lower_bound(nodes_of_address_.begin(), nodes_of_address_.end(), std::make_pair(call_site, 0u));
       n != nodes_of_address_.end() && n->first == call_site; ++n) {
    uint64_t site = site_address(tree, n->second, call_site);
    if (site == call_site) continue;  // no program frame above this one
    auto &e = by_id.try_emplace(site_id(site), site, 0).first->second;
    ++e.second;
  }
  std::vector<std::pair<uint64_t, uint32_t>> out;
  for (const auto &[id, e] : by_id) out.push_back(e);
  std::sort(out.begin(), out.end(), [](const auto &x, const auto &y) { return x.second != y.second ? x.second > y.second : x.first < y.first; });
  return out;
}

uint32_t StackSymbolizer::site_id(uint64_t site_address) {
  auto [it, fresh] = site_id_of_address_.try_emplace(site_address, 0);
  if (fresh) {
    // A frame with a source line is its function and line; one without (no debug information)
    // stays its address: the function's name alone would merge every call it makes.
    const DisplayFrame &f = site_frame(site_address);
    std::string key = f.label() + '\x1f' + f.module;
    if (f.file.empty()) key += '\x1f' + std::to_string(site_address);
    auto [lt, new_label] = site_id_of_label_.try_emplace(std::move(key), uint32_t(site_id_address_.size()));
    if (new_label) site_id_address_.push_back(site_address);
    it->second = lt->second;
  }
  return it->second;
}

std::vector<DisplayFrame> StackSymbolizer::stack(const capture::StackTree &tree, uint32_t leaf) {
  std::vector<DisplayFrame> out;
  std::vector<uint64_t> addrs;
  tree.frames(leaf, &addrs);
  for (uint64_t a : addrs)
    for (const auto &f : frames_of(a)) out.push_back(f);
  if (!addrs.empty() && addrs.back() == 0) truncated_stacks_.insert(leaf);
  return out;
}

std::vector<std::string> StackSymbolizer::warnings() const {
  std::vector<std::string> out = sym_.warnings();
  if (!truncated_stacks_.empty())
    out.push_back(std::to_string(truncated_stacks_.size()) + " stack" + (truncated_stacks_.size() == 1 ? " was" : "s were") +
                  " cut at the recording's depth (heapsnap record --stack-depth, default 64): their outermost frames "
                  "show as [truncated]; record with a larger --stack-depth to see them");
  if (!unknown_sites_.empty())
    out.push_back("[site not known: not sampled]: blocks allocated inside a library (the C++ library's out-of-line "
                  "code, libc) whose stack was not sampled are shown at the library's function, since other "
                  "blocks' stacks cannot say which caller made them; record with --sample-bytes 1 for every "
                  "allocation's stack (--json lists the callers the sampled stacks saw: sampled_callers)");
  return out;
}

}  // namespace heapsnap::replay
