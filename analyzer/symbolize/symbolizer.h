// Offline symbolizer: recorded runtime addresses -> function, file:line and inlined frames.
//
// Modules are registered with add_module() (cheap: no file is touched) and opened lazily on the
// first address asked for. ELF symbols and DWARF come from libdw/libdwfl; separate debug files are
// found by build-id under each debug dir (<dir>/.build-id/xx/yyyy.debug) and by .gnu_debuglink.
// A file whose build-id differs from the recorded one is not trusted. Nothing throws on bad
// input: everything degrades to "module+0xoffset".
//
// Not thread-safe: use one Symbolizer per thread (or lock around it). prefetch() runs work on a
// thread of its own, which the Symbolizer joins before anything else reads what it made.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace heapsnap::symbolize {

struct ModuleInfo {
  std::string path;       // as the loader knows it; the main executable's real path
  uint64_t load_bias = 0; // dlpi_addr
  std::string build_id;   // raw bytes of NT_GNU_BUILD_ID; empty if unknown
  // Optional [start, end) runtime ranges of the executable segments. Not needed for lookups
  // (the file's own headers are used); kept for callers that map pcs to modules.
  std::vector<std::pair<uint64_t, uint64_t>> exec_ranges;
};

struct SourceFrame {
  std::string function;  // demangled; empty if unknown
  std::string file;      // source path from DWARF (relative ones joined to the compilation
                         // directory); empty if unknown
  uint32_t line = 0;
  uint32_t column = 0;
  bool inlined = false;  // true for an inlined callee; the real (outer) function is false
};

struct Symbolized {
  // Innermost first: inlined callees first, the real (outer) function last; at least 1 entry.
  std::vector<SourceFrame> frames;
  std::string module;          // basename of the module path
  uint64_t module_offset = 0;  // runtime pc - load_bias (the pc as given, not pc - 1)
  enum class Status {
    ok,                  // DWARF line and/or function information
    no_debug_info,       // ELF symbol only
    no_symbols,          // module opened, nothing covers the address
    module_missing,      // file cannot be opened or is not ELF
    build_id_mismatch,   // file's build-id differs from the recorded one; not used
  } status = Status::no_symbols;
};

const char* to_string(Symbolized::Status);

struct SymbolizerOptions {
  // Directories searched for <dir>/.build-id/xx/yyyy.debug and <dir>/<module dir>/<debuglink>.
  std::vector<std::string> debug_dirs = {"/usr/lib/debug"};
  bool demangle = true;
  // Also ask debuginfod servers (DEBUGINFOD_URLS) for missing debug files. Off by default: the
  // analyzer works offline and must not stall on the network.
  bool use_debuginfod = false;
  // Where inflated copies of compressed debug files are kept (debug_cache.h); "" for none. The
  // command line passes debug_cache::default_dir().
  std::string cache_dir;
};

// A command's options: --debug-dir's directories (none given: the default) and the debug cache
// the environment names (debug_cache::default_dir()).
SymbolizerOptions command_options(const std::vector<std::string>& debug_dirs);

class Symbolizer {
 public:
  explicit Symbolizer(SymbolizerOptions opts = {});
  ~Symbolizer();
  Symbolizer(const Symbolizer&) = delete;
  Symbolizer& operator=(const Symbolizer&) = delete;

  // Registers a module and returns its handle. Registering the same (path, load_bias, build_id)
  // again returns the same handle. Files are opened lazily.
  uint32_t add_module(const ModuleInfo&);

  // Symbolizes `runtime_pc` in `module`. Return addresses are looked up at pc - 1 (the call
  // instruction) unless is_return_address is false. Results are cached per (module, pc, kind);
  // the reference stays valid for the Symbolizer's lifetime.
  const Symbolized& symbolize(uint32_t module, uint64_t runtime_pc, bool is_return_address = true);

  // Opens `module` and loads its DWARF on a background thread, so that the first symbolize() of
  // it does not wait for that (reading and decompressing a debug file: 40 ms for libc's). For a
  // caller that knows early which modules it will ask about (the replay, from the stacks it
  // reads) and has other work to do meanwhile. The first symbolize(), warnings() or the
  // destructor waits for the queued work to finish; prefetch() after that does nothing.
  void prefetch(uint32_t module);

  // "func (file.cc:12)", "inner (a.h:3) inlined into outer (b.cc:10)",
  // "func (libfoo.so+0x1234)" for symbols only, or "libfoo.so+0x1234".
  std::string describe(const Symbolized&) const;

  // Problems found so far, at most one per module (missing file, build-id mismatch).
  std::vector<std::string> warnings() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace heapsnap::symbolize
