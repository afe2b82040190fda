// heapsnap: the command-line front end of the analyzer (and of `record`, which runs the shim).
#include <malloc.h>

#include <cstdio>

#include "cli/commands.h"
#include "cli/term_style.h"

#ifndef HEAPSNAP_VERSION
#define HEAPSNAP_VERSION "dev"
#endif

int main(int argc, char **argv) {
  // A fixed mmap threshold: glibc's own moves up to the size of the largest mmapped block freed
  // so far, so where later blocks land (and the peak memory) depended on what an earlier pass
  // happened to free. top-retainers on 10^8 nodes peaked 17 MB higher (4012 against 3994 MB)
  // once the snapshot list stopped decompressing every frame; at 1 MiB both peak at 3899 MB.
  mallopt(M_MMAP_THRESHOLD, 1 << 20);
  heapsnap::cli::CommandLine line{
      "heapsnap - where a native program's memory goes, and what keeps it alive.\n\n"
      "  heapsnap record -o app.hsnap -- ./app args   trace an unmodified program\n"
      "  heapsnap summary app.hsnap                   what the capture knows\n"
      "  heapsnap top-allocators app.hsnap            where the allocations come from\n"
      "  heapsnap leaks app.hsnap                     what was never freed\n"
      "  heapsnap peak app.hsnap                      what was live at the peak\n"
      "  heapsnap flamegraph app.hsnap                collapsed stacks for flamegraph.pl\n"
      "  heapsnap export --format pprof -o app.pb.gz app.hsnap   for go tool pprof\n"
      "  heapsnap report app.hsnap -o app.html        everything in one HTML page\n",
      "heapsnap"};
  heapsnap::cli::Cmd app = line.app();
  // The man page (analyzer/cli/man_page.py) turns the "Word:" paragraphs below into its sections.
  app.footer(
      "Run 'heapsnap COMMAND --help' for a command's options and examples, or read the manual:\n"
      "man heapsnap (man -l build/analyzer/heapsnap.1 in a build tree).\n"
      "\n"
      "Exit status:\n"
      "  0  success\n"
      "  1  bad input: a missing, unreadable or damaged capture, or an output file that cannot be written\n"
      "  2  usage error: an unknown command or option, a bad or missing value; record: an output\n"
      "     file that cannot be created\n"
      "  3  record: the program could not be started, cannot be traced (statically linked, setuid or\n"
      "     setgid: refused before it runs), or ran but wrote no capture at all; otherwise record exits\n"
      "     with the program's own status (128+N when signal N killed it)\n"
      "\n"
      "Environment:\n"
      "  NO_COLOR          set and not empty: no colour unless --color=always (https://no-color.org)\n"
      "  TERM              dumb: no colour unless --color=always\n"
      "  HEAPSNAP_PRELOAD  the shim record preloads (default: found next to this program)\n"
      "  HEAPSNAP_CACHE_DIR  where queries keep inflated copies of compressed debug files, in\n"
      "                    HEAPSNAP_CACHE_DIR/debug (default $XDG_CACHE_HOME/heapsnap, else\n"
      "                    ~/.cache/heapsnap; at most 2 GiB, least recently used go first); empty or\n"
      "                    \"off\": no cache\n"
      "  HEAPSNAP_SNAPSHOT_THREADS  threads a heap snapshot's scan runs on, 1 to 64 (default: the CPUs\n"
      "                    the program may use, at most 8; record passes it on to the program)");
  app.version_flag("--version", std::string("heapsnap ") + HEAPSNAP_VERSION);
  app.require_subcommand(1);
  app.fallthrough(false);
  int rc = 0;
  heapsnap::cli::add_record_command(app, &rc);
  // record runs before the program it traces: its start-up is the program's. The other commands'
  // options took three quarters of it (2 M instructions) and record never needs them.
  if (!heapsnap::cli::command_is_record(argc, argv)) {
    heapsnap::cli::add_summary_command(app, &rc);
    heapsnap::cli::add_replay_commands(app, &rc);
    heapsnap::cli::add_export_commands(app, &rc);
    heapsnap::cli::add_snapshots_command(app, &rc);
    heapsnap::cli::add_unreachable_command(app, &rc);
    heapsnap::cli::add_types_command(app, &rc);
    heapsnap::cli::add_memory_command(app, &rc);
    heapsnap::cli::add_retainer_commands(app, &rc);
    heapsnap::cli::add_report_command(app, &rc);
  }
  // --color is accepted before the command and after it (CLI11 options do not fall through).
  heapsnap::cli::add_color_option(app);
  for (heapsnap::cli::Cmd cmd : app.subcommands()) heapsnap::cli::add_color_option(cmd);
  using Parsed = heapsnap::cli::CommandLine::Parsed;
  Parsed parsed = line.parse(heapsnap::cli::split_record_command(argc, argv), argv);
  if (parsed == Parsed::kRan) return rc;
  return parsed == Parsed::kAnswered ? heapsnap::cli::kExitOk : heapsnap::cli::kExitUsage;
}
