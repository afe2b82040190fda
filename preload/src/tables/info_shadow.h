// The full live-block table for snapshots: 8 bytes per unit of address space, written at the unit
// where a block starts when snapshots are enabled: the allocation's call site (an index into
// call_sites) and its allocation time. Together with the byte shadow (which says where blocks
// start and how big they are) this is every live block, with no hash table and no lock on the
// allocation path; a freed block needs no update (its byte-shadow entry is cleared).
//
// The words are a WordMap (word_map.h): a unit is 32 bytes on glibc's chunk layout, else 16.
//
// Cost: touched pages only, at most 25% of the heap for a glibc heap of its smallest blocks
// (50% with 16-byte units), 8 bytes per live block for larger ones.
//
// Dense parts of the table become huge pages (advise_hugepages()), so that a heap snapshot's fork
// copies one PMD per 2 MiB of them instead of 512 PTEs: a sixth of all the entries a glibc heap
// of small blocks makes it copy.
//
// An entry is stored with bit 63 set so that it never looks like a pointer to a conservative
// scan of the tracer's own memory.
#pragma once
#include <atomic>
#include <cstdint>

#include "core/common.h"
#include "tables/word_map.h"

namespace hs::info {

extern WordMap words;
extern bool enabled HS_HIDDEN;

// Chooses the unit (before the first slot is written): 32 bytes if the allocator allows it.
void init(bool glibc_layout);

// The writer thread, every tick: MADV_HUGEPAGE (THP in "madvise" mode acts on it alone; the
// program's memory is left as it is) on the 2 MiB stretches of the table that are at least half
// resident, and on the untouched stretches right above them, where a growing heap's slots go
// next: those fault in as huge pages; the dense ones already in 4 KiB pages are left to
// khugepaged. Sparse stretches (slots of large mmap'd blocks, kilobytes apart) keep 4 KiB pages:
// huge pages there would cost 25% of the blocks' size (256 KiB per 1 MiB block instead of 4 KiB).
// Env HEAPSNAP_SNAPSHOT_HUGEPAGES=0 turns it off.
void advise_hugepages();

HS_INLINE uint64_t *slot(const void *p, bool create) { return words.word(p, create); }

HS_INLINE uint64_t encode(uint32_t site, uint32_t time_ms) {
  return (uint64_t(time_ms | 0x80000000u) << 32) | site;
}
HS_INLINE uint32_t site_of(uint64_t e) { return uint32_t(e); }
HS_INLINE uint32_t time_ms_of(uint64_t e) { return uint32_t(e >> 32) & 0x7fffffffu; }

HS_INLINE void record(const void *p, uint32_t site, uint32_t time_ms) {
  if (uint64_t *s = slot(p, true)) *s = encode(site, time_ms);
}

}  // namespace hs::info
