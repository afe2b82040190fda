// Finds separate debug files for libdwfl (its find_debuginfo callback).
//
// Order: an inflated copy in the debug cache (debug_cache.h), when one is configured; then
// build-id under each debug dir (<dir>/.build-id/xx/yyyy.debug, also used for dwz alt
// files) through libdwfl's own dwfl_build_id_find_debuginfo; then .gnu_debuglink next to the
// module, in its .debug/ subdir and under <dir>/<module's dir>/, validated by build-id (or CRC32
// when the module has no build-id). debuginfod is only consulted when enabled: libdw's standard
// callback would otherwise reach the network whenever DEBUGINFOD_URLS is set.
#pragma once

#include <elfutils/libdwfl.h>

#include <string>
#include <vector>

namespace heapsnap::symbolize {

class DebugFileLocator {
 public:
  // cache_dir: where inflated copies of compressed debug files are kept ("" for none).
  DebugFileLocator(std::vector<std::string> debug_dirs, bool use_debuginfod, std::string cache_dir = {});
  DebugFileLocator(const DebugFileLocator&) = delete;
  DebugFileLocator& operator=(const DebugFileLocator&) = delete;

  const std::string& cache_dir() const { return cache_dir_; }

  // Callbacks for dwfl_begin(); valid as long as this object lives.
  const Dwfl_Callbacks* callbacks() const { return &callbacks_; }

  // Per-module state the callback reads through the module's userdata slot.
  struct ModuleContext {
    const DebugFileLocator* locator = nullptr;
    bool has_debuglink = false;
    std::string debuglink;  // the main file's .gnu_debuglink name
  };
  // Points `mod`'s userdata at `ctx` (which must outlive the Dwfl) and records its debuglink.
  static void attach(Dwfl_Module* mod, ModuleContext* ctx);

 private:
  static int find_debuginfo(Dwfl_Module* mod, void** userdata, const char* modname,
                            Dwarf_Addr base, const char* file_name, const char* debuglink_file,
                            GElf_Word debuglink_crc, char** debuginfo_file_name);
  int find_by_debuglink(Dwfl_Module* mod, const char* file_name, const char* debuglink,
                        GElf_Word crc, char** debuginfo_file_name) const;

  std::vector<std::string> debug_dirs_;
  bool use_debuginfod_;
  std::string cache_dir_;
  std::string path_;   // libdwfl debuginfo_path string: ":.debug:<dir>:<dir>..."
  char* path_ptr_;     // what callbacks_.debuginfo_path points at
  Dwfl_Callbacks callbacks_{};
};

}  // namespace heapsnap::symbolize
