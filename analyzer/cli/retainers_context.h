// Shared by the snapshot queries over the dominator tree (cmd_retainers.cc: top-retainers,
// dominators, path; cmd_suspects.cc: suspects, roots; cmd_snapshot_diff.cc: diff): the loaded
// snapshot, its graph with root objects and leak cliques, and how a node, a site or a root reads.
//
// The graph has the roots as objects (snapshot/root_objects.h): each global or static variable,
// each thread (stack, registers, TLS) is a node between the super root and the blocks, so that
// "g_sessions retains 4 MiB" is one answer, and what no root reaches hangs, clique by clique,
// under a leak node (snapshot/object_graph.h): a leaked cycle is a subtree with its size too.
#pragma once
#include <nlohmann/json.hpp>

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "cli/format.h"
#include "cli/replay_load.h"
#include "cli/snapshot_args.h"
#include "cli/term_style.h"
#include "replay/block_types.h"
#include "replay/replay.h"
#include "replay/root_frames.h"
#include "replay/stack_symbolizer.h"
#include "snapshot/object_graph.h"
#include "snapshot/root_objects.h"
#include "snapshot/top_rows.h"

namespace heapsnap::cli::retainers {

using json = nlohmann::ordered_json;
using snapshot::HeapSnapshot;
using snapshot::ObjectGraph;

inline std::string hex(uint64_t v) {
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
    fprintf(stderr, "stale edges: %s dropped from the spare capacity of %s vector buffers (%s vector headers seen)\n",
            human_count(st.spare_edges).c_str(), human_count(st.vector_buffers).c_str(),
            human_count(st.vector_headers).c_str());
    // The steps inside the dominators, and the CPU time, the steadier figure on a shared machine.
    const auto &d = st.dominator_steps;
    const double cpu = double(ru.ru_utime.tv_sec) + double(ru.ru_utime.tv_usec) * 1e-6 + double(ru.ru_stime.tv_sec) +
                       double(ru.ru_stime.tv_usec) * 1e-6;
    fprintf(stderr,
            "dominator steps, cpu s: dfs %.3f (leak cliques %.3f of it), predecessors %.3f, semidominators %.3f, "
            "idoms %.3f; process cpu %.3f s\n",
            d.dfs.cpu_s, d.late.cpu_s, d.preds.cpu_s, d.semi.cpu_s, d.idom.cpu_s, cpu);
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
  // The root objects' direct children in the dominator tree, and the node that stands for each
  // (snapshot/top_rows.h). See index_roots().
  snapshot::RootChildren root_children;
  std::unique_ptr<replay::BlockTyper> typer_;  // typer(): made on first use
  std::unique_ptr<GraphStatsReport> stats;  // --stats; last, so that it prints first
  bool usage_error = false;                  // load(): a bad --hide-frames

  // Each block's type and how it was known (replay/block_types.h).
  replay::BlockTyper &typer() {
    if (!typer_) typer_ = std::make_unique<replay::BlockTyper>(snap, capture.stacks, *sym, &roots);
    return *typer_;
  }
  // Every block's type at once (a histogram, a grouping); typer() for a few.
  const replay::BlockTypes &types() { return typer().all(); }
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
    bool unknown = false;
    if (!stack_of(block)) sym->call_site_address(capture.stacks, snap.call_site[block], &unknown);
    j["site_from"] = stack_of(block) ? "stack" : "call_site";
    // Not sampled, and its call site is the library's alone: which frame of the program called it
    // is not known. The sampled stacks through that call site say where it was seen called from
    // (a hint: other callers may be unsampled).
    j["site_known"] = !unknown;
    if (unknown) {
      json seen = json::array();
      for (const auto &[at, stacks] : sym->sampled_callers(capture.stacks, snap.call_site[block])) {
        seen.push_back({{"site", sym->site_label(sym->site_frame(at))}, {"sampled_stacks", stacks}});
        if (seen.size() == 5) break;
      }
      j["sampled_callers"] = seen;
    }
    if (typer().group(block)) {
      j["type"] = typer().type_of(block);
      j["type_from"] = typer().how(block);
    }
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
  void index_roots() { root_children.build(graph); }
  // The symbolizer's notes (modules without symbols, build-id mismatches): printed after a text
  // answer, and "notes" in JSON.
  void print_symbol_notes() const {
    for (const auto &w : sym->warnings()) printf("%s %s\n", out_style(Style::kWarning, "note:").c_str(), w.c_str());
  }
  // The node a root object's row shows (snapshot::RootChildren::rep).
  uint32_t rep(uint32_t v) const { return root_children.rep_of(graph, v); }
  // The root object's children (nodes).
  std::vector<uint32_t> kids_of_root(uint32_t obj) const { return root_children.kids_of(obj); }
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
    const std::string &type = typer().type_of(b);
    return what + ", leader " + (type.empty() ? "" : type + " ") + hex(snap.addr[b]) + " at " + site_label(b);
  }
  // The "held by" line of node v.
  std::string held_by(uint32_t v) {
    const uint32_t h = holder(v);
    if (graph.is_root(h)) return h == v ? "itself (a root)" : root_label(h, true);
    if (is_leader(h)) return h == v ? "nothing: unreachable (a leak)" : "nothing: unreachable, in the " + cluster_label(h);
    return "several roots at once, no one of them alone (`heapsnap path` shows one way)";
  }
  // A row's object: a root's label, a leak clique's, or a block's address and site.
  std::string node_label(uint32_t v) {
    if (graph.is_root(v)) return root_label(v);
    if (is_leader(v)) return cluster_label(v);
    const uint32_t b = ObjectGraph::block_of(v);
    const std::string &type = typer().type_of(b);
    return (type.empty() ? "" : type + " ") + hex(snap.addr[b]) + " at " + site_label(b);
  }
  // A thread's stack frames, innermost first, as the snapshot stepped them: each frame's function
  // (the physical one: the last of its pc's inline chain); empty when its registers were not known.
  std::vector<std::string> stack_frames(const snapshot::RootObject &o) const {
    std::vector<std::string> out;
    if (o.what != snapshot::RootObject::kThread) return out;
    const auto &rr = snap.roots[o.range];
    for (size_t i = 0; i < rr.frame_pc.size(); ++i) {
      const replay::DisplayFrame *f = stack_frame(rr, i);
      out.push_back(f ? f->readable_label() : hex(rr.frame_pc[i]));
    }
    return out;
  }
  // Frame i of a stack root's range: its physical function (replay::stack_root_frame), or nullptr.
  const replay::DisplayFrame *stack_frame(const snapshot::RootRange &rr, size_t i) const {
    return replay::stack_root_frame(*sym, rr, i);
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
    if (o.what == snapshot::RootObject::kThread) {
      j["tid"] = o.tid;
      j["thread_name"] = o.thread_name;
      j["frames"] = stack_frames(o);
    }
    j["address"] = hex(o.start);
    j["size"] = o.size;
    const auto &rr = snap.roots[o.range];
    j["range"] = {{"kind", snapshot::root_kind_name(rr.kind)}, {"name", rr.name}, {"detail", rr.detail}};
    return j;
  }
};

// Loads the chosen snapshot, its capture's stacks and modules, and builds the graph. False: an
// error was printed (load_failed gives the exit code).
bool load(const SnapshotArgs &a, Context *c, bool with_children, bool print_stats, bool need_edges = false);
int load_failed(const Context &c);
// "2.4 MiB reachable + 144 B unreachable", for headings.
std::string heap_summary(const Context &c);
// The fields every snapshot query's --json starts with: file, snapshot, total_reachable_bytes,
// unreachable_bytes.
json json_heading(const Context &c);
// The leak cliques' leaders, biggest first.
std::vector<uint32_t> clusters_by_size(const Context &c);
json cluster_json(Context &c, uint32_t leader);

// Per site, over the whole dominator tree: blocks, their own bytes, and what the topmost ones
// retain (each block once), with what holds the topmost ones (holder node -> bytes).
struct SiteGroups {
  std::vector<uint64_t> site;  // site ids
  std::vector<uint64_t> retained, count, shallow;
  std::vector<uint32_t> example;
  std::vector<std::unordered_map<uint32_t, uint64_t>> holders;
};

SiteGroups site_groups(Context &c);
// What holds a group: a root, a leak clique, or several roots at once.
std::string holder_text(Context &c, uint32_t h);

struct TopArgs : SnapshotArgs {
  std::string by = "object";
  bool stats = false;
  size_t frames = 6;
};
struct DomArgs : SnapshotArgs {
  std::string by = "site";
  int depth = 4;
  std::string min_bytes = "0";
};
struct PathArgs : SnapshotArgs {
  std::string address;
};
struct DiffArgs {
  std::string a, b;
  std::string by = "site";  // or "type"
  bool json = false, raw_bytes = false;
  size_t limit = 20;
  std::vector<std::string> debug_dirs;
  SiteOptions sites;
};

int run_top(const TopArgs &a);
int run_dominators(const DomArgs &a);
int run_path(const PathArgs &a);
int run_suspects(const SnapshotArgs &a);
int run_roots(const SnapshotArgs &a);
int run_diff(const DiffArgs &d);

}  // namespace heapsnap::cli::retainers

namespace heapsnap::cli {
// The types histogram (cmd_types.cc): `types`, and `top-retainers --by type`.
int print_types(retainers::Context &c, const SnapshotArgs &a);
}  // namespace heapsnap::cli
