// The RSS breakdown's pure half (preload/src/snapshot/smaps.h) on a fixed smaps text: the parser,
// each mapping's own kind, and distribute(), whose parts must always add up to the mapping's Rss.
#include "snapshot/image_scan.h"
#include "snapshot/smaps.h"

#include <doctest/doctest.h>

#include <cstring>
#include <string>

using namespace hs::snapshot::memory;

namespace {

// Shortened as the kernel writes it (fields it does not read left out in places).
const char kSmaps[] =
    "55d0c0a00000-55d0c0a02000 r--p 00000000 fe:00 1234                       /usr/bin/app\n"
    "Size:                  8 kB\n"
    "Rss:                   8 kB\n"
    "Shared_Clean:          4 kB\n"
    "Private_Clean:         4 kB\n"
    "Anonymous:             0 kB\n"
    "Swap:                  0 kB\n"
    "VmFlags: rd mr mw me\n"
    "55d0c0a02000-55d0c0a10000 r-xp 00002000 fe:00 1234                       /usr/bin/app\n"
    "Size:                 56 kB\n"
    "Rss:                  40 kB\n"
    "Private_Clean:        40 kB\n"
    "55d0c0a10000-55d0c0a12000 rw-p 00010000 fe:00 1234                       /usr/bin/app\n"
    "Rss:                   8 kB\n"
    "Private_Dirty:         8 kB\n"
    "Anonymous:             8 kB\n"
    "55d0c0a12000-55d0c0a13000 rw-p 00000000 00:00 0 \n"
    "Rss:                   4 kB\n"
    "Anonymous:             4 kB\n"
    "55d0c2000000-55d0c2100000 rw-p 00000000 00:00 0                          [heap]\n"
    "Size:               1024 kB\n"
    "Rss:                 900 kB\n"
    "Private_Dirty:       880 kB\n"
    "Shared_Dirty:         20 kB\n"
    "Anonymous:           900 kB\n"
    "Swap:                 24 kB\n"
    "7f0000000000-7f0000800000 rw-p 00000000 00:00 0 \n"
    "Rss:                2048 kB\n"
    "Anonymous:          2048 kB\n"
    "7f0001000000-7f0001100000 rw-s 00000000 00:01 99                         /dev/zero (deleted)\n"
    "Rss:                 512 kB\n"
    "Shared_Dirty:        512 kB\n"
    "7f0002000000-7f0002100000 rw-s 00000000 00:1a 77                         /dev/shm/queue\n"
    "Rss:                  64 kB\n"
    "7f0003000000-7f0003010000 r--p 00000000 fe:00 555                        /usr/share/data.bin\n"
    "Rss:                  16 kB\n"
    "7f0004000000-7f0004100000 r-xp 00000000 fe:00 600                        /opt/lib/libheapsnap_preload.so\n"
    "Rss:                 300 kB\n"
    "7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0                          [stack]\n"
    "Rss:                  20 kB\n"
    "7ffd00100000-7ffd00102000 r-xp 00000000 00:00 0                          [vdso]\n"
    "Rss:                   4 kB\n"
    "7f0005000000-7f0005001000 rw-p 00000000 00:00 0                          [anon:my cache]\n"
    "Rss:                   4 kB\n";

}  // namespace

TEST_CASE("smaps: every mapping, its range, permissions, path and sizes") {
  SmapsEntry e[32];
  long n = parse_smaps(kSmaps, strlen(kSmaps), e, 32);
  REQUIRE(n == 13);
  CHECK(e[0].start == 0x55d0c0a00000ull);
  CHECK(e[0].end == 0x55d0c0a02000ull);
  CHECK(e[0].inode == 1234);
  CHECK(std::string(e[0].path) == "/usr/bin/app");
  CHECK(e[0].rss == 8 * 1024);
  CHECK(e[0].shared_bytes == 4 * 1024);
  CHECK(e[0].private_bytes == 4 * 1024);
  CHECK(e[1].executable);
  CHECK(std::string(e[3].path).empty());
  CHECK(e[4].rss == 900 * 1024);
  CHECK(e[4].swap == 24 * 1024);
  CHECK(e[4].shared_bytes == 20 * 1024);
  CHECK(e[4].private_bytes == 880 * 1024);
  CHECK(e[6].shared);
  CHECK(std::string(e[6].path) == "/dev/zero (deleted)");
  CHECK(std::string(e[12].path) == "[anon:my cache]");
  SUBCASE("too many for the room given: -1, not a short list") { CHECK(parse_smaps(kSmaps, strlen(kSmaps), e, 5) == -1); }
  SUBCASE("a cut header line is refused") {
    const char bad[] = "55d0c0a00000-\nRss: 4 kB\n";
    CHECK(parse_smaps(bad, strlen(bad), e, 32) == -1);
  }
}

TEST_CASE("smaps: each mapping's own kind") {
  SmapsEntry e[32];
  long n = parse_smaps(kSmaps, strlen(kSmaps), e, 32);
  REQUIRE(n == 13);
  CHECK(base_kind(e, n, 0) == kModuleData);    // a module's read-only segment (it has an executable one)
  CHECK(base_kind(e, n, 1) == kCode);
  CHECK(base_kind(e, n, 2) == kModuleData);    // .data
  CHECK(base_kind(e, n, 3) == kProgramAnon);   // (.bss is claimed by the child, which knows the module's extent)
  CHECK(base_kind(e, n, 4) == kHeapUnwalked);  // [heap]: what the arena walk does not claim
  CHECK(base_kind(e, n, 5) == kProgramAnon);
  CHECK(base_kind(e, n, 6) == kSharedMemory);  // MAP_SHARED|MAP_ANONYMOUS
  CHECK(base_kind(e, n, 7) == kSharedMemory);  // /dev/shm
  CHECK(base_kind(e, n, 8) == kMappedFiles);   // a file without an executable mapping
  CHECK(base_kind(e, n, 9) == kHeapsnap);
  CHECK(base_kind(e, n, 10) == kThreadStacks);
  CHECK(base_kind(e, n, 11) == kOther);        // vdso
  CHECK(base_kind(e, n, 12) == kProgramAnon);  // a named anonymous mapping
  CHECK(is_splittable(e[3]));
  CHECK(is_splittable(e[4]));
  CHECK(is_splittable(e[10]));
  CHECK(is_splittable(e[12]));
  CHECK_FALSE(is_splittable(e[1]));
  CHECK_FALSE(is_splittable(e[6]));
}

TEST_CASE("smaps: distribute gives each mapping's Rss out exactly") {
  uint64_t measured[kKinds] = {}, out[kKinds];
  auto sum = [&] {
    uint64_t s = 0;
    for (uint64_t v : out) s += v;
    return s;
  };
  SUBCASE("measured parts as measured, the rest to the mapping's kind") {
    measured[kHeapLive] = 500 * 1024;
    measured[kHeapFree] = 300 * 1024;
    distribute(900 * 1024, measured, kHeapUnwalked, out);
    CHECK(out[kHeapLive] == 500 * 1024);
    CHECK(out[kHeapFree] == 300 * 1024);
    CHECK(out[kHeapUnwalked] == 100 * 1024);
    CHECK(sum() == 900 * 1024);
  }
  SUBCASE("more measured than resident (pages dropped after the fork): scaled down, still exact") {
    measured[kHeapLive] = 1000;
    measured[kHeapTop] = 2001;
    measured[kHeapOverhead] = 7;
    distribute(1001, measured, kProgramAnon, out);
    CHECK(sum() == 1001);
    CHECK(out[kProgramAnon] == 0);
    CHECK(out[kHeapTop] > out[kHeapLive]);
  }
  SUBCASE("nothing measured: all of it to the mapping's kind") {
    distribute(4096, measured, kThreadStacks, out);
    CHECK(out[kThreadStacks] == 4096);
    CHECK(sum() == 4096);
  }
  SUBCASE("huge figures do not overflow") {
    measured[kHeapLive] = uint64_t(1) << 62;
    measured[kHeapFree] = uint64_t(1) << 62;
    distribute(uint64_t(1) << 40, measured, kOther, out);
    CHECK(sum() == uint64_t(1) << 40);
  }
}

namespace {

SmapsEntry mapping(uint64_t start, uint64_t end, const char *path, uint64_t rss, uint64_t anonymous, bool executable = false) {
  SmapsEntry e{};
  e.start = start;
  e.end = end;
  e.readable = e.writable = !executable;
  e.executable = executable;
  snprintf(e.path, sizeof(e.path), "%s", path);
  e.rss = rss;
  e.anonymous = anonymous;
  e.private_bytes = rss;
  return e;
}

uint64_t resident_half(uint64_t lo, uint64_t hi, void *) { return (hi - lo) / 2; }

}  // namespace

TEST_CASE("merge_fork_image: anonymous memory as the fork left it, file mappings as the program has them") {
  constexpr uint64_t K = 1024, M = 1024 * K;
  // The child's view (the fork's page tables) and the program's, read later.
  SmapsEntry own[] = {
      mapping(0x10000000, 0x10100000, "/usr/bin/app", 40 * K, 0, true),  // code: fork copied no page tables
      mapping(0x20000000, 0x28000000, "", 1 * M, 1 * M),                  // touched by the program after the fork
      mapping(0x30000000, 0x30100000, "/usr/lib/gone.so", 8 * K, 0, true), // unmapped by the program since
      mapping(0x40000000, 0x50000000, "", 0, 0),                          // the child's arena...
  };
  SmapsEntry program[] = {
      mapping(0x10000000, 0x10100000, "/usr/bin/app", 1 * M, 0, true),
      mapping(0x20000000, 0x28000000, "", 100 * M, 100 * M),
      mapping(0x60000000, 0x64000000, "", 64 * M, 64 * M),  // mapped and touched after the fork
  };
  SmapsEntry out[8];
  uint64_t changed = 0;
  long n = merge_fork_image(own, 4, program, 3, 0x40000000, 0x50000000, resident_half, nullptr, out, 8, &changed);
  REQUIRE(n == 3);  // (the arena is not the program's)
  CHECK(out[0].rss == 1 * M);    // the program's figure: the child's own is what it touched itself
  CHECK(out[1].rss == 1 * M);    // the fork's, not the 100 MiB the program touched since
  CHECK(out[1].anonymous == 1 * M);
  CHECK(out[2].rss == 8 * K);    // not in the program any more: the child's figure stays
  CHECK(changed == 99 * M + 64 * M);
  CHECK(merge_fork_image(own, 4, program, 3, 0x40000000, 0x50000000, resident_half, nullptr, out, 2, &changed) == -1);

  SUBCASE("MADV_DONTFORK memory is the program's, in address order; MADV_WIPEONFORK takes the program's figures") {
    SmapsEntry own2[] = {own[0], own[1]};
    own2[1].wipe_on_fork = true;
    SmapsEntry program2[] = {program[0], mapping(0x18000000, 0x18100000, "", 1 * M, 1 * M), program[1]};
    program2[1].dont_fork = true;
    program2[2].wipe_on_fork = true;
    n = merge_fork_image(own2, 2, program2, 3, 0x40000000, 0x50000000, resident_half, nullptr, out, 8, &changed);
    REQUIRE(n == 3);
    CHECK(out[1].start == 0x18000000);
    CHECK(out[1].rss == 1 * M);
    CHECK(out[2].rss == 100 * M);  // (the child's copy of it is empty)
    CHECK(changed == 0);
  }
  SUBCASE("a MADV_DONTFORK mapping over addresses the fork had mapped is new: changed, not counted twice") {
    SmapsEntry own3[] = {own[0], own[1]};
    // The program unmapped the fork's 0x20000000 mapping and put a DONTFORK one in its place.
    SmapsEntry program3[] = {program[0], mapping(0x20000000, 0x20100000, "", 1 * M, 1 * M)};
    program3[1].dont_fork = true;
    n = merge_fork_image(own3, 2, program3, 2, 0x40000000, 0x50000000, resident_half, nullptr, out, 8, &changed);
    REQUIRE(n == 2);  // the fork's two, not the DONTFORK one beside them
    CHECK(out[1].start == 0x20000000);
    CHECK(out[1].rss == 1 * M);  // the fork's figure
    // The new mapping's RSS; (the fork's mapping is compared with what the program has over its
    // addresses, this same 1 MiB: no difference there).
    CHECK(changed == 1 * M);
  }
  SUBCASE("a mapping the kernel merged with the child's arena keeps its own part, counted") {
    SmapsEntry merged[] = {mapping(0x3f000000, 0x50000000, "", 20 * M, 20 * M)};  // 16 MiB of it before the arena
    n = merge_fork_image(merged, 1, program, 3, 0x40000000, 0x50000000, resident_half, nullptr, out, 8, &changed);
    REQUIRE(n == 1);
    CHECK(out[0].start == 0x3f000000);
    CHECK(out[0].end == 0x40000000);
    CHECK(out[0].rss == 8 * M);        // resident_half of 16 MiB
    CHECK(out[0].anonymous == 8 * M);  // scaled with it
  }
}

TEST_CASE("smaps: VmFlags' dc and wf (MADV_DONTFORK, MADV_WIPEONFORK), and no other flag taken for them") {
  const char text[] =
      "7f0000000000-7f0000001000 rw-p 00000000 00:00 0 \n"
      "Rss:                   4 kB\n"
      "VmFlags: rd wr mr mw me dc ac sd\n"
      "7f0000001000-7f0000002000 rw-p 00000000 00:00 0 \n"
      "VmFlags: rd wr mr mw me ac wf\n"
      "7f0000002000-7f0000003000 rw-p 00000000 00:00 0 \n"
      "VmFlags: rd wr mr mw me ac sd dcx\n";
  SmapsEntry e[3];
  REQUIRE(parse_smaps(text, sizeof(text) - 1, e, 3) == 3);
  CHECK((e[0].dont_fork && !e[0].wipe_on_fork));
  CHECK((!e[1].dont_fork && e[1].wipe_on_fork));
  CHECK((!e[2].dont_fork && !e[2].wipe_on_fork));
}

TEST_CASE("smaps: KernelPageSize above 4 kB is a hugetlb mapping (its pages not in Rss); a THP mapping's is 4 kB") {
  const char text[] =
      "7f0000000000-7f0000400000 rw-p 00000000 00:0f 1234                       /anon_hugepage (deleted)\n"
      "Rss:                   0 kB\n"
      "KernelPageSize:     2048 kB\n"
      "Private_Hugetlb:    4096 kB\n"
      "7f0000400000-7f0000800000 rw-p 00000000 00:00 0 \n"
      "Rss:                4096 kB\n"
      "AnonHugePages:      4096 kB\n"
      "KernelPageSize:        4 kB\n";
  SmapsEntry e[2];
  REQUIRE(parse_smaps(text, sizeof(text) - 1, e, 2) == 2);
  CHECK(e[0].hugetlb);
  CHECK(e[0].rss == 0);
  CHECK(!e[1].hugetlb);
  // The child's own PAGEMAP_SCAN counted the huge pages: the program's smaps says they are no Rss.
  SmapsEntry own = e[0];
  own.rss = own.anonymous = 4u << 20;
  own.hugetlb = false;
  take_split(&own, 1, e, 2);
  CHECK(own.hugetlb);
  CHECK(own.rss == 0);
  CHECK(own.anonymous == 0);
}

TEST_CASE("smaps: the tracer's named mappings are heapsnap's, a program's of the same name is not") {
  const char text[] =
      "7f0006000000-7f0006002000 rw-p 00000000 00:00 0                          [anon:heapsnap]\n"
      "Rss:                   8 kB\n"
      "7f0007000000-7f0007001000 rw-s 00000000 00:01 98                         [anon_shmem:heapsnap]\n"
      "Rss:                   4 kB\n";
  SmapsEntry e[4];
  long n = parse_smaps(text, strlen(text), e, 4);
  REQUIRE(n == 2);
  CHECK(base_kind(e, n, 0) == kHeapsnap);
  CHECK(is_splittable(e[0]));  // (the child's claims still split it: part may be a stack)
  CHECK(base_kind(e, n, 1) == kSharedMemory);  // the tracer names private mappings only
}
