// The snapshot child's own figures by PAGEMAP_SCAN (preload/src/snapshot/image_scan.h) on a mapping
// made here: written pages are Rss and anonymous, a page only read (the zero page) is not, as smaps
// counts them; the split comes from the program's entry.
#include "snapshot/image_scan.h"

#include <doctest/doctest.h>
#include <sys/mman.h>

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

using namespace hs;
using namespace hs::snapshot::memory;

TEST_CASE("scan_image: Rss and anonymous bytes of written pages, not of the zero page; the arena cut out") {
  const size_t page = 4096;
  auto *m = static_cast<volatile uint8_t *>(mmap(nullptr, 8 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  REQUIRE(reinterpret_cast<uintptr_t>(m) != reinterpret_cast<uintptr_t>(MAP_FAILED));
  m[0] = 1;  // three pages written
  m[page] = 1;
  m[5 * page] = 1;
  uint8_t sum = m[3 * page];               // one read: the zero page
  CHECK(sum == 0);
  Mapping map{};
  map.start = reinterpret_cast<uint64_t>(m);
  map.end = map.start + 8 * page;
  map.readable = map.writable = true;
  SmapsEntry e[3];
  // [skip_lo, skip_hi): the last two pages, as the child's arena would be when merged with it.
  static PageRegion regions[kScanRegions];
  long n = scan_image(&map, 1, map.end - 2 * page, map.end, e, 3, regions);
  if (n < 0) {
    MESSAGE("no PAGEMAP_SCAN in this kernel (before 6.7): the child reads its smaps instead");
    munmap(const_cast<uint8_t *>(m), 8 * page);
    return;
  }
  REQUIRE(n == 1);
  CHECK(e[0].start == map.start);
  CHECK(e[0].end == map.end - 2 * page);
  CHECK(e[0].rss == 3 * page);
  CHECK(e[0].anonymous == 3 * page);
  CHECK(e[0].swap == 0);
  // The split from the program's entry of the same start, in proportion.
  SmapsEntry program = e[0];
  program.shared_bytes = 2 * page;
  program.private_bytes = 2 * page;
  program.wipe_on_fork = true;
  take_split(e, 1, &program, 1);
  CHECK(e[0].shared_bytes + e[0].private_bytes == e[0].rss);
  CHECK(e[0].shared_bytes == 3 * page / 2);
  CHECK(e[0].wipe_on_fork);
  munmap(const_cast<uint8_t *>(m), 8 * page);
}

namespace {

// This process's /proc/self/FILE, read whole.
std::string read_self(const char *file) {
  std::string text, path = std::string("/proc/self/") + file;
  FILE *f = fopen(path.c_str(), "r");
  if (!f) return text;
  char buf[65536];
  for (size_t n; (n = fread(buf, 1, sizeof(buf), f)) > 0;) text.append(buf, n);
  fclose(f);
  return text;
}

}  // namespace

TEST_CASE("scan_program: a file mapping's Rss from the pagemap is smaps' Rss; pages the other image lacks ask for smaps") {
  const size_t page = 4096;
  // A file mapping of ours, its first 3 of 8 pages read (page cache pages: file-backed Rss; fault-around
  // may map more of them, as smaps then says too).
  char tmpl[] = "/tmp/heapsnap-scan-XXXXXX";
  int fd = mkstemp(tmpl);
  REQUIRE(fd >= 0);
  unlink(tmpl);
  REQUIRE(ftruncate(fd, 8 * page) == 0);
  auto *f = static_cast<volatile uint8_t *>(mmap(nullptr, 8 * page, PROT_READ, MAP_PRIVATE, fd, 0));
  REQUIRE(reinterpret_cast<uintptr_t>(f) != reinterpret_cast<uintptr_t>(MAP_FAILED));
  uint8_t sum = uint8_t(f[0] + f[page] + f[2 * page]);
  CHECK(sum == 0);
  // An anonymous mapping with one page written: "the program's" memory that "the child" lacks.
  auto *a = static_cast<volatile uint8_t *>(mmap(nullptr, 4 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  REQUIRE(reinterpret_cast<uintptr_t>(a) != reinterpret_cast<uintptr_t>(MAP_FAILED));
  a[page] = 1;

  const std::string maps = read_self("maps");
  std::vector<SmapsEntry> prog(4096);
  long n = parse_smaps(maps.data(), maps.size(), prog.data(), prog.size());
  REQUIRE(n > 0);
  prog.resize(size_t(n));
  const std::string smaps = read_self("smaps");
  std::vector<SmapsEntry> truth(4096);
  long nt = parse_smaps(smaps.data(), smaps.size(), truth.data(), truth.size());
  REQUIRE(nt > 0);
  truth.resize(size_t(nt));
  static PageRegion regions[kScanRegions];
  int pm = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  REQUIRE(pm >= 0);
  // "The child's" image: every mapping, with a page of Rss, but for the anonymous one (none).
  std::vector<SmapsEntry> own = prog;
  for (auto &e : own) e.rss = e.start == reinterpret_cast<uint64_t>(a) ? 0 : page;
  long r = scan_program(pm, prog.data(), n, own.data(), long(own.size()), regions);
  if (r == -1) {
    MESSAGE("no PAGEMAP_SCAN in this kernel (before 6.7): the child reads the program's smaps instead");
  } else {
    CHECK(r == kNeedSmaps);  // the anonymous page "the child" lacks: only VmFlags tell why
    // With it in the child's image too, the scan stands, and the file mapping's figures are smaps'.
    for (auto &e : own) e.rss = page;
    for (auto &e : prog) e.rss = e.anonymous = e.swap = 0;
    REQUIRE(scan_program(pm, prog.data(), n, own.data(), long(own.size()), regions) == 0);
    bool seen = false;
    for (long i = 0; i < n; ++i) {
      if (prog[size_t(i)].start != reinterpret_cast<uint64_t>(f)) continue;
      seen = true;
      CHECK(prog[size_t(i)].rss >= 3 * page);  // (and what the kernel's fault-around mapped beside them)
      CHECK(prog[size_t(i)].anonymous == 0);
      for (const auto &t : truth)
        if (t.start == prog[size_t(i)].start) CHECK(t.rss == prog[size_t(i)].rss);
    }
    CHECK(seen);
    // Every file-backed mapping's Rss as smaps says (the libraries' too: nothing here touches them meanwhile).
    for (const auto &p : prog)
      if (p.path[0] == '/')
        for (const auto &t : truth)
          if (t.start == p.start && t.end == p.end) CHECK_MESSAGE(t.rss == p.rss, p.path);
  }
  close(pm);
  munmap(const_cast<uint8_t *>(a), 4 * page);
  munmap(const_cast<uint8_t *>(f), 8 * page);
  close(fd);
}

TEST_CASE("scan_image and scan_program: an [anon:NAME] mapping is anonymous memory, scanned, not a special one") {
  // (PR_SET_VMA_ANON_NAME needs CONFIG_ANON_VMA_NAME, which the test machine's kernel lacks: the
  // name is given here as the maps would show it.)
  const size_t page = 4096;
  auto *m = static_cast<volatile uint8_t *>(mmap(nullptr, 4 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  REQUIRE(reinterpret_cast<uintptr_t>(m) != reinterpret_cast<uintptr_t>(MAP_FAILED));
  m[0] = 1;
  m[2 * page] = 1;
  Mapping map{};
  map.start = reinterpret_cast<uint64_t>(m);
  map.end = map.start + 4 * page;
  map.readable = map.writable = true;
  strcpy(map.path, "[anon:my cache]");
  SmapsEntry e[2];
  static PageRegion regions[kScanRegions];
  long n = scan_image(&map, 1, 0, 0, e, 2, regions);
  if (n < 0) {
    MESSAGE("no PAGEMAP_SCAN in this kernel (before 6.7)");
  } else {
    REQUIRE(n == 1);
    CHECK(e[0].rss == 2 * page);
    CHECK(std::string(e[0].path) == "[anon:my cache]");
    // The program's side: private anonymous, so its figures are the child's; a child copy without
    // its pages asks for smaps, one with them does not.
    SmapsEntry prog = e[0], own = e[0];
    prog.rss = prog.anonymous = 0;
    own.rss = 0;
    int pm = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
    REQUIRE(pm >= 0);
    CHECK(scan_program(pm, &prog, 1, &own, 1, regions) == kNeedSmaps);
    own.rss = 2 * page;
    CHECK(scan_program(pm, &prog, 1, &own, 1, regions) == 0);
    CHECK(prog.rss == 0);  // (not scanned: the child's figures stand)
    close(pm);
  }
  munmap(const_cast<uint8_t *>(m), 4 * page);
}
