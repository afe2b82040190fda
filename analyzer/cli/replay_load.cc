#include "cli/replay_load.h"

#include "cli/format.h"
#include "cli/progress.h"
#include "cli/term_style.h"

namespace heapsnap::cli {

replay::ReplayResult load_capture_context(const std::string &file) {
  std::string err;
  replay::ReplayResult ctx;
  if (auto reader = capture::CaptureReader::open(file, &err)) {
    replay::ReplayOptions o;
    o.context_only = true;
    ctx = replay::replay(*reader, o);
  }
  return ctx;
}

bool load_replay(const std::string &file, const std::vector<std::string> &debug_dirs, LoadedReplay *out) {
  std::string err;
  Progress prog("replaying " + file);
  // Made before the replay, which hands it modules and stacks as it reads them: debug files
  // load on another thread meanwhile.
  out->sym = std::make_unique<replay::StackSymbolizer>(symbolize::command_options(debug_dirs));
  replay::ReplayOptions o;
  o.progress = prog.callback();
  out->sym->follow(o);
  out->r = replay::replay_with_peak(file, &err, o);
  if (!err.empty()) {
    print_error("%s", err.c_str());
    return false;
  }
  prog.done();
  if (!out->r.have_process) {
    print_error("%s", no_process_record_message(file, out->r.problems).c_str());
    return false;
  }
  return true;
}

}  // namespace heapsnap::cli
