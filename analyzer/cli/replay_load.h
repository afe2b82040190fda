// What every replay query (top-allocators, leaks, peak, flamegraph, timeline, export) starts
// with: the capture replayed, and a symbolizer that followed the replay (it prefetched the debug
// files of the modules the stacks name while the events were read).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "replay/replay.h"
#include "replay/stack_symbolizer.h"

namespace heapsnap::cli {

struct LoadedReplay {
  replay::ReplayResult r;
  std::unique_ptr<replay::StackSymbolizer> sym;
};

// Replays `file` (progress on stderr when it is a terminal). On failure prints why (the file's
// offset at fault, or that it holds no process record) and returns false.
bool load_replay(const std::string &file, const std::vector<std::string> &debug_dirs, LoadedReplay *out);

// Only what symbolizing a snapshot needs from its capture: the modules and stacks
// (ReplayOptions::context_only). Empty when the file cannot be opened (the snapshot loader says
// why).
replay::ReplayResult load_capture_context(const std::string &file);

}  // namespace heapsnap::cli
