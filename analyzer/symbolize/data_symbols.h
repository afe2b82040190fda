// Data symbols of one module file: its global and static variables (ELF OBJECT symbols with their
// sizes, from .symtab, else .dynsym, or from a separate debug file's), and where the module has
// DWARF that is cheap to read, each variable's declared type and source file:line. For naming
// the roots of a heap snapshot: the word of a module's .data/.bss that points into the heap
// belongs to the variable whose extent holds it.
//
// Addresses are file addresses (a runtime address minus the module's load bias).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "symbolize/type_layouts.h"

namespace heapsnap::symbolize {

struct DataSymbol {
  uint64_t addr = 0, size = 0;  // file address and extent (size 0: the one address only)
  std::string name;             // demangled ("g_sessions", "main::counter", "ns::Registry::instance")
  bool local = false;           // STB_LOCAL: a static (file- or function-scope) variable
  // From DWARF, when known: the type as declared (readable: "std::map<int, std::unique_ptr<Session>>",
  // "Cache *") and the declaration's source file (full path) and line.
  std::string type, file;
  uint32_t line = 0;
};

struct DataSymbolsOptions {
  std::vector<std::string> debug_dirs = {"/usr/lib/debug"};
  // DWARF variables are read only when the module's (or its debug file's) .debug_info is at most
  // this big: every DIE is visited once (about 20 ns each), a few milliseconds for a program,
  // seconds for the biggest libraries. 0: never.
  uint64_t max_dwarf_bytes = 64u << 20;
};

class DataSymbols {
 public:
  // Opens `path`; a build-id that differs from `expected_build_id` (when both are known) makes
  // the file untrusted: no symbols. Never throws; a file that cannot be read has no symbols.
  DataSymbols(const std::string& path, const std::string& expected_build_id, const DataSymbolsOptions& opts);
  ~DataSymbols();
  DataSymbols(const DataSymbols&) = delete;
  DataSymbols& operator=(const DataSymbols&) = delete;

  // The variable whose extent holds file address `addr`, or nullptr.
  const DataSymbol* find(uint64_t addr) const;
  size_t size() const { return syms_.size(); }
  bool have_dwarf() const { return dwarf_; }
  // The member layouts of the module's own classes (with its DWARF), moved out.
  TypeLayouts take_layouts() { return std::move(layouts_); }
  const std::string& error() const { return error_; }

 private:
  std::vector<DataSymbol> syms_;  // by address, sized ones not overlapping
  bool dwarf_ = false;
  TypeLayouts layouts_;
  std::string error_;
};

}  // namespace heapsnap::symbolize
