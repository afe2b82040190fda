// Snapshot queries over the dominator tree: top-retainers, dominators, path, suspects, roots, diff.
//
// The graph has the roots as objects (snapshot/root_objects.h): each global or static variable,
// each thread's stack and registers is a node between the super root and the blocks, so that
// "g_sessions retains 4 MiB" is one answer, and what no root reaches hangs, clique by clique,
// under a leak node (snapshot/object_graph.h): a leaked cycle is a subtree with its size too.
#include <nlohmann/json.hpp>

#include <sys/resource.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <deque>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <unordered_map>
#include <unordered_set>

#include "cli/commands.h"
#include "cli/format.h"
#include "cli/replay_load.h"
#include "cli/snapshot_args.h"
#include "cli/term_style.h"
#include "replay/replay.h"
#include "replay/stack_symbolizer.h"
#include "snapshot/object_graph.h"
#include "snapshot/root_objects.h"

namespace heapsnap::cli {
namespace {

using json = nlohmann::ordered_json;
using snapshot::HeapSnapshot;
using snapshot::ObjectGraph;

std::string hex(uint64_t v) {
  char b[32];
  snprintf(b, sizeof(b), "0x%llx", static_cast<unsigned long long>(v));
  return b;
}

// --stats: sizes, the time of each step and memory per node, printed on stderr when the query
// is done (on destruction: the Context's last member, so it goes before the big arrays do).
struct GraphStatsReport {
  snapshot::GraphStats st;
  std::chrono::steady_clock::time_point start, graph_done = std::chrono::steady_clock::now();
  double read_s;  // reading the capture's modules and stacks, choosing and loading the snapshot
  GraphStatsReport(const snapshot::GraphStats &s, std::chrono::steady_clock::time_point t0, double read)
      : st(s), start(t0), read_s(read) {}
  ~GraphStatsReport() {
    const auto now = std::chrono::steady_clock::now();
    const double query_s = std::chrono::duration<double>(now - graph_done).count();
    const double total_s = std::chrono::duration<double>(now - start).count();
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    const double peak = double(ru.ru_maxrss) * 1024.0, n = double(st.nodes);
    fprintf(stderr,
            "graph: %s nodes, %s edges, %s reachable; read %.3f s, build %.3f s, dominators %.3f s, retained %.3f s, "
            "query %.3f s, total %.3f s\n"
            "memory: peak RSS %.0f MB (%.1f B/node); snapshot %.1f B/node, graph %.1f B/node (%.1f B/edge), "
            "dominators %.1f B/node, retained %.1f B/node\n",
            human_count(st.nodes).c_str(), human_count(st.edges).c_str(), human_count(st.reachable).c_str(), read_s,
            st.build_s, st.dominators_s, st.retained_s, query_s, total_s, peak / 1e6, peak / n,
            double(st.snapshot_bytes) / n, double(st.graph_bytes) / n,
            st.edges ? double(st.target_bytes) / double(st.edges) : 0.0,
            double(st.dominator_bytes) / n, double(st.retained_bytes) / n);
  }
};

// Everything a query needs: the snapshot, its root objects and graph, and labels for nodes.
struct Context {
  SnapshotArgs args;
  HeapSnapshot snap;
  snapshot::RootObjects roots;
  ObjectGraph graph;
  replay::ReplayResult capture;  // modules and stacks (no events replayed)
  std::unique_ptr<replay::StackSymbolizer> sym;
  // The root objects' direct children in the dominator tree, (root object, node) in order, and
  // per root object the node that stands for it: the one child that retains all it retains (the
  // object a pointer variable points to), else its own node. See index_roots().
  std::vector<std::pair<uint32_t, uint32_t>> root_kids;
  std::vector<uint32_t> root_rep;
  std::unique_ptr<GraphStatsReport> stats;  // --stats; last, so that it prints first
  bool usage_error = false;                  // load(): a bad --hide-frames

  std::string sz(double b) const { return args.raw_bytes ? std::to_string(uint64_t(b + 0.5)) : human_bytes(b); }
  // The same in the size colour, padded to `width` first (see out_style).
  std::string szc(double b, int width = 0) const { return out_style(Style::kSize, sz(b), width); }
  // A block's stack id in the capture's tree (0: not sampled, no stack).
  uint32_t stack_of(uint32_t block) const {
    uint32_t st = block < snap.stack.size() ? snap.stack[block] : 0;
    return capture.stacks.valid(st) ? st : 0;
  }
  // The address whose inline chain holds the block's site: the first frame of the program in its
  // stack, or in its call site's inline chain (StackSymbolizer::site_address). Sites are grouped
  // by it.
  uint64_t site_addr(uint32_t block) { return sym->site_address(capture.stacks, stack_of(block), snap.call_site[block]); }
  // The block's site as one id per distinct site (StackSymbolizer::site_id): what groups blocks.
  uint32_t site_id(uint32_t block) { return sym->site_id(site_addr(block)); }
  std::string site_id_label(uint32_t id) { return sym->site_label(sym->site_frame(sym->site_id_address(id))); }
  std::string site_label(uint32_t block) { return sym->site_label(sym->site_frame(site_addr(block))); }
  json site_json(uint32_t block) {
    const auto &f = sym->site_frame(site_addr(block));
    json j;
    j["site"] = sym->site_label(f);
    j["function"] = sym->site_function(f);
    j["file"] = f.file;
    j["line"] = f.line;
    j["call_site"] = hex(snap.call_site[block]);
    // The call site's innermost frame as symbolized (what "site" was before sites were chosen),
    // and what the site was chosen from: the block's stack (sampled) or its call site alone.
    j["site_innermost"] = sym->frames_of(snap.call_site[block])[0].label();
    bool inferred = false;
    if (!stack_of(block)) sym->call_site_address(capture.stacks, snap.call_site[block], &inferred);
    j["site_from"] = stack_of(block) ? "stack" : inferred ? "sampled_stacks_through_call_site" : "call_site";
    return j;
  }
  // The block's stack for people: readable, cut to max_frames with the program's frames first
  // (a run of the library's frames is one line), as the replay commands print stacks.
  std::vector<std::string> stack_lines(uint32_t block, size_t max_frames) {
    std::vector<replay::DisplayFrame> frames;
    if (stack_of(block)) frames = sym->stack(capture.stacks, stack_of(block));
    else frames = sym->frames_of(snap.call_site[block]);
    std::vector<std::string> out;
    bool program = false;
    for (const auto &f : frames) program = program || !f.library;
    bool cut = frames.size() > max_frames && !sym->all_frames() && program;
    size_t shown = 0;
    for (size_t i = 0; i < frames.size();) {
      if (cut && frames[i].library) {
        size_t j = i;
        while (j < frames.size() && frames[j].library) ++j;
        out.push_back("... " + std::to_string(j - i) + " library frame" + (j - i == 1 ? "" : "s"));
        i = j;
        continue;
      }
      if (shown == max_frames) {
        out.push_back("... " + std::to_string(frames.size() - i) + " more");
        break;
      }
      out.push_back(sym->site_label(frames[i++]));
      ++shown;
    }
    return out;
  }
  std::vector<std::string> stack_labels(uint32_t block, size_t max_frames) {
    std::vector<std::string> out;
    if (snap.stack[block] && capture.stacks.valid(snap.stack[block])) {
      for (const auto &f : sym->stack(capture.stacks, snap.stack[block])) {
        if (out.size() == max_frames) break;
        out.push_back(f.label());
      }
    } else {
      for (const auto &f : sym->frames_of(snap.call_site[block])) out.push_back(f.label());
    }
    return out;
  }

  // --- roots and holders ---
  void index_roots() {
    const auto &g = graph;
    root_kids.clear();
    root_rep.assign(g.num_roots, 0);
    for (uint32_t i = 0; i < g.num_roots; ++i) root_rep[i] = g.root_node(i);
    if (!g.num_roots) return;
    // One sequential pass over the blocks' dominators: root objects are numbered after them.
    const uint32_t *idom = g.dom.idom.data();
    for (uint32_t v = 1; v <= g.num_blocks; ++v)
      if (idom[v] != graph::kNoIdom && g.is_root(idom[v])) root_kids.push_back({g.root_object(idom[v]), v});
    std::sort(root_kids.begin(), root_kids.end());
    for (size_t i = 0; i < root_kids.size();) {
      size_t j = i;
      uint32_t best = root_kids[i].second;
      for (; j < root_kids.size() && root_kids[j].first == root_kids[i].first; ++j)
        if (g.retained.bytes[root_kids[j].second] > g.retained.bytes[best]) best = root_kids[j].second;
      const uint32_t obj = root_kids[i].first;
      if (g.retained.bytes[best] && g.retained.bytes[best] == g.retained.bytes[g.root_node(obj)]) root_rep[obj] = best;
      i = j;
    }
  }
  // The node a root object's row shows: see root_rep.
  uint32_t rep(uint32_t v) const { return graph.is_root(v) ? root_rep[graph.root_object(v)] : v; }
  // The root object's children (nodes), from root_kids.
  std::vector<uint32_t> kids_of_root(uint32_t obj) const {
    auto lo = std::lower_bound(root_kids.begin(), root_kids.end(), std::make_pair(obj, 0u));
    std::vector<uint32_t> out;
    for (; lo != root_kids.end() && lo->first == obj; ++lo) out.push_back(lo->second);
    return out;
  }
  bool is_leader(uint32_t v) const { return graph.leak_node && graph.is_block(v) && graph.dom.idom[v] == graph.leak_node; }
  // What keeps v alive on its own: the root object on its dominator chain, or, for a block in a
  // leak clique, the clique's leader; a block held by several roots at once is its own holder
  // (the top of its chain, just below the super root).
  uint32_t holder(uint32_t v) const {
    const auto &idom = graph.dom.idom;
    uint32_t u = v, below = v;
    while (idom[u] != graph::kNoIdom && idom[u] != 0) {
      below = u;
      u = idom[u];
    }
    return u == graph.leak_node && graph.leak_node ? below : u;
  }
  const snapshot::RootObject &root_of(uint32_t v) const { return roots.objects[graph.root_object(v)]; }
  std::string root_label(uint32_t v, bool kind_first = false) const { return root_of(v).label(snap, kind_first); }
  bool cycle(uint32_t leader) const {
    auto it = std::lower_bound(graph.leaks.begin(), graph.leaks.end(), leader,
                               [](const snapshot::LeakCluster &l, uint32_t n) { return l.node < n; });
    return it != graph.leaks.end() && it->node == leader && it->cycle;
  }
  // "cycle of 2 blocks, leader 0x... at make_pair (app.cc:80)".
  std::string cluster_label(uint32_t leader) {
    const uint64_t n = graph.retained_blocks(leader);
    const uint32_t b = ObjectGraph::block_of(leader);
    std::string what = cycle(leader) ? "cycle of " + human_count(n) + " block" + (n == 1 ? "" : "s")
                       : n == 1     ? std::string("unreachable block")
                                    : human_count(n) + " unreachable blocks";
    return what + ", leader " + hex(snap.addr[b]) + " at " + site_label(b);
  }
  // The "held by" line of node v.
  std::string held_by(uint32_t v) {
    const uint32_t h = holder(v);
    if (graph.is_root(h)) return h == v ? "itself (a root)" : root_label(h, true);
    if (is_leader(h)) return h == v ? "nothing: unreachable (a leak)" : "nothing: unreachable, in the " + cluster_label(h);
    return "(held through several roots)";
  }
  // A row's object: a root's label, a leak clique's, or a block's address and site.
  std::string node_label(uint32_t v) {
    if (graph.is_root(v)) return root_label(v);
    if (is_leader(v)) return cluster_label(v);
    const uint32_t b = ObjectGraph::block_of(v);
    return hex(snap.addr[b]) + " at " + site_label(b);
  }
  json root_json(uint32_t v) const {
    const auto &o = root_of(v);
    json j;
    j["name"] = o.what == snapshot::RootObject::kVariable ? o.name : o.label(snap);
    j["kind"] = o.kind(snap);
    j["label"] = o.label(snap);
    j["type"] = o.type;
    j["file"] = o.file;
    j["line"] = o.line;
    j["module"] = o.module;
    j["module_offset"] = hex(o.module_offset);
    j["address"] = hex(o.start);
    j["size"] = o.size;
    const auto &rr = snap.roots[o.range];
    j["range"] = {{"kind", snapshot::root_kind_name(rr.kind)}, {"name", rr.name}, {"detail", rr.detail}};
    return j;
  }
};

bool load(const SnapshotArgs &a, Context *c, bool with_children, bool print_stats, bool need_edges = false) {
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
  lo.edge_offsets = need_edges;
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

// load()'s failure as an exit status.
int load_failed(const Context &c) { return c.usage_error ? kExitUsage : kExitInput; }

// "… reachable + … unreachable" for headings.
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

struct TopArgs : SnapshotArgs {
  std::string by = "object";
  bool stats = false;
  size_t frames = 6;
};

// One row of top-retainers --by object.
struct TopRow {
  uint32_t node;
  uint32_t inside;  // index of the nearest listed row above it on its dominator chain, or UINT32_MAX
  uint64_t own;     // its retained bytes less those of the rows listed inside it
};

// The rows of top-retainers --by object: nodes by retained bytes, one row per structure. A node
// is left out when a row above it on its dominator chain is the same structure: a block of the
// same site (a std::map's nodes under its root node, a list under its head), or a variable whose
// direct children include one of that site (the map's nodes under g_sessions). A variable whose
// one child retains all it does is shown as that child (g_cache as the Cache it points to).
std::vector<TopRow> top_rows(Context &c, size_t limit) {
  const auto &g = c.graph;
  const auto &idom = g.dom.idom;
  std::vector<uint32_t> nodes;
  nodes.reserve(g.dom.preorder.size());  // the nodes in the tree: no regrowth (10^8 of them)
  for (uint32_t v = 1; v < g.csr.num_nodes; ++v)
    if (g.retained.count[v] && v != g.leak_node) nodes.push_back(v);
  // Ancestors first among equal sizes: an ancestor retains more blocks (itself) than any descendant.
  auto before = [&](uint32_t x, uint32_t y) {
    if (g.retained.bytes[x] != g.retained.bytes[y]) return g.retained.bytes[x] > g.retained.bytes[y];
    if (g.retained.count[x] != g.retained.count[y]) return g.retained.count[x] > g.retained.count[y];
    return x < y;
  };
  std::vector<TopRow> rows;
  std::unordered_map<uint32_t, uint32_t> row_of;       // listed node -> row
  std::unordered_map<uint32_t, uint32_t> nearest;      // node seen on a walk -> nearest listed row above it
  std::unordered_map<uint32_t, std::unordered_set<uint32_t>> covers;  // listed variable -> its children's sites
  std::unordered_map<uint32_t, uint32_t> site_cache;   // block node -> site id
  auto site = [&](uint32_t v) {
    auto [it, fresh] = site_cache.try_emplace(v, 0);
    if (fresh) it->second = c.site_id(ObjectGraph::block_of(v));
    return it->second;
  };
  size_t sorted = 0, i = 0;
  while (rows.size() < limit) {
    if (i == sorted) {
      if (sorted == nodes.size()) break;
      const size_t next = std::min(nodes.size(), std::max<size_t>(sorted * 4, 64 + limit * 8));
      std::partial_sort(nodes.begin() + long(sorted), nodes.begin() + long(next), nodes.end(), before);
      sorted = next;
    }
    const uint32_t v = nodes[i++];
    if (g.is_root(v) && c.rep(v) != v) continue;  // shown as the child that stands for it
    const uint32_t p = idom[v];
    if (g.is_block(v) && g.is_block(p) && site(p) == site(v)) continue;  // the same structure, one level down
    // The nearest listed row above v: walk up to a listed node or one walked before.
    std::vector<uint32_t> path;
    uint32_t found = UINT32_MAX;
    for (uint32_t u = p; u != 0 && u != graph::kNoIdom; u = idom[u]) {
      if (auto r = row_of.find(u); r != row_of.end()) {
        found = r->second;
        break;
      }
      if (auto m = nearest.find(u); m != nearest.end()) {
        found = m->second;
        break;
      }
      path.push_back(u);
    }
    for (uint32_t u : path) nearest[u] = found;
    bool same = false;
    if (g.is_block(v))
      for (uint32_t r = found; r != UINT32_MAX && !same; r = rows[r].inside) {
        const uint32_t u = rows[r].node;
        if (g.is_block(u)) {
          same = site(u) == site(v);
        } else if (g.is_root(u) && c.root_of(u).what == snapshot::RootObject::kVariable) {
          auto [it, fresh] = covers.try_emplace(u);
          if (fresh)
            for (uint32_t k : c.kids_of_root(g.root_object(u))) it->second.insert(site(k));
          same = it->second.count(site(v)) > 0;
        }
      }
    if (same) continue;
    row_of[v] = uint32_t(rows.size());
    rows.push_back({v, found, g.retained.bytes[v]});
  }
  for (const auto &r : rows)
    if (r.inside != UINT32_MAX) rows[r.inside].own -= g.retained.bytes[r.node];
  return rows;
}

int run_top(const TopArgs &a) {
  Context c;
  if (!load(a, &c, a.by == "site", a.stats)) return load_failed(c);
  const auto &g = c.graph;
  uint64_t total = g.total_bytes();
  json out;
  out["file"] = a.file;
  out["snapshot"] = c.snap.info.index;
  out["total_reachable_bytes"] = g.reachable_bytes();
  out["unreachable_bytes"] = g.unreachable_bytes();
  out["total_bytes"] = total;
  out["blocks"] = c.snap.blocks();
  if (a.by == "object") {
    uint64_t in_tree = 0;
    for (uint32_t v = 1; v <= g.num_blocks; ++v) in_tree += g.retained.count[v] != 0;
    std::vector<TopRow> rows = top_rows(c, a.limit);
    out["reachable_blocks"] = g.leak_node ? in_tree - g.retained_blocks(g.leak_node) : in_tree;
    if (!a.json) {
      printf("%s — %s in %s blocks\n\n",
             out_style(Style::kHeading, "top retainers of snapshot " + std::to_string(c.snap.info.index) + " (" +
                                            snapshot::trigger_name(c.snap.info.trigger) + ")").c_str(),
             heap_summary(c).c_str(), human_count(in_tree).c_str());
      print_styled(Style::kHeader, "%12s %7s %12s %10s  %s\n", "retained", "%", "shallow", "blocks", "object");
    }
    json arr = json::array();
    std::unordered_set<uint32_t> shown;
    for (size_t ri = 0; ri < rows.size(); ++ri) {
      const TopRow &row = rows[ri];
      const uint32_t v = row.node;
      shown.insert(v);
      const double pct = total ? 100.0 * double(row.own) / double(total) : 0;
      const bool root = g.is_root(v);
      const uint32_t b = root ? 0 : ObjectGraph::block_of(v);
      if (a.json) {
        json o = root ? json::object() : c.site_json(b);
        o["kind"] = root ? "root" : c.is_leader(v) ? "unreachable" : g.unreachable(v) ? "unreachable_part" : "object";
        o["label"] = c.node_label(v);
        if (root) o["root"] = c.root_json(v);
        else o["address"] = hex(c.snap.addr[b]);
        o["shallow_bytes"] = root ? 0 : c.snap.size[b];
        o["retained_bytes"] = g.retained.bytes[v];
        o["retained_blocks"] = g.retained_blocks(v);
        o["share"] = total ? double(row.own) / double(total) : 0.0;
        if (row.inside != UINT32_MAX) o["inside_row"] = row.inside;
        if (c.is_leader(v)) o["cycle"] = c.cycle(v);
        if (!root) o["stack"] = c.stack_labels(b, a.frames);
        o["held_by"] = c.held_by(v);
        arr.push_back(o);
        continue;
      }
      printf("%s %6.1f%% %12s %10s  %s\n", c.szc(double(g.retained.bytes[v]), 12).c_str(), pct,
             root ? "-" : c.sz(double(c.snap.size[b])).c_str(), human_count(g.retained_blocks(v)).c_str(),
             c.node_label(v).c_str());
      std::string held = root ? "a root: the " + c.root_of(v).kind(c.snap) + " memory at " + hex(c.root_of(v).start) +
                                    (c.root_of(v).size ? ", " + c.sz(double(c.root_of(v).size)) : std::string())
                              : "held by " + c.held_by(v);
      if (row.inside != UINT32_MAX) held += "; inside row " + std::to_string(row.inside + 1);
      printf("%48s %s\n", "", held.c_str());
      if (!root)
        for (const auto &line : c.stack_lines(b, a.frames)) printf("%48s   from %s\n", "", line.c_str());
    }
    // Unreachable memory is a leak whatever its size: its cliques are listed even when too small
    // for the table above.
    std::vector<uint32_t> clusters = clusters_by_size(c);
    json leaks = json::array();
    size_t listed = 0;
    for (uint32_t l : clusters) {
      if (listed == a.limit) break;
      ++listed;
      if (a.json) {
        leaks.push_back(cluster_json(c, l));
        continue;
      }
      if (listed == 1)
        printf("\n%s: %s in %s blocks, %s clique%s (memcheck's definitely and indirectly lost: `heapsnap unreachable`)\n",
               out_style(Style::kHeading, "unreachable").c_str(), c.szc(double(g.unreachable_bytes())).c_str(),
               human_count(g.retained_blocks(g.leak_node)).c_str(), human_count(clusters.size()).c_str(),
               clusters.size() == 1 ? "" : "s");
      printf("%s %10s  %s%s\n", c.szc(double(g.retained.bytes[l]), 12).c_str(), human_count(g.retained_blocks(l)).c_str(),
             c.cluster_label(l).c_str(), shown.count(l) ? " (listed above)" : "");
    }
    if (!a.json && !rows.empty())
      printf("\n%s\n", out_style(Style::kEstimate, "%: of all live bytes, less the rows listed inside the row (the column "
                                                   "adds up to 100% at most); a structure is one row").c_str());
    if (a.json) {
      out["by"] = "object";
      out["objects"] = arr;
      out["unreachable"] = leaks;
      std::cout << out.dump(2) << "\n";
    }
    return kExitOk;
  }
  // --by site: a site's retained bytes count each block once: only the topmost block of the site
  // on each dominator chain contributes (its retained size covers the nested ones).
  std::unordered_map<uint64_t, uint32_t> site_index;
  std::vector<uint64_t> site_addr;
  std::vector<uint32_t> site_of(size_t(g.num_blocks) + 1, 0);
  for (uint32_t b = 0; b < c.snap.blocks(); ++b) {
    uint64_t site = c.site_id(b);
    auto [it, fresh] = site_index.try_emplace(site, uint32_t(site_addr.size()));
    if (fresh) site_addr.push_back(site);
    site_of[b + 1] = it->second;
  }
  size_t ns = site_addr.size();
  std::vector<uint32_t> active(ns, 0), first_block(ns, UINT32_MAX);
  std::vector<uint64_t> retained(ns, 0), shallow(ns, 0), count(ns, 0), instances(ns, 0);
  // Iterative DFS over the dominator tree: enter/leave events keep per-site nesting counts.
  std::vector<std::pair<uint32_t, bool>> stack{{0, false}};
  while (!stack.empty()) {
    auto [v, leaving] = stack.back();
    stack.pop_back();
    if (g.is_block(v)) {
      uint32_t s = site_of[v];
      if (leaving) {
        --active[s];
        continue;
      }
      if (!active[s]) {
        retained[s] += g.retained.bytes[v];
        ++instances[s];
      }
      ++active[s];
      shallow[s] += c.snap.size[v - 1];
      ++count[s];
      if (first_block[s] == UINT32_MAX) first_block[s] = v - 1;
      stack.push_back({v, true});
    }
    for (uint32_t ch : g.children.successors(v)) stack.push_back({ch, false});
  }
  std::vector<uint32_t> order(ns);
  for (uint32_t i = 0; i < ns; ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](uint32_t x, uint32_t y) { return retained[x] > retained[y]; });
  if (order.size() > a.limit) order.resize(a.limit);
  if (!a.json) {
    printf("%s — %s\n\n",
           out_style(Style::kHeading, "top retaining sites of snapshot " + std::to_string(c.snap.info.index)).c_str(),
           heap_summary(c).c_str());
    print_styled(Style::kHeader, "%12s %7s %12s %10s  %s\n", "retained", "%", "shallow", "blocks", "allocation site");
  }
  json arr = json::array();
  for (uint32_t s : order) {
    if (!retained[s]) continue;
    uint32_t b = first_block[s];
    if (a.json) {
      json o = c.site_json(b);
      o["retained_bytes"] = retained[s];
      o["shallow_bytes"] = shallow[s];
      o["blocks"] = count[s];
      o["top_level_instances"] = instances[s];
      arr.push_back(o);
      continue;
    }
    printf("%s %6.1f%% %12s %10s  %s\n", c.szc(double(retained[s]), 12).c_str(),
           total ? 100.0 * double(retained[s]) / double(total) : 0.0, c.sz(double(shallow[s])).c_str(),
           human_count(count[s]).c_str(), c.site_label(b).c_str());
  }
  if (a.json) {
    out["by"] = "site";
    out["sites"] = arr;
    std::cout << out.dump(2) << "\n";
  }
  return kExitOk;
}

// --- dominators: the tree grouped by site, level by level --------------------------------------

struct DomArgs : SnapshotArgs {
  int depth = 4;
  std::string min_bytes = "0";
};

bool parse_size_arg(const std::string &s, uint64_t *out) {
  char *end = nullptr;
  unsigned long long v = strtoull(s.c_str(), &end, 10);
  std::string suf = end;
  if (suf == "k" || suf == "K") v <<= 10;
  else if (suf == "m" || suf == "M") v <<= 20;
  else if (suf == "g" || suf == "G") v <<= 30;
  else if (!suf.empty()) return false;
  *out = v;
  return true;
}

int run_dominators(const DomArgs &a) {
  uint64_t min_bytes = 0;
  if (!parse_size_arg(a.min_bytes, &min_bytes)) {
    print_error("dominators --min-bytes '%s': expected a size (e.g. 4096, 64K, 1M)", a.min_bytes.c_str());
    return kExitUsage;
  }
  Context c;
  if (!load(a, &c, true, false)) return load_failed(c);
  const auto &g = c.graph;
  // A group is the set of dominator-tree nodes with the same site under the same parent group.
  // Expanded breadth first, one level at a time, with a fresh small map per group (dotMemory's
  // lesson: clearing one big map per level dominated their run time). The roots are not levels
  // of their own: the first level is what they hold (each group says by which roots), and what
  // no root reaches makes groups of its own, marked unreachable. A group's nodes whose children
  // have its site again (a tree's or a list's nodes, nested level after level) are one group:
  // the same-site children join it, and its levels count how deep they go.
  struct Group {
    uint64_t site;
    uint32_t example;
    bool unreachable = false;
    uint64_t count = 0, shallow = 0, retained = 0, levels = 1;
    std::vector<uint32_t> nodes;   // the group's nodes, nested ones included
    std::map<uint32_t, uint64_t> holders;  // first level: holder node -> bytes
  };
  auto add = [&](std::unordered_map<uint64_t, Group> &groups, uint32_t ch, bool unreachable, uint32_t holder) {
    uint32_t b = ObjectGraph::block_of(ch);
    uint64_t site = c.site_id(b);
    uint64_t key = site * 2 + unreachable;
    Group &gr = groups[key];
    if (!gr.count) {
      gr.site = site;
      gr.example = b;
      gr.unreachable = unreachable;
    }
    ++gr.count;
    gr.shallow += c.snap.size[b];
    gr.retained += g.retained.bytes[ch];
    gr.nodes.push_back(ch);
    if (holder != UINT32_MAX) gr.holders[holder] += g.retained.bytes[ch];
  };
  // Pulls the same-site descendants of the group's nodes into it, level after level.
  auto nest = [&](Group &gr) {
    std::vector<uint32_t> frontier = gr.nodes;
    for (;;) {
      std::vector<uint32_t> next;
      for (uint32_t p : frontier)
        for (uint32_t ch : g.children.successors(p))
          if (c.site_id(ObjectGraph::block_of(ch)) == gr.site) next.push_back(ch);
      if (next.empty()) break;
      ++gr.levels;
      for (uint32_t ch : next) {
        ++gr.count;
        gr.shallow += c.snap.size[ObjectGraph::block_of(ch)];
        gr.nodes.push_back(ch);
      }
      frontier.swap(next);
    }
  };
  auto holders_text = [&](const Group &gr) -> std::string {
    if (gr.unreachable) return "unreachable";
    if (gr.holders.empty()) return "";
    if (gr.holders.size() == 1) {
      uint32_t h = gr.holders.begin()->first;
      return "held by " + (g.is_root(h) ? c.root_label(h, true) : std::string("several roots"));
    }
    auto top = std::max_element(gr.holders.begin(), gr.holders.end(), [](auto &x, auto &y) { return x.second < y.second; });
    return "held by " + human_count(gr.holders.size()) + " roots, most by " +
           (g.is_root(top->first) ? c.root_label(top->first, true) : std::string("several roots at once"));
  };
  std::function<json(std::unordered_map<uint64_t, Group> &, int)> emit;
  emit = [&](std::unordered_map<uint64_t, Group> &groups, int level) {
    std::vector<Group *> sorted;
    for (auto &[k, gr] : groups)
      if (gr.retained >= min_bytes) sorted.push_back(&gr);
    std::sort(sorted.begin(), sorted.end(), [](Group *x, Group *y) {
      return x->retained != y->retained ? x->retained > y->retained : x->site < y->site;
    });
    if (sorted.size() > a.limit) sorted.resize(a.limit);
    json arr = json::array();
    for (Group *gr : sorted) {
      nest(*gr);
      json o = c.site_json(gr->example);
      o["objects"] = gr->count;
      o["shallow_bytes"] = gr->shallow;
      o["retained_bytes"] = gr->retained;
      o["levels"] = gr->levels;
      std::string held = holders_text(*gr);
      if (!held.empty()) o["held_by"] = held;
      if (gr->unreachable) o["unreachable"] = true;
      if (!a.json) {
        std::string nested = gr->levels > 1 ? ", nested " + human_count(gr->levels) + " levels deep" : "";
        printf("%*s%s  %s retained, %s objects%s, %s shallow%s\n", level * 2, "", c.site_label(gr->example).c_str(),
               c.szc(double(gr->retained)).c_str(), human_count(gr->count).c_str(), nested.c_str(),
               c.sz(double(gr->shallow)).c_str(), held.empty() ? "" : (" — " + held).c_str());
      }
      if (level + 1 < a.depth) {
        std::unordered_map<uint64_t, Group> kids;
        for (uint32_t p : gr->nodes)
          for (uint32_t ch : g.children.successors(p))
            if (c.site_id(ObjectGraph::block_of(ch)) != gr->site) add(kids, ch, gr->unreachable, UINT32_MAX);
        json k = emit(kids, level + 1);
        if (!k.empty()) o["children"] = k;
      }
      arr.push_back(o);
    }
    return arr;
  };
  if (!a.json)
    printf("%s (%s)\n\n",
           out_style(Style::kHeading, "dominator tree of snapshot " + std::to_string(c.snap.info.index) +
                                          " grouped by allocation site").c_str(),
           heap_summary(c).c_str());
  // The first level: the blocks each root holds alone, those several roots hold, and the leak
  // cliques.
  std::unordered_map<uint64_t, Group> first;
  for (uint32_t top : g.children.successors(0)) {
    if (g.is_root(top)) {
      for (uint32_t ch : g.children.successors(top)) add(first, ch, false, top);
    } else if (top == g.leak_node) {
      for (uint32_t ch : g.children.successors(top)) add(first, ch, true, UINT32_MAX);
    } else if (g.is_block(top)) {
      add(first, top, false, 0);
    }
  }
  json tree = emit(first, 0);
  if (a.json) {
    json out;
    out["file"] = a.file;
    out["snapshot"] = c.snap.info.index;
    out["total_reachable_bytes"] = g.reachable_bytes();
    out["unreachable_bytes"] = g.unreachable_bytes();
    out["tree"] = tree;
    std::cout << out.dump(2) << "\n";
  }
  return kExitOk;
}

// --- path: shortest chain of pointers from a root -----------------------------------------------

struct PathArgs : SnapshotArgs {
  std::string address;
};

int run_path(const PathArgs &a) {
  char *end = nullptr;
  errno = 0;
  uint64_t target_addr = strtoull(a.address.c_str(), &end, 0);
  if (a.address.empty() || *end || errno) {
    print_error("path: '%s' is not an address (e.g. 0x55d0c2a8e2a0)", a.address.c_str());
    return kExitUsage;
  }
  Context c;
  if (!load(a, &c, false, false, true)) return load_failed(c);
  uint32_t target = c.snap.find(target_addr);
  if (target == UINT32_MAX) {
    print_error("path: no live block contains %s in snapshot %u", a.address.c_str(), c.snap.info.index);
    return kExitInput;
  }
  const auto &g = c.graph;
  // Breadth first from the super root through the root objects (not through the leak node): the
  // first time the target is reached is a shortest path.
  std::vector<uint32_t> parent(g.csr.num_nodes, UINT32_MAX);
  std::vector<uint32_t> via(g.csr.num_nodes, 0);  // index into csr.targets of the edge used
  std::deque<uint32_t> queue{0};
  parent[0] = 0;
  if (g.leak_node) parent[g.leak_node] = 0;
  uint32_t goal = ObjectGraph::node_of(target);
  while (!queue.empty() && parent[goal] == UINT32_MAX) {
    uint32_t v = queue.front();
    queue.pop_front();
    for (uint32_t k = g.csr.offsets[v]; k < g.csr.offsets[v + 1]; ++k) {
      uint32_t w = g.csr.targets[k];
      if (parent[w] != UINT32_MAX) continue;
      parent[w] = v;
      via[w] = k;
      queue.push_back(w);
    }
  }
  json out;
  out["file"] = a.file;
  out["snapshot"] = c.snap.info.index;
  out["target"] = hex(c.snap.addr[target]);
  if (parent[goal] == UINT32_MAX) {
    std::string leak = g.unreachable(goal) ? c.cluster_label(c.holder(goal)) : "";
    if (a.json) {
      out["reachable"] = false;
      if (!leak.empty()) out["unreachable_in"] = leak;
      std::cout << out.dump(2) << "\n";
    } else {
      printf("%s (block at %s, %s) is not reachable from any root%s\n", a.address.c_str(), hex(c.snap.addr[target]).c_str(),
             c.site_label(target).c_str(), a.interior == "on" ? "" : " through start pointers");
      if (!leak.empty()) printf("  it is part of an unreachable %s\n", leak.c_str());
    }
    return kExitOk;
  }
  std::vector<uint32_t> chain;
  for (uint32_t v = goal; v != 0; v = parent[v]) chain.push_back(v);
  std::reverse(chain.begin(), chain.end());
  // chain[0] is the root object, the rest blocks.
  const uint32_t root_node = chain[0];
  chain.erase(chain.begin());
  const snapshot::RootObject &ro = c.root_of(root_node);
  const uint32_t obj = g.root_object(root_node);
  // The word that points at the first block: in one of the object's ranges (a thread object has
  // its stack's, its registers' and its TLS's).
  uint32_t range = ro.range;
  uint32_t first = ObjectGraph::block_of(chain[0]);
  uint64_t root_off = 0;
  for (uint32_t r = 0, found = 0; r < c.snap.roots.size() && !found; ++r) {
    const auto &cand = c.snap.roots[r];
    for (uint32_t k = cand.first; k < cand.first + cand.count; ++k)
      if (c.roots.object_of_word[k] == obj && c.snap.root_target[k] == first) {
        range = r;
        root_off = c.snap.root_offset[k];
        found = 1;
        break;
      }
  }
  const auto &rr = c.snap.roots[range];
  json hops = json::array();
  // A register root is the tracer's copy of a thread's registers: its offset names the register.
  bool in_register = rr.kind == snapshot::kRegisters;
  const uint64_t word = rr.start + root_off;
  std::string where = "+" + std::to_string(root_off);
  if (in_register) where += " " + std::string(snapshot::register_name(root_off));
  if (ro.what == snapshot::RootObject::kVariable && word != ro.start) where += ", " + ro.name + "+" + std::to_string(word - ro.start);
  if (!a.json)
    printf("%s (%u hops)\n  root: %s at %s (%s)\n",
           out_style(Style::kHeading, "path to " + hex(c.snap.addr[target])).c_str(), unsigned(chain.size()),
           ro.label(c.snap, true).c_str(), hex(word).c_str(), where.c_str());
  out["root"] = {{"kind", snapshot::root_kind_name(rr.kind)}, {"name", rr.name}, {"detail", rr.detail},
                 {"address", hex(word)}, {"object", c.root_json(root_node)}};
  if (ro.what == snapshot::RootObject::kVariable) {
    out["root"]["variable"] = ro.name;
    out["root"]["offset_in_variable"] = word - ro.start;
  }
  if (in_register) out["root"]["register"] = snapshot::register_name(root_off);
  for (size_t i = 0; i < chain.size(); ++i) {
    uint32_t b = ObjectGraph::block_of(chain[i]);
    json h = c.site_json(b);
    h["address"] = hex(c.snap.addr[b]);
    h["size"] = c.snap.size[b];
    if (i + 1 < chain.size()) {
      // Offset of the pointer to the next hop inside this block.
      uint32_t nb = ObjectGraph::block_of(chain[i + 1]);
      uint32_t off = 0;
      for (uint64_t k = c.snap.edge_begin[b]; k < c.snap.edge_begin[b + 1]; ++k)
        if (c.snap.edge_target[k] == nb) {
          off = c.snap.edge_offset[k];
          break;
        }
      h["next_at_offset"] = off;
      if (!a.json)
        printf("  -> %s (%s) %s, field +%u ->\n", hex(c.snap.addr[b]).c_str(), c.szc(double(c.snap.size[b])).c_str(),
               c.site_label(b).c_str(), off);
    } else if (!a.json) {
      printf("  -> %s (%s) %s  [target]\n", hex(c.snap.addr[b]).c_str(), c.szc(double(c.snap.size[b])).c_str(),
             c.site_label(b).c_str());
    }
    hops.push_back(h);
  }
  out["reachable"] = true;
  out["hops"] = hops;
  if (a.json) std::cout << out.dump(2) << "\n";
  return kExitOk;
}

// --- suspects: MAT's leak suspects ---------------------------------------------------------------

// Per site, over the whole dominator tree: blocks, their own bytes, and what the topmost ones
// retain (each block once), with what holds the topmost ones (holder node -> bytes).
struct SiteGroups {
  std::vector<uint64_t> site;  // site ids
  std::vector<uint64_t> retained, count, shallow;
  std::vector<uint32_t> example;
  std::vector<std::unordered_map<uint32_t, uint64_t>> holders;
};

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

int run_suspects(const SnapshotArgs &a) {
  Context c;
  if (!load(a, &c, true, false)) return load_failed(c);
  const auto &g = c.graph;
  const uint64_t total = g.total_bytes();
  json arr = json::array();
  if (!a.json)
    printf("%s (%s)\n", out_style(Style::kHeading, "leak suspects in snapshot " + std::to_string(c.snap.info.index)).c_str(),
           heap_summary(c).c_str());
  // MAT's two kinds. Single objects: one retaining over 10% of the heap (a root object counts,
  // shown as the one object it points to when that holds all it retains); from it, follow the
  // biggest dominated child while that child keeps at least 70% of its parent's retained bytes:
  // where that stops is the accumulation point. Groups: the blocks of one site that together
  // retain over 10% (each block once), and what holds them.
  auto big = [&](uint32_t v) { return g.retained.bytes[v] * 10 > total; };
  std::vector<uint32_t> suspects;
  for (uint32_t v = 1; v < g.csr.num_nodes; ++v) {
    if (v == g.leak_node || !g.retained.count[v] || !big(v)) continue;
    if (g.is_root(v) && c.rep(v) != v) continue;  // its child stands for it
    // Only the topmost such object on a chain: its descendants are part of its story.
    bool nested = false;
    for (uint32_t u = g.dom.idom[v]; u != graph::kNoIdom && u != 0 && u != g.leak_node; u = g.dom.idom[u])
      if (big(u) && c.rep(u) != v) {
        nested = true;
        break;
      }
    if (!nested) suspects.push_back(v);
  }
  std::sort(suspects.begin(), suspects.end(), [&](uint32_t x, uint32_t y) { return g.retained.bytes[x] > g.retained.bytes[y]; });
  int n = 0;
  for (uint32_t v : suspects) {
    uint32_t acc = v;
    for (;;) {
      uint32_t best = UINT32_MAX;
      for (uint32_t ch : g.children.successors(acc))
        if (best == UINT32_MAX || g.retained.bytes[ch] > g.retained.bytes[best]) best = ch;
      if (best == UINT32_MAX || g.retained.bytes[best] * 10 < g.retained.bytes[acc] * 7) break;
      acc = best;
    }
    // What the accumulation point holds, by site, each block once (topmost of its site).
    std::unordered_map<uint64_t, std::pair<uint64_t, uint64_t>> kids;  // site -> (blocks, retained)
    {
      std::unordered_map<uint64_t, uint32_t> active;
      std::vector<std::pair<uint32_t, bool>> stack;
      for (uint32_t ch : g.children.successors(acc)) stack.push_back({ch, false});
      while (!stack.empty()) {
        auto [u, leaving] = stack.back();
        stack.pop_back();
        uint64_t site = c.site_id(ObjectGraph::block_of(u));
        if (leaving) {
          --active[site];
          continue;
        }
        auto &k = kids[site];
        ++k.first;
        if (!active[site]++) k.second += g.retained.bytes[u];
        stack.push_back({u, true});
        for (uint32_t ch : g.children.successors(u)) stack.push_back({ch, false});
      }
    }
    std::vector<std::pair<uint64_t, std::pair<uint64_t, uint64_t>>> rows(kids.begin(), kids.end());
    std::sort(rows.begin(), rows.end(), [](auto &x, auto &y) { return x.second.second > y.second.second; });
    const bool root = g.is_root(v), acc_root = g.is_root(acc);
    json s = root ? json::object() : c.site_json(ObjectGraph::block_of(v));
    s["kind"] = root ? "root" : c.is_leader(v) ? "unreachable" : "object";
    s["label"] = c.node_label(v);
    if (root) s["root"] = c.root_json(v);
    else s["address"] = hex(c.snap.addr[ObjectGraph::block_of(v)]);
    s["retained_bytes"] = g.retained.bytes[v];
    s["share"] = total ? double(g.retained.bytes[v]) / double(total) : 0.0;
    s["held_by"] = c.held_by(v);
    json ap = acc_root ? json::object() : c.site_json(ObjectGraph::block_of(acc));
    ap["label"] = c.node_label(acc);
    if (!acc_root) ap["address"] = hex(c.snap.addr[ObjectGraph::block_of(acc)]);
    ap["retained_bytes"] = g.retained.bytes[acc];
    ap["children"] = g.children.successors(acc).size();
    json holds = json::array();
    for (size_t i = 0; i < rows.size() && i < 5; ++i)
      holds.push_back({{"site", c.site_id_label(uint32_t(rows[i].first))}, {"objects", rows[i].second.first},
                       {"retained_bytes", rows[i].second.second}});
    ap["holds"] = holds;
    s["accumulation_point"] = ap;
    arr.push_back(s);
    if (!a.json) {
      printf("\n%s %s retains %s (%.0f%% of the heap)%s\n",
             out_style(Style::kHeading, "suspect " + std::to_string(++n) + ":").c_str(),
             root ? c.root_label(v, true).c_str() : c.node_label(v).c_str(), c.szc(double(g.retained.bytes[v])).c_str(),
             100.0 * double(g.retained.bytes[v]) / double(total ? total : 1),
             root ? "" : (", held by " + c.held_by(v)).c_str());
      printf("  accumulation point: %s, retaining %s in %zu direct children; below it:\n", c.node_label(acc).c_str(),
             c.szc(double(g.retained.bytes[acc])).c_str(), g.children.successors(acc).size());
      for (size_t i = 0; i < rows.size() && i < 5; ++i)
        printf("    %s objects from %s retaining %s\n", human_count(rows[i].second.first).c_str(),
               c.site_id_label(uint32_t(rows[i].first)).c_str(), c.sz(double(rows[i].second.second)).c_str());
    }
  }
  // Groups: "2,000 instances of <site> occupy 4.0 MiB, held by g_sessions".
  SiteGroups sg = site_groups(c);
  std::vector<uint32_t> order;
  for (uint32_t i = 0; i < sg.site.size(); ++i)
    if (sg.retained[i] * 10 > total && sg.count[i] > 1) order.push_back(i);
  std::sort(order.begin(), order.end(), [&](uint32_t x, uint32_t y) { return sg.retained[x] > sg.retained[y]; });
  json groups = json::array();
  // One answer per structure: a group held wholly by one single-object suspect is that suspect's
  // content (listed under its accumulation point), not a suspect of its own.
  const std::unordered_set<uint32_t> suspect_set(suspects.begin(), suspects.end());
  for (uint32_t i : order) {
    std::vector<std::pair<uint32_t, uint64_t>> hs(sg.holders[i].begin(), sg.holders[i].end());
    std::sort(hs.begin(), hs.end(), [](auto &x, auto &y) { return x.second != y.second ? x.second > y.second : x.first < y.first; });
    if (hs.size() == 1 && suspect_set.count(hs[0].first)) continue;
    std::string held = hs.empty() ? "" : holder_text(c, hs[0].first);
    if (hs.size() > 1) held += " and " + human_count(hs.size() - 1) + " other" + (hs.size() == 2 ? "" : "s");
    json o = c.site_json(sg.example[i]);
    o["kind"] = "group";
    o["instances"] = sg.count[i];
    o["shallow_bytes"] = sg.shallow[i];
    o["retained_bytes"] = sg.retained[i];
    o["share"] = total ? double(sg.retained[i]) / double(total) : 0.0;
    json ho = json::array();
    for (size_t k = 0; k < hs.size() && k < 5; ++k) ho.push_back({{"holder", holder_text(c, hs[k].first)}, {"retained_bytes", hs[k].second}});
    o["held_by"] = ho;
    groups.push_back(o);
    if (!a.json)
      printf("\n%s %s instances of %s occupy %s (%.0f%% of the heap), held by %s\n",
             out_style(Style::kHeading, "suspect " + std::to_string(++n) + ":").c_str(), human_count(sg.count[i]).c_str(),
             c.site_label(sg.example[i]).c_str(), c.szc(double(sg.retained[i])).c_str(),
             100.0 * double(sg.retained[i]) / double(total ? total : 1), held.c_str());
  }
  // Unreachable memory: a leak whatever its size.
  std::vector<uint32_t> clusters = clusters_by_size(c);
  json leaks = json::array();
  if (!clusters.empty() && !a.json)
    printf("\n%s %s in %s blocks that no root reaches (%s clique%s; `heapsnap unreachable` for memcheck's view):\n",
           out_style(Style::kHeading, "unreachable:").c_str(), c.szc(double(g.unreachable_bytes())).c_str(),
           human_count(g.retained_blocks(g.leak_node)).c_str(), human_count(clusters.size()).c_str(),
           clusters.size() == 1 ? "" : "s");
  for (size_t i = 0; i < clusters.size() && i < 10; ++i) {
    leaks.push_back(cluster_json(c, clusters[i]));
    if (!a.json)
      printf("  %s, %s, unreachable\n", c.cluster_label(clusters[i]).c_str(), c.szc(double(g.retained.bytes[clusters[i]])).c_str());
  }
  if (suspects.empty() && order.empty() && !a.json) printf("\nno object or site retains more than 10%% of the heap\n");
  if (a.json) {
    json out;
    out["file"] = a.file;
    out["snapshot"] = c.snap.info.index;
    out["total_reachable_bytes"] = g.reachable_bytes();
    out["unreachable_bytes"] = g.unreachable_bytes();
    out["suspects"] = arr;
    out["groups"] = groups;
    out["unreachable"] = leaks;
    std::cout << out.dump(2) << "\n";
  }
  return kExitOk;
}

// --- roots: the roots as objects, by what they retain ---------------------------------------------

int run_roots(const SnapshotArgs &a) {
  Context c;
  if (!load(a, &c, false, false)) return load_failed(c);
  const auto &g = c.graph;
  const uint64_t total = g.total_bytes();
  std::vector<uint32_t> order;
  for (uint32_t i = 0; i < g.num_roots; ++i) order.push_back(g.root_node(i));
  std::sort(order.begin(), order.end(), [&](uint32_t x, uint32_t y) {
    return g.retained.bytes[x] != g.retained.bytes[y] ? g.retained.bytes[x] > g.retained.bytes[y] : x < y;
  });
  // What several roots hold at once (no one of them alone): the blocks just below the super root.
  uint64_t shared = 0, shared_blocks = 0;
  for (uint32_t v = 1; v <= g.num_blocks; ++v)
    if (g.dom.idom[v] == 0) {
      shared += g.retained.bytes[v];
      shared_blocks += g.retained.count[v];
    }
  const size_t all = order.size();
  if (order.size() > a.limit) order.resize(a.limit);
  if (a.json) {
    json arr = json::array();
    for (uint32_t v : order) {
      json o = c.root_json(v);
      o["retained_bytes"] = g.retained.bytes[v];
      o["retained_blocks"] = g.retained_blocks(v);
      o["share"] = total ? double(g.retained.bytes[v]) / double(total) : 0.0;
      uint32_t r = c.rep(v);
      if (r != v) o["holds"] = {{"address", hex(c.snap.addr[ObjectGraph::block_of(r)])}, {"site", c.site_label(ObjectGraph::block_of(r))}};
      arr.push_back(o);
    }
    json out;
    out["file"] = a.file;
    out["snapshot"] = c.snap.info.index;
    out["total_bytes"] = total;
    out["reachable_bytes"] = g.reachable_bytes();
    out["unreachable_bytes"] = g.unreachable_bytes();
    out["shared_bytes"] = shared;
    out["shared_blocks"] = shared_blocks;
    out["root_objects"] = all;
    out["roots"] = arr;
    std::cout << out.dump(2) << "\n";
    return kExitOk;
  }
  printf("%s — %s; %s root objects\n\n",
         out_style(Style::kHeading, "roots of snapshot " + std::to_string(c.snap.info.index) + " (" +
                                        snapshot::trigger_name(c.snap.info.trigger) + ")").c_str(),
         heap_summary(c).c_str(), human_count(all).c_str());
  print_styled(Style::kHeader, "%12s %7s %10s  %s\n", "retained", "%", "blocks", "root");
  for (uint32_t v : order) {
    printf("%s %6.1f%% %10s  %s\n", c.szc(double(g.retained.bytes[v]), 12).c_str(),
           total ? 100.0 * double(g.retained.bytes[v]) / double(total) : 0.0, human_count(g.retained_blocks(v)).c_str(),
           c.root_label(v).c_str());
    uint32_t r = c.rep(v);
    if (r != v)
      printf("%33s -> %s\n", "", c.node_label(r).c_str());
  }
  printf("\n%s held by several roots at once (no one of them alone) in %s blocks", c.szc(double(shared)).c_str(),
         human_count(shared_blocks).c_str());
  if (g.unreachable_bytes())
    printf("; %s unreachable (`heapsnap unreachable`)", c.szc(double(g.unreachable_bytes())).c_str());
  printf("\n");
  return kExitOk;
}

// --- diff: growth by site between two snapshots --------------------------------------------------

struct DiffArgs {
  std::string a, b;
  bool json = false, raw_bytes = false;
  size_t limit = 20;
  std::vector<std::string> debug_dirs;
  SiteOptions sites;
};

bool split_spec(const std::string &spec, std::string *file, int *index) {
  auto colon = spec.rfind(':');
  if (colon == std::string::npos) {
    *file = spec;
    *index = -1;
    return true;
  }
  *file = spec.substr(0, colon);
  char *end = nullptr;
  long v = strtol(spec.c_str() + colon + 1, &end, 10);
  if (*end || v < 0) return false;
  *index = int(v);
  return true;
}

int run_diff(const DiffArgs &d) {
  SnapshotArgs sa, sb;
  if (!split_spec(d.a, &sa.file, &sa.snapshot) || !split_spec(d.b, &sb.file, &sb.snapshot)) {
    print_error("diff: expected FILE[:INDEX] FILE[:INDEX]");
    return kExitUsage;
  }
  symbolize::FrameFilter filter;
  if (!make_frame_filter(d.sites, &filter)) return kExitUsage;
  HeapSnapshot x, y;
  if (!load_chosen_snapshot(sa, &x) || !load_chosen_snapshot(sb, &y)) return kExitInput;
  // Sites are matched by module and offset, not by address: two runs of a program load it at
  // different addresses (ASLR), and each side is symbolized with its own capture's modules and
  // stacks. A block's site is the first frame of the program in its stack or its call site's
  // inline chain (StackSymbolizer::site_address): the offset is the address holding that frame.
  struct Side {
    replay::ReplayResult capture;
    std::unique_ptr<replay::StackSymbolizer> sym;
  };
  auto context = [&](const std::string &file) {
    auto side = std::make_unique<Side>();
    side->capture = load_capture_context(file);
    side->sym = std::make_unique<replay::StackSymbolizer>(side->capture.modules, symbolize::command_options(d.debug_dirs));
    side->sym->set_frame_filter(filter);
    return side;
  };
  std::unique_ptr<Side> side_b = context(sb.file);
  std::unique_ptr<Side> side_a = sa.file == sb.file ? nullptr : context(sa.file);
  Side &before_side = side_a ? *side_a : *side_b;
  replay::StackSymbolizer &before = *before_side.sym;
  replay::StackSymbolizer *sym_b = side_b->sym.get();
  struct Row {
    int64_t count = 0, bytes = 0;
    uint64_t count_a = 0, count_b = 0, bytes_a = 0, bytes_b = 0;
    uint64_t site = 0;          // an address of it: the after side's when it has one
    uint64_t call_site = 0;     // a call site of its blocks, on the same side
    bool site_after = false;
  };
  std::unordered_map<std::string, Row> rows;
  std::unordered_map<uint64_t, Row *> by_address;  // per side: each distinct address keyed once
  auto row_of = [&](replay::StackSymbolizer &sym, uint64_t site, uint64_t call_site, bool after) -> Row & {
    auto [it, fresh] = by_address.try_emplace(site, nullptr);
    if (fresh) {
      Row &r = rows[sym.stable_site(site)];
      if (!r.site_after) {
        r.site = site;
        r.call_site = call_site;
        r.site_after = after;
      }
      it->second = &r;
    }
    return *it->second;
  };
  // Stacks only where a block has one in either run alike: within one capture, or between two
  // that recorded every allocation's stack. Between two sampled runs a block's stack depends on
  // the draw, and the same code would key two ways; there the call site's inline chain alone
  // names the site.
  bool use_stacks = sa.file == sb.file ||
                    (before_side.capture.sample_bytes() == 1 && side_b->capture.sample_bytes() == 1);
  if (!use_stacks) {
    before_side.sym->set_call_site_inference(false);
    side_b->sym->set_call_site_inference(false);
  }
  auto site_of = [use_stacks](Side &side, const HeapSnapshot &h, uint32_t i) {
    uint32_t st = use_stacks && i < h.stack.size() ? h.stack[i] : 0;
    return side.sym->site_address(side.capture.stacks, side.capture.stacks.valid(st) ? st : 0, h.call_site[i]);
  };
  for (uint32_t i = 0; i < x.blocks(); ++i) {
    Row &r = row_of(before, site_of(before_side, x, i), x.call_site[i], false);
    ++r.count_a;
    r.bytes_a += x.size[i];
  }
  by_address.clear();
  for (uint32_t i = 0; i < y.blocks(); ++i) {
    Row &r = row_of(*sym_b, site_of(*side_b, y, i), y.call_site[i], true);
    ++r.count_b;
    r.bytes_b += y.size[i];
  }
  std::vector<std::pair<std::string, Row>> v;
  for (auto &[key, r] : rows) {
    r.count = int64_t(r.count_b) - int64_t(r.count_a);
    r.bytes = int64_t(r.bytes_b) - int64_t(r.bytes_a);
    if (r.count || r.bytes) v.push_back({key, r});
  }
  std::sort(v.begin(), v.end(), [](auto &p, auto &q) {
    return p.second.bytes != q.second.bytes ? p.second.bytes > q.second.bytes : p.first < q.first;
  });
  if (v.size() > d.limit) v.resize(d.limit);
  auto label = [&](const Row &r) {
    replay::StackSymbolizer &sym = r.site_after ? *sym_b : before;
    return sym.site_label(sym.site_frame(r.site));
  };
  auto frame = [&](const Row &r) {
    replay::StackSymbolizer &sym = r.site_after ? *sym_b : before;
    const replay::DisplayFrame &f = sym.site_frame(r.site);
    return std::make_pair(sym.site_function(f), &f);
  };
  auto innermost = [&](const Row &r) { return (r.site_after ? *sym_b : before).frames_of(r.call_site)[0].label(); };
  int64_t dbytes = 0, dcount = 0;
  for (auto &[key, r] : rows) {
    dbytes += r.bytes;
    dcount += r.count;
  }
  if (d.json) {
    json arr = json::array();
    for (auto &[key, r] : v)
      arr.push_back({{"site", label(r)}, {"function", frame(r).first}, {"file", frame(r).second->file},
                     {"line", frame(r).second->line}, {"site_key", key}, {"call_site", hex(r.call_site)},
                     {"site_address", hex(r.site)}, {"site_innermost", innermost(r)}, {"count_change", r.count},
                     {"bytes_change", r.bytes},
                     {"count_before", r.count_a}, {"count_after", r.count_b}, {"bytes_before", r.bytes_a},
                     {"bytes_after", r.bytes_b}});
    json out{{"before", d.a}, {"after", d.b}, {"bytes_change", dbytes}, {"count_change", dcount}, {"sites", arr}};
    std::cout << out.dump(2) << "\n";
    return kExitOk;
  }
  auto sz = [&](int64_t b) { return d.raw_bytes ? std::to_string(b) : (b >= 0 ? "+" : "") + human_bytes(double(b)); };
  // Growth is what a diff is read for: it stands out; what shrank is green.
  auto change = [&](int64_t b, int width) {
    return out_style(b > 0 ? Style::kGrowth : b < 0 ? Style::kShrink : Style::kSize, sz(b), width);
  };
  printf("%s: %s -> %s: %s in %+lld blocks\n\n", out_style(Style::kHeading, "heap growth by allocation site").c_str(),
         d.a.c_str(), d.b.c_str(), change(dbytes, 0).c_str(), (long long)dcount);
  print_styled(Style::kHeader, "%14s %10s  %s\n", "bytes", "blocks", "site");
  for (auto &[key, r] : v) printf("%s %+10lld  %s\n", change(r.bytes, 14).c_str(), (long long)r.count, label(r).c_str());
  return kExitOk;
}

}  // namespace

void add_retainer_commands(CLI::App &app, int *rc) {
  {
    auto a = std::make_shared<TopArgs>();
    CLI::App *cmd = app.add_subcommand("top-retainers", "Objects (or allocation sites) that keep the most memory alive: retained vs shallow bytes.");
    add_snapshot_args(cmd, *a);
    cmd->add_option("--by", a->by, "object (default) or site")->check(CLI::IsMember({"object", "site"}));
    cmd->add_flag("--stats", a->stats, "print graph sizes, timings and memory per node on stderr");
    cmd->add_option("--frames", a->frames, "stack frames per object (default 6)");
    add_site_options(cmd, a->sites);
    cmd->footer("Examples:\n  heapsnap top-retainers app.hsnap -n 10\n  heapsnap top-retainers --by site --json app.hsnap");
    cmd->callback([a, rc] { *rc = run_top(*a); });
  }
  {
    auto a = std::make_shared<DomArgs>();
    CLI::App *cmd = app.add_subcommand("dominators", "The dominator tree grouped by allocation site, level by level.");
    add_snapshot_args(cmd, *a);
    cmd->add_option("--depth", a->depth, "levels to expand (default 4)");
    cmd->add_option("--min-bytes", a->min_bytes, "hide groups retaining less (e.g. 1M)");
    add_site_options(cmd, a->sites);
    cmd->footer("Examples:\n  heapsnap dominators app.hsnap --depth 3 --min-bytes 1M\n  heapsnap dominators --snapshot 2 --json app.hsnap");
    cmd->callback([a, rc] { *rc = run_dominators(*a); });
  }
  {
    auto a = std::make_shared<PathArgs>();
    CLI::App *cmd = app.add_subcommand("path", "Shortest chain of pointers from a root to the block at ADDRESS.");
    add_snapshot_args(cmd, *a, false);
    cmd->add_option("address", a->address, "an address inside the block (e.g. 0x55d0c2a8e2a0)")->required();
    add_site_options(cmd, a->sites);
    cmd->footer("Addresses come from top-retainers, suspects or export --format graph-json.\n"
                "Example: heapsnap path app.hsnap 0x55d0c2a8e2a0");
    cmd->callback([a, rc] { *rc = run_path(*a); });
  }
  {
    auto a = std::make_shared<SnapshotArgs>();
    CLI::App *cmd = app.add_subcommand("suspects", "Leak suspects, MAT-style: objects and sites retaining over 10% of the heap, where they accumulate, and unreachable memory.");
    add_snapshot_args(cmd, *a, false);
    add_site_options(cmd, a->sites);
    cmd->footer("Examples:\n  heapsnap suspects app.hsnap\n  heapsnap suspects --snapshot 0 --json app.hsnap");
    cmd->callback([a, rc] { *rc = run_suspects(*a); });
  }
  {
    auto a = std::make_shared<SnapshotArgs>();
    CLI::App *cmd = app.add_subcommand("roots", "The roots as objects (global and static variables, thread stacks, registers) by the memory each keeps alive on its own.");
    add_snapshot_args(cmd, *a);
    add_site_options(cmd, a->sites);
    cmd->footer("A module's data words are split by its symbols (.symtab, else .dynsym): each variable is a root,\n"
                "with its type and source line when the module has DWARF; words in no symbol (a stripped module)\n"
                "stay one root per mapping, named by module and offset.\n"
                "Examples:\n  heapsnap roots app.hsnap\n  heapsnap roots --json -n 5 app.hsnap");
    cmd->callback([a, rc] { *rc = run_roots(*a); });
  }
  {
    auto d = std::make_shared<DiffArgs>();
    CLI::App *cmd = app.add_subcommand("diff", "Heap growth by allocation site between two snapshots.");
    cmd->add_option("before", d->a, "FILE[:INDEX] (default: the last complete snapshot)")->required();
    cmd->add_option("after", d->b, "FILE[:INDEX]")->required();
    cmd->add_flag("--json", d->json, "machine-readable output");
    cmd->add_flag("--bytes", d->raw_bytes, "plain byte counts");
    cmd->add_option("-n,--limit", d->limit, "rows (default 20)");
    cmd->add_option("--debug-dir", d->debug_dirs, "directory with separate debug files");
    add_site_options(cmd, d->sites);
    cmd->footer("Sites are matched by module and offset, so two runs' captures diff too.\n"
                "Examples:\n  heapsnap diff app.hsnap:0 app.hsnap:3\n  heapsnap diff before.hsnap after.hsnap");
    cmd->callback([d, rc] { *rc = run_diff(*d); });
  }
}

}  // namespace heapsnap::cli
