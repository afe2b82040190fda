// Snapshot queries over the dominator tree: top-retainers, dominators, path, suspects, diff.
#include <nlohmann/json.hpp>

#include <sys/resource.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <deque>
#include <iostream>
#include <memory>
#include <unordered_map>

#include "cli/commands.h"
#include "cli/format.h"
#include "cli/replay_load.h"
#include "cli/snapshot_args.h"
#include "cli/term_style.h"
#include "replay/replay.h"
#include "replay/stack_symbolizer.h"
#include "snapshot/object_graph.h"

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

// Everything a query needs: the snapshot, its graph, and labels for blocks.
struct Context {
  SnapshotArgs args;
  HeapSnapshot snap;
  ObjectGraph graph;
  replay::ReplayResult capture;  // modules and stacks (no events replayed)
  std::unique_ptr<replay::StackSymbolizer> sym;
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
    j["site_from"] = stack_of(block) ? "stack" : "call_site";
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
  std::string root_label(uint32_t node) {
    uint32_t top = snapshot::top_dominator(graph, node);
    uint32_t r = graph.root_range[top];
    if (r == UINT32_MAX) return "(held through several roots)";
    const auto &rr = snap.roots[r];
    std::string s = snapshot::root_kind_name(rr.kind);
    if (!rr.name.empty()) s += " " + rr.name;
    if (rr.kind == snapshot::kStack) s += " (tid " + std::to_string(rr.detail) + ")";
    return s;
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
  snapshot::GraphOptions go;
  go.follow_interior = a.interior == "on";
  go.with_children = with_children;
  go.release_edges = !need_edges;
  go.keep_csr = need_edges;  // only path walks the edges after the dominators
  c->graph = snapshot::build_object_graph(c->snap, go);
  if (print_stats) c->stats = std::make_unique<GraphStatsReport>(c->graph.stats, start, read_s);
  c->sym = std::make_unique<replay::StackSymbolizer>(c->capture.modules, symbolize::command_options(a.debug_dirs));
  c->sym->set_frame_filter(std::move(filter));
  return true;
}

// load()'s failure as an exit status.
int load_failed(const Context &c) { return c.usage_error ? kExitUsage : kExitInput; }

// --- top-retainers ------------------------------------------------------------------------------

struct TopArgs : SnapshotArgs {
  std::string by = "object";
  bool stats = false;
  size_t frames = 6;
};

int run_top(const TopArgs &a) {
  Context c;
  if (!load(a, &c, a.by == "site", a.stats)) return load_failed(c);
  const auto &g = c.graph;
  uint64_t total = g.total_bytes();
  json out;
  out["file"] = a.file;
  out["snapshot"] = c.snap.info.index;
  out["total_reachable_bytes"] = total;
  out["blocks"] = c.snap.blocks();
  if (a.by == "object") {
    std::vector<uint32_t> nodes;
    nodes.reserve(g.dom.preorder.size());  // the reachable nodes: no regrowth (10^8 of them)
    for (uint32_t v = 1; v < g.csr.num_nodes; ++v)
      if (g.retained.count[v]) nodes.push_back(v);
    const size_t reachable = nodes.size();
    out["reachable_blocks"] = reachable;
    size_t k = std::min(a.limit, nodes.size());
    std::partial_sort(nodes.begin(), nodes.begin() + long(k), nodes.end(),
                      [&](uint32_t x, uint32_t y) { return g.retained.bytes[x] > g.retained.bytes[y]; });
    nodes.resize(k);
    if (!a.json) {
      printf("%s — %s reachable in %s blocks\n\n",
             out_style(Style::kHeading, "top retainers of snapshot " + std::to_string(c.snap.info.index) + " (" +
                                            snapshot::trigger_name(c.snap.info.trigger) + ")").c_str(),
             c.szc(double(total)).c_str(), human_count(reachable).c_str());
      print_styled(Style::kHeader, "%12s %7s %12s %10s  %s\n", "retained", "%", "shallow", "blocks", "object");
    }
    json arr = json::array();
    for (uint32_t v : nodes) {
      uint32_t b = ObjectGraph::block_of(v);
      double pct = total ? 100.0 * double(g.retained.bytes[v]) / double(total) : 0;
      if (a.json) {
        json o = c.site_json(b);
        o["address"] = hex(c.snap.addr[b]);
        o["shallow_bytes"] = c.snap.size[b];
        o["retained_bytes"] = g.retained.bytes[v];
        o["retained_blocks"] = g.retained.count[v];
        o["stack"] = c.stack_labels(b, a.frames);
        o["held_by"] = c.root_label(v);
        arr.push_back(o);
        continue;
      }
      printf("%s %6.1f%% %12s %10s  %s at %s\n", c.szc(double(g.retained.bytes[v]), 12).c_str(), pct,
             c.sz(double(c.snap.size[b])).c_str(), human_count(g.retained.count[v]).c_str(), hex(c.snap.addr[b]).c_str(),
             c.site_label(b).c_str());
      printf("%48s held by %s\n", "", c.root_label(v).c_str());
      for (const auto &line : c.stack_lines(b, a.frames)) printf("%48s   from %s\n", "", line.c_str());
    }
    if (a.json) {
      out["by"] = "object";
      out["objects"] = arr;
      std::cout << out.dump(2) << "\n";
    }
    return kExitOk;
  }
  // --by site: a site's retained bytes count each block once: only the topmost block of the site
  // on each dominator chain contributes (its retained size covers the nested ones).
  std::unordered_map<uint64_t, uint32_t> site_index;
  std::vector<uint64_t> site_addr;
  std::vector<uint32_t> site_of(g.csr.num_nodes, 0);
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
    if (v != 0) {
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
    printf("%s — %s reachable\n\n",
           out_style(Style::kHeading, "top retaining sites of snapshot " + std::to_string(c.snap.info.index)).c_str(),
           c.szc(double(total)).c_str());
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
  // lesson: clearing one big map per level dominated their run time).
  struct Group {
    uint64_t site;
    uint32_t example;
    uint64_t count = 0, shallow = 0, retained = 0;
    std::vector<uint32_t> nodes;
  };
  std::function<json(const std::vector<uint32_t> &, int)> expand = [&](const std::vector<uint32_t> &parents, int level) {
    std::unordered_map<uint64_t, Group> groups;
    for (uint32_t p : parents)
      for (uint32_t ch : g.children.successors(p)) {
        uint32_t b = ObjectGraph::block_of(ch);
        uint64_t site = c.site_id(b);
        Group &gr = groups[site];
        if (!gr.count) {
          gr.site = site;
          gr.example = b;
        }
        ++gr.count;
        gr.shallow += c.snap.size[b];
        gr.retained += g.retained.bytes[ch];
        gr.nodes.push_back(ch);
      }
    std::vector<Group *> sorted;
    for (auto &[k, gr] : groups)
      if (gr.retained >= min_bytes) sorted.push_back(&gr);
    std::sort(sorted.begin(), sorted.end(), [](Group *x, Group *y) { return x->retained > y->retained; });
    if (sorted.size() > a.limit) sorted.resize(a.limit);
    json arr = json::array();
    for (Group *gr : sorted) {
      json o = c.site_json(gr->example);
      o["objects"] = gr->count;
      o["shallow_bytes"] = gr->shallow;
      o["retained_bytes"] = gr->retained;
      if (!a.json)
        printf("%*s%s  %s retained, %s objects, %s shallow\n", level * 2, "", c.site_label(gr->example).c_str(),
               c.szc(double(gr->retained)).c_str(), human_count(gr->count).c_str(), c.sz(double(gr->shallow)).c_str());
      if (level + 1 < a.depth) {
        json kids = expand(gr->nodes, level + 1);
        if (!kids.empty()) o["children"] = kids;
      }
      arr.push_back(o);
    }
    return arr;
  };
  if (!a.json)
    printf("%s (%s reachable)\n\n",
           out_style(Style::kHeading, "dominator tree of snapshot " + std::to_string(c.snap.info.index) +
                                          " grouped by allocation site").c_str(),
           c.szc(double(g.total_bytes())).c_str());
  json tree = expand({0}, 0);
  if (a.json) {
    json out;
    out["file"] = a.file;
    out["snapshot"] = c.snap.info.index;
    out["total_reachable_bytes"] = g.total_bytes();
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
  // Breadth first from the super root: the first time the target is reached is a shortest path.
  std::vector<uint32_t> parent(g.csr.num_nodes, UINT32_MAX);
  std::vector<uint32_t> via(g.csr.num_nodes, 0);  // index into csr.targets of the edge used
  std::deque<uint32_t> queue{0};
  parent[0] = 0;
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
    if (a.json) {
      out["reachable"] = false;
      std::cout << out.dump(2) << "\n";
    } else {
      printf("%s (block at %s, %s) is not reachable from any root%s\n", a.address.c_str(), hex(c.snap.addr[target]).c_str(),
             c.site_label(target).c_str(), a.interior == "on" ? "" : " through start pointers");
    }
    return kExitOk;
  }
  std::vector<uint32_t> chain;
  for (uint32_t v = goal; v != 0; v = parent[v]) chain.push_back(v);
  std::reverse(chain.begin(), chain.end());
  json hops = json::array();
  uint32_t first = ObjectGraph::block_of(chain[0]);
  const auto &rr = c.snap.roots[g.root_range[chain[0]]];
  uint64_t root_off = 0;
  for (uint32_t k = rr.first; k < rr.first + rr.count; ++k)
    if (c.snap.root_target[k] == first) {
      root_off = c.snap.root_offset[k];
      break;
    }
  // A register root is the tracer's copy of a thread's registers: its offset names the register.
  bool in_register = rr.kind == snapshot::kRegisters;
  std::string where = "+" + std::to_string(root_off);
  if (in_register) where += " " + std::string(snapshot::register_name(root_off));
  if (!a.json)
    printf("%s (%u hops)\n  root: %s %s at %s (%s)\n",
           out_style(Style::kHeading, "path to " + hex(c.snap.addr[target])).c_str(), unsigned(chain.size()),
           snapshot::root_kind_name(rr.kind), rr.name.c_str(), hex(rr.start + root_off).c_str(), where.c_str());
  out["root"] = {{"kind", snapshot::root_kind_name(rr.kind)}, {"name", rr.name}, {"detail", rr.detail},
                 {"address", hex(rr.start + root_off)}};
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

int run_suspects(const SnapshotArgs &a) {
  Context c;
  if (!load(a, &c, true, false)) return load_failed(c);
  const auto &g = c.graph;
  uint64_t total = g.total_bytes();
  json arr = json::array();
  if (!a.json)
    printf("%s (%s reachable)\n", out_style(Style::kHeading, "leak suspects in snapshot " + std::to_string(c.snap.info.index)).c_str(),
           c.szc(double(total)).c_str());
  // A suspect is an object retaining over 10% of the heap; from it, follow the biggest dominated
  // child while that child keeps at least 70% of its parent's retained bytes: where that stops is
  // the accumulation point (MAT's rule).
  std::vector<uint32_t> suspects;
  for (uint32_t v = 1; v < g.csr.num_nodes; ++v)
    if (g.retained.count[v] && g.retained.bytes[v] * 10 > total) {
      uint32_t p = g.dom.idom[v];
      // Only the topmost such object on a chain: its descendants are part of its story.
      bool nested = false;
      for (uint32_t u = p; u != graph::kNoIdom && u != 0; u = g.dom.idom[u])
        if (g.retained.bytes[u] * 10 > total) {
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
    uint32_t b = ObjectGraph::block_of(v), ab = ObjectGraph::block_of(acc);
    // How many children the accumulation point holds, grouped by their site.
    std::unordered_map<uint64_t, std::pair<uint64_t, uint64_t>> kids;
    for (uint32_t ch : g.children.successors(acc)) {
      auto &k = kids[c.site_id(ObjectGraph::block_of(ch))];
      ++k.first;
      k.second += g.retained.bytes[ch];
    }
    json s = c.site_json(b);
    s["address"] = hex(c.snap.addr[b]);
    s["retained_bytes"] = g.retained.bytes[v];
    s["share"] = total ? double(g.retained.bytes[v]) / double(total) : 0.0;
    s["held_by"] = c.root_label(v);
    json ap = c.site_json(ab);
    ap["address"] = hex(c.snap.addr[ab]);
    ap["retained_bytes"] = g.retained.bytes[acc];
    ap["children"] = g.children.successors(acc).size();
    s["accumulation_point"] = ap;
    arr.push_back(s);
    if (!a.json) {
      printf("\n%s %s at %s retains %s (%.0f%% of the heap), held by %s\n",
             out_style(Style::kHeading, "suspect " + std::to_string(++n) + ":").c_str(), c.site_label(b).c_str(),
             hex(c.snap.addr[b]).c_str(), c.szc(double(g.retained.bytes[v])).c_str(),
             100.0 * double(g.retained.bytes[v]) / double(total ? total : 1), c.root_label(v).c_str());
      printf("  accumulation point: %s at %s, retaining %s in %zu direct children:\n", c.site_label(ab).c_str(),
             hex(c.snap.addr[ab]).c_str(), c.szc(double(g.retained.bytes[acc])).c_str(), g.children.successors(acc).size());
      std::vector<std::pair<uint64_t, std::pair<uint64_t, uint64_t>>> rows(kids.begin(), kids.end());
      std::sort(rows.begin(), rows.end(), [](auto &x, auto &y) { return x.second.second > y.second.second; });
      for (size_t i = 0; i < rows.size() && i < 5; ++i) {
        printf("    %s objects from %s retaining %s\n", human_count(rows[i].second.first).c_str(),
               c.site_id_label(uint32_t(rows[i].first)).c_str(), c.sz(double(rows[i].second.second)).c_str());
      }
    }
  }
  if (suspects.empty() && !a.json) printf("\nno object retains more than 10%% of the heap\n");
  if (a.json) {
    json out;
    out["file"] = a.file;
    out["snapshot"] = c.snap.info.index;
    out["total_reachable_bytes"] = total;
    out["suspects"] = arr;
    std::cout << out.dump(2) << "\n";
  }
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
    CLI::App *cmd = app.add_subcommand("suspects", "Leak suspects, MAT-style: objects retaining over 10% of the heap and where they accumulate.");
    add_snapshot_args(cmd, *a, false);
    add_site_options(cmd, a->sites);
    cmd->footer("Examples:\n  heapsnap suspects app.hsnap\n  heapsnap suspects --snapshot 0 --json app.hsnap");
    cmd->callback([a, rc] { *rc = run_suspects(*a); });
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
