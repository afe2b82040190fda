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
#include "cli/retainers_context.h"

namespace heapsnap::cli {

// The types histogram of a loaded snapshot, by retained bytes (also top-retainers --by type).
int print_types(retainers::Context &c, const SnapshotArgs &a) {
  using json = nlohmann::ordered_json;
  const auto &s = c.snap;
  const replay::BlockTypes &types = c.types();
  const size_t groups = types.groups();
  uint64_t typed_blocks = 0, typed_bytes = 0, all_bytes = 0;
  std::vector<uint64_t> all_count(groups, 0), all_shallow(groups, 0);
  for (uint32_t b = 0; b < s.blocks(); ++b) {
    const uint32_t t = types.group_of[b];
    all_count[t] += 1;
    all_shallow[t] += s.size[b];
    all_bytes += s.size[b];
    if (t) {
      ++typed_blocks;
      typed_bytes += s.size[b];
    }
  }
  snapshot::GroupFigures f = snapshot::retained_by_group(c.graph, s, types.group_of, groups);
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
    j["by"] = "type";
    j["blocks"] = s.blocks();
    j["bytes"] = all_bytes;
    j["typed_blocks"] = typed_blocks;
    j["typed_bytes"] = typed_bytes;
    json arr = json::array();
    for (uint32_t t : order) {
      json o = {{"type", types.name[t]}, {"how", types.how[t]}, {"count", all_count[t]}, {"shallow_bytes", all_shallow[t]},
                {"instances", f.instances[t]}, {"retained_bytes", f.retained[t]}};
      if (f.first_block[t] != UINT32_MAX) o["example"] = retainers::hex(s.addr[f.first_block[t]]);
      arr.push_back(o);
    }
    j["types"] = arr;
    std::cout << j.dump(2) << "\n";
    return kExitOk;
  }
  printf("%s — %s of %s %s have a type: %s of %s live (%.1f%%)\n\n",
         out_style(Style::kHeading, "types in snapshot " + std::to_string(s.info.index)).c_str(),
         human_count(typed_blocks).c_str(), human_count(s.blocks()).c_str(), blocks_word(double(s.blocks())), sz(typed_bytes).c_str(),
         sz(all_bytes).c_str(), all_bytes ? 100.0 * double(typed_bytes) / double(all_bytes) : 0.0);
  if (order.empty()) {
    printf("no block's type is known: no polymorphic C++ object (vtable), no allocation through the C++\n"
           "library's allocators, no pointer variable with debug information (or the capture predates format 3.2)\n");
    return kExitOk;
  }
  print_styled(Style::kHeader, "%10s %12s %12s  %-9s %s\n", "objects", "shallow", "retained", "from", "type");
  for (uint32_t t : order)
    printf("%10s %12s %s  %-9s %s\n", human_count(all_count[t]).c_str(), sz(all_shallow[t]).c_str(),
           out_style(Style::kSize, sz(f.retained[t]), 12).c_str(), types.how[t].c_str(), types.name[t].c_str());
  printf("\n%s\n", out_style(Style::kEstimate,
                              "retained: what the type's objects keep alive, each object once (nested ones of the same type "
                              "count in the outer one; unreachable ones too). from: vtable (the object's class, read at "
                              "snapshot time), frames (its allocation's frames; identical-code folding at -O2 can name a "
                              "same-sized T) or variable (the pointee type of the pointer variable that holds it)").c_str());
  return kExitOk;
}

// Named as well as anonymous: the sanitizer builds' unity units put several cmd_*.cc in one
// translation unit, and each has its own Options and run().
namespace cmd_types {
namespace {

int run(const SnapshotArgs &a) {
  retainers::Context c;
  if (!retainers::load(a, &c, true, false)) return retainers::load_failed(c);
  return print_types(c, a);
}

}  // namespace
}  // namespace cmd_types

void add_types_command(Cmd app, int *rc) {
  using namespace cmd_types;
  auto a = std::make_shared<SnapshotArgs>();
  Cmd cmd = app.subcommand(
      "types", "The types of a snapshot's objects (MAT's class histogram): count, own bytes, retained bytes.");
  add_snapshot_args(cmd, *a);
  cmd.footer(
      "Two sources. A C++ object with virtual functions starts with a pointer into its class's vtable;\n"
      "the snapshot reads the class's std::type_info name there when it is taken (a `Base *` made by a\n"
      "factory shows as its Derived class, with or without symbols). Other blocks get the type their\n"
      "allocation's frames name: std::map<K, V> node, std::vector<T> buffer, std::string buffer,\n"
      "X (make_shared), X (make_unique). A block a global or static pointer variable points to is of\n"
      "the variable's pointee type (`Cache *g_cache`: a Cache), with debug information. A plain\n"
      "`new T` held elsewhere, or a C malloc, has no type here.\n"
      "Example: heapsnap types --snapshot 0 app.hsnap");
  cmd.callback([a, rc] { *rc = run(*a); });
}

}  // namespace heapsnap::cli
