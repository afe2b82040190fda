#include "export/graph_json.h"

#include <nlohmann/json.hpp>

namespace heapsnap::exporters {

bool write_graph_json(const snapshot::HeapSnapshot &s, const snapshot::ObjectGraph &g,
                      const std::function<std::string(uint32_t)> &site, FILE *out) {
  using snapshot::ObjectGraph;
  fputs("{\"nodes\": [", out);
  for (uint32_t b = 0; b < s.blocks(); ++b) {
    uint32_t v = ObjectGraph::node_of(b);
    std::string idom;
    if (!g.dom.reachable(v)) idom = "null";
    else if (g.dom.idom[v] == 0) idom = "-1";
    else idom = std::to_string(ObjectGraph::block_of(g.dom.idom[v]));
    // Site labels can hold any character: nlohmann escapes them.
    std::string label = nlohmann::json(site(b)).dump();
    fprintf(out, "%s\n {\"id\": %u, \"address\": \"0x%llx\", \"size\": %llu, \"site\": %s, \"idom\": %s, \"retained\": %llu}",
            b ? "," : "", b, (unsigned long long)s.addr[b], (unsigned long long)s.size[b], label.c_str(), idom.c_str(),
            (unsigned long long)g.retained.bytes[v]);
  }
  fputs("\n],\n\"edges\": [", out);
  bool first = true;
  for (uint32_t v = 1; v < g.csr.num_nodes; ++v)
    for (uint32_t t : g.csr.successors(v)) {
      fprintf(out, "%s[%u, %u]", first ? "" : ", ", ObjectGraph::block_of(v), ObjectGraph::block_of(t));
      first = false;
    }
  fputs("],\n\"roots\": [", out);
  first = true;
  for (uint32_t t : g.csr.successors(0)) {
    fprintf(out, "%s%u", first ? "" : ", ", ObjectGraph::block_of(t));
    first = false;
  }
  fputs("]}\n", out);
  return !ferror(out);
}

}  // namespace heapsnap::exporters
