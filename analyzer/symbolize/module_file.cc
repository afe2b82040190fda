#include "symbolize/module_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "symbolize/debug_cache.h"

namespace heapsnap::symbolize {

ModuleFile::ModuleFile(std::string path, const DebugFileLocator* locator, bool demangle_names)
    : path_(std::move(path)), locator_(locator), demangle_(demangle_names) {
  locator_ctx_.locator = locator_;
}

ModuleFile::~ModuleFile() {
  dwarf_.reset();  // holds pointers into the Dwfl's data
  if (dwfl_ != nullptr) dwfl_end(dwfl_);
}

bool ModuleFile::open() {
  if (state_ != State::unopened) return state_ == State::ok;
  state_ = State::failed;
  if (!new_session(&dwfl_, &mod_, &build_id_, &error_)) return false;
  state_ = State::ok;
  return true;
}

bool ModuleFile::new_session(Dwfl** dwfl, Dwfl_Module** mod, std::string* build_id, std::string* error) {
  if (path_.empty()) {
    *error = "no file name";
    return false;
  }
  int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    *error = std::strerror(errno);
    return false;
  }
  Dwfl* d = dwfl_begin(locator_->callbacks());
  if (d == nullptr) {
    ::close(fd);
    *error = dwfl_errmsg(-1);
    return false;
  }
  // Report at bias 0 (ET_DYN: add_p_vaddr with base 0): module addresses are file addresses, so
  // one session serves every load address of this file.
  dwfl_report_begin(d);
  auto slash = path_.rfind('/');
  std::string name = slash == std::string::npos ? path_ : path_.substr(slash + 1);
  Dwfl_Module* m = dwfl_report_elf(d, name.c_str(), path_.c_str(), fd, 0, true);
  if (m == nullptr) {
    ::close(fd);  // only consumed on success
    *error = dwfl_errmsg(-1);
    dwfl_report_end(d, nullptr, nullptr);
    dwfl_end(d);
    return false;
  }
  dwfl_report_end(d, nullptr, nullptr);
  DebugFileLocator::attach(m, &locator_ctx_);
  const unsigned char* bits = nullptr;
  GElf_Addr vaddr = 0;
  int n = dwfl_module_build_id(m, &bits, &vaddr);
  build_id->clear();
  if (n > 0) build_id->assign(reinterpret_cast<const char*>(bits), static_cast<size_t>(n));
  *dwfl = d;
  *mod = m;
  return true;
}

void ModuleFile::load_dwarf() {
  dwarf_loaded_ = true;
  Dwarf* dw = dwfl_module_getdwarf(mod_, &dwarf_bias_);
  if (dw == nullptr) return;
  // On the thread that owns this module (the prefetch worker or, after it, the caller's): no
  // other thread reads the Elf libdw inflated while it is copied.
  if (debug_cache::store(locator_->cache_dir(), mod_, dw, build_id_)) dw = reopen_from_cache(dw);
  dwarf_ = std::make_unique<DwarfIndex>(dw, demangle_);
}

// After the inflated copy of the module's debug file went into the cache: a new session whose
// DWARF comes from that copy, mapped, so that only the pages lookups touch are resident. libdw
// holds the sections it inflated in memory for the session's life (10 MB for libc's), which
// the first query after a debug package changed carried through its whole replay. Keeps the
// current session (returns dw) if the new one cannot be had.
Dwarf* ModuleFile::reopen_from_cache(Dwarf* dw) {
  Dwfl* dwfl = nullptr;
  Dwfl_Module* mod = nullptr;
  std::string id, error;
  if (!new_session(&dwfl, &mod, &id, &error)) return dw;
  Dwarf_Addr bias = 0;
  Dwarf* again = id == build_id_ ? dwfl_module_getdwarf(mod, &bias) : nullptr;
  if (again == nullptr) {
    dwfl_end(dwfl);
    DebugFileLocator::attach(mod_, &locator_ctx_);  // the new session pointed the context at its file
    return dw;
  }
  dwfl_end(dwfl_);
  dwfl_ = dwfl;
  mod_ = mod;
  dwarf_bias_ = bias;
  return again;
}

void ModuleFile::preload(const std::string& expected_build_id) {
  if (!open()) return;
  if (!expected_build_id.empty() && expected_build_id != build_id_) return;  // not to be used
  if (!dwarf_loaded_) load_dwarf();
  if (dwarf_ == nullptr && !symbols_.loaded()) symbols_.load(mod_);
}

Symbolized::Status ModuleFile::lookup(uint64_t addr, std::vector<SourceFrame>& frames) {
  frames.clear();
  if (state_ != State::ok) {
    frames.emplace_back();
    return Symbolized::Status::module_missing;
  }
  if (!dwarf_loaded_) load_dwarf();
  if (dwarf_ != nullptr && dwarf_->lookup(addr - dwarf_bias_, frames)) {
    SourceFrame& outer = frames.back();
    if (outer.function.empty() && !outer.inlined) {
      if (!symbols_.loaded()) symbols_.load(mod_);
      if (const std::string* name = symbols_.find(addr, demangle_)) outer.function = *name;
    }
    return Symbolized::Status::ok;
  }
  frames.clear();
  frames.emplace_back();
  if (!symbols_.loaded()) symbols_.load(mod_);
  if (const std::string* name = symbols_.find(addr, demangle_)) {
    frames.back().function = *name;
    return Symbolized::Status::no_debug_info;
  }
  return Symbolized::Status::no_symbols;
}

}  // namespace heapsnap::symbolize
