// suspects (MAT's leak suspects) and roots (the roots as objects, by what each keeps alive alone).
#include <iostream>
#include <unordered_set>

#include "cli/commands.h"
#include "cli/retainers_context.h"

namespace heapsnap::cli::retainers {

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
      const size_t kids = g.children.successors(acc).size();
      printf("  accumulation point: %s, retaining %s in %s direct %s%s\n", c.node_label(acc).c_str(),
             c.szc(double(g.retained.bytes[acc])).c_str(), human_count(kids).c_str(), kids == 1 ? "child" : "children",
             rows.empty() ? "" : "; below it:");
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
  // One answer per structure: a group that single-object suspects hold (90% of its bytes or more)
  // is their content, listed under their accumulation points, not a suspect of its own.
  const std::unordered_set<uint32_t> suspect_set(suspects.begin(), suspects.end());
  for (uint32_t i : order) {
    std::vector<std::pair<uint32_t, uint64_t>> hs(sg.holders[i].begin(), sg.holders[i].end());
    std::sort(hs.begin(), hs.end(), [](auto &x, auto &y) { return x.second != y.second ? x.second > y.second : x.first < y.first; });
    uint64_t in_suspects = 0;  // what single-object suspects hold of the group (a root stands for its object)
    for (const auto &[holder, bytes] : hs)
      if (suspect_set.count(holder) || suspect_set.count(c.rep(holder))) in_suspects += bytes;
    if (in_suspects * 10 >= sg.retained[i] * 9) continue;
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
    printf("\n%s %s in %s %s that no root reaches (%s clique%s; `heapsnap unreachable` for memcheck's view):\n",
           out_style(Style::kHeading, "unreachable:").c_str(), c.szc(double(g.unreachable_bytes())).c_str(),
           human_count(g.retained_blocks(g.leak_node)).c_str(), blocks_word(double(g.retained_blocks(g.leak_node))), human_count(clusters.size()).c_str(),
           clusters.size() == 1 ? "" : "s");
  for (size_t i = 0; i < clusters.size() && i < 10; ++i) {
    leaks.push_back(cluster_json(c, clusters[i]));
    if (!a.json)
      printf("  %s, %s, unreachable\n", c.cluster_label(clusters[i]).c_str(), c.szc(double(g.retained.bytes[clusters[i]])).c_str());
  }
  if (suspects.empty() && order.empty() && !a.json) printf("\nno object or site retains more than 10%% of the heap\n");
  if (a.json) {
    json out = json_heading(c);
    out["suspects"] = arr;
    out["groups"] = groups;
    out["unreachable"] = leaks;
    out["notes"] = c.sym->warnings();
    std::cout << out.dump(2) << "\n";
  } else {
    c.print_symbol_notes();
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
    // A thread: where it was (its innermost frames, outward).
    std::vector<std::string> frames = c.stack_frames(c.root_of(v));
    if (!frames.empty()) {
      std::string line;
      for (size_t i = 0; i < frames.size() && i < 4; ++i) line += (i ? " <- " : "") + frames[i];
      if (frames.size() > 4) line += " <- ...";
      printf("%33s in %s\n", "", line.c_str());
    }
  }
  printf("\n%s held by several roots at once (no one of them alone) in %s %s", c.szc(double(shared)).c_str(),
         human_count(shared_blocks).c_str(), blocks_word(double(shared_blocks)));
  if (g.unreachable_bytes())
    printf("; %s unreachable (`heapsnap unreachable`)", c.szc(double(g.unreachable_bytes())).c_str());
  printf("\n");
  return kExitOk;
}
}  // namespace heapsnap::cli::retainers
