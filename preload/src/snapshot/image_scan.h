// Figures of mappings by PAGEMAP_SCAN (Linux 6.7), without smaps' page walk, which looks at every
// resident page's struct page (about 12-20 ms per GiB resident: most of the breakdown's cost on a
// big heap). PAGEMAP_SCAN reports ranges of pages by their page table entries alone: present,
// swapped, the zero page, file-backed (only asked for file mappings: that one reads the page's
// folio). From them, per mapping: Rss (present pages but the zero page, as smaps counts them),
// Anonymous (of those, not file pages) and Swap. Two users in the snapshot child (child_memory.h):
//   scan_image    the child's own image (/proc/self/pagemap): the fork's anonymous memory
//   scan_program  the program's (/proc/PID/pagemap; the ioctl works on another process's pagemap
//                 with the permission smaps needs): its file-backed and shared mappings, which fork
//                 does not copy (smaps.h, merge_fork_image), from its /proc/PID/maps
// Every system call here is raw (no errno): scan_program runs on the child's worker thread.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/proc_maps.h"
#include "snapshot/smaps.h"

namespace hs::snapshot::memory {

// One range of pages PAGEMAP_SCAN reports (struct page_region), and the scratch the scans need.
struct PageRegion {
  uint64_t start, end, categories;
};
constexpr size_t kScanRegions = 512;

// Test hooks (core/config.h, set by the child before any scan): no_scan makes every scan fail as
// on a kernel without PAGEMAP_SCAN (before 6.7: the callers read smaps instead); refuse_guard makes
// the kernel's answer to a scan that asks for PAGE_IS_GUARD EINVAL, as Linux 6.7-6.13 answer it
// (the scans then drop that category and go on).
struct ScanHooks {
  bool no_scan, refuse_guard;
};
extern ScanHooks g_scan_hooks;
// Whether the scans still ask for PAGE_IS_GUARD (false once the kernel refused it).
bool scan_takes_guard();

// Entries of maps[0..n), address-ordered, with [skip_lo, skip_hi) (the child's arena) cut out, into
// out[0..cap); scratch: kScanRegions of them, not on the stack (a stack page touched here for the
// first time would be one more page of the thread's stack in the very figures taken). Returns the
// count; -1 when the kernel has no PAGEMAP_SCAN or a scan fails (then the caller reads
// /proc/self/smaps), or cap is too small. Entries have no VmFlags (the child has no MADV_DONTFORK
// mappings) and no shared/private split.
// sink (optional): each entry's pages as mincore's vector would give them, but of Rss pages only
// (present, not the zero page), from the same walk of the page tables: sink->vector(e) returns a
// zeroed byte per page of e (page_shift) or null, and the scan sets each Rss page's byte to 1.
struct ResidencySink {
  uint8_t *(*vector)(const SmapsEntry &e, void *ctx);
  void *ctx;
  unsigned page_shift;
};
long scan_image(const Mapping *maps, long n, uint64_t skip_lo, uint64_t skip_hi, SmapsEntry *out, size_t cap,
                PageRegion *scratch, const ResidencySink *sink = nullptr);

// scan_program's answer when only the program's smaps can tell (its VmFlags): a mapping of the
// program's holds pages where the child's copy holds none (none of the child's mappings overlaps
// it, or only ones without a resident page): MADV_DONTFORK or MADV_WIPEONFORK memory, whose figures
// must be the program's, or memory mapped or first touched since the fork, which must be left out.
constexpr long kNeedSmaps = -2;

// The program's mappings prog[0..n) (its /proc/PID/maps, parsed by parse_smaps: figures zero) get
// their figures from the program's pagemap (pagemap_fd, opened by the caller): each file-backed,
// shared or special ([vdso] and the like) mapping's Rss, Anonymous and Swap; private anonymous ones
// keep zeros (their figures are the child's own[0..n_own), scan_image's), and each of those the
// child holds no page of is checked for one page in the program (kNeedSmaps when it has one).
// Returns 0; -1 when a scan fails (no PAGEMAP_SCAN); kNeedSmaps. No split, no VmFlags.
long scan_program(int pagemap_fd, SmapsEntry *prog, long n, const SmapsEntry *own, long n_own, PageRegion *scratch);

// For each of own[0..n_own) that scan_image made: the program's mapping at the same start, if any,
// gives its MADV_WIPEONFORK flag and its shared/private split (in proportion, over the own Rss); a
// hugetlb mapping's figures are zeroed (PAGEMAP_SCAN reports its huge pages as present, a range per
// huge page; smaps and VmRSS leave them out of Rss).
// (Only with the program's smaps: scan_program has neither.)
void take_split(SmapsEntry *own, long n_own, const SmapsEntry *program, long n_program);

}  // namespace hs::snapshot::memory
