#include "snapshot/image_scan.h"

#include <fcntl.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

namespace hs::snapshot::memory {
namespace {

// <linux/fs.h> of Linux 6.7 (the build's headers may be older); PageRegion is in the header.
struct PmScanArg {
  uint64_t size, flags, start, end, walk_end, vec, vec_len, max_pages, category_inverted, category_mask,
      category_anyof_mask, return_mask;
};
constexpr unsigned long kPagemapScan = _IOWR('f', 16, PmScanArg);
constexpr uint64_t kFile = 1 << 2, kPresent = 1 << 3, kSwapped = 1 << 4, kPfnZero = 1 << 5, kGuard = 1 << 8;

// Sums [lo, hi)'s pages into e, with v (kScanRegions) for the kernel's answers: false when the
// scan fails.
// PAGE_IS_GUARD came after PAGEMAP_SCAN itself (Linux 6.7 knows categories 0-6 and refuses the
// others with EINVAL): asked for while the kernel takes it, dropped at the first refusal.
std::atomic<uint64_t> g_guard{kGuard};

bool scan(int fd, uint64_t lo, uint64_t hi, bool file, SmapsEntry &e, PageRegion *v) {
  for (uint64_t at = lo; at < hi;) {
    PmScanArg a = {};
    a.size = sizeof(a);
    a.start = at;
    a.end = hi;
    a.vec = reinterpret_cast<uint64_t>(v);
    a.vec_len = kScanRegions;
    a.category_anyof_mask = kPresent | kSwapped;
    const uint64_t guard = g_guard.load(std::memory_order_relaxed);
    a.return_mask = kPresent | kSwapped | kPfnZero | guard | (file ? kFile : 0);
    long r = ioctl(fd, kPagemapScan, &a);
    if (r < 0 && guard && errno == EINVAL) {
      g_guard.store(0, std::memory_order_relaxed);
      continue;  // the same range again, without it
    }
    if (r < 0 || size_t(r) > kScanRegions) return false;
    for (long i = 0; i < r; ++i) {
      const uint64_t bytes = v[i].end - v[i].start, c = v[i].categories;
      if ((c & kPresent) && !(c & kPfnZero)) {
        e.rss += bytes;
        if (!(c & kFile)) e.anonymous += bytes;
      } else if ((c & kSwapped) && !(c & kGuard)) {
        e.swap += bytes;
      }
    }
    if (a.walk_end <= at) return false;
    at = a.walk_end;
  }
  return true;
}

}  // namespace

long scan_image(const Mapping *maps, long n, uint64_t skip_lo, uint64_t skip_hi, SmapsEntry *out, size_t cap,
                PageRegion *v) {
  int fd = v ? open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC) : -1;
  if (fd < 0) return -1;
  long count = 0;
  for (long i = 0; i < n; ++i) {
    const Mapping &m = maps[i];
    uint64_t cuts[2][2] = {{m.start, m.end < skip_lo ? m.end : skip_lo}, {m.start > skip_hi ? m.start : skip_hi, m.end}};
    if (!(m.start < skip_hi && skip_lo < m.end)) cuts[0][1] = m.end, cuts[1][0] = cuts[1][1] = 0;
    for (auto &cut : cuts) {
      if (cut[1] <= cut[0]) continue;
      if (size_t(count) == cap) {
        close(fd);
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
      if (e.shared || (m.path[0] == '[' && strncmp(m.path, "[anon:", 6) != 0 && strcmp(m.path, "[heap]") != 0 &&
                       strcmp(m.path, "[stack]") != 0))
        continue;
      if (!scan(fd, e.start, e.end, m.path[0] == '/', e, v)) {
        close(fd);
        return -1;
      }
    }
  }
  close(fd);
  return count;
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
    const uint64_t both = p->shared_bytes + p->private_bytes;
    e.shared_bytes = both ? uint64_t((unsigned __int128)e.rss * p->shared_bytes / both) : 0;
    e.private_bytes = e.rss - e.shared_bytes;
  }
}

}  // namespace hs::snapshot::memory
