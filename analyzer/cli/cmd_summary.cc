// heapsnap summary FILE [--json]: program, duration, exact totals, sampling, integrity.
#include <nlohmann/json.hpp>

#include <cstdio>
#include <iostream>

#include "cli/commands.h"
#include "cli/format.h"
#include "cli/term_style.h"
#include "replay/capture_summary.h"
#include "snapshot/heap_snapshot.h"

namespace heapsnap::cli {
// Named as well as anonymous: the sanitizer builds' unity units put several cmd_*.cc in one
// translation unit, and each has its own Options and run().
namespace cmd_summary {
namespace {

struct Options {
  std::string file;
  bool json = false;
};

nlohmann::ordered_json to_json(const replay::CaptureSummary &s) {
  const wire::Totals &t = s.totals;
  nlohmann::ordered_json j;
  j["file"] = nullptr;
  j["program"] = s.process.executable();
  j["argv"] = std::vector<std::string>(s.process.argv().begin(), s.process.argv().end());
  j["pid"] = s.process.pid();
  j["duration_s"] = double(s.last_time_ns) / 1e9;
  j["alloc_calls"] = t.alloc_calls();
  j["free_calls"] = t.free_calls();
  j["realloc_calls"] = t.realloc_calls();
  j["bytes_allocated"] = t.bytes_allocated();
  j["bytes_freed"] = t.bytes_freed();
  j["heap_bytes_at_end"] = t.heap_bytes();
  add_peak_json(j, peak_figure(t, s.highest_heap));
  j["peak_accuracy_bytes"] = t.peak_accuracy_bytes();
  j["leaked_blocks"] = t.live_blocks();
  j["leaked_bytes"] = t.heap_bytes();
  j["foreign_frees"] = t.foreign_frees();
  j["rss_bytes_at_end"] = t.rss_bytes();
  j["sample_bytes"] = s.process.sample_bytes();
  j["sampled_allocs"] = s.sampled_allocs;
  j["sampled_frees"] = s.sampled_frees;
  j["sampled_reallocs"] = s.sampled_reallocs;
  j["stacks"] = s.stacks;
  j["modules"] = s.modules;
  j["threads"] = s.threads;
  j["snapshots"] = s.snapshots;
  j["snapshot_notes"] = s.snapshot_notes;
  j["dropped_events"] = t.dropped_events();
  j["fork_child"] = s.process.fork_child();
  j["end_reason"] = s.ended ? nlohmann::ordered_json(s.end_reason) : nlohmann::ordered_json(nullptr);
  j["truncated"] = s.truncated;
  j["problems"] = problems_json(s.problems);
  j["file_bytes"] = s.file_bytes;
  return j;
}

void print_text(const std::string &file, const replay::CaptureSummary &s) {
  const wire::Totals &t = s.totals;
  // Left-hand labels are the headings; figures in bytes stand out in the size colour.
  auto label = [](const char *l) { return out_style(Style::kHeading, l, -12); };
  auto bytes = [](double b) { return out_style(Style::kSize, human_bytes(b)); };
  std::string args;
  for (int i = 0; i < s.process.argv_size(); ++i) args += (i ? " " : "") + s.process.argv(i);
  printf("%s%s (%s, %s frames)\n", label("capture").c_str(), file.c_str(), bytes(double(s.file_bytes)).c_str(),
         human_count(s.frames).c_str());
  printf("%s%s\n", label("program").c_str(), args.empty() ? s.process.executable().c_str() : args.c_str());
  printf("%s%u%s\n", label("pid").c_str(), s.process.pid(), s.process.fork_child() ? " (forked child)" : "");
  printf("%s%s\n", label("duration").c_str(), human_duration(double(s.last_time_ns) / 1e9).c_str());
  if (s.ended) {
    // How the capture ended. "error: ..." is the shim refusing to trace the process (its figures
    // are then empty, not the program's); "salvaged: ..." an end the tail guard wrote after the
    // process had gone without the shim's exit path.
    const std::string &r = s.end_reason;
    if (r.rfind("error:", 0) == 0)
      printf("%s%s\n", out_style(Style::kError, "NOT TRACED", -12).c_str(), r.substr(7).c_str());
    else if (r.rfind("salvaged: ", 0) == 0)
      printf("%s%s %s\n", label("ended").c_str(), r.substr(10).c_str(),
             out_style(Style::kEstimate, "(written by the tail guard after the process had gone)").c_str());
    else
      printf("%s%s\n", label("ended").c_str(), r == "exit" ? "exit" : r.c_str());
  }
  printf("\n%s%s\n", out_style(Style::kHeading, "exact totals").c_str(),
         s.ended ? "" : out_style(Style::kWarning, " (as of the last flush)").c_str());
  printf("  allocation calls   %s (%s reallocs)\n", human_count(t.alloc_calls()).c_str(),
         human_count(t.realloc_calls()).c_str());
  printf("  free calls         %s\n", human_count(t.free_calls()).c_str());
  printf("  bytes allocated    %s\n", bytes(double(t.bytes_allocated())).c_str());
  // The same words as `peak` and the other replay queries (cli/format.h peak_text).
  printf("  peak heap          %s\n", peak_text(peak_figure(t, s.highest_heap), bytes).c_str());
  printf("  not freed at end   %s %s, %s\n", human_count(t.live_blocks()).c_str(), blocks_word(double(t.live_blocks())),
         bytes(double(t.heap_bytes())).c_str());
  if (t.rss_bytes()) printf("  RSS at end         %s\n", bytes(double(t.rss_bytes())).c_str());
  if (t.foreign_frees())
    printf("  foreign frees      %s %s\n", human_count(t.foreign_frees()).c_str(),
           out_style(Style::kEstimate, "(frees of blocks the shim never saw allocated: from before it started, or the "
                                       "loader's; not in the figures above)").c_str());
  uint64_t mean = s.process.sample_bytes();
  printf("\n%s%s\n", label("sampling").c_str(), mean <= 1 ? "every allocation" :
         ("mean every " + human_bytes(double(mean)) + " allocated").c_str());
  printf("  sampled allocs     %s (%s frees, %s reallocs), %s distinct stacks\n",
         human_count(s.sampled_allocs).c_str(), human_count(s.sampled_frees).c_str(),
         human_count(s.sampled_reallocs).c_str(), human_count(s.stacks).c_str());
  printf("%s%u\n", label("threads").c_str(), s.threads);
  printf("%s%s\n", label("modules").c_str(), human_count(s.modules).c_str());
  printf("%s%s\n", label("snapshots").c_str(), human_count(s.snapshots).c_str());
  for (const auto &n : s.snapshot_notes)
    printf("  %s\n", out_style(snapshot::snapshot_note_is_warning(n) ? Style::kWarning : Style::kEstimate, n).c_str());
  if (t.dropped_events())
    printf("%s%s\n", out_style(Style::kWarning, "dropped", -12).c_str(),
           out_style(Style::kWarning, human_count(t.dropped_events()) + " events (tracer fell behind or ran out of memory)").c_str());
  if (s.truncated) {
    printf("\n%s %s\n", out_style(Style::kWarning, "TRUNCATED:").c_str(),
           s.ended ? "damaged frames were skipped"
                   : "the capture has no end record (the process was killed, "
                     "or is still running); figures are as of the last flush");
  }
  for (const auto &p : s.problems)
    printf("  %s offset 0x%llx: %s\n", out_style(Style::kWarning, "problem at").c_str(), (unsigned long long)p.offset,
           p.what.c_str());
}

int run(const Options &o) {
  std::string err;
  auto reader = capture::CaptureReader::open(o.file, &err);
  if (!reader) {
    print_error("%s", err.c_str());
    return kExitInput;
  }
  replay::CaptureSummary s = replay::summarize(*reader);
  if (!s.have_process) {
    print_error("%s", no_process_record_message(o.file, s.problems).c_str());
    return kExitInput;
  }
  if (o.json) {
    auto j = to_json(s);
    j["file"] = o.file;
    std::cout << j.dump(2) << "\n";
  } else {
    print_text(o.file, s);
  }
  return kExitOk;
}

}  // namespace
}  // namespace cmd_summary

void add_summary_command(Cmd app, int *rc) {
  using namespace cmd_summary;
  auto opts = std::make_shared<Options>();
  Cmd cmd = app.subcommand(
      "summary", "Program, duration, exact allocation totals, peak, sampling and integrity of a capture.");
  cmd.option("file", opts->file, "capture file (.hsnap)").required();
  cmd.flag("--json", opts->json, "machine-readable output");
  cmd.footer("Example: heapsnap summary --json app.hsnap | jq .peak_heap_bytes");
  cmd.callback([opts, rc] { *rc = run(*opts); });
}

}  // namespace heapsnap::cli
