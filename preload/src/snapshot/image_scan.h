// The snapshot child's own figures of the fork image (issue 32, child_memory.h) without reading its
// /proc/self/smaps, whose page walk looks at every resident page's struct page (about 12-20 ms per
// GiB resident: most of the breakdown's cost on a big heap). PAGEMAP_SCAN (Linux 6.7) reports
// ranges of pages by their page table entries alone: present, swapped, the zero page, file-backed
// (only asked for file mappings: that one reads the page's folio). From them, per mapping of the
// child's maps: Rss (present pages but the zero page, as smaps counts them), Anonymous (of those,
// not file pages) and Swap; the shared/private split, which only the pages' map counts know, is left
// to the caller (take_split: the program's smaps has the same pages' split, both views being of
// pages that fork made shared).
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/proc_maps.h"
#include "snapshot/smaps.h"

namespace hs::snapshot::memory {

// One range of pages PAGEMAP_SCAN reports (struct page_region), and the scratch scan_image needs.
struct PageRegion {
  uint64_t start, end, categories;
};
constexpr size_t kScanRegions = 512;

// Entries of maps[0..n), address-ordered, with [skip_lo, skip_hi) (the child's arena) cut out, into
// out[0..cap); scratch: kScanRegions of them, not on the stack (a stack page touched here for the
// first time would be one more page of the thread's stack in the very figures taken). Returns the count; -1 when the kernel has no PAGEMAP_SCAN or a scan fails (then the
// caller reads /proc/self/smaps), or cap is too small. Entries have no VmFlags (the child has no
// MADV_DONTFORK mappings; take_split copies MADV_WIPEONFORK from the program's) and no split.
long scan_image(const Mapping *maps, long n, uint64_t skip_lo, uint64_t skip_hi, SmapsEntry *out, size_t cap,
                PageRegion *scratch);

// For each of own[0..n_own) that scan_image made: the program's mapping at the same start, if any,
// gives its MADV_WIPEONFORK flag and its shared/private split (in proportion, over the own Rss).
void take_split(SmapsEntry *own, long n_own, const SmapsEntry *program, long n_program);

}  // namespace hs::snapshot::memory
