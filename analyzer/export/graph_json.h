// A snapshot's object graph as JSON for other tools: nodes (address, size, site, immediate
// dominator, retained bytes), edges and root-held nodes. Streamed with fprintf, never built in
// memory, so it works at any graph size the analyzer can hold.
#pragma once
#include <cstdio>
#include <functional>
#include <string>

#include "snapshot/object_graph.h"

namespace heapsnap::exporters {

// site(block) gives the allocation site label of a block.
bool write_graph_json(const snapshot::HeapSnapshot &s, const snapshot::ObjectGraph &g,
                      const std::function<std::string(uint32_t)> &site, FILE *out);

}  // namespace heapsnap::exporters
