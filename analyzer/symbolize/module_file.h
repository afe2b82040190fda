// One module file opened for symbolization: its Dwfl session, build-id, DWARF index and
// function symbols. Shared by every registered module with the same path (several processes or
// load addresses): all lookups use file-relative addresses.
#pragma once

#include <elfutils/libdwfl.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "symbolize/debug_file_locator.h"
#include "symbolize/dwarf_index.h"
#include "symbolize/elf_symbols.h"
#include "symbolize/symbolizer.h"

namespace heapsnap::symbolize {

class ModuleFile {
 public:
  ModuleFile(std::string path, const DebugFileLocator* locator, bool demangle);
  ~ModuleFile();
  ModuleFile(const ModuleFile&) = delete;
  ModuleFile& operator=(const ModuleFile&) = delete;

  // Opens the file on the first call; false when it cannot be read as ELF (see error()).
  bool open();
  const std::string& error() const { return error_; }
  // Raw NT_GNU_BUILD_ID bytes of the opened file ("" if it has none).
  const std::string& build_id() const { return build_id_; }

  // Symbolizes file address `addr` (already pc - 1 for return addresses) into `frames`.
  // Returns ok, no_debug_info or no_symbols. Requires open() to have succeeded.
  Symbolized::Status lookup(uint64_t addr, std::vector<SourceFrame>& frames);

  // Does ahead what the first lookup would: opens the file and, when its build-id is the
  // expected one (or none is expected), loads its DWARF index and, lacking DWARF, its symbols.
  // The work of Symbolizer::prefetch's thread.
  void preload(const std::string& expected_build_id);

 private:
  void load_dwarf();
  // A libdwfl session of path_ (the module at bias 0, the locator attached) and its build id;
  // false and *error if the file cannot be read as ELF. open()'s, and reopen_from_cache's.
  bool new_session(Dwfl** dwfl, Dwfl_Module** mod, std::string* build_id, std::string* error);
  Dwarf* reopen_from_cache(Dwarf* dw);

  std::string path_;
  const DebugFileLocator* locator_;
  bool demangle_;
  enum class State { unopened, ok, failed } state_ = State::unopened;
  std::string error_;
  std::string build_id_;
  Dwfl* dwfl_ = nullptr;
  Dwfl_Module* mod_ = nullptr;
  DebugFileLocator::ModuleContext locator_ctx_;
  bool dwarf_loaded_ = false;
  Dwarf_Addr dwarf_bias_ = 0;
  std::unique_ptr<DwarfIndex> dwarf_;
  ElfSymbols symbols_;
};

}  // namespace heapsnap::symbolize
