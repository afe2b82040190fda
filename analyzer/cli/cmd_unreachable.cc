// heapsnap unreachable FILE: what a snapshot holds that nothing reaches, in memcheck's terms.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <map>

#include "cli/commands.h"
#include "cli/format.h"
#include "cli/snapshot_args.h"
#include "cli/term_style.h"
#include "replay/replay.h"
#include "replay/block_types.h"
#include "replay/stack_symbolizer.h"
#include "snapshot/reachability.h"

namespace heapsnap::cli {
// Named as well as anonymous: the sanitizer builds' unity units put several cmd_*.cc in one
// translation unit, and each has its own Options and run().
namespace cmd_unreachable {
namespace {

using json = nlohmann::ordered_json;

int run(const SnapshotArgs &a) {
  symbolize::FrameFilter filter;
  if (!make_frame_filter(a.sites, &filter)) return kExitUsage;
  snapshot::HeapSnapshot s;
  if (!load_chosen_snapshot(a, &s)) return kExitInput;
  auto r = snapshot::classify(s, a.interior == "on");
  // Lost blocks grouped by the site that allocated them (definite leaders with their cliques).
  std::string err;
  auto reader = capture::CaptureReader::open(a.file, &err);
  replay::ReplayResult rr = reader ? replay::replay(*reader) : replay::ReplayResult{};
  replay::StackSymbolizer sym(rr.modules, symbolize::command_options(a.debug_dirs));
  sym.set_frame_filter(std::move(filter));
  // A block's site: the first frame of the program in its stack or its call site's inline chain.
  // Grouped by site (StackSymbolizer::site_id), named by an address of it.
  auto site_of = [&](uint32_t b) {
    uint32_t st = b < s.stack.size() ? s.stack[b] : 0;
    return sym.site_id(sym.site_address(rr.stacks, rr.stacks.valid(st) ? st : 0, s.call_site[b]));
  };
  // The type of the lost blocks of a site (replay/block_types.h): its definite blocks' type, or
  // several.
  replay::BlockTyper types(s, rr.stacks, sym);  // only the lost blocks are typed
  struct Group {
    uint64_t definite_blocks = 0, definite_bytes = 0, indirect_blocks = 0, indirect_bytes = 0;
    uint32_t type = 0;
    bool mixed = false;
  };
  auto type_text = [&](const Group &g) -> std::string {
    return g.mixed ? "several types" : types.all_names()[g.type];
  };
  std::map<uint32_t, Group> by_site;
  for (uint32_t b = 0; b < s.blocks(); ++b) {
    if (r.state[b] == snapshot::Reach::kDefinite) {
      Group &g = by_site[site_of(b)];
      const uint32_t t = types.group(b);
      if (g.definite_blocks && g.type != t) g.mixed = true;
      g.type = t;
      ++g.definite_blocks;
      g.definite_bytes += s.size[b];
    } else if (r.state[b] == snapshot::Reach::kIndirect) {
      uint32_t l = r.leader[b];
      while (l != UINT32_MAX && r.state[l] == snapshot::Reach::kIndirect) l = r.leader[l];
      Group &g = by_site[site_of(l == UINT32_MAX ? b : l)];
      ++g.indirect_blocks;
      g.indirect_bytes += s.size[b];
    }
  }
  std::vector<std::pair<uint32_t, Group>> rows(by_site.begin(), by_site.end());
  std::sort(rows.begin(), rows.end(), [](auto &x, auto &y) {
    return x.second.definite_bytes + x.second.indirect_bytes > y.second.definite_bytes + y.second.indirect_bytes;
  });
  if (rows.size() > a.limit) rows.resize(a.limit);
  using R = snapshot::Reach;
  const auto &t = r.totals;
  auto idx = [](R k) { return int(k); };
  if (a.json) {
    json j;
    j["file"] = a.file;
    j["snapshot"] = s.info.index;
    j["interior"] = a.interior == "on";
    for (R k : {R::kDefinite, R::kIndirect, R::kPossible, R::kReachable}) {
      std::string name = snapshot::reach_name(k);
      std::replace(name.begin(), name.end(), ' ', '_');
      j[name] = {{"blocks", t.blocks[idx(k)]}, {"bytes", t.bytes[idx(k)]}};
    }
    j["unreachable_bytes"] = t.bytes[idx(R::kDefinite)] + t.bytes[idx(R::kIndirect)];
    j["unreachable_blocks"] = t.blocks[idx(R::kDefinite)] + t.blocks[idx(R::kIndirect)];
    json arr = json::array();
    for (auto &[id, g] : rows) {
      uint64_t site = sym.site_id_address(id);
      const auto &f = sym.site_frame(site);
      arr.push_back({{"site", sym.site_label(f)}, {"function", sym.site_function(f)}, {"file", f.file}, {"line", f.line},
                     {"call_site", site}, {"site_address", site},
                     {"definite_blocks", g.definite_blocks}, {"definite_bytes", g.definite_bytes},
                     {"indirect_blocks", g.indirect_blocks}, {"indirect_bytes", g.indirect_bytes},
                     {"type", type_text(g)}});
    }
    j["by_site"] = arr;
    std::cout << j.dump(2) << "\n";
    return kExitOk;
  }
  auto sz = [&](uint64_t b) { return a.raw_bytes ? std::to_string(b) + " bytes" : human_bytes(double(b)); };
  printf("%s of %s — memcheck's leak summary%s\n",
         out_style(Style::kHeading, "snapshot " + std::to_string(s.info.index) + " (" +
                                        snapshot::trigger_name(s.info.trigger) + ")").c_str(),
         a.file.c_str(), a.interior == "on" ? "" : " (interior pointers ignored)");
  for (R k : {R::kDefinite, R::kIndirect, R::kPossible, R::kReachable})
    printf("  %-16s %s in %s %s\n", (std::string(snapshot::reach_name(k)) + ":").c_str(),
           out_style(Style::kSize, sz(t.bytes[idx(k)])).c_str(), human_count(t.blocks[idx(k)]).c_str(),
           blocks_word(double(t.blocks[idx(k)])));
  if (!rows.empty()) {
    printf("\n");
    print_styled(Style::kHeader, "lost blocks by allocation site (indirect ones counted at their clique's leader):\n");
  }
  for (auto &[id, g] : rows) {
    uint64_t site = sym.site_id_address(id);
    const std::string type = type_text(g);
    printf("  %s definite in %s, %s indirect in %s  %s%s\n", out_style(Style::kSize, sz(g.definite_bytes), 12).c_str(),
           human_count(g.definite_blocks).c_str(), out_style(Style::kSize, sz(g.indirect_bytes), 12).c_str(),
           human_count(g.indirect_blocks).c_str(), sym.site_label(sym.site_frame(site)).c_str(),
           type.empty() ? "" : ("  [" + type + "]").c_str());
  }
  return kExitOk;
}

}  // namespace
}  // namespace cmd_unreachable

void add_unreachable_command(Cmd app, int *rc) {
  using namespace cmd_unreachable;
  auto a = std::make_shared<SnapshotArgs>();
  Cmd cmd = app.subcommand("unreachable", "Blocks of a snapshot that nothing reaches: definitely, indirectly and possibly lost, as memcheck counts them.");
  add_snapshot_args(cmd, *a);
  add_site_options(cmd, a->sites);
  cmd.footer("Example: heapsnap record --snapshot-at-exit -o app.hsnap -- ./app && heapsnap unreachable app.hsnap");
  cmd.callback([a, rc] { *rc = run(*a); });
}

}  // namespace heapsnap::cli
