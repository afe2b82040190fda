// heapsnap memory FILE [--snapshot N|TRIGGER] [--json]: the program's RSS at a snapshot, explained
// (issue 32): parts that add up to it, and what could be done about them, with numbers.
#include <nlohmann/json.hpp>

#include <cstdio>
#include <iostream>

#include "cli/commands.h"
#include "cli/format.h"
#include "cli/term_style.h"
#include "memory/memory_breakdown.h"
#include "snapshot/heap_snapshot.h"

namespace heapsnap::cli {
// Named as well as anonymous: the sanitizer builds' unity units put several cmd_*.cc in one
// translation unit, and each has its own Options and run().
namespace cmd_memory {
namespace {

using json = nlohmann::ordered_json;

struct Options {
  std::string file;
  int snapshot = -1;
  std::string trigger;
  bool json = false;
  bool raw_bytes = false;
};

// The snapshot asked for: an index, or the last one taken (of a trigger) whose child finished.
// -1 with the error printed when there is none.
int choose(const Options &o, capture::CaptureReader &reader) {
  auto list = snapshot::list_snapshots(reader);
  if (o.snapshot >= 0) {
    for (const auto &s : list)
      if (int(s.index) == o.snapshot) return o.snapshot;
    print_error("%s has no snapshot %d; `heapsnap snapshots %s` lists them", o.file.c_str(), o.snapshot, o.file.c_str());
    return -1;
  }
  const snapshot::SnapshotInfo *pick = nullptr;
  for (const auto &s : list) {
    if (!o.trigger.empty() && o.trigger != snapshot::trigger_name(s.trigger)) continue;
    if (s.have_end && s.end.complete() && (!pick || s.time_ns >= pick->time_ns)) pick = &s;
  }
  if (!pick) {
    if (!reader.problems().empty())
      print_error("%s has no complete %ssnapshot (the capture is damaged: offset 0x%llx: %s)", o.file.c_str(),
                  o.trigger.empty() ? "" : (o.trigger + " ").c_str(), (unsigned long long)reader.problems()[0].offset,
                  reader.problems()[0].what.c_str());
    else
      print_error("%s has no complete %ssnapshot (record with --snapshot-at-exit or another trigger)", o.file.c_str(),
                  o.trigger.empty() ? "" : (o.trigger + " ").c_str());
    return -1;
  }
  return int(pick->index);
}

int run(const Options &o) {
  std::string err;
  auto reader = capture::CaptureReader::open(o.file, &err);
  if (!reader) {
    print_error("%s", err.c_str());
    return kExitInput;
  }
  int index = choose(o, *reader);
  if (index < 0) return kExitInput;
  reader = capture::CaptureReader::open(o.file, &err);
  if (!reader) {
    print_error("%s", err.c_str());
    return kExitInput;
  }
  memory::Breakdown b;
  bool missing = false;
  if (!memory::load_breakdown(*reader, uint32_t(index), &b, &err, &missing)) {
    print_error("%s: %s", o.file.c_str(), err.c_str());
    return kExitInput;
  }
  if (b.parts.empty()) {
    print_error("%s: snapshot %d: no memory breakdown: %s", o.file.c_str(), index, b.error.empty() ? "no parts" : b.error.c_str());
    return kExitInput;
  }
  const auto diagnoses = memory::diagnose(b);
  auto sz = [&](uint64_t v) { return o.raw_bytes ? std::to_string(v) : human_bytes(double(v)); };
  auto pct = [&](uint64_t v) { return b.rss ? 100.0 * double(v) / double(b.rss) : 0.0; };
  uint64_t sum = 0;
  for (const auto &p : b.parts) sum += p.rss;
  if (o.json) {
    json j;
    j["file"] = o.file;
    j["snapshot"] = index;
    j["rss_bytes"] = b.rss;
    j["vm_rss_bytes"] = b.vm_rss;
    j["parts_sum_bytes"] = sum;
    json parts = json::array();
    for (const auto &p : b.parts)
      parts.push_back({{"kind", memory::kind_key(p.kind)}, {"name", memory::kind_name(p.kind)}, {"rss_bytes", p.rss},
                       {"percent", pct(p.rss)}, {"size_bytes", p.size}, {"swap_bytes", p.swap},
                       {"anonymous_bytes", p.anonymous}, {"shared_bytes", p.shared}, {"mappings", p.mappings},
                       {"estimated", memory::kind_estimated(p.kind)}, {"about", memory::kind_about(p.kind)}});
    j["parts"] = parts;
    json arenas = json::array();
    for (const auto &a : b.arenas)
      arenas.push_back({{"main", a.main()}, {"state", a.state()}, {"heaps", a.heaps()}, {"size_bytes", a.size()},
                        {"live_bytes", a.live_bytes()}, {"live_rss", a.live_rss()}, {"overhead_bytes", a.overhead_bytes()},
                        {"overhead_rss", a.overhead_rss()}, {"free_bytes", a.free_bytes()}, {"free_rss", a.free_rss()},
                        {"cached_bytes", a.cached_bytes()}, {"cached_rss", a.cached_rss()}, {"top_bytes", a.top_bytes()},
                        {"top_rss", a.top_rss()}, {"unwalked_bytes", a.unwalked_bytes()}, {"unwalked_rss", a.unwalked_rss()},
                        {"live_chunks", a.live_chunks()}, {"free_chunks", a.free_chunks()},
                        {"cached_chunks", a.cached_chunks()}, {"trimmable_bytes", a.trimmable()}, {"complete", a.complete()},
                        {"fastbin_bytes", a.fastbin_bytes()}, {"fastbin_rss", a.fastbin_rss()}, {"fastbin_chunks", a.fastbin_chunks()},
                        {"tcache_bytes", a.tcache_bytes()}, {"tcache_rss", a.tcache_rss()}, {"tcache_chunks", a.tcache_chunks()}});
    j["arenas"] = arenas;
    json stacks = json::array();
    for (const auto &s : b.stacks)
      stacks.push_back({{"tid", s.tid()}, {"size_bytes", s.size()}, {"rss_bytes", s.rss()}, {"used_bytes", s.used()}});
    j["stacks"] = stacks;
    j["threads"] = b.threads;
    j["mappings"] = b.mappings;
    j["mmapped_chunks"] = b.mmapped_chunks;
    j["mmapped_live_bytes"] = b.mmapped_live;
    j["unmatched_bytes"] = b.unmatched;
    j["cost_s"] = double(b.cost_ns) / 1e9;
    if (!b.error.empty()) j["error"] = b.error;
    json d = json::array();
    for (const auto &x : diagnoses) d.push_back({{"id", x.id}, {"bytes", x.bytes}, {"text", x.text}});
    j["diagnoses"] = d;
    std::cout << j.dump(2) << "\n";
    return kExitOk;
  }
  printf("%s — RSS %s at the fork (the kernel's VmRSS, read after it: %s), %u mapping%s, %u thread%s\n\n",
         out_style(Style::kHeading, "memory at snapshot " + std::to_string(index)).c_str(), sz(b.rss).c_str(),
         sz(b.vm_rss).c_str(), b.mappings, b.mappings == 1 ? "" : "s", b.threads, b.threads == 1 ? "" : "s");
  print_styled(Style::kHeader, "%-20s %12s %7s %12s  %s\n", "part", "resident", "of RSS", "mapped", "what");
  for (const auto &p : b.parts)
    printf("%-20s %s %6.1f%% %12s  %s\n", memory::kind_name(p.kind), out_style(Style::kSize, sz(p.rss), 12).c_str(),
           pct(p.rss), sz(p.size).c_str(), memory::kind_about(p.kind));
  printf("%-20s %12s %6.1f%%\n", "sum", sz(sum).c_str(), pct(sum));
  uint64_t trim = 0;
  for (const auto &a : b.arenas) trim += a.trimmable();
  printf("\n%zu arena%s, %llu mmapped chunk%s (%s live), malloc_trim(0) would return about %s; heapsnap's own: %s "
         "(subtract it for the program's RSS without heapsnap)\n",
         b.arenas.size(), b.arenas.size() == 1 ? "" : "s", (unsigned long long)b.mmapped_chunks,
         b.mmapped_chunks == 1 ? "" : "s", sz(b.mmapped_live).c_str(), sz(trim).c_str(),
         sz(b.part(14)).c_str());
  if (!b.error.empty()) printf("%s\n", out_style(Style::kWarning, "partial: " + b.error).c_str());
  if (!b.arenas.empty()) {
    printf("\n");
    print_styled(Style::kHeader, "%-7s %5s %12s %12s %12s %12s %12s %12s %12s %12s %12s\n", "arena", "heaps", "resident", "live",
                 "overhead", "free (bins)", "tcache", "fastbins", "cached else", "top", "trimmable");
    size_t shown = 0;
    for (const auto &a : b.arenas) {
      if (shown++ == 16) {
        printf("(%zu more arenas: --json lists them)\n", b.arenas.size() - 16);
        break;
      }
      uint64_t res = a.live_rss() + a.overhead_rss() + a.free_rss() + a.cached_rss() + a.top_rss() + a.unwalked_rss();
      const uint64_t known = a.tcache_rss() + a.fastbin_rss(), rest = a.cached_rss() > known ? a.cached_rss() - known : 0;
      printf("%-7s %5u %12s %12s %12s %12s %12s %12s %12s %12s %12s%s\n", a.main() ? "main" : "thread", a.heaps(), sz(res).c_str(),
             sz(a.live_rss()).c_str(), sz(a.overhead_rss()).c_str(), sz(a.free_rss()).c_str(), sz(a.tcache_rss()).c_str(),
             sz(a.fastbin_rss()).c_str(), sz(rest).c_str(), sz(a.top_rss()).c_str(), sz(a.trimmable()).c_str(),
             a.complete() ? "" : "  (not all walked)");
    }
  }
  if (!b.stacks.empty()) {
    printf("\n");
    print_styled(Style::kHeader, "%-10s %12s %12s %12s\n", "thread", "stack", "touched", "in use");
    size_t shown = 0;
    for (const auto &st : b.stacks) {
      if (shown++ == 16) {
        printf("(%zu more stacks: --json lists them)\n", b.stacks.size() - 16);
        break;
      }
      printf("%-10u %12s %12s %12s\n", st.tid(), sz(st.size()).c_str(), sz(st.rss()).c_str(),
             st.used() ? sz(st.used()).c_str() : "?");
    }
  }
  if (!diagnoses.empty()) {
    printf("\n");
    for (const auto &d : diagnoses) printf("- %s\n", d.text.c_str());
  } else {
    printf("\nno diagnosis: no fragmentation, untrimmed memory, extra arenas or oversized stacks worth a MiB\n");
  }
  printf("\n%s\n",
         out_style(Style::kEstimate,
                   "The figures are of the fork: anonymous mappings' Rss from the snapshot's copy (its page tables), "
                   "file mappings' from the program's page tables (/proc/PID/pagemap, or its smaps); within a "
                   "mapping, heap parts are split by "
                   "the pages resident in the copy, a page shared by two chunks by bytes. " +
                       sz(b.unmatched) + " of anonymous memory changed in the program between the fork and the read "
                       "(not in these figures; the VmRSS above is of the read).")
             .c_str());
  return kExitOk;
}

}  // namespace
}  // namespace cmd_memory

void add_memory_command(Cmd app, int *rc) {
  using namespace cmd_memory;
  auto o = std::make_shared<Options>();
  Cmd cmd = app.subcommand("memory",
                           "The program's RSS at a snapshot, explained: heap (live, overhead, free, top), mmapped "
                           "chunks, stacks, mappings, heapsnap's own; with diagnoses.");
  cmd.option("file", o->file, "capture file").required();
  cmd.option_function(
         "--snapshot",
         [o](const std::string &v) {
           if (!v.empty() && v.find_first_not_of("0123456789") == std::string::npos && v.size() < 10)
             o->snapshot = std::stoi(v);
           else if (snapshot::trigger_from_name(v) >= 0)
             o->trigger = v;
           else
             reject_value("--snapshot", "'" + v + "' is not a snapshot index or trigger (peak, exit, signal, ...)");
         },
         "snapshot index, or a trigger (peak, exit, before-destructors, growth, signal, periodic, heap-threshold, "
         "rss-threshold, client): the last complete snapshot of that trigger (default: the last complete one taken)")
      .type_name("N|TRIGGER");
  cmd.flag("--json", o->json, "machine-readable output");
  cmd.flag("--bytes", o->raw_bytes, "print sizes as plain byte counts");
  cmd.footer(
      "At each snapshot the snapshot child reads the program's mappings (/proc/PID/maps and pagemap, or\n"
      "its smaps) and splits every mapping's Rss into parts that add up to the RSS: glibc's arenas walked\n"
      "chunk by chunk (live blocks' requested bytes, allocator overhead, free chunks, cached chunks: tcache,\n"
      "fastbins, other; top chunks), mmapped chunks, thread stacks (touched pages), the program's own\n"
      "anonymous mappings, code, module data, mapped files, shared memory, heapsnap's own memory (subtract\n"
      "it for the program untraced), other.\n"
      "Then it diagnoses, with numbers: fragmentation (free memory in the arenas against live), memory\n"
      "freed but not returned (what malloc_trim(0) or a lower M_TRIM_THRESHOLD would give back), too many\n"
      "arenas for the threads (what MALLOC_ARENA_MAX would save), stacks much bigger than used.\n"
      "Exit status: 0, 1 when the capture cannot be read or its snapshot has no breakdown (captures\n"
      "before format 3.3), 2 on a usage error.\n"
      "Example: heapsnap memory --snapshot exit app.hsnap");
  cmd.callback([o, rc] { *rc = run(*o); });
}

}  // namespace heapsnap::cli
