// Function symbols of one module (.symtab, else .dynsym, plus any found in its debug file),
// sorted for O(log n) address lookup. dwfl_module_addrinfo scans the whole table per call, which
// is far too slow for big binaries.
#pragma once

#include <elfutils/libdwfl.h>

#include <cstdint>
#include <string>
#include <vector>

namespace heapsnap::symbolize {

class ElfSymbols {
 public:
  // Reads the symbol table of `mod` (module addresses; bias applied).
  void load(Dwfl_Module* mod);
  bool loaded() const { return loaded_; }

  // Name (demangled if asked) of the function containing `addr`, or nullptr.
  const std::string* find(uint64_t addr, bool demangle);

 private:
  struct Sym {
    uint64_t addr;
    uint64_t size;  // 0: extends to the next symbol
    const char* name;
    int32_t name_id;  // index into names_, -1 until asked for
  };
  std::vector<Sym> syms_;
  std::vector<std::string> names_;
  bool loaded_ = false;
};

}  // namespace heapsnap::symbolize
