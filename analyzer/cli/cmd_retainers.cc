// Snapshot queries over the dominator tree: top-retainers, dominators and path (and the
// registration of suspects, roots and diff: cmd_suspects.cc, cmd_snapshot_diff.cc). What they
// share is in retainers_context.h.
#include <deque>
#include <functional>
#include <iostream>
#include <map>

#include "cli/commands.h"
#include "cli/retainers_context.h"
#include "snapshot/path_steps.h"

namespace heapsnap::cli {
namespace retainers {


int run_top(const TopArgs &a) {
  Context c;
  if (!load(a, &c, a.by != "object", a.stats)) return load_failed(c);
  if (a.by == "type") return print_types(c, a);
  const auto &g = c.graph;
  uint64_t total = g.total_bytes();
  json out = json_heading(c);
  out["total_bytes"] = total;
  out["blocks"] = c.snap.blocks();
  if (a.by == "object") {
    uint64_t in_tree = 0;
    for (uint32_t v = 1; v <= g.num_blocks; ++v) in_tree += g.retained.count[v] != 0;
    std::vector<snapshot::TopRow> rows =
        snapshot::top_rows(c.graph, c.roots, c.root_children, [&](uint32_t b) { return c.site_id(b); }, a.limit);
    out["reachable_blocks"] = g.leak_node ? in_tree - g.retained_blocks(g.leak_node) : in_tree;
    if (!a.json) {
      printf("%s — %s in %s %s\n\n",
             out_style(Style::kHeading, "top retainers of snapshot " + std::to_string(c.snap.info.index) + " (" +
                                            snapshot::trigger_name(c.snap.info.trigger) + ")").c_str(),
             heap_summary(c).c_str(), human_count(in_tree).c_str(), blocks_word(double(in_tree)));
      print_styled(Style::kHeader, "%12s %7s %12s %10s  %s\n", "retained", "%", "shallow", "blocks", "object");
    }
    json arr = json::array();
    std::unordered_set<uint32_t> shown;
    for (size_t ri = 0; ri < rows.size(); ++ri) {
      const snapshot::TopRow &row = rows[ri];
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
        printf("\n%s: %s in %s %s, %s clique%s (memcheck's definitely and indirectly lost: `heapsnap unreachable`)\n",
               out_style(Style::kHeading, "unreachable").c_str(), c.szc(double(g.unreachable_bytes())).c_str(),
               human_count(g.retained_blocks(g.leak_node)).c_str(), blocks_word(double(g.retained_blocks(g.leak_node))), human_count(clusters.size()).c_str(),
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
      out["notes"] = c.sym->warnings();
      std::cout << out.dump(2) << "\n";
    } else {
      c.print_symbol_notes();
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
    out["notes"] = c.sym->warnings();
    std::cout << out.dump(2) << "\n";
  } else {
    c.print_symbol_notes();
  }
  return kExitOk;
}

// --- dominators: the tree grouped by site, level by level --------------------------------------

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
  // What makes a group: the block's site, or with --by type its type (replay/block_types.h).
  const bool by_type = a.by == "type";
  auto key_of = [&](uint32_t b) -> uint64_t { return by_type ? c.types().group_of[b] : c.site_id(b); };
  auto group_label = [&](uint32_t b) {
    if (!by_type) return c.site_label(b);
    const std::string &t = c.types().type_of(b);
    return (t.empty() ? std::string("(no type known)") : t) + " from " + c.site_label(b);
  };
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
    uint64_t site = key_of(b);
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
          if (key_of(ObjectGraph::block_of(ch)) == gr.site) next.push_back(ch);
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
      if (by_type) o["group"] = group_label(gr->example);
      std::string held = holders_text(*gr);
      if (!held.empty()) o["held_by"] = held;
      if (gr->unreachable) o["unreachable"] = true;
      if (!a.json) {
        std::string nested = gr->levels > 1 ? ", nested " + human_count(gr->levels) + " levels deep" : "";
        printf("%*s%s  %s retained, %s object%s%s, %s shallow%s\n", level * 2, "", group_label(gr->example).c_str(),
               c.szc(double(gr->retained)).c_str(), human_count(gr->count).c_str(), gr->count == 1 ? "" : "s", nested.c_str(),
               c.sz(double(gr->shallow)).c_str(), held.empty() ? "" : (" — " + held).c_str());
      }
      if (level + 1 < a.depth) {
        std::unordered_map<uint64_t, Group> kids;
        for (uint32_t p : gr->nodes)
          for (uint32_t ch : g.children.successors(p))
            if (key_of(ObjectGraph::block_of(ch)) != gr->site) add(kids, ch, gr->unreachable, UINT32_MAX);
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
                                          (by_type ? " grouped by type" : " grouped by allocation site")).c_str(),
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
    json out = json_heading(c);
    out["tree"] = tree;
    std::cout << out.dump(2) << "\n";
  }
  return kExitOk;
}

// --- path: shortest chain of pointers from a root -----------------------------------------------

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
  // The word that points at the first block, and for a stack word the frame holding it
  // (snapshot/path_steps.h, shared with the report's paths).
  const snapshot::RootWord rw = snapshot::root_word(c.snap, c.roots, g.root_object(root_node), ObjectGraph::block_of(chain[0]));
  const auto &rr = c.snap.roots[rw.range];
  const uint64_t root_off = rw.offset;
  json hops = json::array();
  // A register root is the tracer's copy of a thread's registers: its offset names the register.
  bool in_register = rr.kind == snapshot::kRegisters;
  const uint64_t word = rw.address;
  std::string where = "+" + std::to_string(root_off);
  if (in_register) where += " " + std::string(snapshot::register_name(root_off));
  if (ro.what == snapshot::RootObject::kVariable && word != ro.start) where += ", " + ro.name + "+" + std::to_string(word - ro.start);
  // A stack word: the function whose frame holds it (the physical frame: the last of its pc's
  // inline chain).
  json frame_json;
  if (rw.frame >= 0) {
    if (const replay::DisplayFrame *fr = c.stack_frame(rr, size_t(rw.frame))) {
      where += ", in the frame of " + fr->readable_label();
      frame_json = {{"index", rw.frame}, {"function", fr->readable_function()}, {"label", fr->readable_label()}};
    }
  }
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
  if (!frame_json.is_null()) out["root"]["frame"] = frame_json;
  for (size_t i = 0; i < chain.size(); ++i) {
    uint32_t b = ObjectGraph::block_of(chain[i]);
    json h = c.site_json(b);
    h["address"] = hex(c.snap.addr[b]);
    h["size"] = c.snap.size[b];
    if (i + 1 < chain.size()) {
      // Offset of the pointer to the next hop inside this block.
      const uint32_t found = snapshot::pointer_offset(c.snap, b, ObjectGraph::block_of(chain[i + 1]));
      const uint32_t off = found == snapshot::kNoOffset ? 0 : found;
      h["next_at_offset"] = off;
      // The field, by the block's type: a member of the program's class (DWARF), a container
      // node's link or value, an element's index.
      const std::string &type = c.typer().type_of(b);
      const std::string field = type.empty() ? "" : c.roots.layouts.field_at(type, off);
      if (!type.empty()) h["type"] = type;
      if (!field.empty()) h["next_in_field"] = field;
      if (!a.json)
        printf("  -> %s (%s) %s%s, field +%u%s ->\n", hex(c.snap.addr[b]).c_str(), c.szc(double(c.snap.size[b])).c_str(),
               type.empty() ? "" : (type + " ").c_str(), c.site_label(b).c_str(), off,
               field.empty() ? "" : (" (" + field + ")").c_str());
    } else {
      const std::string &type = c.typer().type_of(b);
      if (!type.empty()) h["type"] = type;
      if (!a.json)
        printf("  -> %s (%s) %s%s  [target]\n", hex(c.snap.addr[b]).c_str(), c.szc(double(c.snap.size[b])).c_str(),
               type.empty() ? "" : (type + " ").c_str(), c.site_label(b).c_str());
    }
    hops.push_back(h);
  }
  out["reachable"] = true;
  out["hops"] = hops;
  if (a.json) std::cout << out.dump(2) << "\n";
  return kExitOk;
}

}  // namespace retainers

using namespace retainers;

void add_retainer_commands(Cmd app, int *rc) {
  {
    auto a = std::make_shared<TopArgs>();
    Cmd cmd = app.subcommand("top-retainers", "Objects (or allocation sites) that keep the most memory alive: retained vs shallow bytes.");
    add_snapshot_args(cmd, *a);
    cmd.option("--by", a->by, "object (default), site, or type (as `heapsnap types`)")
        .one_of({"object", "site", "type"});
    cmd.flag("--stats", a->stats, "print graph sizes, timings and memory per node on stderr");
    cmd.option("--frames", a->frames, "stack frames per object (default 6)");
    add_site_options(cmd, a->sites);
    cmd.footer("Examples:\n  heapsnap top-retainers app.hsnap -n 10\n  heapsnap top-retainers --by site --json app.hsnap");
    cmd.callback([a, rc] { *rc = run_top(*a); });
  }
  {
    auto a = std::make_shared<DomArgs>();
    Cmd cmd = app.subcommand("dominators", "The dominator tree grouped by allocation site, level by level.");
    add_snapshot_args(cmd, *a);
    cmd.option("--depth", a->depth, "levels to expand (default 4)");
    cmd.option("--min-bytes", a->min_bytes, "hide groups retaining less (e.g. 1M)");
    cmd.option("--by", a->by, "site (default) or type: what makes a group").one_of({"site", "type"});
    add_site_options(cmd, a->sites);
    cmd.footer("Examples:\n  heapsnap dominators app.hsnap --depth 3 --min-bytes 1M\n  heapsnap dominators --snapshot 2 --json app.hsnap");
    cmd.callback([a, rc] { *rc = run_dominators(*a); });
  }
  {
    auto a = std::make_shared<PathArgs>();
    Cmd cmd = app.subcommand("path", "Shortest chain of pointers from a root to the block at ADDRESS.");
    add_snapshot_args(cmd, *a, false);
    cmd.option("address", a->address, "an address inside the block (e.g. 0x55d0c2a8e2a0)").required();
    add_site_options(cmd, a->sites);
    cmd.footer("Addresses come from top-retainers, suspects or export --format graph-json.\n"
                "Example: heapsnap path app.hsnap 0x55d0c2a8e2a0");
    cmd.callback([a, rc] { *rc = run_path(*a); });
  }
  {
    auto a = std::make_shared<SnapshotArgs>();
    Cmd cmd = app.subcommand("suspects", "Leak suspects, MAT-style: objects and sites retaining over 10% of the heap, where they accumulate, and unreachable memory.");
    add_snapshot_args(cmd, *a, false);
    add_site_options(cmd, a->sites);
    cmd.footer("Examples:\n  heapsnap suspects app.hsnap\n  heapsnap suspects --snapshot 0 --json app.hsnap");
    cmd.callback([a, rc] { *rc = run_suspects(*a); });
  }
  {
    auto a = std::make_shared<SnapshotArgs>();
    Cmd cmd = app.subcommand("roots", "The roots as objects (global and static variables, thread stacks, registers) by the memory each keeps alive on its own.");
    add_snapshot_args(cmd, *a);
    add_site_options(cmd, a->sites);
    cmd.footer("A module's data words are split by its symbols (.symtab, else .dynsym): each variable is a root,\n"
                "with its type and source line when the module has DWARF; words in no symbol (a stripped module)\n"
                "stay one root per mapping, named by module and offset.\n"
                "Examples:\n  heapsnap roots app.hsnap\n  heapsnap roots --json -n 5 app.hsnap");
    cmd.callback([a, rc] { *rc = run_roots(*a); });
  }
  {
    auto d = std::make_shared<DiffArgs>();
    Cmd cmd = app.subcommand("diff", "Heap growth by allocation site between two snapshots.");
    cmd.option("before", d->a, "FILE[:INDEX] (default: the last complete snapshot)").required();
    cmd.option("after", d->b, "FILE[:INDEX]").required();
    cmd.flag("--json", d->json, "machine-readable output");
    cmd.flag("--bytes", d->raw_bytes, "plain byte counts");
    cmd.option("-n,--limit", d->limit, "rows (default 20)");
    cmd.option("--by", d->by, "site (default) or type: what the rows are").one_of({"site", "type"});
    cmd.option("--debug-dir", d->debug_dirs, "directory with separate debug files");
    add_site_options(cmd, d->sites);
    cmd.footer("Sites are matched by module and offset, so two runs' captures diff too.\n"
                "Examples:\n  heapsnap diff app.hsnap:0 app.hsnap:3\n  heapsnap diff before.hsnap after.hsnap");
    cmd.callback([d, rc] { *rc = run_diff(*d); });
  }
}

}  // namespace heapsnap::cli
