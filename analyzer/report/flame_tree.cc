#include "report/flame_tree.h"

#include <algorithm>
#include <string_view>
#include <unordered_map>

#include "export/collapsed.h"
#include "symbolize/frame_filter.h"
#include "util/flat_map.h"

namespace heapsnap::report {

const char *flame_metric_name(int m) {
  static const char *names[] = {"alloc_bytes", "alloc_calls", "leaked_bytes", "peak_bytes"};
  return m >= 0 && m < kFlameMetrics ? names[m] : "?";
}

const char *frame_kind_name(int k) {
  static const char *names[] = {"program", "library", "allocator", "unknown"};
  return k >= 0 && k < kFrameKinds ? names[k] : "?";
}

namespace {

std::string_view basename_of(std::string_view p) {
  size_t s = p.rfind('/');
  return s == std::string_view::npos ? p : p.substr(s + 1);
}

}  // namespace

FrameKind frame_kind(const replay::DisplayFrame &f, const std::string &exe) {
  if (f.function.empty()) return kUnknownFrame;
  if (symbolize::FrameFilter::allocator(f.function, f.module)) return kAllocatorFrame;
  if (f.library || basename_of(f.module) != basename_of(exe)) return kLibraryFrame;
  return kProgramFrame;
}

std::string frame_location(const replay::DisplayFrame &f) {
  if (f.file.empty()) return "";
  std::string s(basename_of(f.file));
  if (f.line) {
    s += ':';
    s += std::to_string(f.line);
  }
  return s;
}

uint32_t FlameTree::add(uint32_t parent_node, uint32_t name_id) {
  parent.push_back(parent_node);
  name.push_back(name_id);
  value.push_back({0, 0, 0, 0});
  other.push_back(false);
  loc.push_back(0);
  return uint32_t(parent.size() - 1);
}

FlameTree build_flame_tree(const replay::ReplayResult &r, replay::StackSymbolizer &sym) {
  FlameTree t;
  const std::string exe = r.process.executable();
  std::unordered_map<std::string, uint32_t> name_ids, module_ids, loc_ids;
  auto intern_in = [](std::unordered_map<std::string, uint32_t> &ids, std::vector<std::string> &list, const std::string &s) {
    auto [it, fresh] = ids.try_emplace(s, uint32_t(list.size()));
    if (fresh) list.push_back(s);
    return it->second;
  };
  auto intern = [&](const std::string &s, const replay::DisplayFrame *f) {
    size_t before = t.names.size();
    uint32_t id = intern_in(name_ids, t.names, s);
    if (t.names.size() != before) {
      t.name_kind.push_back(f ? frame_kind(*f, exe) : kUnknownFrame);
      t.name_module.push_back(f && !f->module.empty() ? intern_in(module_ids, t.modules, f->module) : UINT32_MAX);
    }
    return id;
  };
  // A node's location. A node merges every return address of its name under its caller: lines of
  // one file are listed ("app.c:37,38"), up to 4, then "app.c (several lines)"; several files: none.
  // (where: 1 + index into locs, 0 when not known; interned once per return address.)
  auto locate = [&](uint32_t node, uint32_t where_id) {
    uint32_t &l = t.loc[node];
    if (where_id == 0 || l == UINT32_MAX || l == where_id) return;
    if (l == 0) {
      l = where_id;
      return;
    }
    const std::string had = t.locs[l - 1], where = t.locs[where_id - 1];
    size_t colon = where.rfind(':'), had_end = had.find_first_of(": ");
    std::string file = where.substr(0, colon), line = colon == std::string::npos ? "" : where.substr(colon + 1);
    if (had.compare(0, had_end, file) != 0 || had_end != file.size() || line.empty()) {
      l = UINT32_MAX;
      return;
    }
    if (had[had_end] == ' ') return;  // several lines already
    std::string lines = had.substr(had_end + 1);
    size_t n = 1;
    for (size_t at = 0; (at = lines.find(',', at)) != std::string::npos; ++at) ++n;
    if (("," + lines + ",").find("," + line + ",") != std::string::npos) return;
    l = 1 + intern_in(loc_ids, t.locs, n >= 4 ? file + " (several lines)" : had + "," + line);
  };
  t.add(0, intern("all", nullptr));
  // Names of one return address, outermost first (the function holding the inlined callees
  // first), cached: many stack nodes share an address. Flat maps: the stack tree of a big capture
  // has millions of nodes, and a node-based map costs a cache miss and an allocation per entry.
  struct Named {
    uint32_t name;
    uint32_t where;  // its frame_location: 1 + index into t.locs, 0 when not known
  };
  std::vector<std::vector<Named>> name_lists;
  util::FlatMap64<uint32_t> addr_names;  // address + 1 -> 1 + index into name_lists
  // (flame parent + 1, name) -> flame child.
  util::FlatMap64<uint32_t> child;
  const auto &st = r.stacks;
  size_t n = st.nodes() + 1;
  // Which stack-tree nodes carry a figure, or lead to one: the others are not walked.
  std::vector<uint8_t> used(n, 0);
  for (uint32_t id = uint32_t(std::min(n, r.by_stack.size())); id-- > 1;) {
    const auto &f = r.by_stack[id];
    if (f.alloc_bytes > 0 || f.alloc_calls > 0 || f.live_bytes > 0 || f.peak_bytes > 0) used[id] = 1;
  }
  for (uint32_t id = uint32_t(n); id-- > 1;)
    if (used[id]) used[st.parent(id)] = 1;
  size_t walked = size_t(std::count(used.begin(), used.end(), uint8_t(1)));
  t.parent.reserve(walked + 1);
  t.name.reserve(walked + 1);
  t.value.reserve(walked + 1);
  t.other.reserve(walked + 1);
  std::vector<uint32_t> flame_of(n, 0);  // stack-tree node -> flame node (the innermost frame of its address)
  for (uint32_t id = 1; id < n; ++id) {
    if (!used[id]) continue;
    uint64_t a = st.address(id);
    uint32_t &list = addr_names[a + 1];  // (address + 1: the map's keys must not be 0; 0 is the truncation marker)
    if (!list) {
      std::vector<Named> names;
      const auto &frames = sym.frames_of(a);
      for (auto f = frames.rbegin(); f != frames.rend(); ++f) {
        std::string where = frame_location(*f);
        names.push_back({intern(exporter::collapsed_frame_name(*f), &*f), where.empty() ? 0 : 1 + intern_in(loc_ids, t.locs, where)});
      }
      name_lists.push_back(std::move(names));
      list = uint32_t(name_lists.size());
    }
    uint32_t at = flame_of[st.parent(id)];
    for (const Named &nm : name_lists[list - 1]) {
      uint32_t &c = child[(uint64_t(at + 1) << 32) | nm.name];
      if (!c) c = t.add(at, nm.name);
      at = c;
      locate(at, nm.where);
    }
    flame_of[id] = at;
    if (id < r.by_stack.size()) {
      const auto &f = r.by_stack[id];
      auto &v = t.value[at];
      v[kAllocBytes] += f.alloc_bytes;
      v[kAllocCalls] += f.alloc_calls;
      v[kLeakedBytes] += f.live_bytes;
      v[kPeakBytes] += f.peak_bytes;
    }
  }
  for (uint32_t &l : t.loc)
    if (l == UINT32_MAX) l = 0;  // several files
  // Self figures to inclusive ones: children come after their parents.
  for (uint32_t v = uint32_t(t.nodes()); v-- > 1;)
    for (int m = 0; m < kFlameMetrics; ++m) t.value[t.parent[v]][m] += t.value[v][m];
  return t;
}

FlameTree prune_flame_tree(const FlameTree &full, const FlameBudget &budget) {
  size_t n = full.nodes();
  size_t max_nodes = std::max<size_t>(budget.max_nodes, 2);
  std::array<double, kFlameMetrics> root = full.value.empty() ? std::array<double, kFlameMetrics>{} : full.value[0];
  std::vector<float> score(n, 0);
  std::vector<uint32_t> live_children(n, 0);  // children with a figure, not yet kept
  std::vector<std::pair<float, uint32_t>> order;
  for (uint32_t v = 1; v < n; ++v) {
    double s = 0;
    for (int m = 0; m < kFlameMetrics; ++m)
      if (root[m] > 0) s = std::max(s, full.value[v][m] / root[m]);
    score[v] = float(s);
    if (s > 0) {
      ++live_children[full.parent[v]];
      order.push_back({score[v], v});
    }
  }
  // Importance first, then parents before children (a child's score never beats its parent's,
  // and float rounding is monotone, so ties are the only case where the id order matters). Every
  // node taken costs at least one of the budget's nodes, so only the first max_nodes matter.
  auto before = [](const std::pair<float, uint32_t> &a, const std::pair<float, uint32_t> &b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  };
  size_t head = std::min(order.size(), max_nodes);
  std::partial_sort(order.begin(), order.begin() + long(head), order.end(), before);
  order.resize(head);
  std::vector<bool> keep(n, false);
  keep[0] = true;
  size_t count = 1 + (live_children[0] ? 1 : 0);  // the root, and its "[other]" while it needs one
  for (const auto &[sc, v] : order) {
    uint32_t p = full.parent[v];
    if (!keep[p]) continue;  // cannot happen (see above), but a tree it must stay
    size_t cost = 1 + (live_children[v] ? 1 : 0);
    bool frees_other = live_children[p] == 1;
    if (count + cost - (frees_other ? 1 : 0) > max_nodes) break;
    keep[v] = true;
    count += cost;
    if (--live_children[p] == 0) --count;
  }
  // Copy the kept nodes (parents first), then one "[other]" per parent for what was cut.
  FlameTree out;
  out.modules = full.modules;
  std::unordered_map<uint32_t, uint32_t> loc_map;  // the locations of the kept nodes only
  auto loc_of = [&](uint32_t v) -> uint32_t {
    uint32_t old = v < full.loc.size() ? full.loc[v] : 0;
    if (old == 0) return 0;
    auto [it, fresh] = loc_map.try_emplace(old, uint32_t(out.locs.size()) + 1);
    if (fresh) out.locs.push_back(full.locs[old - 1]);
    return it->second;
  };
  std::unordered_map<uint32_t, uint32_t> name_map;
  auto name_of = [&](uint32_t old) {
    auto [it, fresh] = name_map.try_emplace(old, uint32_t(out.names.size()));
    if (fresh) {
      out.name_kind.push_back(old < full.name_kind.size() ? full.name_kind[old] : kUnknownFrame);
      out.name_module.push_back(old < full.name_module.size() ? full.name_module[old] : UINT32_MAX);
      std::string s = full.names[old];
      if (s.size() > budget.max_name) {
        size_t cut = budget.max_name;
        while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;  // not inside a UTF-8 sequence
        s = s.substr(0, cut) + "...";
      }
      out.names.push_back(s);
    }
    return it->second;
  };
  std::vector<uint32_t> new_id(n, UINT32_MAX);
  std::unordered_map<uint32_t, std::array<double, kFlameMetrics>> cut;  // kept parent -> what was cut below it
  for (uint32_t v = 0; v < n; ++v) {
    if (keep[v]) {
      new_id[v] = v == 0 ? out.add(0, name_of(full.name[0])) : out.add(new_id[full.parent[v]], name_of(full.name[v]));
      out.value.back() = full.value[v];
      out.loc.back() = loc_of(v);
    } else if (v != 0 && score[v] > 0 && keep[full.parent[v]]) {
      auto [it, fresh] = cut.try_emplace(full.parent[v], std::array<double, kFlameMetrics>{0, 0, 0, 0});
      for (int m = 0; m < kFlameMetrics; ++m) it->second[m] += full.value[v][m];
    }
  }
  uint32_t other_name = UINT32_MAX;
  std::vector<uint32_t> parents;
  for (const auto &kv : cut) parents.push_back(kv.first);
  std::sort(parents.begin(), parents.end());
  for (uint32_t v : parents) {
    if (other_name == UINT32_MAX) {
      other_name = uint32_t(out.names.size());
      out.names.push_back("[other]");
      out.name_kind.push_back(kUnknownFrame);
      out.name_module.push_back(UINT32_MAX);
    }
    out.add(new_id[v], other_name);
    out.value.back() = cut[v];
    out.other.back() = true;
  }
  return out;
}

}  // namespace heapsnap::report
