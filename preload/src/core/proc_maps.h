// /proc/self/maps, parsed without stdio or malloc (usable in the snapshot child, where any lock
// another thread held at fork time stays held forever). Storage comes from the caller.
#pragma once
#include <cstddef>
#include <cstdint>

namespace hs {

struct Mapping {
  uint64_t start, end;
  bool readable, writable, executable;
  bool shared;  // MAP_SHARED ('s')
  uint64_t offset;
  uint64_t inode;
  char path[160];  // truncated; "" for anonymous, "[stack]", "[heap]", ...
};

// Reads the maps into out[0..cap). Returns the number of mappings, or -1 on error.
long read_proc_maps(Mapping *out, size_t cap, char *scratch, size_t scratch_size);

// The mapping holding addr, read line by line into a buffer on the stack (for a lookup where
// the whole maps would not fit); false if no mapping holds it or the maps cannot be read.
bool find_mapping(uint64_t addr, Mapping *out);

// A hexadecimal number at p (lower case, an optional "0x" first), as /proc writes them; p is left
// after its last digit.
uint64_t parse_hex(const char *&p);

// Reads a small file (a /proc status line or counter) into buf with one read, NUL-terminated:
// no stdio (it would allocate). Returns the bytes read, or -1 when it cannot be opened or read.
long read_small_file(const char *path, char *buf, size_t cap);

}  // namespace hs
