#include "memory/memory_breakdown.h"

#include <algorithm>
#include <cstdio>

#include "cli/format.h"

namespace heapsnap::memory {

namespace {
struct KindText {
  const char *name, *key, *about;
};
const KindText kText[kKinds + 1] = {
    {"?", "unknown", ""},
    {"heap: live blocks", "heap_live", "requested bytes of live blocks in glibc's arenas (estimate: pages split by bytes)"},
    {"heap: overhead", "heap_overhead", "chunk headers, rounding, arena headers (estimate: pages split by bytes)"},
    {"heap: free chunks", "heap_free", "free chunks in the arenas' bins (estimate: pages split by bytes)"},
    {"heap: cached chunks", "heap_cached",
     "marked in use, no live block: tcache (and its structs), fastbins, pre-tracing blocks (split per arena below)"},
    {"heap: top chunks", "heap_top", "the arenas' unused ends (estimate: pages split by bytes)"},
    {"heap: not walked", "heap_unwalked", "arena memory whose chunks could not be followed"},
    {"mmapped chunks", "mmapped_chunks", "blocks glibc mapped on their own (above M_MMAP_THRESHOLD)"},
    {"thread stacks", "thread_stacks", "touched pages of thread stacks, the main thread's included"},
    {"program anonymous", "program_anonymous", "the program's own anonymous mappings (mmap, other allocators)"},
    {"code", "code", "file-backed executable mappings"},
    {"module data", "module_data", "modules' data, relro and .bss"},
    {"mapped files", "mapped_files", "other file-backed mappings"},
    {"shared memory", "shared_memory", "shared anonymous memory, /dev/shm, memfd, SysV"},
    {"heapsnap", "heapsnap", "heapsnap's own memory: subtract it for the program's RSS untraced"},
    {"other", "other", "vdso, vvar, anything else"},
};
}  // namespace

const char *kind_name(int k) { return k >= 1 && k <= kKinds ? kText[k].name : "?"; }
const char *kind_key(int k) { return k >= 1 && k <= kKinds ? kText[k].key : "unknown"; }
const char *kind_about(int k) { return k >= 1 && k <= kKinds ? kText[k].about : ""; }
bool kind_estimated(int k) { return k >= wire::MEM_HEAP_LIVE && k <= wire::MEM_HEAP_TOP; }

uint64_t Breakdown::part(int kind) const {
  for (const Part &p : parts)
    if (p.kind == kind) return p.rss;
  return 0;
}

bool load_breakdown(capture::CaptureReader &reader, uint32_t index, Breakdown *out, std::string *error, bool *missing) {
  *missing = false;
  bool found = false;
  std::string err;
  reader.set_record_filter([](uint32_t f) { return f == wire::Record::kSnapshotMemory; });
  reader.for_each_record([&](const wire::Record &r, const capture::RecordPos &pos) {
    const wire::SnapshotMemory &m = r.snapshot_memory();
    if (m.index() != index) return true;
    found = true;
    Breakdown &b = *out;
    b = Breakdown{};
    b.index = index;
    b.frame_offset = pos.frame_offset;
    b.rss = m.rss_bytes();
    b.vm_rss = m.vm_rss_bytes();
    b.threads = m.threads();
    b.mappings = m.mappings();
    b.page_size = m.page_size() ? m.page_size() : 4096;
    b.unmatched = m.unmatched_bytes();
    b.cost_ns = m.cost_ns();
    b.mmapped_chunks = m.mmapped_chunks();
    b.mmapped_live = m.mmapped_live_bytes();
    b.error = m.error();
    char at[96];
    snprintf(at, sizeof(at), "snapshot %u, memory record in frame at offset 0x%llx: ", index, (unsigned long long)pos.frame_offset);
    auto bad = [&](const std::string &what) {
      if (err.empty()) err = at + what;
    };
    unsigned __int128 sum = 0;
    bool seen[kKinds + 1] = {};
    for (const wire::MemoryPart &p : m.parts()) {
      int k = int(p.kind());
      if (k < 1 || k > kKinds) {
        bad("unknown part kind " + std::to_string(k));
        return false;
      }
      if (seen[k]) {
        bad(std::string("part '") + kind_name(k) + "' twice");
        return false;
      }
      seen[k] = true;
      if (p.rss() > b.rss) {
        bad(std::string("part '") + kind_name(k) + "' is bigger than the RSS");
        return false;
      }
      sum += p.rss();
      b.parts.push_back({k, p.rss(), p.size(), p.swap(), p.anonymous(), p.shared(), p.mappings()});
    }
    if (b.error.empty() && sum != b.rss) {
      bad("the parts add up to " + std::to_string(uint64_t(sum)) + " bytes, not the RSS of " + std::to_string(b.rss));
      return false;
    }
    std::sort(b.parts.begin(), b.parts.end(), [](const Part &x, const Part &y) { return x.kind < y.kind; });
    for (const wire::MemoryArena &a : m.arenas()) {
      const uint64_t pairs[][2] = {{a.live_rss(), a.live_bytes()},     {a.overhead_rss(), a.overhead_bytes()},
                                   {a.free_rss(), a.free_bytes()},     {a.cached_rss(), a.cached_bytes()},
                                   {a.top_rss(), a.top_bytes()},       {a.unwalked_rss(), a.unwalked_bytes()}};
      unsigned __int128 bytes = 0;
      for (const auto &pr : pairs) {
        if (pr[0] > pr[1]) {
          bad("an arena with more resident bytes than bytes");
          return false;
        }
        bytes += pr[1];
      }
      if (a.fastbin_rss() > a.fastbin_bytes() || a.tcache_rss() > a.tcache_bytes() ||
          uint64_t(a.fastbin_bytes()) + a.tcache_bytes() > a.cached_bytes() ||
          uint64_t(a.fastbin_chunks()) + a.tcache_chunks() > a.cached_chunks()) {
        bad("an arena whose fastbins and tcache exceed its cached chunks");
        return false;
      }
      if (bytes > a.size() || a.trimmable() > a.size()) {
        bad("an arena whose parts exceed its size");
        return false;
      }
      b.arenas.push_back(a);
    }
    for (const wire::MemoryStack &s : m.stacks()) {
      if (s.rss() > s.size() || s.used() > s.size()) {
        bad("thread stack " + std::to_string(s.tid()) + ": more resident or used than its size");
        return false;
      }
      b.stacks.push_back(s);
    }
    return false;  // the first record of the snapshot is the one
  });
  reader.set_record_filter(nullptr);
  if (!err.empty()) {
    *error = err;
    return false;
  }
  if (!found) {
    *missing = true;
    *error = "snapshot " + std::to_string(index) +
             " has no memory breakdown (a capture from before heapsnap format 3.3, or the snapshot child failed before it)";
    return false;
  }
  return true;
}

namespace {

using cli::human_bytes;
std::string hb(uint64_t v) { return human_bytes(double(v)); }
std::string pct(uint64_t part, uint64_t whole) {
  char b[32];
  snprintf(b, sizeof(b), "%.1f%%", whole ? 100.0 * double(part) / double(whole) : 0.0);
  return b;
}

}  // namespace

std::vector<Diagnosis> diagnose(const Breakdown &b) {
  std::vector<Diagnosis> out;
  constexpr uint64_t kMiB = 1 << 20;
  uint64_t live = 0, free_rss = 0, cached = 0, free_chunks = 0, cached_chunks = 0, free_bytes = 0, trim = 0;
  uint64_t tcache = 0, fastbins = 0;
  uint64_t main_top = 0, thread_slack = 0, thread_free = 0, thread_cached = 0, thread_top = 0, max_slack = 0;
  uint32_t thread_arenas = 0;
  for (const auto &a : b.arenas) {
    live += a.live_rss();
    free_rss += a.free_rss();
    cached += a.cached_rss();
    tcache += a.tcache_rss();
    fastbins += a.fastbin_rss();
    free_chunks += a.free_chunks();
    cached_chunks += a.cached_chunks();
    free_bytes += a.free_bytes();
    trim += a.trimmable();
    if (a.main()) {
      main_top += a.top_rss();
    } else {
      ++thread_arenas;
      uint64_t slack = a.free_rss() + a.cached_rss() + a.top_rss();
      thread_slack += slack;
      thread_free += a.free_rss();
      thread_cached += a.cached_rss();
      thread_top += a.top_rss();
      max_slack = std::max(max_slack, slack);
    }
  }
  const uint64_t holes = free_rss + cached;
  if (holes >= kMiB && holes * 10 >= live + holes) {
    out.push_back({"fragmentation",
                   "fragmentation: " + hb(holes) + " of the arenas is resident but free: " + hb(free_rss) + " in " +
                       cli::human_count(free_chunks) + " free chunks (average " +
                       hb(free_chunks ? free_bytes / free_chunks : 0) + "), " + hb(cached) + " in " +
                       cli::human_count(cached_chunks) + " cached ones (tcache " + hb(tcache) + ", fastbins " + hb(fastbins) +
                       ", other " + hb(cached > tcache + fastbins ? cached - tcache - fastbins : 0) + "), against " +
                       hb(live) + " of live blocks (" + pct(holes, live + holes) +
                       " of live + free). Holes between live blocks are reused only by blocks that fit; only their whole "
                       "pages can go back to the system (malloc_trim).",
                   holes});
  }
  if (trim >= kMiB || (b.rss && trim * 20 >= b.rss && trim >= 256 * 1024)) {
    std::string text = "freed but not returned: malloc_trim(0) would give back about " + hb(trim) + " (" + pct(trim, b.rss) +
                       " of RSS): resident whole pages inside free chunks, and the main arena's top chunk past its first page.";
    if (main_top > 128 * 1024)
      text += " The main arena's top chunk alone holds " + hb(main_top) +
              " resident: glibc shrinks it at a free() only past M_TRIM_THRESHOLD (128 KiB by default; raised by "
              "mallopt(M_TRIM_THRESHOLD), MALLOC_TRIM_THRESHOLD_, or by glibc itself to twice a freed mmapped chunk).";
    text += " Free pages in the middle of a heap glibc never returns by itself: call malloc_trim(0) after a big free, or "
            "lower M_TRIM_THRESHOLD. (Estimate: pages resident in the snapshot's copy.)";
    out.push_back({"not_returned", text, trim});
  }
  if (thread_arenas >= 2 && thread_slack >= kMiB) {
    uint64_t save = thread_slack - max_slack;
    out.push_back({"arenas",
                   "too many arenas: " + std::to_string(b.arenas.size()) + " arenas (main + " + std::to_string(thread_arenas) +
                       " thread arenas) for " + std::to_string(b.threads) +
                       " threads at the snapshot; the thread arenas hold " + hb(thread_slack) +
                       " resident outside live blocks (free " + hb(thread_free) + ", cached " + hb(thread_cached) +
                       ", top " + hb(thread_top) + "). MALLOC_ARENA_MAX=2 (one thread arena) would save up to about " +
                       hb(save) + ": the slack of all thread arenas but the largest (an upper bound: one arena's slack "
                       "grows with what it serves, and fewer arenas contend more).",
                   save});
  }
  uint64_t s_size = 0, s_rss = 0, s_used = 0;
  uint32_t known = 0;
  for (const auto &s : b.stacks) {
    s_size += s.size();
    s_rss += s.rss();
    if (s.used()) {
      s_used += s.used();
      ++known;
    }
  }
  const uint64_t stale = s_rss > s_used ? s_rss - s_used : 0;
  if (!b.stacks.empty() && ((stale >= kMiB && s_rss >= 2 * s_used) || (s_size >= 64 * kMiB && s_size >= 8 * s_rss))) {
    std::vector<wire::MemoryStack> big(b.stacks);
    std::sort(big.begin(), big.end(), [](const auto &x, const auto &y) { return x.rss() > y.rss(); });
    std::string top;
    for (size_t i = 0; i < big.size() && i < 3; ++i)
      top += std::string(i ? "; " : "") + "thread " + std::to_string(big[i].tid()) + ": " + hb(big[i].size()) + " stack, " +
             hb(big[i].rss()) + " touched, " + (big[i].used() ? hb(big[i].used()) : std::string("?")) + " in use";
    out.push_back({"stacks",
                   "stacks much bigger than used: " + std::to_string(b.stacks.size()) + " thread stacks reserve " + hb(s_size) +
                       ", " + hb(s_rss) + " of it resident, " + hb(s_used) + " in use at the snapshot (from the stack "
                       "pointers up, " + std::to_string(known) + " threads known). " + hb(stale) +
                       " resident was touched once and is not in use now: it stays resident while the thread lives "
                       "(and in glibc's stack cache after). A smaller stack size (pthread_attr_setstacksize, ulimit -s) "
                       "caps the reserve; RSS pays only for touched pages (" + top + ").",
                   stale});
  }
  return out;
}

}  // namespace heapsnap::memory
