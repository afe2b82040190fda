// heapsnap: the command-line front end of the analyzer (and of `record`, which runs the shim).
#include <cstdio>

#include "cli/commands.h"

#ifndef HEAPSNAP_VERSION
#define HEAPSNAP_VERSION "dev"
#endif

int main(int argc, char **argv) {
  CLI::App app{
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
  app.set_version_flag("--version", std::string("heapsnap ") + HEAPSNAP_VERSION);
  app.require_subcommand(1);
  app.fallthrough(false);
  int rc = 0;
  heapsnap::cli::add_record_command(app, &rc);
  heapsnap::cli::add_summary_command(app, &rc);
  heapsnap::cli::add_replay_commands(app, &rc);
  heapsnap::cli::add_export_commands(app, &rc);
  heapsnap::cli::add_snapshots_command(app, &rc);
  heapsnap::cli::add_unreachable_command(app, &rc);
  heapsnap::cli::add_retainer_commands(app, &rc);
  heapsnap::cli::add_report_command(app, &rc);
  try {
    app.parse(heapsnap::cli::split_record_command(argc, argv), argv);
  } catch (const CLI::ParseError &e) {
    int code = app.exit(e);
    return code == 0 ? 0 : heapsnap::cli::kExitUsage;
  }
  return rc;
}
