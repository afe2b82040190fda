// Options shared by the snapshot queries (unreachable, top-retainers, dominators, path, ...).
#pragma once
#include <string>
#include <vector>

#include "cli/args.h"
#include "cli/site_options.h"
#include "snapshot/heap_snapshot.h"

namespace heapsnap::cli {

struct SnapshotArgs {
  std::string file;
  int snapshot = -1;           // -1: the last complete snapshot taken (or of snapshot_trigger)
  std::string snapshot_trigger;  // --snapshot peak|exit|...: the last complete one of that trigger
  bool json = false;
  bool raw_bytes = false;
  std::string interior = "on";
  std::vector<std::string> debug_dirs;
  size_t limit = 20;
  SiteOptions sites;  // the commands that name sites add them: add_site_options(cmd, a.sites)
};

// rows: the command shows rows that -n/--limit limits (path and suspects do not).
void add_snapshot_args(Cmd cmd, SnapshotArgs &a, bool rows = true);

// Loads the chosen snapshot; prints the error and returns false on failure.
bool load_chosen_snapshot(const SnapshotArgs &a, snapshot::HeapSnapshot *out,
                          const snapshot::LoadOptions &opts = {});

}  // namespace heapsnap::cli
