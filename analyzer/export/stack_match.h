// --match for exports, with the meaning the replay commands give it: a stack is kept when one of
// its frames has the text in its function, source file or module name.
#pragma once
#include <string>
#include <vector>

#include "replay/stack_symbolizer.h"

namespace heapsnap::exporter {

inline bool stack_matches(const std::vector<replay::DisplayFrame> &frames, const std::string &text) {
  if (text.empty()) return true;
  for (const auto &f : frames)
    if (f.function.find(text) != std::string::npos || f.file.find(text) != std::string::npos ||
        f.module.find(text) != std::string::npos)
      return true;
  return false;
}

}  // namespace heapsnap::exporter
