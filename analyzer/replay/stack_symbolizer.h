// Turns recorded return addresses into display frames: finds the module that held the address
// (at the time the capture saw it), symbolizes it (inlined callees expanded), caches per address.
#pragma once
#include <cstdint>
#include <string>
#include <unordered_set>
#include <unordered_map>
#include <vector>

#include "capture/stack_tree.h"
#include "replay/replay.h"
#include "symbolize/frame_filter.h"
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
  // The C or C++ library's, an allocation wrapper's, or one that --hide-frames names
  // (symbolize::FrameFilter): never an allocation's site while the program has a frame.
  bool library = false;

  // "func (file.cc:12)", "func (libfoo.so)", "libfoo.so+0x1234", "[truncated]".
  std::string label(bool with_location = true) const;
  // The same with the function's name made readable (symbolize::readable_name): "std::string"
  // for std::__cxx11::basic_string<char, ...>, no default template arguments, long names elided
  // in the middle.
  std::string readable_label(bool with_location = true) const;
  // The function's readable name ("" when unknown).
  std::string readable_function() const;
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
  // The symbolizer's notes (modules without symbols, build-id mismatches), and how many of the
  // stacks shown were cut at the recording's depth ([truncated] frames).
  std::vector<std::string> warnings() const;

  // --- Allocation sites ------------------------------------------------------------------------
  // An allocation's site is its first frame, walking outward from the allocation call (inlined
  // frames counting as frames), that is the program's (DisplayFrame::library false). With a stack
  // (a sampled block) the whole stack is walked, each return address's inline chain included;
  // with only the call site, its inline chain. When every frame is the library's, the site is the
  // outermost frame of the call site's inline chain. With --all-frames (FrameFilter::all_frames)
  // the site is the call site's innermost frame, as it was before sites were chosen.

  // Replaces the rules (the default: the built-in ones). Forgets what was symbolized.
  void set_frame_filter(symbolize::FrameFilter f);
  const symbolize::FrameFilter &frame_filter() const { return filter_; }
  bool all_frames() const { return filter_.all_frames(); }

  // Whether an inline chain of `address` holds a frame of the program.
  bool has_program_frame(uint64_t address);
  // The site's frame in the inline chain of `address` (the site address below): its first frame
  // of the program, else its outermost.
  const DisplayFrame &site_frame(uint64_t address);
  // The return address whose inline chain holds the site: the first address of stack `stack`
  // (leaf first) with a frame of the program; `call_site` when none has, and with --all-frames;
  // when `stack` is 0 or not in the tree, call_site_address(call_site). Remembered per stack node: one pass over a tree's
  // nodes in all. call_site 0: the stack's own leaf address.
  uint64_t site_address(const capture::StackTree &tree, uint32_t stack, uint64_t call_site = 0);
  // An unsampled block has only its call site. When that call site's inline chain is all the
  // library's (an out-of-line std::map insert, a libstdc++ string grow), nothing says which frame
  // of the program called it: the site is the call site (its chain's outermost frame, the library
  // function), marked not known (`*unknown` set; site_label() says "site not known: not sampled").
  // The sampled stacks through the same return address are no proof: on roots_app, the 2,300
  // strings grown by one out-of-line _M_mutate came from add_sessions (2,000) and fill_cache (300),
  // and the few sampled ones were often all add_sessions', so "they all agree" named add_sessions
  // for fill_cache's 300 too; no share of a handful of samples rules a caller out. Those stacks
  // are a hint (sampled_callers()), never the site.
  uint64_t call_site_address(const capture::StackTree &tree, uint64_t call_site, bool *unknown = nullptr);
  // Whether `address` stood as the site of an unsampled block whose call site has no frame of the
  // program (call_site_address above): its label says the site is not known.
  bool site_unknown(uint64_t address) const { return unknown_sites_.count(address) != 0; }
  // The program's sites of the sampled stacks that pass through return address `call_site`, with
  // how many stacks name each, most first: where the library function was seen called from.
  std::vector<std::pair<uint64_t, uint32_t>> sampled_callers(const capture::StackTree &tree, uint64_t call_site);
  // One id per distinct site, however many addresses hold it (a function's line reached by
  // several calls, or through several inline chains): sites with the same function, source line
  // and module are one (a frame without a source line is its address). Dense, from 0; site_id_address() gives an address of it (the first one seen).
  uint32_t site_id(uint64_t site_address);
  uint64_t site_id_address(uint32_t id) const { return site_id_address_[id]; }
  size_t site_ids() const { return site_id_address_.size(); }
  // How a site or a frame of a stack is shown: readable, unless --all-frames (then as it was).
  std::string site_label(const DisplayFrame &f, bool with_location = true) const {
    if (all_frames()) return f.label(with_location);
    std::string l = f.readable_label(with_location);
    if (f.library && site_unknown(f.address)) l += " [site not known: not sampled]";
    return l;
  }
  std::string site_function(const DisplayFrame &f) const {
    return all_frames() ? f.function : f.readable_function();
  }

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
  std::unordered_set<uint32_t> truncated_stacks_;  // stacks shown whose outermost frame is the marker
  std::vector<Range> ranges_;  // sorted by start (when sorted_)
  bool sorted_ = true;
  std::vector<bool> prefetched_;  // per symbolizer handle
  const Range *last_watched_ = nullptr;  // watch(): the range of the previous new frame
  std::unordered_map<uint64_t, std::vector<DisplayFrame>> cache_;
  symbolize::FrameFilter filter_;
  // site_address(): per node of site_tree_, 0 unknown, 1 no program frame at or above it, else
  // the site address.
  const capture::StackTree *site_tree_ = nullptr;
  std::vector<uint64_t> site_memo_;
  // call_site_address(): the call sites that stood as an unknown site; sampled_callers(): the
  // tree's nodes by address, for the first query.
  std::unordered_set<uint64_t> unknown_sites_;
  const capture::StackTree *call_site_tree_ = nullptr;
  // (address, node) for every node of the tree, sorted: 12 bytes a node, where a map of
  // vectors cost a heap block per distinct address.
  std::vector<std::pair<uint64_t, uint32_t>> nodes_of_address_;
  std::unordered_map<uint64_t, uint32_t> site_id_of_address_;
  std::unordered_map<std::string, uint32_t> site_id_of_label_;
  std::vector<uint64_t> site_id_address_;
};

}  // namespace heapsnap::replay
