// The roots of a snapshot as objects (MAT's GC roots): each global or static variable whose
// extent (its ELF symbol's address and size) holds pointers into the heap, each thread's stack,
// each thread's register set, each anonymous or TLS range. A module's data words that fall in no
// symbol (a stripped module, padding, the loader's own words) make one object per root range,
// named by module and offset. The object graph (object_graph.h) gives each a node between the
// super root and the blocks, so that dominators and retained sizes hold for roots too:
// "g_sessions retains 4 MiB".
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "snapshot/heap_snapshot.h"
#include "symbolize/data_symbols.h"

namespace heapsnap::snapshot {

struct RootObject {
  // kThread: one thread's stack, registers and TLS together (MAT's thread root): a structure a
  // thread holds in a local is often held from its stack and from a register at once, and is
  // then that thread's alone, not "held by several roots".
  enum What : uint8_t { kVariable, kRange, kThread };
  What what = kRange;
  enum ThreadPart : uint8_t { kStackPart = 1, kRegistersPart = 2, kTlsPart = 4 };
  uint8_t thread_parts = 0;     // kThread: which of the thread's ranges hold heap pointers
  bool main_thread = false;     // kThread: the process's main thread
  uint64_t tid = 0;             // kThread
  std::string thread_name;      // kThread: its name at snapshot time (pthread_setname_np, else the program's)
  uint32_t range = 0;           // index into HeapSnapshot::roots
  uint64_t start = 0, size = 0;  // runtime extent: the variable's, or the range's
  std::string name;             // the variable ("g_sessions", "main::cache"), or the range's label
  std::string type, file;       // the variable's declared type and source file, from DWARF
  uint32_t line = 0;
  bool local = false;           // a static variable (local symbol), not a global
  std::string module;           // basename of the module holding the variable or range ("" if none)
  uint64_t module_offset = 0;   // start - the module's load bias

  // Kind as a word: "global", "static", "thread", "anonymous", "data" (a module's words outside
  // any symbol).
  std::string kind(const HeapSnapshot &s) const;
  // "g_sessions (static, std::map<int, std::unique_ptr<Session>>, app.cc:29)",
  // "thread 1234 \"worker\" (stack, registers)", "app+0x4010 (data, no symbol)". kind_first, for "held by":
  // "static g_sessions (std::map<int, std::unique_ptr<Session>>, app.cc:29)".
  std::string label(const HeapSnapshot &s, bool kind_first = false) const;
};

struct RootObjects {
  std::vector<RootObject> objects;
  // Per root word (index into HeapSnapshot::root_target): the object holding it.
  std::vector<uint32_t> object_of_word;
  // The member layouts of the classes the modules read for their variables define (DWARF): to
  // name the field that holds each pointer of a path.
  symbolize::TypeLayouts layouts;
  size_t memory_bytes() const;
};

// A loaded module as the capture knows it (replay::ModuleRecord's fields).
struct RootModule {
  std::string path;
  uint64_t load_bias = 0;
  std::string build_id;
};

// Splits the snapshot's root ranges into objects. Global ranges are matched to their module by
// path (the one loaded lowest below the range when a path was loaded more than once) and their
// words to the module's data symbols (symbolize/data_symbols.h; each module file is read once).
// Without modules, or with opts.max_dwarf_bytes and symbols off (symbols = false), every range
// is one object.
RootObjects root_objects(const HeapSnapshot &s, const std::vector<RootModule> &modules,
                         const symbolize::DataSymbolsOptions &opts, bool symbols = true);

}  // namespace heapsnap::snapshot
