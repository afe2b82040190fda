#include "report/dominator_icicle.h"

#include <algorithm>
#include <deque>
#include <unordered_map>

namespace heapsnap::report {

SiteIcicle dominator_icicle(const snapshot::HeapSnapshot &s, const snapshot::ObjectGraph &g,
                            const std::vector<uint32_t> &site_of, const IcicleBudget &budget) {
  using snapshot::ObjectGraph;
  SiteIcicle t;
  auto add = [&](uint32_t parent, uint32_t site, uint32_t example, bool other) {
    t.parent.push_back(parent);
    t.site.push_back(site);
    t.example.push_back(example);
    t.retained.push_back(0);
    t.objects.push_back(0);
    t.shallow.push_back(0);
    t.other.push_back(other);
    return uint32_t(t.parent.size() - 1);
  };
  add(0, kNoSite, UINT32_MAX, false);
  // All reachable memory: what no root reaches (under the leak node) is not in the icicle, and
  // root objects are no objects of the heap.
  uint64_t total = g.reachable_bytes();
  t.retained[0] = total;
  uint64_t unreachable_nodes = g.leak_node && g.dom.reachable(g.leak_node) ? g.retained.count[g.leak_node] : 0;
  t.objects[0] = g.retained.count.empty() ? 0 : g.retained.count[0] - 1 - g.num_roots - unreachable_nodes;
  size_t max_nodes = std::max<size_t>(budget.max_nodes, 1);
  auto threshold = uint64_t(double(total) * budget.min_share);

  struct Pending {
    uint32_t node;                 // icicle node
    int depth;                     // of its children
    std::vector<uint32_t> members; // graph nodes of the group
  };
  struct Group {
    uint32_t site = kNoSite;
    uint32_t example = 0;
    uint64_t count = 0, shallow = 0, retained = 0;
    std::vector<uint32_t> members;
  };
  std::deque<Pending> queue;
  queue.push_back({0, 1, {0}});
  while (!queue.empty() && t.nodes() < max_nodes) {
    Pending p = std::move(queue.front());
    queue.pop_front();
    std::unordered_map<uint32_t, Group> groups;
    // The members' children that are blocks; a root object's children stand in for it (the top
    // level holds what the roots hold), and the leak node's are left out.
    std::vector<uint32_t> kids;
    for (uint32_t v : p.members)
      for (uint32_t ch : g.children.successors(v)) {
        if (g.is_block(ch)) kids.push_back(ch);
        else if (g.is_root(ch))
          for (uint32_t gc : g.children.successors(ch)) kids.push_back(gc);
      }
    for (uint32_t ch : kids) {
      const uint32_t b = ObjectGraph::block_of(ch);
      if (b >= s.blocks()) continue;  // not a block of this snapshot: nothing to group
      const uint32_t site = b < site_of.size() ? site_of[b] : kNoSite;
      Group &gr = groups[site];
      if (!gr.count) {
        gr.site = site;
        gr.example = b;
      }
      ++gr.count;
      gr.shallow += s.size[b];
      gr.retained += g.retained.bytes[ch];
      gr.members.push_back(ch);
    }
    std::vector<Group *> sorted;
    sorted.reserve(groups.size());
    for (auto &kv : groups) sorted.push_back(&kv.second);
    std::sort(sorted.begin(), sorted.end(), [](const Group *a, const Group *b) {
      return a->retained != b->retained ? a->retained > b->retained : a->site < b->site;
    });
    Group rest;
    bool have_rest = false;
    for (size_t i = 0; i < sorted.size(); ++i) {
      Group *gr = sorted[i];
      // Room for this group, and for an "other" after it if groups remain.
      size_t room = max_nodes - t.nodes();
      bool fits = i < budget.max_children && gr->retained >= threshold && gr->retained > 0 &&
                  room >= (i + 1 < sorted.size() ? 2 : 1);
      if (!fits) {
        have_rest = true;
        rest.count += gr->count;
        rest.shallow += gr->shallow;
        rest.retained += gr->retained;
        continue;
      }
      uint32_t id = add(p.node, gr->site, gr->example, false);
      t.retained[id] = gr->retained;
      t.objects[id] = gr->count;
      t.shallow[id] = gr->shallow;
      if (p.depth < budget.max_depth) queue.push_back({id, p.depth + 1, std::move(gr->members)});
    }
    if (have_rest && rest.retained > 0 && t.nodes() < max_nodes) {
      uint32_t id = add(p.node, kNoSite, UINT32_MAX, true);
      t.retained[id] = rest.retained;
      t.objects[id] = rest.count;
      t.shallow[id] = rest.shallow;
    }
  }
  return t;
}

}  // namespace heapsnap::report
