// /proc/self/maps, parsed without stdio or malloc (usable in the snapshot child, where any lock
// another thread held at fork time stays held forever). Storage comes from the caller.
#pragma once
#include <cstddef>
#include <cstdint>

namespace hs {

struct Mapping {
  uint64_t start, end;
  bool readable, writable, executable;
  uint64_t offset;
  uint64_t inode;
  char path[160];  // truncated; "" for anonymous, "[stack]", "[heap]", ...
};

// Reads the maps into out[0..cap). Returns the number of mappings, or -1 on error.
long read_proc_maps(Mapping *out, size_t cap, char *scratch, size_t scratch_size);

}  // namespace hs
