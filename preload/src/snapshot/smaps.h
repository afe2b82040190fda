// The RSS breakdown's pure half (issue 32): /proc/PID/smaps parsed without stdio or malloc, each
// mapping's own kind from its line, and the rule that splits one mapping's Rss among the kinds the
// snapshot child measured in it, so that the parts always add up to the Rss the kernel reported.
// Used by child_memory.cc (in the snapshot child) and by tests/unit/smaps_test.cc.
#pragma once
#include <cstddef>
#include <cstdint>

namespace hs::snapshot::memory {

// The parts of RSS (proto/heapsnap.proto, MemoryKind: the same numbers).
enum Kind : uint8_t {
  kHeapLive = 0,      // requested bytes of live blocks in glibc's arenas
  kHeapOverhead,      // chunk headers, rounding, arena headers, fenceposts
  kHeapFree,          // free chunks in the bins
  kHeapCached,        // chunks glibc marks in use that hold no live block: tcache, fastbins, blocks from before tracing
  kHeapTop,           // the arenas' top chunks
  kHeapUnwalked,      // arena memory the walk could not follow (a torn chunk header)
  kMmappedChunks,     // glibc's mmapped chunks (big blocks)
  kThreadStacks,      // thread stacks, the main thread's [stack] included
  kProgramAnon,       // the program's own anonymous mappings
  kCode,              // file-backed executable mappings
  kModuleData,        // modules' data: their non-executable file mappings and .bss
  kMappedFiles,       // other file-backed mappings
  kSharedMemory,      // shared anonymous memory, /dev/shm, memfd, SysV
  kHeapsnap,          // heapsnap's own: its library, private heap, tables, buffers, thread stacks
  kOther,             // vdso, vvar, vsyscall, anything else
  kKinds
};
const char *kind_name(Kind k);

struct SmapsEntry {
  uint64_t start, end;
  uint64_t inode;
  bool readable, writable, executable, shared;
  char path[160];  // truncated; "" for anonymous
  // Bytes (the file says kB).
  uint64_t rss, anonymous, shared_bytes, private_bytes, swap;
};

// Parses smaps text [text, text+n) into out[0..cap). Returns the number of entries, or -1 when
// the text holds more than cap entries or a header line it cannot read.
long parse_smaps(const char *text, size_t n, SmapsEntry *out, size_t cap);

// Whether the child must split this mapping (it may hold heap arenas, stacks, mmapped chunks,
// .bss or heapsnap's memory): private anonymous memory, [heap], [stack], [anon:NAME].
bool is_splittable(const SmapsEntry &e);

// The kind of the whole mapping i when it is not split (or of what no measurement claims in it):
// from its path, permissions and the mappings beside it (a file with an executable mapping is a
// module: its other mappings are its data).
Kind base_kind(const SmapsEntry *all, long n, long i);

// One mapping's parts: measured[k] is what the child found resident of kind k in it, measured
// from its own (forked) copy; rest is the kind of whatever Rss is left. Fills rss_out[k] so that
// the parts sum to e.rss exactly: measured parts as measured while they fit, scaled down in
// proportion when they exceed the Rss (pages the program dropped after the fork), the remainder
// to `rest`.
void distribute(uint64_t rss, const uint64_t *measured, Kind rest, uint64_t *rss_out);

}  // namespace hs::snapshot::memory
