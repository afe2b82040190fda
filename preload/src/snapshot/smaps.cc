#include "snapshot/smaps.h"

#include <algorithm>
#include <cstring>

#include "core/proc_maps.h"

namespace hs::snapshot::memory {

const char *kind_name(Kind k) {
  static const char *const kNames[kKinds] = {
      "heap live",  "heap overhead", "heap free",   "heap cached",  "heap top",      "heap unwalked",
      "mmapped chunks", "thread stacks", "program anonymous", "code", "module data", "mapped files",
      "shared memory", "heapsnap", "other"};
  return k < kKinds ? kNames[k] : "?";
}

namespace {

bool is_hex(char ch) { return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f'); }

uint64_t parse_dec(const char *&p, const char *end) {
  uint64_t v = 0;
  while (p < end && *p >= '0' && *p <= '9') v = v * 10 + uint64_t(*p++ - '0');
  return v;
}

// "start-end perms offset dev inode   path"
bool parse_header(const char *p, const char *end, SmapsEntry &e) {
  memset(&e, 0, sizeof(e));
  e.start = parse_hex(p);
  if (p >= end || *p++ != '-') return false;
  e.end = parse_hex(p);
  if (end - p < 6 || *p != ' ') return false;
  ++p;
  e.readable = p[0] == 'r';
  e.writable = p[1] == 'w';
  e.executable = p[2] == 'x';
  e.shared = p[3] == 's';
  p += 4;
  for (int field = 0; field < 3; ++field) {  // offset, dev, inode
    while (p < end && *p == ' ') ++p;
    if (field == 2) e.inode = parse_dec(p, end);
    while (p < end && *p != ' ') ++p;
  }
  while (p < end && *p == ' ') ++p;
  size_t len = size_t(end - p);
  if (len >= sizeof(e.path)) len = sizeof(e.path) - 1;
  memcpy(e.path, p, len);
  e.path[len] = 0;
  return e.end >= e.start;
}

bool starts(const char *p, const char *end, const char *key, size_t klen) {
  return size_t(end - p) > klen && memcmp(p, key, klen) == 0;
}

// "Key:   1234 kB" -> bytes
uint64_t kb_value(const char *p, const char *end) {
  while (p < end && (*p < '0' || *p > '9')) ++p;
  return parse_dec(p, end) * 1024;
}

bool path_is(const SmapsEntry &e, const char *s) { return strcmp(e.path, s) == 0; }

}  // namespace

long parse_smaps(const char *text, size_t n, SmapsEntry *out, size_t cap) {
  const char *p = text, *end = text + n;
  long count = 0;
  SmapsEntry *cur = nullptr;
  while (p < end) {
    const char *eol = static_cast<const char *>(memchr(p, '\n', size_t(end - p)));
    if (!eol) eol = end;
    if (eol > p && is_hex(*p)) {
      if (size_t(count) == cap) return -1;
      cur = &out[count];
      if (!parse_header(p, eol, *cur)) return -1;
      ++count;
    } else if (cur) {
      if (starts(p, eol, "Rss:", 4)) cur->rss = kb_value(p + 4, eol);
      else if (starts(p, eol, "Anonymous:", 10)) cur->anonymous = kb_value(p + 10, eol);
      else if (starts(p, eol, "Shared_Clean:", 13) || starts(p, eol, "Shared_Dirty:", 13)) cur->shared_bytes += kb_value(p + 13, eol);
      else if (starts(p, eol, "Private_Clean:", 14) || starts(p, eol, "Private_Dirty:", 14)) cur->private_bytes += kb_value(p + 14, eol);
      else if (starts(p, eol, "Swap:", 5)) cur->swap = kb_value(p + 5, eol);
      else if (starts(p, eol, "KernelPageSize:", 15)) cur->hugetlb = kb_value(p + 15, eol) > 4096;
      else if (starts(p, eol, "VmFlags:", 8)) {
        for (const char *f = p + 8; f + 2 <= eol; ++f)
          if (f[-1] == ' ' && (f + 2 == eol || f[2] == ' ')) {
            cur->dont_fork |= f[0] == 'd' && f[1] == 'c';
            cur->wipe_on_fork |= f[0] == 'w' && f[1] == 'f';
          }
      }
    }
    p = eol + 1;
  }
  return count;
}

bool is_splittable(const SmapsEntry &e) {
  if (e.shared) return false;
  if (e.path[0] == 0) return true;
  return path_is(e, "[heap]") || path_is(e, "[stack]") || strncmp(e.path, "[anon:", 6) == 0;
}

Kind base_kind(const SmapsEntry *all, long n, long i) {
  const SmapsEntry &e = all[i];
  const char *path = e.path;
  if (strstr(path, "libheapsnap_preload") || strstr(path, "libmimalloc")) return kHeapsnap;
  if (!e.shared && strncmp(path, "[anon:heapsnap", 14) == 0) return kHeapsnap;  // (core/own_mappings.h names them)
  if (e.shared) {
    // MAP_SHARED|MAP_ANONYMOUS shows as "/dev/zero (deleted)"; shm_open as /dev/shm/NAME.
    if (!path[0] || strncmp(path, "/dev/zero", 9) == 0 || strncmp(path, "/dev/shm/", 9) == 0 ||
        strncmp(path, "/memfd:", 7) == 0 || strncmp(path, "/SYSV", 5) == 0 || strncmp(path, "[anon", 5) == 0)
      return kSharedMemory;
    return kMappedFiles;
  }
  if (path_is(e, "[heap]")) return kHeapUnwalked;
  if (path_is(e, "[stack]")) return kThreadStacks;
  if (path[0] == '[' && strncmp(path, "[anon:", 6) != 0) return kOther;  // vdso, vvar, vsyscall
  if (path[0] == '/') {
    if (e.executable) return kCode;
    // A module maps one executable segment at least; a file without one is data the program mapped.
    for (long j = 0; j < n; ++j)
      if (all[j].executable && all[j].inode == e.inode && strcmp(all[j].path, path) == 0) return kModuleData;
    return kMappedFiles;
  }
  return kProgramAnon;  // anonymous (what the child splits off it is measured apart)
}

bool fork_copied(const SmapsEntry &e) {
  return !e.shared && !e.wipe_on_fork && (is_splittable(e) || e.anonymous || e.swap);
}

namespace {

// The program's figures over [lo, hi): its mappings there, each in proportion to the part of it
// inside (whole when the ranges match, as they do unless the program mapped, unmapped or
// changed memory next to it since the fork). Returns false when no mapping of its overlaps.
bool figures_over(const SmapsEntry *p, long n, uint64_t lo, uint64_t hi, SmapsEntry *into) {
  const SmapsEntry *it = std::upper_bound(p, p + n, lo, [](uint64_t v, const SmapsEntry &x) { return v < x.end; });
  bool any = false;
  into->rss = into->anonymous = into->shared_bytes = into->private_bytes = into->swap = 0;
  for (; it != p + n && it->start < hi; ++it) {
    uint64_t a = it->start > lo ? it->start : lo, b = it->end < hi ? it->end : hi, size = it->end - it->start;
    if (b <= a || !size) continue;
    auto part = [&](uint64_t v) { return uint64_t((unsigned __int128)v * (b - a) / size); };
    into->rss += part(it->rss);
    into->anonymous += part(it->anonymous);
    into->shared_bytes += part(it->shared_bytes);
    into->private_bytes += part(it->private_bytes);
    into->swap += part(it->swap);
    any = true;
  }
  return any;
}

uint64_t diff(uint64_t a, uint64_t b) { return a > b ? a - b : b - a; }

}  // namespace

long merge_fork_image(const SmapsEntry *own, long n_own, const SmapsEntry *program, long n_program, uint64_t skip_lo,
                      uint64_t skip_hi, uint64_t (*resident)(uint64_t lo, uint64_t hi, void *ctx), void *ctx,
                      SmapsEntry *out, size_t cap, uint64_t *changed) {
  long n = 0;
  *changed = 0;
  for (long i = 0; i < n_own; ++i) {
    const SmapsEntry &e = own[i];
    // Up to two pieces: what lies outside [skip_lo, skip_hi).
    uint64_t cuts[2][2] = {{e.start, e.end < skip_lo ? e.end : skip_lo}, {e.start > skip_hi ? e.start : skip_hi, e.end}};
    bool clipped = e.start < skip_hi && skip_lo < e.end;
    if (!clipped) cuts[0][1] = e.end, cuts[1][0] = cuts[1][1] = 0;
    for (auto &cut : cuts) {
      if (cut[1] <= cut[0]) continue;
      if (size_t(n) == cap) return -1;
      SmapsEntry &o = out[n++];
      o = e;
      o.start = cut[0];
      o.end = cut[1];
      if (clipped) {  // (the child's own memory is in e's figures: keep this piece's share)
        uint64_t r = resident(o.start, o.end, ctx);
        auto scale = [&](uint64_t v) { return e.rss ? uint64_t((unsigned __int128)v * r / e.rss) : 0; };
        o.anonymous = scale(e.anonymous);
        o.shared_bytes = scale(e.shared_bytes);
        o.private_bytes = scale(e.private_bytes);
        o.swap = scale(e.swap);
        o.rss = r;
      }
      SmapsEntry now;
      bool in_program = figures_over(program, n_program, o.start, o.end, &now);
      if (fork_copied(o)) {
        *changed += diff(o.rss, in_program ? now.rss : 0);
      } else if (in_program) {
        o.rss = now.rss;
        o.anonymous = now.anonymous;
        o.shared_bytes = now.shared_bytes;
        o.private_bytes = now.private_bytes;
        o.swap = now.swap;
      }
    }
  }
  // The program's MADV_DONTFORK mappings: as it has them, unless one of the fork's overlaps it
  // (the program unmapped that one after the fork and mapped this one in its place: made since,
  // its RSS is changed, and the parts must not count those addresses twice). Its anonymous memory
  // outside every other mapping of the fork's: made since.
  const long forked = n;
  for (long j = 0; j < n_program; ++j) {
    const SmapsEntry &d = program[j];
    if (!d.dont_fork) continue;
    const SmapsEntry *it = std::upper_bound(out, out + forked, d.start, [](uint64_t v, const SmapsEntry &x) { return v < x.end; });
    if (it != out + forked && it->start < d.end) {
      *changed += d.rss;
      continue;
    }
    if (size_t(n) == cap) return -1;
    out[n++] = d;
  }
  if (n > forked) std::sort(out, out + n, [](const SmapsEntry &x, const SmapsEntry &y) { return x.start < y.start; });
  for (long j = 0; j < n_program; ++j) {
    const SmapsEntry &p = program[j];
    if (p.dont_fork || !fork_copied(p) || p.end <= p.start) continue;
    uint64_t inside = 0;
    const SmapsEntry *it = std::upper_bound(out, out + n, p.start, [](uint64_t v, const SmapsEntry &x) { return v < x.end; });
    for (; it != out + n && it->start < p.end; ++it) {
      uint64_t a = it->start > p.start ? it->start : p.start, b = it->end < p.end ? it->end : p.end;
      if (b > a) inside += b - a;
    }
    *changed += uint64_t((unsigned __int128)p.rss * (p.end - p.start - inside) / (p.end - p.start));
  }
  return n;
}

void distribute(uint64_t rss, const uint64_t *measured, Kind rest, uint64_t *rss_out) {
  unsigned __int128 sum = 0;
  for (int k = 0; k < kKinds; ++k) sum += measured[k];
  for (int k = 0; k < kKinds; ++k) rss_out[k] = 0;
  if (sum <= rss) {
    for (int k = 0; k < kKinds; ++k) rss_out[k] = measured[k];
    rss_out[rest] += rss - uint64_t(sum);
    return;
  }
  // More measured than resident: scale each part down, the rounding to the largest.
  uint64_t given = 0;
  int largest = 0;
  for (int k = 0; k < kKinds; ++k) {
    rss_out[k] = uint64_t((unsigned __int128)measured[k] * rss / sum);
    given += rss_out[k];
    if (measured[k] > measured[largest]) largest = k;
  }
  rss_out[largest] += rss - given;
}

}  // namespace hs::snapshot::memory
