// heapsnap types FILE: the classes of a snapshot's objects, with their counts, own bytes and
// retained bytes (MAT's class histogram, DevTools' constructors view).
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <iostream>

#include "cli/commands.h"
#include "cli/format.h"
#include "cli/snapshot_args.h"
#include "cli/term_style.h"
#include "snapshot/group_retained.h"
#include "snapshot/object_graph.h"
#include "symbolize/demangle.h"

namespace heapsnap::cli {
namespace {

using json = nlohmann::ordered_json;

// "7Session" (as std::type_info::name() gives it) to "Session".
std::string class_name(const std::string &mangled) {
  std::string d = symbolize::demangle(("_ZTS" + mangled).c_str());
  const std::string prefix = "typeinfo name for ";
  return d.rfind(prefix, 0) == 0 ? d.substr(prefix.size()) : mangled;
}

int run(const SnapshotArgs &a) {
  snapshot::HeapSnapshot s;
  snapshot::LoadOptions lo;
  lo.identity = false;
  lo.edge_offsets = false;
  if (!load_chosen_snapshot(a, &s, lo)) return kExitInput;
  // Group 0: blocks of no known class; group t: type number t.
  const size_t groups = s.type_names.size() + 1;
  std::vector<uint32_t> group_of(s.blocks(), 0);
  for (uint32_t b = 0; b < s.blocks() && !s.type.empty(); ++b) group_of[b] = s.type[b];
  uint64_t typed_blocks = 0, typed_bytes = 0, all_bytes = 0;
  std::vector<uint64_t> all_count(groups, 0), all_shallow(groups, 0);
  for (uint32_t b = 0; b < s.blocks(); ++b) {
    all_count[group_of[b]] += 1;
    all_shallow[group_of[b]] += s.size[b];
    all_bytes += s.size[b];
    if (group_of[b]) {
      ++typed_blocks;
      typed_bytes += s.size[b];
    }
  }
  snapshot::GraphOptions go;
  go.follow_interior = a.interior == "on";
  go.with_children = true;
  go.release_edges = true;
  go.keep_csr = false;
  snapshot::ObjectGraph g = snapshot::build_object_graph(s, go);
  snapshot::GroupFigures f = snapshot::retained_by_group(g, s, group_of, groups);
  std::vector<uint32_t> order;
  for (uint32_t t = 1; t < groups; ++t)
    if (all_count[t]) order.push_back(t);
  std::sort(order.begin(), order.end(), [&](uint32_t x, uint32_t y) {
    return f.retained[x] != f.retained[y] ? f.retained[x] > f.retained[y] : all_shallow[x] > all_shallow[y];
  });
  if (order.size() > a.limit) order.resize(a.limit);
  auto sz = [&](uint64_t b) { return a.raw_bytes ? std::to_string(b) : human_bytes(double(b)); };
  if (a.json) {
    json j;
    j["file"] = a.file;
    j["snapshot"] = s.info.index;
    j["blocks"] = s.blocks();
    j["bytes"] = all_bytes;
    j["typed_blocks"] = typed_blocks;
    j["typed_bytes"] = typed_bytes;
    json arr = json::array();
    for (uint32_t t : order)
      arr.push_back({{"class", class_name(s.type_names[t - 1])}, {"mangled", s.type_names[t - 1]},
                     {"how", "vtable"}, {"count", all_count[t]}, {"shallow_bytes", all_shallow[t]},
                     {"reachable_count", f.count[t]}, {"retained_bytes", f.retained[t]}});
    j["classes"] = arr;
    std::cout << j.dump(2) << "\n";
    return kExitOk;
  }
  printf("%s — %s objects of %s classes known by their vtable: %s of %s live (%.1f%%)\n\n",
         out_style(Style::kHeading, "classes in snapshot " + std::to_string(s.info.index)).c_str(),
         human_count(typed_blocks).c_str(), human_count(groups - 1).c_str(), sz(typed_bytes).c_str(),
         sz(all_bytes).c_str(), all_bytes ? 100.0 * double(typed_bytes) / double(all_bytes) : 0.0);
  if (order.empty()) {
    printf("no object of the snapshot starts with a vtable pointer: no polymorphic C++ objects (or the\n"
           "capture predates format 3.2)\n");
    return kExitOk;
  }
  print_styled(Style::kHeader, "%10s %12s %12s  %s\n", "objects", "shallow", "retained", "class");
  for (uint32_t t : order)
    printf("%10s %12s %s  %s\n", human_count(all_count[t]).c_str(), sz(all_shallow[t]).c_str(),
           out_style(Style::kSize, sz(f.retained[t]), 12).c_str(), class_name(s.type_names[t - 1]).c_str());
  printf("\n%s\n", out_style(Style::kEstimate, "retained: what the objects of the class keep alive, each object once "
                                               "(nested ones of the same class are counted in the outer one)").c_str());
  return kExitOk;
}

}  // namespace

void add_types_command(CLI::App &app, int *rc) {
  auto a = std::make_shared<SnapshotArgs>();
  CLI::App *cmd = app.add_subcommand(
      "types", "The classes of a snapshot's polymorphic C++ objects (known by their vtable pointer): count, "
               "own bytes, retained bytes.");
  add_snapshot_args(cmd, *a);
  cmd->footer(
      "A C++ object with virtual functions starts with a pointer into its class's vtable; the snapshot\n"
      "reads the class's std::type_info name there at the moment it is taken, so a `Base *` made by a\n"
      "factory shows as its Derived class, with or without symbols. Other blocks have no class here.\n"
      "Example: heapsnap types --snapshot 0 app.hsnap");
  cmd->callback([a, rc] { *rc = run(*a); });
}

}  // namespace heapsnap::cli
