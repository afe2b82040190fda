// `flamegraph` and `export`: a capture's per-stack figures in other tools' formats. Text goes to
// stdout unless -o says otherwise; pprof is binary, so it needs -o or a stdout that is not a
// terminal. Notes about the capture go to stderr, since stdout may be the data.
//
// `export --format F` dispatches through kFormats: a new format is one more entry there.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "cli/commands.h"
#include "cli/format.h"
#include "cli/replay_load.h"
#include "cli/site_options.h"
#include "cli/snapshot_args.h"
#include "cli/term_style.h"
#include "export/collapsed.h"
#include "export/graph_json.h"
#include "export/gzip.h"
#include "export/pprof.h"
#include "replay/replay.h"
#include "replay/stack_symbolizer.h"

namespace heapsnap::cli {
// Named as well as anonymous: the sanitizer builds' unity units put several cmd_*.cc in one
// translation unit, and each has its own Options and run().
namespace cmd_export {
namespace {

struct ExportOpts {
  std::string file;
  std::string format;
  std::string output;  // "" or "-": stdout
  std::string metric = "alloc-bytes";
  std::string match;
  std::vector<std::string> debug_dirs;
  int snapshot = -1;           // graph-json
  std::string interior = "on";
  SiteOptions sites;           // graph-json's site labels (pprof and collapsed keep whole stacks)
  std::string by = "stack";    // collapsed: stack, or type (a root frame per type)
};

void print_notes(const LoadedReplay &L) {
  if (L.r.truncated) print_note("the capture is truncated: figures cover what was read");
  for (const auto &p : L.r.problems) print_note("offset 0x%llx: %s", (unsigned long long)p.offset, p.what.c_str());
  for (const auto &w : L.sym->warnings()) print_note("%s", w.c_str());
}

bool to_stdout(const ExportOpts &o) { return o.output.empty() || o.output == "-"; }

int write_output(const ExportOpts &o, const std::string &data) {
  if (to_stdout(o)) {
    if (fwrite(data.data(), 1, data.size(), stdout) != data.size() || fflush(stdout) != 0) {
      print_error("writing to stdout: %s", strerror(errno));
      return kExitInput;
    }
    return kExitOk;
  }
  FILE *f = fopen(o.output.c_str(), "wb");
  if (!f) {
    print_error("%s: %s", o.output.c_str(), strerror(errno));
    return kExitInput;
  }
  bool ok = fwrite(data.data(), 1, data.size(), f) == data.size();
  ok = (fclose(f) == 0) && ok;
  if (!ok) {
    print_error("writing %s: %s", o.output.c_str(), strerror(errno));
    remove(o.output.c_str());  // a partial profile would only mislead
    return kExitInput;
  }
  return kExitOk;
}

int run_collapsed(const ExportOpts &o) {
  auto metric = exporter::parse_metric(o.metric);
  if (!metric) {
    print_error("--metric '%s': expected alloc-bytes, alloc-calls, leaked or peak", o.metric.c_str());
    return kExitUsage;
  }
  LoadedReplay L;
  if (!load_replay(o.file, o.debug_dirs, &L)) return kExitInput;
  exporter::CollapsedOptions co;
  co.metric = *metric;
  co.match = o.match;
  co.by_type = o.by == "type";
  std::string text = exporter::collapsed_text(exporter::collapse_stacks(L.r, *L.sym, co));
  print_notes(L);
  return write_output(o, text);
}

int run_pprof(const ExportOpts &o) {
  if (to_stdout(o) && stdout_is_terminal()) {
    print_error("export: pprof output is binary: give -o FILE.pb.gz or redirect stdout");
    return kExitUsage;
  }
  LoadedReplay L;
  if (!load_replay(o.file, o.debug_dirs, &L)) return kExitInput;
  exporter::PprofOptions po;
  po.match = o.match;
  po.capture_path = o.file;
  std::string raw, gz, err;
  if (!exporter::build_pprof(L.r, *L.sym, po).SerializeToString(&raw)) {
    print_error("could not serialize the profile (over 2 GiB?)");
    return kExitInput;
  }
  if (!exporter::gzip(raw, &gz, &err)) {
    print_error("%s", err.c_str());
    return kExitInput;
  }
  print_notes(L);
  return write_output(o, gz);
}

// graph-json: a snapshot's nodes, edges, roots, immediate dominators and retained sizes.
int run_graph_json(const ExportOpts &o) {
  symbolize::FrameFilter filter;
  if (!make_frame_filter(o.sites, &filter)) return kExitUsage;
  SnapshotArgs a;
  a.file = o.file;
  a.snapshot = o.snapshot;
  a.interior = o.interior;
  snapshot::HeapSnapshot s;
  snapshot::LoadOptions lo;
  lo.identity = false;
  lo.edge_offsets = true;  // (the spare capacity of vectors is found by offset: snapshot/spare_capacity.h)
  if (!load_chosen_snapshot(a, &s, lo)) return kExitInput;
  auto g = snapshot::build_object_graph(s, o.interior == "on", false);
  replay::ReplayResult ctx = load_capture_context(o.file);
  replay::StackSymbolizer sym(ctx.modules, symbolize::command_options(o.debug_dirs));
  sym.set_frame_filter(std::move(filter));
  // A block's site: the first frame of the program in its stack or its call site's inline chain.
  std::unordered_map<uint64_t, std::string> labels;  // per site address: made readable once
  auto site = [&](uint32_t b) -> std::string {
    uint32_t st = b < s.stack.size() ? s.stack[b] : 0;
    uint64_t at = sym.site_address(ctx.stacks, ctx.stacks.valid(st) ? st : 0, s.call_site[b]);
    auto [it, fresh] = labels.try_emplace(at);
    if (fresh) it->second = sym.site_label(sym.site_frame(at));
    return it->second;
  };
  FILE *out = stdout;
  if (!o.output.empty() && o.output != "-") {
    out = fopen(o.output.c_str(), "w");
    if (!out) {
      print_error("export: cannot write %s: %s", o.output.c_str(), strerror(errno));
      return kExitInput;
    }
  }
  bool ok = exporters::write_graph_json(s, g, site, out);
  if (out != stdout) ok = fclose(out) == 0 && ok;
  else fflush(stdout);
  if (!ok) {
    print_error("export: writing %s failed", out == stdout ? "stdout" : o.output.c_str());
    return kExitInput;
  }
  return kExitOk;
}

struct Format {
  const char *name;
  int (*run)(const ExportOpts &);
};
constexpr Format kFormats[] = {
    {"collapsed", run_collapsed},
    {"pprof", run_pprof},
    {"graph-json", run_graph_json},
};

int run_export(const ExportOpts &o) {
  if (o.by != "stack" && o.format != "collapsed") {
    print_error("export: --by %s is for --format collapsed (pprof carries each sample's type as a label: "
                "`go tool pprof -tagroot type`)", o.by.c_str());
    return kExitUsage;
  }
  for (const Format &f : kFormats)
    if (o.format == f.name) return f.run(o);
  std::string known;
  for (const Format &f : kFormats) known += std::string(known.empty() ? "" : ", ") + f.name;
  print_error("export: --format '%s' is not implemented (formats: %s)", o.format.c_str(), known.c_str());
  return kExitUsage;
}

// The options every export shares, named as the replay commands name them.
void add_common(Cmd cmd, ExportOpts &o) {
  cmd.option("file", o.file, "capture file (.hsnap)").required();
  cmd.option("-o,--output", o.output, "write here instead of stdout");
  cmd.option("--match", o.match, "only stacks with a frame whose function, file or module contains this text");
  cmd.option("--debug-dir", o.debug_dirs, "directory with separate debug files (default /usr/lib/debug); repeatable");
}

}  // namespace
}  // namespace cmd_export

void add_export_commands(Cmd app, int *rc) {
  using namespace cmd_export;
  {
    auto o = std::make_shared<ExportOpts>();
    Cmd cmd = app.subcommand("flamegraph", "Collapsed stacks for flamegraph.pl or speedscope.");
    add_common(cmd, *o);
    cmd.option("--metric", o->metric, "alloc-bytes (default), alloc-calls, leaked or peak");
    cmd.option("--by", o->by, "stack (default), or type: each stack under a first frame naming its type")
        .one_of({"stack", "type"});
    cmd.footer("One line per stack, outermost frame first: \"main;f;g 4096\".\n"
                "Examples:\n  heapsnap flamegraph app.hsnap | flamegraph.pl > app.svg\n"
                "  heapsnap flamegraph --metric leaked -o leaks.folded app.hsnap   (open in speedscope)");
    cmd.callback([o, rc] { *rc = run_collapsed(*o); });
  }
  {
    auto o = std::make_shared<ExportOpts>();
    Cmd cmd = app.subcommand("export", "The capture's allocation stacks in another tool's format.");
    add_common(cmd, *o);
    cmd.option("--format", o->format,
               "pprof (profile.proto, gzipped), collapsed (as `flamegraph`) or graph-json (a snapshot's object graph)")
        .required();
    cmd.option("--snapshot", o->snapshot, "for graph-json: snapshot index (default: the last complete one)");
    cmd.option("--interior", o->interior, "for graph-json: follow interior pointers, on (default) or off")
        .one_of({"on", "off"});
    cmd.option("--metric", o->metric, "for --format collapsed: alloc-bytes (default), alloc-calls, leaked or peak");
    cmd.option("--by", o->by, "for --format collapsed: stack (default), or type (a first frame naming each stack's type)")
        .one_of({"stack", "type"});
    add_site_options(cmd, o->sites);
    cmd.footer("pprof sample types: alloc_objects, alloc_space (default), inuse_objects, inuse_space\n"
                "(inuse: not freed when the capture ended). Each sample whose frames name a type carries a label\n"
                "type=... (`go tool pprof -tagroot type` splits by it, `-tagfocus type=...` keeps one).\n"
                "graph-json: {\"nodes\": [{id, address, size, site, idom (-1: only the roots dominate it; null:\n"
                "unreachable), retained}], \"edges\": [[from, to]], \"roots\": [ids held directly by a root]}.\n"
                "Examples:\n  heapsnap export --format pprof -o app.pb.gz app.hsnap && go tool pprof -top app.pb.gz\n"
                "  heapsnap export --format graph-json --snapshot 0 -o graph.json app.hsnap");
    cmd.callback([o, rc] { *rc = run_export(*o); });
  }
}

}  // namespace heapsnap::cli
