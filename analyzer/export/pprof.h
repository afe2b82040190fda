// pprof's profile.proto (google/pprof, see profile.proto here) from a replay, for `go tool pprof`
// and the tools that read it. Four sample types, as Go's own heap profiles have them:
// alloc_objects/count, alloc_space/bytes, inuse_objects/count, inuse_space/bytes, where "inuse"
// is what was not freed when the capture ended. Values are the replay's weighted estimates
// rounded to integers; period is the capture's mean sampling interval (space/bytes).
//
// One Location per distinct return address, its inlined callees as extra Lines (innermost
// first, the real function last, as pprof expects); every Location has at least one Line with a
// Function, because speedscope drops locations without one (an unsymbolized frame gets
// "module+0xoffset" as its name). Functions are shared by (name, file).
#pragma once
#include <string>

#include "profile.pb.h"
#include "replay/replay.h"
#include "replay/stack_symbolizer.h"

namespace heapsnap::exporter {

struct PprofOptions {
  std::string match;         // only stacks with a matching frame (see stack_matches())
  std::string capture_path;  // named in the profile's comments
};

perftools::profiles::Profile build_pprof(const replay::ReplayResult &r,
                                         replay::StackSymbolizer &sym, const PprofOptions &opts);

}  // namespace heapsnap::exporter
