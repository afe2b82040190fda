// heapsnap types FILE: the classes of a snapshot's objects, with their counts, own bytes and
// retained bytes (MAT's class histogram, DevTools' constructors view).
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <unordered_map>

#include "cli/commands.h"
#include "cli/format.h"
#include "cli/snapshot_args.h"
#include "cli/term_style.h"
#include "snapshot/group_retained.h"
#include "snapshot/object_graph.h"
#include "symbolize/demangle.h"
#include "cli/replay_load.h"
#include "replay/frame_types.h"
#include "replay/stack_symbolizer.h"

namespace heapsnap::cli {
namespace {

using json = nlohmann::ordered_json;

// "7Session" (as std::type_info::name() gives it) to "Session" (replay/frame_types.h).
std::string class_name(const std::string &mangled) {
  std::string d = symbolize::demangle(("_ZTS" + mangled).c_str());
  const std::string prefix = "typeinfo name for ";
  return d.rfind(prefix, 0) == 0 ? replay::type_from_class(d.substr(prefix.size())) : mangled;
}

int run(const SnapshotArgs &a) {
  // The capture's modules and stacks (for the types the allocation frames give), then the snapshot.
  replay::ReplayResult capture = load_capture_context(a.file);
  snapshot::HeapSnapshot s;
  snapshot::LoadOptions lo;
  lo.identity = false;
  lo.edge_offsets = false;
  if (!load_chosen_snapshot(a, &s, lo)) return kExitInput;
  replay::StackSymbolizer sym(capture.modules, symbolize::command_options(a.debug_dirs));
  // The groups: 0 for blocks of no known type, then one per type name. A class the vtable
  // names wins over what the frames say (a factory's Base * is its Derived).
  std::vector<std::string> names{""};
  std::vector<const char *> how{""};
  std::unordered_map<std::string, uint32_t> group_by_name;
  auto group_named = [&](const std::string &name, const char *source) {
    auto [it, fresh] = group_by_name.try_emplace(name, uint32_t(names.size()));
    if (fresh) {
      names.push_back(name);
      how.push_back(source);
    } else if (how[it->second] != source) {
      how[it->second] = "vtable, frames";
    }
    return it->second;
  };
  std::vector<uint32_t> vtable_group(s.type_names.size() + 1, 0);
  for (size_t t = 0; t < s.type_names.size(); ++t) vtable_group[t + 1] = group_named(class_name(s.type_names[t]), "vtable");
  std::unordered_map<uint64_t, uint32_t> site_group;  // an unsampled block's type: its call site's
  std::vector<uint32_t> group_of(s.blocks(), 0);
  for (uint32_t b = 0; b < s.blocks(); ++b) {
    if (!s.type.empty() && s.type[b]) {
      group_of[b] = vtable_group[s.type[b]];
    } else if (s.stack[b] && capture.stacks.valid(s.stack[b])) {
      std::string t = replay::type_from_frames(sym.stack(capture.stacks, s.stack[b]));
      group_of[b] = t.empty() ? 0 : group_named(t, "frames");
    } else {
      auto [it, fresh] = site_group.try_emplace(s.call_site[b], 0);
      if (fresh) {
        std::string t = replay::type_from_frames(sym.frames_of(s.call_site[b]));
        it->second = t.empty() ? 0 : group_named(t, "frames");
      }
      group_of[b] = it->second;
    }
  }
  const size_t groups = names.size();
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
      arr.push_back({{"type", names[t]}, {"how", how[t]}, {"count", all_count[t]}, {"shallow_bytes", all_shallow[t]},
                     {"reachable_count", f.count[t]}, {"retained_bytes", f.retained[t]}});
    j["types"] = arr;
    std::cout << j.dump(2) << "\n";
    return kExitOk;
  }
  printf("%s — %s of %s blocks have a type: %s of %s live (%.1f%%)\n\n",
         out_style(Style::kHeading, "types in snapshot " + std::to_string(s.info.index)).c_str(),
         human_count(typed_blocks).c_str(), human_count(s.blocks()).c_str(), sz(typed_bytes).c_str(),
         sz(all_bytes).c_str(), all_bytes ? 100.0 * double(typed_bytes) / double(all_bytes) : 0.0);
  if (order.empty()) {
    printf("no block's type is known: no polymorphic C++ object (vtable), no allocation through the C++\n"
           "library's allocators (or the capture predates format 3.2)\n");
    return kExitOk;
  }
  print_styled(Style::kHeader, "%10s %12s %12s  %-8s %s\n", "objects", "shallow", "retained", "from", "type");
  for (uint32_t t : order)
    printf("%10s %12s %s  %-8s %s\n", human_count(all_count[t]).c_str(), sz(all_shallow[t]).c_str(),
           out_style(Style::kSize, sz(f.retained[t]), 12).c_str(), how[t], names[t].c_str());
  printf("\n%s\n", out_style(Style::kEstimate,
                              "retained: what the type's objects keep alive, each object once (nested ones of the same type "
                              "count in the outer one). from: vtable (the object's class, read at snapshot time) or frames "
                              "(its allocation's frames; identical-code folding at -O2 can name a same-sized T)").c_str());
  return kExitOk;
}

}  // namespace

void add_types_command(CLI::App &app, int *rc) {
  auto a = std::make_shared<SnapshotArgs>();
  CLI::App *cmd = app.add_subcommand(
      "types", "The types of a snapshot's objects (MAT's class histogram): count, own bytes, retained bytes.");
  add_snapshot_args(cmd, *a);
  cmd->footer(
      "Two sources. A C++ object with virtual functions starts with a pointer into its class's vtable;\n"
      "the snapshot reads the class's std::type_info name there when it is taken (a `Base *` made by a\n"
      "factory shows as its Derived class, with or without symbols). Other blocks get the type their\n"
      "allocation's frames name: std::map<K, V> node, std::vector<T> buffer, std::string buffer,\n"
      "X (make_shared), X (make_unique). A plain `new T` or a C malloc has no type here.\n"
      "Example: heapsnap types --snapshot 0 app.hsnap");
  cmd->callback([a, rc] { *rc = run(*a); });
}

}  // namespace heapsnap::cli
