#include "report/report_data.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <unordered_map>

#include "replay/replay.h"
#include "replay/stack_symbolizer.h"
#include "report/timeline_series.h"
#include "report/memory_section.h"
#include "snapshot/heap_snapshot.h"
#include "snapshot/object_graph.h"
#include "snapshot/root_objects.h"
#include "snapshot/top_rows.h"
#include "snapshot/group_retained.h"
#include "replay/block_types.h"
#include "replay/root_frames.h"
#include "snapshot/path_steps.h"

#ifndef HEAPSNAP_VERSION
#define HEAPSNAP_VERSION "dev"
#endif

namespace heapsnap::report {
namespace {

using json = nlohmann::ordered_json;
using replay::DisplayFrame;
using replay::ReplayResult;
using replay::StackFigures;
using replay::StackSymbolizer;

constexpr size_t kMaxNotes = 20;

// Estimates are doubles; the page shows whole bytes and calls.
int64_t whole(double v) { return std::llround(v); }
double seconds(uint64_t ns) { return std::round(double(ns) / 1e6) / 1e3; }  // ms resolution

std::string hex(uint64_t v) {
  char b[32];
  snprintf(b, sizeof(b), "0x%llx", static_cast<unsigned long long>(v));
  return b;
}

// A stack for the tables: frame labels with file:line, innermost first, cut to `max` frames.
json stack_json(const std::vector<DisplayFrame> &frames, size_t max) {
  json fr = json::array();
  for (size_t i = 0; i < frames.size() && i < max; ++i) {
    const auto &f = frames[i];
    fr.push_back(f.inlined ? f.label() + " [inlined]" : f.label());
  }
  json j;
  j["frames"] = fr;
  j["more"] = frames.size() > max ? frames.size() - max : 0;
  return j;
}

// --- flame graph -------------------------------------------------------------------------------

json flame_json(const FlameTree &t, size_t full_nodes) {
  json j;
  json metrics = json::array();
  for (int m = 0; m < kFlameMetrics; ++m) metrics.push_back(flame_metric_name(m));
  j["metrics"] = metrics;
  j["names"] = t.names;
  j["parent"] = t.parent;
  j["name"] = t.name;
  json values = json::array();
  for (int m = 0; m < kFlameMetrics; ++m) {
    std::vector<int64_t> col(t.nodes());
    for (size_t v = 0; v < t.nodes(); ++v) col[v] = whole(t.value[v][m]);
    values.push_back(col);
  }
  j["values"] = values;
  std::vector<uint32_t> other;
  for (size_t v = 0; v < t.nodes(); ++v)
    if (t.other[v]) other.push_back(uint32_t(v));
  j["other"] = other;
  j["full_nodes"] = full_nodes;
  // What the tooltips and colours need: each name's kind and module, each node's file:line
  // (0 = not known, else 1 + an index: the columns stay short).
  json kinds = json::array();
  for (int k = 0; k < kFrameKinds; ++k) kinds.push_back(frame_kind_name(k));
  j["kinds"] = kinds;
  std::vector<int> name_kind(t.names.size(), kUnknownFrame);
  std::vector<uint32_t> name_module(t.names.size(), 0);
  for (size_t i = 0; i < t.names.size(); ++i) {
    if (i < t.name_kind.size()) name_kind[i] = t.name_kind[i];
    if (i < t.name_module.size() && t.name_module[i] != UINT32_MAX) name_module[i] = t.name_module[i] + 1;
  }
  j["name_kind"] = name_kind;
  j["modules"] = t.modules;
  j["name_module"] = name_module;
  j["locs"] = t.locs;
  j["loc"] = t.loc;
  return j;
}

// --- top allocation sites and leaks --------------------------------------------------------------

double figure(const StackFigures &f, int m) {
  switch (m) {
    case kAllocBytes: return f.alloc_bytes;
    case kAllocCalls: return f.alloc_calls;
    case kLeakedBytes: return f.live_bytes;
    default: return f.peak_bytes;
  }
}

json top_allocators_json(const ReplayResult &r, StackSymbolizer &sym, const ReportOptions &o) {
  // A site is its stacks' first frame of the program (StackSymbolizer::site_address), as
  // top-allocators names it.
  struct Site {
    std::string label;
    DisplayFrame frame;
    StackFigures sum;
    uint32_t heaviest = 0;
    double heaviest_bytes = -1;
    uint64_t stacks = 0;
  };
  std::unordered_map<std::string, Site> sites;
  for (uint32_t id = 1; id < r.by_stack.size(); ++id) {
    const auto &f = r.by_stack[id];
    if (f.unused()) continue;
    if (!r.stacks.valid(id)) continue;
    const DisplayFrame &site = sym.site_frame(sym.site_address(r.stacks, id));
    std::string key = site.label();
    Site &s = sites[key];
    if (s.label.empty()) {
      s.label = sym.site_label(site);
      s.frame = site;
    }
    s.sum += f;
    ++s.stacks;
    if (f.alloc_bytes > s.heaviest_bytes) {
      s.heaviest_bytes = f.alloc_bytes;
      s.heaviest = id;
    }
  }
  std::vector<Site *> all;
  for (auto &kv : sites) all.push_back(&kv.second);
  // The top rows by every metric, so that the page can sort by any column and stay exact.
  std::vector<Site *> rows;
  for (int m = 0; m < kFlameMetrics; ++m) {
    size_t k = std::min(o.table_rows, all.size());
    std::partial_sort(all.begin(), all.begin() + long(k), all.end(), [&](Site *a, Site *b) {
      double x = figure(a->sum, m), y = figure(b->sum, m);
      return x != y ? x > y : a->label < b->label;
    });
    for (size_t i = 0; i < k; ++i)
      if (figure(all[i]->sum, m) > 0 && std::find(rows.begin(), rows.end(), all[i]) == rows.end()) rows.push_back(all[i]);
  }
  std::sort(rows.begin(), rows.end(), [](Site *a, Site *b) { return a->sum.alloc_bytes > b->sum.alloc_bytes; });
  json arr = json::array();
  for (Site *s : rows) {
    json j;
    j["site"] = s->label;
    j["module"] = s->frame.module;
    j["alloc_bytes"] = whole(s->sum.alloc_bytes);
    j["alloc_calls"] = whole(s->sum.alloc_calls);
    j["peak_bytes"] = whole(s->sum.peak_bytes);
    j["leaked_bytes"] = whole(s->sum.live_bytes);
    j["leaked_blocks"] = whole(s->sum.live_calls);
    j["reallocs"] = s->sum.reallocs;
    j["realloc_moves"] = s->sum.realloc_moves;
    j["stacks"] = s->stacks;
    j["stack"] = stack_json(sym.stack(r.stacks, s->heaviest), o.stack_frames);
    arr.push_back(j);
  }
  json out;
  out["sites_total"] = sites.size();
  out["rows"] = arr;
  return out;
}

json leaks_json(const ReplayResult &r, StackSymbolizer &sym, const ReportOptions &o) {
  std::vector<uint32_t> ids;
  double blocks = 0, bytes = 0;
  for (uint32_t id = 1; id < r.by_stack.size(); ++id) {
    const auto &f = r.by_stack[id];
    if (f.live_calls < 0.5) continue;
    ids.push_back(id);
    blocks += f.live_calls;
    bytes += f.live_bytes;
  }
  size_t k = std::min(o.table_rows, ids.size());
  std::partial_sort(ids.begin(), ids.begin() + long(k), ids.end(), [&](uint32_t a, uint32_t b) {
    return r.by_stack[a].live_bytes != r.by_stack[b].live_bytes ? r.by_stack[a].live_bytes > r.by_stack[b].live_bytes : a < b;
  });
  json arr = json::array();
  for (size_t i = 0; i < k; ++i) {
    const auto &f = r.by_stack[ids[i]];
    json j;
    j["bytes"] = whole(f.live_bytes);
    j["blocks"] = whole(f.live_calls);
    auto frames = sym.stack(r.stacks, ids[i]);
    j["site"] = sym.site_label(sym.site_frame(sym.site_address(r.stacks, ids[i])));
    j["stack"] = stack_json(frames, o.stack_frames);
    arr.push_back(j);
  }
  json out;
  out["stacks_total"] = ids.size();
  out["blocks"] = whole(blocks);
  out["bytes"] = whole(bytes);
  out["rows"] = arr;
  return out;
}

// --- snapshots -----------------------------------------------------------------------------------

// The site table shared by every snapshot section: a program site (StackSymbolizer::site_id: one
// id per function, source line and module, however many return addresses reach it) -> row. The
// symbolizer is one for the whole report, so a site is the same row in every snapshot: the diffs
// between snapshots match sites by that identity, not by an address.
// A row's stack (the diff and retaining-site rows expand to it): the allocation stack of one of the
// site's blocks, for the sites a snapshot's tables can show (its biggest by bytes and by retained
// bytes). The rest of the up to max_sites rows per snapshot carry none: the page stays within its
// size budget, and says so where such a row is expanded.
struct SiteTable {
  std::string exe;  // the program's executable (frame_kind)
  std::unordered_map<uint32_t, uint32_t> index;
  json rows = json::array();
  uint32_t of(uint32_t site_id, StackSymbolizer &sym) {
    auto [it, fresh] = index.try_emplace(site_id, uint32_t(rows.size()));
    if (fresh) {
      const uint64_t address = site_id < sym.site_ids() ? sym.site_id_address(site_id) : 0;
      const auto &f = sym.site_frame(address);
      json j;
      j["label"] = sym.site_label(f);
      j["module"] = f.module;
      j["address"] = hex(address);
      j["kind"] = int(frame_kind(f, exe));
      rows.push_back(j);
    }
    return it->second;
  }
  bool has_stack(uint32_t site) const { return rows[site].contains("stack"); }
  void give_stack(uint32_t site, json stack) { rows[site]["stack"] = std::move(stack); }
};

// Each block's program site as top-retainers --by site and dominators group blocks
// (cli/retainers_context.h, Context::site_id): the first frame of the program in the block's
// sampled stack, else in its call site's inline chain (or the sampled stacks through that call
// site), as one id per distinct site.
std::vector<uint32_t> block_sites(const snapshot::HeapSnapshot &s, const ReplayResult &r, StackSymbolizer &sym) {
  std::vector<uint32_t> out(s.blocks());
  for (uint32_t b = 0; b < s.blocks(); ++b) {
    const uint32_t st = b < s.stack.size() ? s.stack[b] : 0;
    out[b] = sym.site_id(sym.site_address(r.stacks, r.stacks.valid(st) ? st : 0, s.call_site[b]));
  }
  return out;
}

// Which snapshots to analyse: complete ones, at most `max`, evenly spread, first and last kept.
// What holds `node`, as top-retainers says it: the root object at the top of its dominator chain
// ("global g_cache (Cache *, app.cc:12)"), "nothing: unreachable", or several roots at once.
std::string root_label(const snapshot::HeapSnapshot &s, const snapshot::ObjectGraph &g,
                       const snapshot::RootObjects &roots, uint32_t node) {
  if (g.is_root(node)) return "itself (a root)";
  uint32_t top = snapshot::top_dominator(g, node);
  if (g.is_root(top)) return roots.objects[g.root_object(top)].label(s, true);
  if (g.leak_node && top == g.leak_node) return "nothing: unreachable";
  return "several roots at once";
}

std::vector<DisplayFrame> block_stack(const snapshot::HeapSnapshot &s, uint32_t b, const ReplayResult &r,
                                      StackSymbolizer &sym) {
  if (b < s.stack.size() && s.stack[b] && r.stacks.valid(s.stack[b])) return sym.stack(r.stacks, s.stack[b]);
  return sym.frames_of(s.call_site[b]);
}

json snapshot_json(const snapshot::SnapshotInfo &info, snapshot::HeapSnapshot &s, const ReplayResult &r,
                   StackSymbolizer &sym, SiteTable &sites, const ReportOptions &o) {
  using snapshot::ObjectGraph;
  // The roots as objects (variables named from symbols, threads), and what no root reaches under
  // the leak node, as the snapshot commands build it (cli/retainers_context.cc).
  std::vector<snapshot::RootModule> mods;
  for (const auto &m : r.modules) mods.push_back({m.path, m.load_bias, m.build_id});
  symbolize::DataSymbolsOptions dso;
  dso.debug_dirs = symbolize::command_options(o.debug_dirs).debug_dirs;
  const snapshot::RootObjects roots = snapshot::root_objects(s, mods, dso);
  snapshot::GraphOptions go;
  go.follow_interior = o.follow_interior;
  go.with_children = true;
  // The snapshot keeps its edge arrays: a path's hops name the field that points on
  // (snapshot::pointer_offset reads them), as `heapsnap path` does.
  go.release_edges = false;
  go.roots = &roots;
  go.leak_clusters = true;
  ObjectGraph g = snapshot::build_object_graph(s, go);
  const replay::BlockTypes types = replay::block_types(s, r.stacks, sym, &roots);
  json j;
  j["index"] = info.index;
  j["time_s"] = seconds(info.time_ns);
  j["trigger"] = snapshot::trigger_name(info.trigger);
  j["label"] = info.label;
  uint64_t bytes = 0;
  for (uint32_t b = 0; b < s.blocks(); ++b) bytes += s.size[b];
  uint64_t total = g.reachable_bytes();
  const uint64_t unreachable_blocks = g.leak_node && g.dom.reachable(g.leak_node) ? g.retained_blocks(g.leak_node) : 0;
  j["blocks"] = s.blocks();
  j["bytes"] = bytes;
  j["edges"] = info.end.edges();
  j["reachable_bytes"] = total;
  j["reachable_blocks"] = g.retained.count[0] - 1 - g.num_roots - (unreachable_blocks ? unreachable_blocks + 1 : 0);
  j["pause_ms"] = double(info.pause_ns) / 1e6;

  // Every table and the icicle group blocks by their program site, as the CLI does.
  const std::vector<uint32_t> site_key = block_sites(s, r, sym);

  // Dominator tree by site.
  SiteIcicle ic = dominator_icicle(s, g, site_key, o.icicle);
  json tree;
  std::vector<int64_t> site_col(ic.nodes());
  for (size_t v = 0; v < ic.nodes(); ++v)
    site_col[v] = (v == 0 || ic.other[v] || ic.site[v] == kNoSite) ? -1 : int64_t(sites.of(ic.site[v], sym));
  tree["parent"] = ic.parent;
  tree["site"] = site_col;
  tree["retained"] = ic.retained;
  tree["objects"] = ic.objects;
  tree["shallow"] = ic.shallow;
  std::vector<uint32_t> other;
  for (size_t v = 0; v < ic.nodes(); ++v)
    if (ic.other[v]) other.push_back(uint32_t(v));
  tree["other"] = other;
  j["tree"] = tree;

  // Top retainers by object: one row per structure, as `top-retainers` lists them
  // (snapshot/top_rows.h); unreachable structures have a table of their own.
  // A row's site is the block's program site, as `top-retainers` names it (the call site alone is
  // often the library's out-of-line code).
  auto row_site = [&](uint32_t b) { return sites.of(site_key[b], sym); };
  snapshot::RootChildren root_children;
  root_children.build(g);
  const std::vector<snapshot::TopRow> top = snapshot::top_rows(g, roots, root_children, row_site, o.table_rows, false);
  const size_t k = top.size();
  // Shortest paths from the roots (one breadth-first pass over the pointer graph serves every
  // row), as `heapsnap path` finds them.
  std::vector<uint32_t> bfs_parent;
  if (k) {
    bfs_parent.assign(g.csr.num_nodes, UINT32_MAX);
    std::vector<uint32_t> queue{0};
    bfs_parent[0] = 0;
    // Not through the leak node (an unreachable block pointing at a reachable one is no way from a
    // root), as `heapsnap path` walks.
    if (g.leak_node && g.leak_node < bfs_parent.size()) bfs_parent[g.leak_node] = 0;
    for (size_t head = 0; head < queue.size(); ++head)
      for (uint32_t w : g.csr.successors(queue[head]))
        if (bfs_parent[w] == UINT32_MAX) {
          bfs_parent[w] = queue[head];
          queue.push_back(w);
        }
  }
  auto path_json = [&](uint32_t v) {
    std::vector<uint32_t> chain;
    for (uint32_t u = v; u != 0 && u != UINT32_MAX && chain.size() <= g.csr.num_nodes; u = bfs_parent[u]) chain.push_back(u);
    std::reverse(chain.begin(), chain.end());
    json p;
    if (chain.empty() || bfs_parent[chain.front()] != 0) {
      p["root"] = "(no path from a root)";
      p["hops"] = json::array();
      p["more"] = 0;
      return p;
    }
    p["root"] = g.is_root(chain.front()) ? roots.objects[g.root_object(chain.front())].label(s, true) : std::string("(root)");
    // The root's word, and for a stack word the function whose frame holds it (snapshot/path_steps.h,
    // replay/root_frames.h: what `heapsnap path` says).
    if (g.is_root(chain.front()) && chain.size() > 1) {
      const snapshot::RootWord w = snapshot::root_word(s, roots, g.root_object(chain.front()), ObjectGraph::block_of(chain[1]));
      if (w.found) p["root_word"] = hex(w.address);
      if (w.frame >= 0 && w.range < s.roots.size())
        if (const DisplayFrame *fr = replay::stack_root_frame(sym, s.roots[w.range], size_t(w.frame)))
          p["root_frame"] = {{"index", w.frame}, {"function", fr->readable_function()}, {"label", fr->readable_label()}};
    }
    chain.erase(chain.begin());  // the root object: the hops are blocks
    // Long chains (lists) keep their first and last hops.
    constexpr size_t kHead = 4, kTail = 8;
    json hops = json::array();
    size_t more = chain.size() > kHead + kTail ? chain.size() - kHead - kTail : 0;
    for (size_t i = 0; i < chain.size(); ++i) {
      if (more && i == kHead) i += more;
      const uint32_t b = ObjectGraph::block_of(chain[i]);
      json h = {{"address", hex(s.addr[b])}, {"site", row_site(b)}, {"size", s.size[b]}};
      // The block's type, and the field holding the pointer to the next hop (a member of the
      // program's class, a container node's link or value, an element's index), as `heapsnap path`
      // names them.
      const std::string &type = types.type_of(b);
      if (!type.empty()) h["type"] = type;
      if (i + 1 < chain.size()) {
        const uint32_t off = snapshot::pointer_offset(s, b, ObjectGraph::block_of(chain[i + 1]));
        if (off != snapshot::kNoOffset) {
          h["next_at_offset"] = off;
          const std::string field = type.empty() ? "" : roots.layouts.field_at(type, off);
          if (!field.empty()) h["next_in_field"] = field;
        }
      }
      hops.push_back(h);
    }
    p["hops"] = hops;
    p["more"] = more;
    p["more_at"] = kHead;
    return p;
  };
  json objs = json::array();
  for (size_t i = 0; i < k; ++i) {
    uint32_t v = top[i].node, b = ObjectGraph::block_of(v);
    json row;
    // A row listed inside an earlier one (on its dominator chain, another structure): its index,
    // and the bytes it retains beyond the rows inside it.
    if (top[i].inside != UINT32_MAX) row["inside"] = top[i].inside;
    row["own"] = top[i].own;
    if (g.is_root(v)) {  // a variable or a thread holding what no other root holds (and no one child stands for)
      const snapshot::RootObject &ro = roots.objects[g.root_object(v)];
      row["root"] = ro.label(s);
      row["root_kind"] = ro.kind(s);
      row["retained"] = g.retained.bytes[v];
      row["retained_blocks"] = g.retained_blocks(v);
      row["held_by"] = "itself (a root)";
      objs.push_back(row);
      continue;
    }
    row["address"] = hex(s.addr[b]);
    if (types.group_of[b]) {
      row["type"] = types.type_of(b);
      row["type_from"] = types.how[types.group_of[b]];
    }
    row["site"] = row_site(b);
    row["shallow"] = s.size[b];
    row["retained"] = g.retained.bytes[v];
    row["retained_blocks"] = g.retained.count[v];
    row["held_by"] = root_label(s, g, roots, v);
    row["stack"] = stack_json(block_stack(s, b, r, sym), o.stack_frames);
    row["path"] = path_json(v);
    objs.push_back(row);
  }
  j["retainers"] = objs;

  // Top retaining sites: a site's retained bytes count each block once (only the topmost block
  // of the site on each dominator chain contributes), as `top-retainers --by site` counts them:
  // what no root reaches (the leak cliques under the leak node) counts too, as there.
  std::unordered_map<uint32_t, uint32_t> local;
  std::vector<uint32_t> local_site;  // per local site: its site id
  std::vector<uint32_t> site_of(g.csr.num_nodes, 0);
  std::vector<uint32_t> first_block;  // per local site: its first block (for its stack)
  for (uint32_t b = 0; b < s.blocks(); ++b) {
    auto [it, fresh] = local.try_emplace(site_key[b], uint32_t(local_site.size()));
    if (fresh) {
      local_site.push_back(site_key[b]);
      first_block.push_back(b);
    }
    site_of[b + 1] = it->second;
  }
  auto with_stack = [&](uint32_t st) {
    uint32_t site = sites.of(local_site[st], sym);
    if (!sites.has_stack(site)) sites.give_stack(site, stack_json(block_stack(s, first_block[st], r, sym), o.stack_frames));
    return site;
  };
  size_t ns = local_site.size();
  std::vector<uint32_t> active(ns, 0);
  std::vector<uint64_t> retained(ns, 0), shallow(ns, 0), count(ns, 0);
  std::vector<std::pair<uint32_t, bool>> stack{{0, false}};
  while (!stack.empty()) {
    auto [v, leaving] = stack.back();
    stack.pop_back();
    if (g.is_block(v)) {
      uint32_t st = site_of[v];
      if (leaving) {
        --active[st];
        continue;
      }
      if (!active[st]) retained[st] += g.retained.bytes[v];
      ++active[st];
      shallow[st] += s.size[v - 1];
      ++count[st];
      stack.push_back({v, true});
    }
    for (uint32_t ch : g.children.successors(v)) stack.push_back({ch, false});
  }
  std::vector<uint32_t> order;
  for (uint32_t i = 0; i < ns; ++i)
    if (retained[i]) order.push_back(i);
  size_t ks = std::min(o.table_rows, order.size());
  std::partial_sort(order.begin(), order.begin() + long(ks), order.end(),
                    [&](uint32_t x, uint32_t y) { return retained[x] != retained[y] ? retained[x] > retained[y] : x < y; });
  json rs = json::array();
  for (size_t i = 0; i < ks; ++i) {
    uint32_t st = order[i];
    rs.push_back({{"site", with_stack(st)}, {"retained", retained[st]}, {"shallow", shallow[st]},
                  {"blocks", count[st]}});
  }
  j["retaining_sites"] = rs;

  // The roots as objects, by what each keeps alive on its own (`heapsnap roots`).
  {
    std::vector<uint32_t> rn;
    for (uint32_t i = 0; i < g.num_roots; ++i)
      if (g.retained_blocks(g.root_node(i))) rn.push_back(g.root_node(i));
    size_t kr = std::min(o.table_rows, rn.size());
    std::partial_sort(rn.begin(), rn.begin() + long(kr), rn.end(), [&](uint32_t x, uint32_t y) {
      return g.retained.bytes[x] != g.retained.bytes[y] ? g.retained.bytes[x] > g.retained.bytes[y] : x < y;
    });
    json ra = json::array();
    for (size_t i = 0; i < kr; ++i) {
      const snapshot::RootObject &ro = roots.objects[g.root_object(rn[i])];
      ra.push_back({{"root", ro.label(s)}, {"kind", ro.kind(s)}, {"retained", g.retained.bytes[rn[i]]},
                    {"blocks", g.retained_blocks(rn[i])}});
    }
    j["roots"] = ra;
  }

  // The types histogram (`heapsnap types`): each type's objects, own bytes and retained bytes.
  {
    snapshot::GroupFigures f = snapshot::retained_by_group(g, s, types.group_of, types.groups());
    uint64_t typed = 0;
    for (uint32_t b = 0; b < s.blocks(); ++b)
      if (types.group_of[b]) typed += s.size[b];
    std::vector<uint32_t> order;
    for (uint32_t t = 1; t < types.groups(); ++t)
      if (f.count[t]) order.push_back(t);
    std::sort(order.begin(), order.end(), [&](uint32_t x, uint32_t y) {
      return f.retained[x] != f.retained[y] ? f.retained[x] > f.retained[y] : x < y;
    });
    if (order.size() > o.table_rows) order.resize(o.table_rows);
    json ta = json::array();
    for (uint32_t t : order)
      ta.push_back({{"type", types.name[t]}, {"how", types.how[t]}, {"objects", f.count[t]}, {"shallow", f.shallow[t]},
                    {"retained", f.retained[t]}});
    j["types"] = ta;
    j["typed_bytes"] = typed;
  }

  // What no root reaches, clique by clique (snapshot/reachability.h leak_cliques): a cycle is
  // named a cycle, with its leader's type and site.
  {
    std::vector<uint32_t> leaders;
    if (g.leak_node && g.dom.reachable(g.leak_node))
      for (uint32_t v : g.children.successors(g.leak_node)) leaders.push_back(v);
    std::sort(leaders.begin(), leaders.end(), [&](uint32_t x, uint32_t y) {
      return g.retained.bytes[x] != g.retained.bytes[y] ? g.retained.bytes[x] > g.retained.bytes[y] : x < y;
    });
    if (leaders.size() > o.table_rows) leaders.resize(o.table_rows);
    json ua = json::array();
    for (uint32_t v : leaders) {
      const uint32_t b = ObjectGraph::block_of(v);
      bool cycle = false;
      for (const auto &lc : g.leaks)
        if (lc.node == v) cycle = lc.cycle;
      json row = {{"address", hex(s.addr[b])}, {"site", row_site(b)}, {"bytes", g.retained.bytes[v]},
                  {"blocks", g.retained.count[v]}, {"cycle", cycle}, {"type", types.type_of(b)},
                  {"stack", stack_json(block_stack(s, b, r, sym), o.stack_frames)}};
      ua.push_back(row);
    }
    j["unreachable"] = ua;
    j["unreachable_bytes"] = g.unreachable_bytes();
    j["unreachable_blocks"] = unreachable_blocks;
  }

  // Every block by site (reachable or not), for diffs between snapshots.
  std::vector<uint64_t> all_count(ns, 0), all_bytes(ns, 0);
  for (uint32_t b = 0; b < s.blocks(); ++b) {
    uint32_t st = site_of[b + 1];
    ++all_count[st];
    all_bytes[st] += s.size[b];
  }
  std::vector<uint32_t> by_bytes(ns);
  for (uint32_t i = 0; i < ns; ++i) by_bytes[i] = i;
  std::sort(by_bytes.begin(), by_bytes.end(),
            [&](uint32_t x, uint32_t y) { return all_bytes[x] != all_bytes[y] ? all_bytes[x] > all_bytes[y] : local_site[x] < local_site[y]; });
  json tab;
  std::vector<uint32_t> tsite;
  std::vector<uint64_t> tcount, tbytes;
  uint64_t other_count = 0, other_bytes = 0;
  for (size_t i = 0; i < ns; ++i) {
    uint32_t st = by_bytes[i];
    if (i < o.max_sites) {
      tsite.push_back(i < o.table_rows ? with_stack(st) : sites.of(local_site[st], sym));
      tcount.push_back(all_count[st]);
      tbytes.push_back(all_bytes[st]);
    } else {
      other_count += all_count[st];
      other_bytes += all_bytes[st];
    }
  }
  tab["site"] = tsite;
  tab["count"] = tcount;
  tab["bytes"] = tbytes;
  tab["sites_total"] = ns;
  tab["other_count"] = other_count;
  tab["other_bytes"] = other_bytes;
  j["sites"] = tab;
  return j;
}

}  // namespace

// The complete snapshots the report analyses, at most `max`, evenly spread, in the order they were
// taken (by time: an at-peak or growth snapshot's records are written at the end of the capture,
// after those of snapshots taken later). The at-peak snapshot is always one of them: the report's
// "at its peak" finding and `peak` answer from it.
std::vector<uint32_t> choose_snapshots(const std::vector<snapshot::SnapshotInfo> &list, size_t max) {
  std::vector<const snapshot::SnapshotInfo *> complete;
  const snapshot::SnapshotInfo *peak = nullptr;
  for (const auto &s : list)
    if (s.have_end && s.end.complete()) {
      complete.push_back(&s);
      if (s.trigger == wire::TRIGGER_PEAK) peak = &s;
    }
  std::stable_sort(complete.begin(), complete.end(),
                   [](const snapshot::SnapshotInfo *a, const snapshot::SnapshotInfo *b) { return a->time_ns < b->time_ns; });
  std::vector<const snapshot::SnapshotInfo *> picked;
  if (complete.size() <= max) {
    picked = complete;
  } else if (max == 1) {
    picked = {peak ? peak : complete.back()};
  } else if (max > 1) {
    for (size_t i = 0; i < max; ++i) {
      const snapshot::SnapshotInfo *pick = complete[(i * (complete.size() - 1) + (max - 1) / 2) / (max - 1)];
      if (picked.empty() || picked.back() != pick) picked.push_back(pick);
    }
    if (peak && std::find(picked.begin(), picked.end(), peak) == picked.end()) {
      // In place of the picked one nearest in time that is neither the first nor the last.
      size_t best = picked.size() > 2 ? 1 : picked.size();
      for (size_t i = 1; i + 1 < picked.size(); ++i)
        if (std::llabs(int64_t(picked[i]->time_ns - peak->time_ns)) < std::llabs(int64_t(picked[best]->time_ns - peak->time_ns)))
          best = i;
      if (best < picked.size())
        picked[best] = peak;
      else
        picked.push_back(peak);
      std::stable_sort(picked.begin(), picked.end(),
                       [](const snapshot::SnapshotInfo *a, const snapshot::SnapshotInfo *b) { return a->time_ns < b->time_ns; });
    }
  }
  std::vector<uint32_t> out;
  for (const auto *s : picked) out.push_back(s->index);
  return out;
}

bool build_report_data(const ReportOptions &o, json *out, std::string *error) {
  auto progress = [&](const std::string &phase) -> std::function<void(uint64_t, uint64_t)> {
    if (!o.progress) return {};
    return [&o, phase](uint64_t d, uint64_t t) { o.progress(phase, d, t); };
  };
  std::string err;
  StackSymbolizer sym(symbolize::command_options(o.debug_dirs));  // follows the replay: debug files load meanwhile
  sym.set_frame_filter(o.frame_filter);
  replay::ReplayOptions ro;
  ro.progress = progress("replaying " + o.file);
  ro.heap_cells = true;  // the heap line between the Totals records
  sym.follow(ro);
  ReplayResult r = replay::replay_with_peak(o.file, &err, ro);
  if (!err.empty()) {
    *error = err;
    return false;
  }
  if (!r.have_process) {
    *error = o.file + ": no process record: not a usable capture";
    return false;
  }

  json notes = json::array();
  auto note = [&](const std::string &s) {
    if (notes.size() < kMaxNotes) notes.push_back(s);
  };
  if (r.truncated) note("The capture is truncated (no end record, or damaged frames): figures cover what was read.");
  for (const auto &p : r.problems) note("offset " + hex(p.offset) + ": " + p.what);
  if (r.sample_bytes() > 1)
    note("Stack figures are sampled estimates (one sample per ~" + std::to_string(r.sample_bytes()) +
         " bytes); the totals and the heap line are exact. Record with --sample-bytes 1 for every allocation.");

  json d;
  d["schema"] = 1;
  d["generator"] = std::string("heapsnap ") + HEAPSNAP_VERSION;
  std::string command;
  for (int i = 0; i < r.process.argv_size(); ++i) command += (i ? " " : "") + r.process.argv(i);
  if (command.empty()) command = r.process.executable();
  d["title"] = o.title.empty() ? command : o.title;
  d["file"] = o.file;
  json proc;
  proc["command"] = command;
  proc["executable"] = r.process.executable();
  proc["pid"] = r.process.pid();
  proc["hostname"] = r.process.hostname();
  proc["start_unix_s"] = r.process.start_unix_ns() / 1000000000ull;
  proc["duration_s"] = seconds(r.end_time_ns);
  proc["sample_bytes"] = r.sample_bytes();
  proc["estimated"] = r.sample_bytes() > 1;
  proc["threads"] = r.totals.threads_seen();
  proc["modules"] = r.modules.size();
  proc["stacks"] = r.stacks.stacks();
  proc["ended"] = r.ended;
  proc["truncated"] = r.truncated;
  d["process"] = proc;
  const auto &t = r.totals;
  d["totals"] = {{"alloc_calls", t.alloc_calls()},       {"free_calls", t.free_calls()},
                 {"bytes_allocated", t.bytes_allocated()}, {"peak_heap_bytes", t.peak_heap_bytes()},
                 {"peak_time_s", seconds(t.peak_time_ns())}, {"leaked_blocks", t.live_blocks()},
                 {"leaked_bytes", t.heap_bytes()},          {"rss_bytes", t.rss_bytes()},
                 {"realloc_calls", t.realloc_calls()},     {"dropped_events", t.dropped_events()}};

  // Heap over time.
  // When the peak was. The shim's totals say when its shared counter, which each thread folds its
  // own changes into now and then, reached the peak: later than the allocation that made it. With
  // every allocation recorded, the replay saw that allocation (its time is the events' clock, as
  // the line's is); the shim's time stays where the replay saw less (blocks it does not trace).
  const bool exact = r.sample_bytes() <= 1;
  uint64_t peak_ns = t.peak_time_ns();
  if (exact && r.sampled_peak_event != UINT64_MAX && std::llround(r.sampled_peak_bytes) >= int64_t(t.peak_heap_bytes()))
    peak_ns = r.sampled_peak_time_ns;
  const auto all_points = heap_points(r.timeline, r.heap_cells, exact, std::max(r.end_time_ns, peak_ns), t.peak_heap_bytes());
  auto pts = thin_timeline(all_points, peak_ns, t.peak_heap_bytes(), o.timeline_buckets);
  json tl;
  std::vector<double> ts;
  std::vector<int64_t> heap;
  std::vector<uint64_t> rss;
  for (const auto &p : pts) {
    ts.push_back(seconds(p.time_ns));
    heap.push_back(p.heap_bytes);
    rss.push_back(p.rss_bytes);
  }
  tl["t"] = ts;
  tl["heap"] = heap;
  tl["rss"] = rss;
  tl["rss_parts"] = rss_parts_json(r);  // coarse, about once a second (null before format 3.4)
  tl["peak"] = {{"t", seconds(peak_ns)}, {"bytes", t.peak_heap_bytes()}};
  tl["end_s"] = seconds(std::max(r.end_time_ns, r.timeline.empty() ? 0 : r.timeline.back().time_ns));
  json markers = json::array();
  size_t marker_cap = 500;
  for (size_t i = 0; i < r.markers.size() && i < marker_cap; ++i)
    markers.push_back({{"t", seconds(r.markers[i].time_ns)}, {"tid", r.markers[i].tid}, {"text", r.markers[i].text.substr(0, 200)}});
  tl["markers"] = markers;
  json snaps = json::array();
  for (const auto &s : r.snapshots)
    snaps.push_back({{"index", s.index}, {"t", seconds(s.time_ns)}, {"trigger", snapshot::trigger_name(s.trigger)}, {"label", s.label}});
  tl["snapshots"] = snaps;
  d["timeline"] = tl;

  // Flame graph.
  if (o.progress) o.progress("symbolizing stacks", 0, 0);
  size_t full_nodes;
  FlameTree flame;
  {
    FlameTree full = build_flame_tree(r, sym);
    full_nodes = full.nodes();
    flame = prune_flame_tree(full, o.flame);
  }
  d["flame"] = flame_json(flame, full_nodes);

  d["top_allocators"] = top_allocators_json(r, sym, o);
  d["leaks"] = leaks_json(r, sym, o);

  // Snapshots.
  json snap_sections = json::array();
  SiteTable sites;
  sites.exe = r.process.executable();
  std::vector<snapshot::SnapshotInfo> list;
  std::vector<std::string> snapshot_notes;
  if (auto reader = capture::CaptureReader::open(o.file, &err)) list = snapshot::list_snapshots(*reader, &snapshot_notes);
  // Snapshots asked for and not taken (and the at-peak and growth outcomes) are said.
  for (const auto &n : snapshot_notes) note(n);
  std::vector<uint32_t> chosen = choose_snapshots(list, o.max_snapshots);
  size_t complete = 0;
  for (const auto &s : list) complete += s.have_end && s.end.complete();
  for (size_t i = 0; i < chosen.size(); ++i) {
    const snapshot::SnapshotInfo *info = nullptr;
    for (const auto &s : list)
      if (s.index == chosen[i]) info = &s;
    if (o.progress) o.progress("snapshot " + std::to_string(i + 1) + "/" + std::to_string(chosen.size()), i, chosen.size());
    auto reader = capture::CaptureReader::open(o.file, &err);
    if (!reader) {
      note("snapshot " + std::to_string(chosen[i]) + ": " + err);
      continue;
    }
    snapshot::HeapSnapshot s;
    snapshot::LoadOptions lo;
    lo.identity = false;
    lo.edge_offsets = true;  // paths name the field that points on
    std::string serr;
    if (!snapshot::load_snapshot(*reader, chosen[i], &s, &serr, lo)) {
      note("snapshot " + std::to_string(chosen[i]) + " left out: " + serr);
      continue;
    }
    if (!serr.empty()) note("snapshot " + std::to_string(chosen[i]) + ": " + serr);
    snap_sections.push_back(snapshot_json(*info, s, r, sym, sites, o));
    // RSS explained at this snapshot, and its diagnoses among the page's notes.
    std::string why;
    json mem = memory_json(o.file, chosen[i], &why);
    if (!why.empty()) note("snapshot " + std::to_string(chosen[i]) + ": " + why);
    if (!mem.is_null())
      for (const auto &x : mem["diagnoses"]) note("snapshot " + std::to_string(chosen[i]) + ", RSS: " + x["text"].get<std::string>());
    snap_sections.back()["memory"] = std::move(mem);
  }
  for (const auto &s : list)
    if (s.have_end && !s.end.complete())
      note("snapshot " + std::to_string(s.index) + " is incomplete" + (s.end.error().empty() ? "" : ": " + s.end.error()));
  if (complete > chosen.size())
    note("The capture has " + std::to_string(complete) + " complete snapshots; the report analyses " +
         std::to_string(chosen.size()) + " of them, evenly spread (--max-snapshots).");
  d["snapshots"] = snap_sections;
  d["peak_snapshot"] = nullptr;
  for (const auto &s : list)
    if (s.trigger == wire::TRIGGER_PEAK && s.have_end && s.end.complete()) d["peak_snapshot"] = s.index;
  d["sites"] = sites.rows;
  d["snapshots_enabled"] = r.process.snapshots_enabled();

  for (const auto &w : sym.warnings()) note(w);
  d["notes"] = notes;
  json budget;
  budget["flame_nodes_max"] = o.flame.max_nodes;
  budget["flame_nodes"] = flame.nodes();
  budget["flame_nodes_full"] = full_nodes;
  budget["tree_nodes_max"] = o.icicle.max_nodes;
  budget["table_rows"] = o.table_rows;
  budget["stack_frames"] = o.stack_frames;
  budget["timeline_points"] = pts.size();
  budget["timeline_points_full"] = all_points.size();
  budget["timeline_totals"] = r.timeline.size();  // of them, the shim's Totals records (the rest from the events)
  budget["max_snapshots"] = o.max_snapshots;
  budget["max_sites"] = o.max_sites;
  d["budget"] = budget;
  *out = std::move(d);
  return true;
}

}  // namespace heapsnap::report
