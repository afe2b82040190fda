// Which transparent-huge-page advice a mapping should get, from the kernel's THP policy and how
// the mapping is used.
//
// Why: a ZeroArray is read everywhere and written in scattered places; it relies on untouched
// pages costing nothing. Where the kernel backs its faults with 2 MiB pages, that fails: with THP
// "always" (or a multi-size THP size set to "always") every first write takes a whole huge page,
// and with use_zero_page = 0 so does every first read, where a 4 KiB read fault maps the shared
// zero page (tests/unit/zero_array_test.cc: reading 512 MB of untouched elements took 517 MB).
// Tables that get written through (the live table's chunks, hash tables) gain from huge pages.
//
// The decision (huge_advice) is a pure function of the policy, so that it is tested under every
// policy on any machine; thp_policy() reads this machine's from /sys/kernel/mm/transparent_hugepage.
#pragma once
#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

namespace heapsnap::util {

enum class ThpMode { kNever, kMadvise, kAlways };

struct ThpPolicy {
  // For anonymous memory of a process that gave no advice, the largest effect any enabled size
  // has: kAlways when the top-level mode or any hugepages-<size>kB/enabled is "always" (or
  // "inherit" from an "always" top level); kMadvise when huge pages need MADV_HUGEPAGE.
  ThpMode mode = ThpMode::kNever;
  // use_zero_page: a read fault in a huge-page region maps the huge zero page (1) or allocates a
  // real huge page (0).
  bool huge_zero_page = true;
};

// How a mapping is used.
struct MemoryUse {
  bool sparse_writes;    // written in scattered places: most of it stays untouched
  bool reads_unwritten;  // parts never written are read (lookups, scans of a whole array)
};
inline constexpr MemoryUse kSparseArray{true, true};  // ZeroArray
inline constexpr MemoryUse kDenseTable{false, false};  // written through before it is read

enum class HugeAdvice { kNone, kHuge, kNoHuge };  // no madvise, MADV_HUGEPAGE, MADV_NOHUGEPAGE

// Huge pages pay when the memory is written through; they cost a whole huge page per scattered
// write, and per read of an unwritten stretch unless the kernel maps the huge zero page there.
// Where they do not pay: MADV_NOHUGEPAGE if the kernel would use them unasked ("always"),
// nothing otherwise (in "madvise" mode unadvised memory gets none).
constexpr HugeAdvice huge_advice(ThpPolicy p, MemoryUse use) {
  if (p.mode == ThpMode::kNever) return HugeAdvice::kNone;
  bool pays = !use.sparse_writes && (!use.reads_unwritten || p.huge_zero_page);
  if (pays) return HugeAdvice::kHuge;
  return p.mode == ThpMode::kAlways ? HugeAdvice::kNoHuge : HugeAdvice::kNone;
}

// The mode a THP "enabled" file names: the bracketed word ("always [madvise] never"), or the
// word alone. `inherit` (multi-size sizes): the top level's. Unknown text: kNever (no effect).
inline ThpMode parse_thp_mode(const char *text, ThpMode inherit = ThpMode::kNever) {
  const char *open = strchr(text, '[');
  const char *word = open ? open + 1 : text;
  while (*word == ' ' || *word == '\n') ++word;
  auto is = [&](const char *w) { return strncmp(word, w, strlen(w)) == 0; };
  if (is("always")) return ThpMode::kAlways;
  if (is("madvise")) return ThpMode::kMadvise;
  if (is("inherit")) return inherit;
  return ThpMode::kNever;
}

namespace thp_detail {
inline bool read_text(const char *path, char *buf, size_t cap) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  ssize_t n = read(fd, buf, cap - 1);
  close(fd);
  if (n <= 0) return false;
  buf[n] = 0;
  return true;
}

inline ThpPolicy read_policy(const char *dir) {
  ThpPolicy p;
  char buf[256], path[512];
  snprintf(path, sizeof(path), "%s/enabled", dir);
  if (!read_text(path, buf, sizeof(buf))) return p;  // no THP in this kernel
  ThpMode top = parse_thp_mode(buf);
  p.mode = top;
  // Multi-size THP (Linux 6.8+): each size has its own setting, which may be "always" under a
  // "madvise" or "never" top level.
  if (DIR *d = opendir(dir)) {
    while (dirent *e = readdir(d)) {
      if (strncmp(e->d_name, "hugepages-", 10) != 0) continue;
      snprintf(path, sizeof(path), "%s/%s/enabled", dir, e->d_name);
      if (!read_text(path, buf, sizeof(buf))) continue;
      ThpMode m = parse_thp_mode(buf, top);
      if (int(m) > int(p.mode)) p.mode = m;
    }
    closedir(d);
  }
  snprintf(path, sizeof(path), "%s/use_zero_page", dir);
  if (read_text(path, buf, sizeof(buf))) p.huge_zero_page = buf[0] != '0';
  return p;
}
}  // namespace thp_detail

// This machine's policy, read once.
inline ThpPolicy thp_policy() {
  static const ThpPolicy p = thp_detail::read_policy("/sys/kernel/mm/transparent_hugepage");
  return p;
}

// Applies the advice to [addr, addr + len) (page aligned). A hint: failure only costs memory or speed.
inline void apply_huge_advice(void *addr, size_t len, HugeAdvice a) {
  if (a == HugeAdvice::kHuge) madvise(addr, len, MADV_HUGEPAGE);
  else if (a == HugeAdvice::kNoHuge) madvise(addr, len, MADV_NOHUGEPAGE);
}

}  // namespace heapsnap::util
