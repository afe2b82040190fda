// heapsnap snapshots FILE [--json] [--dump K]: the heap snapshots of a capture.
#include <nlohmann/json.hpp>

#include <cstdio>
#include <iostream>

#include "cli/commands.h"
#include "cli/format.h"
#include "cli/term_style.h"
#include "snapshot/heap_snapshot.h"

namespace heapsnap::cli {
// Named as well as anonymous: the sanitizer builds' unity units put several cmd_*.cc in one
// translation unit, and each has its own Options and run().
namespace cmd_snapshots {
namespace {

using json = nlohmann::ordered_json;

struct Options {
  std::string file;
  bool json = false;
  int dump = -1;
};

std::string hex(uint64_t v) {
  char b[32];
  snprintf(b, sizeof(b), "0x%llx", static_cast<unsigned long long>(v));
  return b;
}

json info_json(const snapshot::SnapshotInfo &s) {
  json j;
  j["index"] = s.index;
  j["time_s"] = double(s.time_ns) / 1e9;
  j["trigger"] = snapshot::trigger_name(s.trigger);
  j["label"] = s.label;
  j["blocks"] = s.end.blocks();
  j["bytes"] = s.end.bytes();
  j["edges"] = s.end.edges();
  j["interior_edges"] = s.end.interior_edges();
  j["root_edges"] = s.end.root_edges();
  j["roots"] = s.end.roots();
  j["root_bytes"] = s.end.root_bytes();
  j["pause_s"] = double(s.pause_ns) / 1e9;
  j["scan_s"] = double(s.end.scan_ns()) / 1e9;
  j["scan_threads"] = s.end.scan_threads() ? s.end.scan_threads() : 1;
  if (s.end.cpu_ns()) j["cpu_s"] = double(s.end.cpu_ns()) / 1e9;
  j["total_s"] = double(s.end.total_ns()) / 1e9;
  j["skipped_blocks"] = s.end.skipped_blocks();
  j["complete"] = s.have_begin && s.have_end && s.end.complete();
  if (!s.end.error().empty()) j["error"] = s.end.error();
  else if (!s.have_end) j["error"] = "no end record: the snapshot child did not finish";
  j["heap_bytes"] = s.totals.heap_bytes();
  j["live_blocks"] = s.totals.live_blocks();
  return j;
}

int dump(const Options &o, capture::CaptureReader &reader) {
  snapshot::HeapSnapshot s;
  std::string err;
  bool ok = snapshot::load_snapshot(reader, uint32_t(o.dump), &s, &err);
  if (!ok) {
    print_error("%s", err.c_str());
    return kExitInput;
  }
  if (!err.empty()) print_warning("%s", err.c_str());
  json j = info_json(s.info);
  json blocks = json::array();
  for (uint32_t b = 0; b < s.blocks(); ++b) {
    json e = json::array();
    for (uint64_t k = s.edge_begin[b]; k < s.edge_begin[b + 1]; ++k)
      e.push_back({{"to", s.edge_target[k]}, {"offset", s.edge_offset[k]}, {"interior", bool(s.edge_interior[k])}});
    blocks.push_back({{"n", b}, {"address", hex(s.addr[b])}, {"size", s.size[b]}, {"call_site", hex(s.call_site[b])},
                      {"stack", s.stack[b]}, {"id", s.id[b]}, {"time_ms", s.time_ms[b]}, {"edges", e}});
  }
  j["block_list"] = blocks;
  json roots = json::array();
  for (const auto &r : s.roots) {
    json t = json::array();
    for (uint32_t k = r.first; k < r.first + r.count; ++k)
      t.push_back({{"to", s.root_target[k]}, {"offset", s.root_offset[k]}, {"interior", bool(s.root_interior[k])}});
    roots.push_back({{"kind", snapshot::root_kind_name(r.kind)}, {"detail", r.detail}, {"start", hex(r.start)},
                     {"length", r.length}, {"name", r.name}, {"thread_name", r.thread_name}, {"targets", t}});
  }
  j["root_list"] = roots;
  std::cout << j.dump(1) << "\n";
  return kExitOk;
}

int run(const Options &o) {
  std::string err;
  auto reader = capture::CaptureReader::open(o.file, &err);
  if (!reader) {
    print_error("%s", err.c_str());
    return kExitInput;
  }
  if (o.dump >= 0) return dump(o, *reader);
  std::vector<std::string> notes;
  auto list = snapshot::list_snapshots(*reader, &notes);
  if (o.json) {
    json arr = json::array();
    for (const auto &s : list) arr.push_back(info_json(s));
    std::cout << json{{"file", o.file}, {"snapshots", arr}, {"notes", notes}}.dump(2) << "\n";
    return kExitOk;
  }
  auto print_notes = [&] {
    for (const auto &n : notes)
      printf("%s\n", out_style(snapshot::snapshot_note_is_warning(n) ? Style::kWarning : Style::kEstimate, n).c_str());
  };
  if (list.empty()) {
    printf("no snapshots in %s (record with --snapshot-at-exit, --snapshot-on-signal, ...)\n", o.file.c_str());
    print_notes();
    return kExitOk;
  }
  print_styled(Style::kHeader, "%3s %9s %-14s %12s %12s %12s %10s %10s  %s\n", "#", "time", "trigger", "blocks", "bytes",
               "edges", "pause", "scan", "label");
  for (const auto &s : list) {
    bool complete = s.have_begin && s.have_end && s.end.complete();
    printf("%3u %9s %-14s %12s %s %12s %10s %10s  %s%s\n", s.index, human_duration(double(s.time_ns) / 1e9).c_str(),
           snapshot::trigger_name(s.trigger), human_count(s.end.blocks()).c_str(),
           out_style(Style::kSize, human_bytes(double(s.end.bytes())), 12).c_str(), human_count(s.end.edges()).c_str(),
           human_duration(double(s.pause_ns) / 1e9).c_str(), human_duration(double(s.end.scan_ns()) / 1e9).c_str(),
           s.label.c_str(), complete ? "" : out_style(Style::kWarning, "  [INCOMPLETE]").c_str());
    if (!complete) {
      std::string why = !s.end.error().empty() ? s.end.error() : "the snapshot child did not finish";
      printf("      %s\n", out_style(Style::kWarning, why).c_str());
    }
  }
  if (!notes.empty()) printf("\n");
  print_notes();
  return kExitOk;
}

}  // namespace
}  // namespace cmd_snapshots

void add_snapshots_command(Cmd app, int *rc) {
  using namespace cmd_snapshots;
  auto o = std::make_shared<Options>();
  Cmd cmd = app.subcommand("snapshots", "List the heap snapshots in a capture (time, trigger, blocks, bytes, edges, pause).");
  cmd.option("file", o->file, "capture file").required();
  cmd.flag("--json", o->json, "machine-readable output");
  cmd.option("--dump", o->dump, "print snapshot K's blocks, edges and roots as JSON");
  cmd.footer("Record snapshots with: heapsnap record --snapshot-at-exit | --snapshot-on-signal=USR2 | --snapshot-every N ...");
  cmd.callback([o, rc] { *rc = run(*o); });
}

}  // namespace heapsnap::cli
