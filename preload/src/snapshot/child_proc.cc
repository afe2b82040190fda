// The /proc files the RSS breakdown reads in the snapshot child (child_memory.h): maps and smaps
// parsed, the program's pagemap scanned, VmRSS, into the child's arena, with raw system calls only
// (read_program runs on the background worker, child_threads.h: no errno, no TLS there).
#include <fcntl.h>
#include <sys/syscall.h>

#include <cerrno>
#include <cstring>
#include <ctime>

#include "core/private_heap.h"
#include "snapshot/child_memory.h"
#include "snapshot/image_scan.h"

namespace hs::snapshot::child {
namespace {

// A /proc file read whole into the child's arena (smaps may be megabytes: 1 KiB a mapping). Raw
// system calls: this runs on the background worker (child_threads.h: no errno there).
char *read_whole(const char *path, size_t *len) {
  using threads::raw_syscall;
  long fd = raw_syscall(SYS_openat, AT_FDCWD, long(path), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return nullptr;
  size_t cap = size_t(1) << 20, n = 0;
  char *buf = static_cast<char *>(heap::alloc(cap));
  while (buf) {
    if (n == cap) {
      buf = static_cast<char *>(heap::grow(buf, cap * 2));
      cap *= 2;
      if (!buf) break;
    }
    long r = raw_syscall(SYS_read, fd, long(buf + n), long(cap - n));
    if (r == -EINTR) continue;
    if (r <= 0) break;
    n += size_t(r);
  }
  raw_syscall(SYS_close, fd);
  *len = n;
  return buf;
}

// A "Key:  N kB" line of /proc/PID/status, in bytes (0 when missing).
uint64_t status_kb(const char *buf, size_t len, const char *key) {
  const size_t klen = strlen(key);
  const char *p = nullptr;
  for (size_t i = 0; i + klen <= len && !p; ++i)
    if (memcmp(buf + i, key, klen) == 0 && (i == 0 || buf[i - 1] == '\n')) p = buf + i + klen;
  if (!p) return 0;
  const char *end = buf + len;
  while (p < end && (*p == ' ' || *p == '\t')) ++p;
  uint64_t v = 0;
  while (p < end && *p >= '0' && *p <= '9') v = v * 10 + uint64_t(*p++ - '0');
  return v * 1024;
}

// The calling thread's CPU time, as core/common.h's thread_cpu_ns by a raw call (no errno on the
// worker thread).
uint64_t raw_thread_cpu_ns() {
  timespec ts = {};
  threads::raw_syscall(SYS_clock_gettime, CLOCK_THREAD_CPUTIME_ID, long(&ts));
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

}  // namespace

memory::SmapsEntry *read_smaps(const char *path, long *n, bool maps) {
  size_t len = 0;
  char *text = read_whole(path, &len);
  if (!text) return nullptr;
  long lines = 0;
  for (size_t i = 0; i < len; ++i) lines += text[i] == '\n';
  const size_t cap = size_t((maps ? lines : lines / 4) + 16);  // (a mapping is a line of maps, 20-odd of smaps)
  auto *entries = static_cast<memory::SmapsEntry *>(heap::alloc(cap * sizeof(memory::SmapsEntry)));
  *n = entries ? memory::parse_smaps(text, len, entries, cap) : -1;
  return *n >= 0 ? entries : nullptr;
}

// The program's mappings with their figures from its pagemap (image_scan.h, scan_program): its
// /proc/PID/maps, which costs no page walk, and a PAGEMAP_SCAN of each mapping whose figures must
// be the program's (file-backed and shared: fork did not copy their page tables), which costs their
// resident pages only, not the heap's. Null (and *why set) when only its smaps will do.
memory::SmapsEntry *read_program_maps(MemoryState &ms, long *n, const char **why) {
  memory::SmapsEntry *prog = read_smaps(ms.maps_path, n, true);  // (the maps' lines are smaps' headers)
  auto *regions = static_cast<memory::PageRegion *>(heap::alloc(memory::kScanRegions * sizeof(memory::PageRegion)));
  long fd = prog && regions ? threads::raw_syscall(SYS_openat, AT_FDCWD, long(ms.pagemap_path), O_RDONLY | O_CLOEXEC) : -1;
  long r = fd >= 0 ? memory::scan_program(int(fd), prog, *n, ms.own, ms.n_own, regions) : -1;
  if (fd >= 0) threads::raw_syscall(SYS_close, fd);
  if (r == 0) return prog;
  *why = r == memory::kNeedSmaps ? "smaps (a mapping of its holds pages the fork's copy lacks)"
                                  : "smaps (no PAGEMAP_SCAN on its pagemap)";
  return nullptr;
}

// The program's /proc reads, on the background worker while the blocks are enumerated: its
// mappings' figures where the child's own are not the fork's (its file mappings, which fork did
// not copy: see smaps.h, merge_fork_image) and its VmRSS. From its maps and pagemap when the
// child's own figures came from PAGEMAP_SCAN too, else (or when only VmFlags can tell: see
// scan_program; or when it has hugetlb pages) from its smaps, whose walk of its page tables costs
// about 12 ms of CPU per GiB resident. The child's own smaps cannot be read so: the enumeration's
// reads of file-backed private mappings (the shim's own tables among them) fault their pages into
// the child's copy, which would then hold more than the fork did.
void read_program(void *arg) {
  auto &ms = *static_cast<MemoryState *>(arg);
  const uint64_t t = mono_ns(), cpu = raw_thread_cpu_ns();
  // VmRSS, and the hugetlb pages it leaves out: PAGEMAP_SCAN reports them as present pages, smaps
  // only in its *_Hugetlb lines (KernelPageSize tells their mappings), so only smaps can leave them
  // out of the figures too (take_split).
  size_t len = 0;
  const char *status = read_whole(ms.status_path, &len);
  ms.status_rss = status ? status_kb(status, len, "VmRSS:") : 0;
  const uint64_t hugetlb = status ? status_kb(status, len, "HugetlbPages:") : 0;
  ms.program_source = "smaps (the child's own figures are from its smaps)";
  if (ms.own_scanned && hugetlb) ms.program_source = "smaps (it has hugetlb pages)";
  if (ms.own_scanned && !hugetlb) {
    ms.program = read_program_maps(ms, &ms.n_program, &ms.program_source);
    ms.program_scanned = ms.program != nullptr;
    if (ms.program_scanned) ms.program_source = "maps and pagemap";
  }
  if (!ms.program) ms.program = read_smaps(ms.program_path, &ms.n_program);
  ms.step_ns[MemoryState::kProgramSmaps] = mono_ns() - t;
  ms.step_ns[MemoryState::kProgramCpu] = raw_thread_cpu_ns() - cpu;
}

}  // namespace hs::snapshot::child
