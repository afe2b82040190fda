#include "cli/retainers_context.h"

#include "cli/commands.h"

namespace heapsnap::cli::retainers {

bool load(const SnapshotArgs &a, Context *c, bool with_children, bool print_stats, bool need_edges) {
  const auto start = std::chrono::steady_clock::now();
  symbolize::FrameFilter filter;
  if (!make_frame_filter(a.sites, &filter)) {
    c->usage_error = true;
    return false;
  }
  c->args = a;
  // The capture's modules and stacks first: its pass over the file then does not add to the
  // graph's memory (10^8-block snapshots).
  c->capture = load_capture_context(a.file);
  snapshot::LoadOptions lo;
  lo.identity = false;
  lo.edge_offsets = true;  // (the spare capacity of vectors is found by offset: snapshot/spare_capacity.h)
  if (!load_chosen_snapshot(a, &c->snap, lo)) return false;
  const double read_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // The roots as objects: each module's data words split by its variables' symbols.
  const auto t_roots = std::chrono::steady_clock::now();
  std::vector<snapshot::RootModule> mods;
  for (const auto &m : c->capture.modules) mods.push_back({m.path, m.load_bias, m.build_id});
  symbolize::DataSymbolsOptions dso;
  dso.debug_dirs = symbolize::command_options(a.debug_dirs).debug_dirs;
  c->roots = snapshot::root_objects(c->snap, mods, dso);
  const double roots_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_roots).count();
  snapshot::GraphOptions go;
  go.follow_interior = a.interior == "on";
  go.with_children = with_children;
  go.release_edges = !need_edges;
  go.keep_csr = need_edges;  // only path walks the edges after the dominators
  go.roots = &c->roots;
  go.leak_clusters = true;
  c->graph = snapshot::build_object_graph(c->snap, go);
  c->graph.stats.build_s += roots_s;
  c->index_roots();
  if (print_stats) c->stats = std::make_unique<GraphStatsReport>(c->graph.stats, start, read_s);
  c->sym = std::make_unique<replay::StackSymbolizer>(c->capture.modules, symbolize::command_options(a.debug_dirs));
  c->sym->set_frame_filter(std::move(filter));
  return true;
}

int load_failed(const Context &c) { return c.usage_error ? kExitUsage : kExitInput; }

// "… reachable + … unreachable" for headings.
json json_heading(const Context &c) {
  json out;
  out["file"] = c.args.file;
  out["snapshot"] = c.snap.info.index;
  out["total_reachable_bytes"] = c.graph.reachable_bytes();
  out["unreachable_bytes"] = c.graph.unreachable_bytes();
  return out;
}

std::string heap_summary(const Context &c) {
  const auto &g = c.graph;
  std::string s = c.szc(double(g.reachable_bytes())) + " reachable";
  if (g.unreachable_bytes()) s += " + " + c.szc(double(g.unreachable_bytes())) + " unreachable";
  return s;
}

// The leak cliques by retained bytes, biggest first.
std::vector<uint32_t> clusters_by_size(const Context &c) {
  const auto &g = c.graph;
  std::vector<uint32_t> out;
  for (const auto &l : g.leaks)
    if (g.dom.reachable(l.node)) out.push_back(l.node);
  std::sort(out.begin(), out.end(), [&](uint32_t x, uint32_t y) {
    return g.retained.bytes[x] != g.retained.bytes[y] ? g.retained.bytes[x] > g.retained.bytes[y] : x < y;
  });
  return out;
}

json cluster_json(Context &c, uint32_t leader) {
  const auto &g = c.graph;
  const uint32_t b = ObjectGraph::block_of(leader);
  json o = c.site_json(b);
  o["kind"] = "unreachable";
  o["label"] = c.cluster_label(leader);
  o["cycle"] = c.cycle(leader);
  o["address"] = hex(c.snap.addr[b]);
  o["retained_bytes"] = g.retained.bytes[leader];
  o["retained_blocks"] = g.retained_blocks(leader);
  return o;
}

// --- top-retainers ------------------------------------------------------------------------------

SiteGroups site_groups(Context &c) {
  const auto &g = c.graph;
  SiteGroups s;
  std::unordered_map<uint64_t, uint32_t> index;
  std::vector<uint32_t> site_of(size_t(g.num_blocks) + 1, 0);
  for (uint32_t b = 0; b < c.snap.blocks(); ++b) {
    uint64_t id = c.site_id(b);
    auto [it, fresh] = index.try_emplace(id, uint32_t(s.site.size()));
    if (fresh) {
      s.site.push_back(id);
      s.example.push_back(b);
    }
    site_of[b + 1] = it->second;
  }
  const size_t ns = s.site.size();
  s.retained.assign(ns, 0);
  s.count.assign(ns, 0);
  s.shallow.assign(ns, 0);
  s.holders.resize(ns);
  std::vector<uint32_t> active(ns, 0);
  // (node, leaving, holder): the holder is the root object, clique leader or top block above.
  struct Item {
    uint32_t v;
    bool leaving;
    uint32_t holder;
  };
  std::vector<Item> stack{{0, false, 0}};
  while (!stack.empty()) {
    Item it = stack.back();
    stack.pop_back();
    uint32_t holder = it.holder;
    if (it.v != 0 && it.v != g.leak_node && (holder == 0 || holder == g.leak_node)) holder = it.v;
    if (g.is_block(it.v)) {
      uint32_t st = site_of[it.v];
      if (it.leaving) {
        --active[st];
        continue;
      }
      if (!active[st]) {
        s.retained[st] += g.retained.bytes[it.v];
        s.holders[st][holder] += g.retained.bytes[it.v];
      }
      ++active[st];
      ++s.count[st];
      s.shallow[st] += c.snap.size[it.v - 1];
      stack.push_back({it.v, true, holder});
    }
    for (uint32_t ch : g.children.successors(it.v)) stack.push_back({ch, false, it.v == 0 ? 0 : holder});
  }
  return s;
}

std::string holder_text(Context &c, uint32_t h) {
  const auto &g = c.graph;
  if (g.is_root(h)) return c.root_label(h, true);
  if (c.is_leader(h)) return "nothing (unreachable: " + c.cluster_label(h) + ")";
  return "several roots at once (the top block " + hex(c.snap.addr[ObjectGraph::block_of(h)]) + ")";
}

}  // namespace heapsnap::cli::retainers
