#include "snapshot/image_scan.h"

#include <fcntl.h>
#include <sys/ioctl.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

#include "core/raw_syscall.h"

namespace hs::snapshot::memory {

ScanHooks g_scan_hooks = {false, false};

namespace {

// <linux/fs.h> of Linux 6.7 (the build's headers may be older); PageRegion is in the header.
struct PmScanArg {
  uint64_t size, flags, start, end, walk_end, vec, vec_len, max_pages, category_inverted, category_mask,
      category_anyof_mask, return_mask;
};
constexpr unsigned long kPagemapScan = _IOWR('f', 16, PmScanArg);
constexpr uint64_t kFile = 1 << 2, kPresent = 1 << 3, kSwapped = 1 << 4, kPfnZero = 1 << 5, kGuard = 1 << 8;

// PAGE_IS_GUARD came after PAGEMAP_SCAN itself (Linux 6.7 knows categories 0-6 and refuses the
// others with EINVAL): asked for while the kernel takes it, dropped at the first refusal.
std::atomic<uint64_t> g_guard{kGuard};

// One PAGEMAP_SCAN ioctl (raw: no errno). guard_return: PAGE_IS_GUARD in the answer's categories;
// guard_out: ranges of guard markers (a guard region is a swap-like entry) left out. Either is
// dropped, and the scan asked again, when the kernel refuses the category.
long pm_scan(int fd, PmScanArg &a, bool guard_return, bool guard_out) {
  for (;;) {
    const uint64_t guard = g_guard.load(std::memory_order_relaxed);
    PmScanArg q = a;
    if (guard_return) q.return_mask |= guard;
    if (guard_out) q.category_inverted |= guard, q.category_mask |= guard;
    const bool asks = guard && (guard_return || guard_out);
    long r = asks && g_scan_hooks.refuse_guard ? -EINVAL : raw_syscall(SYS_ioctl, fd, long(kPagemapScan), long(&q));
    if (r == -EINVAL && asks) {
      g_guard.store(0, std::memory_order_relaxed);
      continue;  // the same range again, without it
    }
    a.walk_end = q.walk_end;
    return r;
  }
}

// Sums [lo, hi)'s pages into e, with v (kScanRegions) for the kernel's answers, and marks its Rss
// pages in pages[] (a byte per page from lo, when given): false when the scan fails.
bool scan(int fd, uint64_t lo, uint64_t hi, bool file, SmapsEntry &e, PageRegion *v, uint8_t *pages = nullptr,
          unsigned shift = 12) {
  if (g_scan_hooks.no_scan) return false;
  for (uint64_t at = lo; at < hi;) {
    PmScanArg a = {};
    a.size = sizeof(a);
    a.start = at;
    a.end = hi;
    a.vec = reinterpret_cast<uint64_t>(v);
    a.vec_len = kScanRegions;
    a.category_anyof_mask = kPresent | kSwapped;
    a.return_mask = kPresent | kSwapped | kPfnZero | (file ? kFile : 0);
    long r = pm_scan(fd, a, true, false);
    if (r < 0 || size_t(r) > kScanRegions) return false;
    for (long i = 0; i < r; ++i) {
      const uint64_t bytes = v[i].end - v[i].start, c = v[i].categories;
      if ((c & kPresent) && !(c & kPfnZero)) {
        e.rss += bytes;
        if (!(c & kFile)) e.anonymous += bytes;
        if (pages) memset(pages + ((v[i].start - lo) >> shift), 1, size_t(bytes >> shift));
      } else if ((c & kSwapped) && !(c & kGuard)) {
        e.swap += bytes;
      }
    }
    if (a.walk_end <= at) return false;
    at = a.walk_end;
  }
  return true;
}

// Whether [lo, hi) holds one page present (not the zero page) or swapped (not a guard marker):
// 1 or 0, -1 when the scan fails. The kernel stops at the first such page (max_pages).
int any_page(int fd, uint64_t lo, uint64_t hi, PageRegion *v) {
  if (g_scan_hooks.no_scan) return -1;
  PmScanArg a = {};
  a.size = sizeof(a);
  a.start = lo;
  a.end = hi;
  a.vec = reinterpret_cast<uint64_t>(v);
  a.vec_len = 1;
  a.max_pages = 1;
  a.category_inverted = a.category_mask = kPfnZero;  // (the zero page is no Rss)
  a.category_anyof_mask = a.return_mask = kPresent | kSwapped;
  long r = pm_scan(fd, a, false, true);
  return r < 0 ? -1 : r > 0;
}

// vdso, vvar, vsyscall and the like: not the program's memory to split (smaps.h, base_kind).
bool is_special(const char *path) {
  return path[0] == '[' && strncmp(path, "[anon:", 6) != 0 && strcmp(path, "[heap]") != 0 && strcmp(path, "[stack]") != 0;
}

}  // namespace

bool scan_takes_guard() { return g_guard.load(std::memory_order_relaxed) != 0; }

long scan_image(const Mapping *maps, long n, uint64_t skip_lo, uint64_t skip_hi, SmapsEntry *out, size_t cap,
                PageRegion *v, const ResidencySink *sink) {
  if (g_scan_hooks.no_scan || !v) return -1;
  const long fd = raw_syscall(SYS_openat, AT_FDCWD, long("/proc/self/pagemap"), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  long count = 0;
  for (long i = 0; i < n; ++i) {
    const Mapping &m = maps[i];
    uint64_t cuts[2][2] = {{m.start, m.end < skip_lo ? m.end : skip_lo}, {m.start > skip_hi ? m.start : skip_hi, m.end}};
    if (!(m.start < skip_hi && skip_lo < m.end)) cuts[0][1] = m.end, cuts[1][0] = cuts[1][1] = 0;
    for (auto &cut : cuts) {
      if (cut[1] <= cut[0]) continue;
      if (size_t(count) == cap) {
        raw_syscall(SYS_close, fd);
        return -1;
      }
      SmapsEntry &e = out[count++];
      memset(&e, 0, sizeof(e));
      e.start = cut[0];
      e.end = cut[1];
      e.inode = m.inode;
      e.readable = m.readable;
      e.writable = m.writable;
      e.executable = m.executable;
      e.shared = m.shared;
      static_assert(sizeof(e.path) == sizeof(m.path), "the same truncation as smaps'");
      memcpy(e.path, m.path, sizeof(e.path));
      // (A shared mapping's figures are the program's: fork_copied. vvar and the like cannot be scanned.)
      if (e.shared || is_special(m.path)) continue;
      uint8_t *pages = sink ? sink->vector(e, sink->ctx) : nullptr;
      if (!scan(int(fd), e.start, e.end, m.path[0] == '/', e, v, pages, sink ? sink->page_shift : 12)) {
        raw_syscall(SYS_close, fd);
        return -1;
      }
    }
  }
  raw_syscall(SYS_close, fd);
  return count;
}

long scan_program(int fd, SmapsEntry *prog, long n, const SmapsEntry *own, long n_own, PageRegion *v) {
  if (fd < 0 || g_scan_hooks.no_scan || !v) return -1;
  long o = 0;  // the first of own's entries that may overlap prog[i] (both address-ordered)
  for (long i = 0; i < n; ++i) {
    SmapsEntry &p = prog[i];
    const bool special = is_special(p.path), theirs = p.shared || p.path[0] == '/' || special;
    if (theirs && !scan(fd, p.start, p.end, p.path[0] == '/', p, v)) {
      // (vsyscall lies above the user address range the scan takes; vvar is skipped by the kernel)
      if (!special) return -1;
      p.rss = p.anonymous = p.swap = 0;
    }
    while (o < n_own && own[o].end <= p.start) ++o;
    bool overlaps = false, holds = false;
    for (long j = o; j < n_own && own[j].start < p.end; ++j) {
      overlaps = true;
      holds |= own[j].rss || own[j].swap;
    }
    // A mapping the child lacks, or a private anonymous one the child holds no page of: does the
    // program hold one? (the scan's figures, or one page looked for)
    if (overlaps && (theirs || holds)) continue;
    int has = theirs ? (p.rss || p.swap) : any_page(fd, p.start, p.end, v);
    if (has < 0) return -1;
    if (has) return kNeedSmaps;
  }
  return 0;
}

void take_split(SmapsEntry *own, long n_own, const SmapsEntry *program, long n_program) {
  for (long i = 0; i < n_own; ++i) {
    SmapsEntry &e = own[i];
    const SmapsEntry *p = std::lower_bound(program, program + n_program, e.start,
                                           [](const SmapsEntry &x, uint64_t v) { return x.start < v; });
    if (p == program + n_program || p->start != e.start) {
      e.private_bytes = e.rss;  // (a mapping the program no longer has: the child's pages alone)
      continue;
    }
    e.wipe_on_fork = p->wipe_on_fork;
    if (p->hugetlb) {  // (the scan counted its huge pages, present in the child's copy too: smaps does not)
      e.hugetlb = true;
      e.rss = e.anonymous = e.swap = e.shared_bytes = e.private_bytes = 0;
      continue;
    }
    const uint64_t both = p->shared_bytes + p->private_bytes;
    e.shared_bytes = both ? uint64_t((unsigned __int128)e.rss * p->shared_bytes / both) : 0;
    e.private_bytes = e.rss - e.shared_bytes;
  }
}

}  // namespace hs::snapshot::memory
