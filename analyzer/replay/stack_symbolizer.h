// Turns recorded return addresses into display frames: finds the module that held the address
// (at the time the capture saw it), symbolizes it (inlined callees expanded), caches per address.
#pragma once
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "capture/stack_tree.h"
#include "replay/replay.h"
#include "symbolize/symbolizer.h"

namespace heapsnap::replay {

struct DisplayFrame {
  std::string function;   // demangled, or "" when unknown
  std::string file;       // source file (full path as in DWARF), or ""
  uint32_t line = 0;
  std::string module;     // module basename
  uint64_t address = 0;   // the recorded return address
  uint64_t module_offset = 0;
  bool inlined = false;   // an inlined callee of the next frame

  // "func (file.cc:12)", "func (libfoo.so)", "libfoo.so+0x1234", "[truncated]".
  std::string label(bool with_location = true) const;
};

class StackSymbolizer {
 public:
  StackSymbolizer(const std::vector<ModuleRecord> &modules, symbolize::SymbolizerOptions opts = {});
  // Modules come later, from add_module: as a replay reads them (see follow()).
  explicit StackSymbolizer(symbolize::SymbolizerOptions opts);

  void add_module(const ModuleRecord &m);

  // Hooks a replay to this symbolizer: modules are added as the replay reads them, and a module
  // is prefetched (opened, its DWARF loaded, on another thread: Symbolizer::prefetch) when the
  // first stack with a frame in it comes. The replay's own work then hides that load.
  void follow(ReplayOptions &o);

  // Display frames of one return address, innermost first. Address 0 is the truncation marker.
  const std::vector<DisplayFrame> &frames_of(uint64_t address);
  // A name for the code at `address` that another run of the same program gives it too, with its
  // modules loaded elsewhere: the module's path and the offset from its load bias
  // ("/usr/lib/libfoo.so+0x1234"), or the address itself when no module held it. Nothing is
  // symbolized.
  std::string stable_site(uint64_t address);
  // All display frames of a stack, innermost first.
  std::vector<DisplayFrame> stack(const capture::StackTree &tree, uint32_t leaf);
  std::vector<std::string> warnings() const { return sym_.warnings(); }

 private:
  struct Range {
    uint64_t start, end;
    uint32_t handle;
    std::string name;
    std::string path;
    uint64_t load_bias;
  };
  const Range *range_of(uint64_t address);
  void watch(const capture::StackTree &tree, uint32_t first_node);

  symbolize::Symbolizer sym_;
  std::vector<Range> ranges_;  // sorted by start (when sorted_)
  bool sorted_ = true;
  std::vector<bool> prefetched_;  // per symbolizer handle
  const Range *last_watched_ = nullptr;  // watch(): the range of the previous new frame
  std::unordered_map<uint64_t, std::vector<DisplayFrame>> cache_;
};

}  // namespace heapsnap::replay
