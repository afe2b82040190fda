// The RSS breakdown of a snapshot (issue 32), shared by its two halves in the snapshot child:
//   child_memory.cc  reads the program's mappings and their Rss, claims what it knows (heapsnap's own
//                    memory, thread stacks, mmapped chunks, .bss), writes the SnapshotMemory record
//   child_arenas.cc  walks glibc's arenas chunk by chunk and claims each chunk's bytes by kind
// A claim counts the bytes of a range that are resident in the child's copy of the program
// (mincore: fork copied the page tables of every anonymous mapping the program had touched), per
// smaps mapping and kind; smaps.h's distribute() then splits each mapping's own Rss by them.
#pragma once
#include <cstdint>

#include "snapshot/child_internal.h"
#include "snapshot/child_threads.h"
#include "snapshot/smaps.h"

namespace hs::snapshot::child {

// The word at address a of the image (the arena and cache walks, which check a is mapped first).
HS_INLINE uint64_t image_word(uint64_t a) { return *reinterpret_cast<const uint64_t *>(a); }

struct Meter {
  memory::SmapsEntry *e = nullptr;
  long n = 0;
  uint64_t page = 4096;
  uint8_t **vec = nullptr;                   // per mapping: its residency (memory_begin's, or mincore's)
  bool *vec_failed = nullptr;                // mincore failed (a mapping made after the fork)
  bool *full = nullptr;                      // every page of the mapping resident (by mincore)
  uint64_t (*res)[memory::kKinds] = nullptr;  // per mapping: resident bytes claimed, by kind
  uint64_t (*virt)[memory::kKinds] = nullptr; // per mapping: bytes claimed, by kind
  long cursor = 0;

  void set_page();  // (page, page_shift: before init)
  // Takes mincore's vector of every mapping the claims may split (anonymous, resident): the one
  // taken(lo, hi, ctx) gives (memory_begin's, of the child's mappings), else one taken now.
  bool init(memory::SmapsEntry *entries, long count, const uint8_t *(*taken)(uint64_t lo, uint64_t hi, void *ctx),
            void *ctx);
  // Claims [lo, hi) as kind k in every mapping it overlaps; returns its resident bytes.
  uint64_t add(uint64_t lo, uint64_t hi, memory::Kind k);
  // Resident bytes of [lo, hi), claiming nothing.
  uint64_t resident(uint64_t lo, uint64_t hi);
  // The mapping holding a, else the first after it, else -1.
  long entry_at_or_after(uint64_t a);
  // The arena walk's fast path (a chunk at a time, millions of them): the mapping that holds all
  // of [lo, hi) when every page of it is resident there, else -1; then claim() counts it whole.
  HS_INLINE long all_resident(uint64_t lo, uint64_t hi) {
    // The common case first, without a call: the chunk is in the last mapping looked at, and
    // every page of that mapping is resident (a heap the program wrote all of).
    if (cursor < n && full[cursor] && e[cursor].start <= lo && hi <= e[cursor].end) return cursor;
    long i = entry_at_or_after(lo);
    if (i < 0 || e[i].start > lo || hi > e[i].end || !vec[i]) return -1;
    const uint8_t *v = vec[i];
    for (uint64_t pg = (lo - e[i].start) >> page_shift, last = (hi - 1 - e[i].start) >> page_shift; pg <= last; ++pg)
      if (!(v[pg] & 1)) return -1;
    return i;
  }
  HS_INLINE void claim(long i, uint64_t bytes, memory::Kind k) {
    virt[i][k] += bytes;
    res[i][k] += bytes;
  }
  unsigned page_shift = 12;

 private:
  uint64_t resident_in(long i, uint64_t lo, uint64_t hi);
};

// One arena of glibc's, as the walk found it. Bytes are the chunks' own (virtual); rss the part
// of them resident in the child's copy.
enum HeapPart : uint8_t { kLive = 0, kOverhead, kFree, kCached, kTop, kUnwalked, kHeapParts };
struct ArenaFigures {
  uint64_t state;        // its malloc_state (main_arena: in libc's data), 0 when not found
  bool main;
  uint32_t heaps;        // mappings: the brk heap, or its 64 MiB heaps
  uint64_t size;         // bytes of its heaps
  uint64_t bytes[kHeapParts], rss[kHeapParts];
  uint64_t live_chunks, free_chunks, cached_chunks;
  uint64_t trimmable;    // resident whole pages malloc_trim(0) would give back (free chunks, main top)
  bool complete;         // every chunk followed to its heap's end
  // Of the cached chunks, those in its fastbins and in threads' tcaches (with the tcache structs
  // themselves), as child_caches.cc followed their lists; the rest of cached is neither.
  uint64_t fastbin_bytes, fastbin_rss, fastbin_chunks;
  uint64_t tcache_bytes, tcache_rss, tcache_chunks;
};

// A walked heap and the arena (its index in walk_arenas' out) it belongs to.
struct HeapOfArena {
  uint64_t lo, hi;
  uint32_t arena;
};

// child_caches.cc: the size of a tcache_perthread_struct's chunk in the running glibc; the
// fastbins' and tcaches' chunks counted into arenas[] (heaps: every heap walked, sorted here;
// tcache_structs: cached chunks of that size, candidates checked there); main_arena's address
// found from the brk heap's top chunk when no thread arena's ring gave it (0: not found).
uint64_t tcache_struct_chunk_size();
void count_caches(Meter &m, ArenaFigures *arenas, uint32_t na, HeapOfArena *heaps, size_t nheaps,
                  const uint64_t *tcache_structs, size_t nstructs);
uint64_t find_main_state(Child &c, uint64_t top);

// child_arenas.cc: walks the arenas; fills out[0..cap), returns the count. The heaps walked go to
// heaps[0..*nheaps) (room for heaps_cap), address-ordered: blocks outside them are no arena's.
uint32_t walk_arenas(Child &c, Meter &m, ArenaFigures *out, uint32_t cap, Range *heaps, size_t *nheaps, size_t heaps_cap);

// The resident pages of one piece of the child's own anonymous mappings (memory_begin), a byte per
// page as mincore gives them: from the PAGEMAP_SCAN of its own figures (Rss pages: present, not the
// zero page), else (no PAGEMAP_SCAN, shared mappings) from mincore.
struct Residency {
  uint64_t lo, hi;
  uint8_t *vec;  // null: mincore failed
};

// child_memory.cc, in two phases around the blocks' enumeration. memory_begin takes the child's
// own figures (the fork moment's anonymous memory) and the residency of its anonymous mappings
// before the child reads any of the program's memory (a read of a page the program never touched
// maps the zero page in the child, which mincore would count: the shadow's untouched pages, read by
// the enumeration, did), then starts the reads of the program's figures (its file mappings:
// child_proc.cc, read_program) and VmRSS on a worker thread (child_threads.h, Background), beside
// the enumeration. write_memory joins it, merges the two views, claims, walks the arenas and writes
// the SnapshotMemory record (before the blocks; no block list is changed).
struct MemoryState {
  memory::SmapsEntry *entries;  // the fork image's mappings (smaps.h, merge_fork_image)
  long n;  // -1: smaps could not be read
  uint64_t changed;  // the program's anonymous memory changed since the fork (left out)
  uint64_t status_rss;
  uint64_t t0, ns;  // the breakdown's own time on the child's main thread (both phases)
  // The worker's reads: the child's own figures and the program's (null: not read), their counts, the program's files.
  memory::SmapsEntry *own, *program;
  long n_own, n_program;
  bool own_scanned;  // own came from PAGEMAP_SCAN (image_scan.h), not from /proc/self/smaps
  // program came from its maps and pagemap (image_scan.h, scan_program), not its smaps: no
  // shared/private split, no VmFlags, and its private anonymous mappings without figures.
  bool program_scanned;
  const char *program_source;  // which, and why not the pagemap (HEAPSNAP_DEBUG=1)
  char program_path[64], maps_path[64], pagemap_path[64], status_path[64];
  threads::Background worker;
  Residency *pieces;  // address-ordered
  size_t npieces;
  // HEAPSNAP_DEBUG=1: where that time goes (kSteps, printed at the end of write_memory). The
  // program's figures are the worker's (wall, and its CPU: the worker runs beside the enumeration, so
  // its wall time hides in the enumeration's and only its CPU is the cost); "wait" is how long
  // write_memory waited for it to end.
  enum Step { kOwnSmaps, kProgramSmaps, kProgramCpu, kMincore, kWait, kMerge, kClaims, kArenas, kMmapped, kTally, kSteps };
  uint64_t step_ns[kSteps];
  uint64_t lap_at;
  void lap(Step s) {
    uint64_t now = mono_ns();
    step_ns[s] += now - lap_at;
    lap_at = now;
  }
  Meter m;
};
// child_proc.cc: an smaps file (or a maps file: its lines are smaps' headers) parsed into the
// child's arena (null when it cannot be read or parsed); the worker's reads of the program's
// figures and VmRSS into a MemoryState (arg).
memory::SmapsEntry *read_smaps(const char *path, long *n, bool maps = false);
void read_program(void *arg);

void memory_begin(Child &c, uint64_t arena_lo, uint64_t arena_hi);
void write_memory(Child &c, const regs::Result &rr, uint64_t arena_lo, uint64_t arena_hi);

}  // namespace hs::snapshot::child
