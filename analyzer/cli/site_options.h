// --hide-frames and --all-frames, for every command that names allocation sites: which frames
// are the library's, so that a site is the program's own frame (replay/stack_symbolizer.h,
// symbolize/frame_filter.h).
#pragma once
#include <cstdlib>
#include <string>
#include <vector>

#include "cli/args.h"
#include "cli/term_style.h"
#include "symbolize/frame_filter.h"

namespace heapsnap::cli {

struct SiteOptions {
  std::vector<std::string> hide_frames;  // --hide-frames REGEX, repeatable
  bool all_frames = false;
};

inline void add_site_options(Cmd cmd, SiteOptions &o) {
  cmd.option("--hide-frames", o.hide_frames,
             "frames whose function, source file or module this regular expression matches are the library's: "
             "never a site while the program has a frame (your allocation wrappers, e.g. 'xmalloc|my_alloc'); "
             "repeatable; HEAPSNAP_HIDE_FRAMES adds more (separated by newlines or ';')")
      .type_name("REGEX")
      .allow_extra_args(false);
  cmd.flag("--all-frames", o.all_frames,
           "sites are the innermost frames and stacks are whole, as recorded: the C++ library's frames "
           "(std::, operator new), malloc's and your --hide-frames ones included");
}

// The rules the options and the environment give. On a bad regular expression prints why and
// returns false (a usage error).
inline bool make_frame_filter(const SiteOptions &o, symbolize::FrameFilter *out) {
  symbolize::FrameFilter f;
  std::string err;
  if (!f.add_patterns_from_env(std::getenv("HEAPSNAP_HIDE_FRAMES"), &err)) {
    print_error("HEAPSNAP_HIDE_FRAMES: %s", err.c_str());
    return false;
  }
  for (const auto &p : o.hide_frames)
    if (!f.add_pattern(p, &err)) {
      print_error("--hide-frames %s", err.c_str());
      return false;
    }
  f.set_all_frames(o.all_frames);
  *out = std::move(f);
  return true;
}

}  // namespace heapsnap::cli
