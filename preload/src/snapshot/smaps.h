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
  // VmFlags: dc (MADV_DONTFORK: not in a forked child), wf (MADV_WIPEONFORK: empty in it).
  bool dont_fork, wipe_on_fork;
  // KernelPageSize above 4 kB: hugetlb pages, which smaps (and VmRSS) leave out of Rss.
  bool hugetlb;
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

// The skew fix: the snapshot child reads the program's smaps after the fork, while the program
// runs on, so its anonymous figures are of a later moment than the heap walk. The child's own
// /proc/self/smaps is of the fork moment for every mapping whose page tables fork copied, which
// are the private ones with anonymous pages (COW keeps the fork-time pages; what the program
// faults in later is not in the child). File mappings without anonymous pages are not copied
// (the child's Rss for them is only what it touched itself): their figures stay the program's.
// Whether the child's own figures of mapping e are the fork's.
bool fork_copied(const SmapsEntry &e);  // (false for MADV_WIPEONFORK: the child's copy is empty)

// The fork image's mappings: own[0..n_own) is the child's smaps, program[0..n_program) the
// program's, both address-ordered. [skip_lo, skip_hi) is what the child mapped after the fork
// (its arena): cut out of own's mappings; a mapping the kernel merged with it keeps the rest,
// whose Rss resident(lo, hi, ctx) counts (the other figures scaled to it). Each fork_copied
// mapping keeps the child's figures, every other one takes the program's over its range (its
// own when the program has unmapped it); so do the program's MADV_WIPEONFORK mappings, and its
// MADV_DONTFORK ones, which the child lacks, are added as the program has them (the fork's
// figures of both are nowhere). Writes out[0..cap), address-ordered; returns the count, -1 when
// cap is too small. *changed: resident bytes the program's anonymous memory differs by from the fork's
// (per mapping, plus the program's anonymous mappings made after the fork), left out.
long merge_fork_image(const SmapsEntry *own, long n_own, const SmapsEntry *program, long n_program, uint64_t skip_lo,
                      uint64_t skip_hi, uint64_t (*resident)(uint64_t lo, uint64_t hi, void *ctx), void *ctx,
                      SmapsEntry *out, size_t cap, uint64_t *changed);

// One mapping's parts: measured[k] is what the child found resident of kind k in it, measured
// from its own (forked) copy; rest is the kind of whatever Rss is left. Fills rss_out[k] so that
// the parts sum to e.rss exactly: measured parts as measured while they fit, scaled down in
// proportion when they exceed the Rss (pages the program dropped after the fork), the remainder
// to `rest`.
void distribute(uint64_t rss, const uint64_t *measured, Kind rest, uint64_t *rss_out);

}  // namespace hs::snapshot::memory
