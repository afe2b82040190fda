#include "report/memory_section.h"

#include <algorithm>

#include "capture/capture_reader.h"
#include "memory/memory_breakdown.h"

namespace heapsnap::report {

using json = nlohmann::ordered_json;

namespace {
// The page's tables stay small: the biggest rows, and how many were left out.
constexpr size_t kMaxRows = 16;
}  // namespace

json memory_json(const std::string &file, uint32_t index, std::string *why) {
  std::string err;
  auto reader = capture::CaptureReader::open(file, &err);
  if (!reader) {
    *why = err;
    return nullptr;
  }
  memory::Breakdown b;
  bool missing = false;
  if (!memory::load_breakdown(*reader, index, &b, &err, &missing)) {
    *why = missing ? "" : err;  // (missing: an older capture; nothing to say on the page)
    return nullptr;
  }
  if (b.parts.empty()) {
    *why = "no memory breakdown: " + (b.error.empty() ? std::string("no parts") : b.error);
    return nullptr;
  }
  json j;
  j["rss_bytes"] = b.rss;
  j["vm_rss_bytes"] = b.vm_rss;
  uint64_t sum = 0;
  json parts = json::array();
  for (const auto &p : b.parts) {
    sum += p.rss;
    parts.push_back({{"kind", memory::kind_key(p.kind)}, {"name", memory::kind_name(p.kind)}, {"rss_bytes", p.rss},
                     {"size_bytes", p.size}, {"estimated", memory::kind_estimated(p.kind)},
                     {"own", p.kind == wire::MEM_HEAPSNAP}, {"about", memory::kind_about(p.kind)}});
  }
  j["parts"] = parts;
  j["parts_sum_bytes"] = sum;
  std::vector<const wire::MemoryArena *> arenas;
  for (const auto &a : b.arenas) arenas.push_back(&a);
  std::stable_sort(arenas.begin(), arenas.end(), [](auto *x, auto *y) { return x->size() > y->size(); });
  json at = json::array();
  for (size_t i = 0; i < arenas.size() && i < kMaxRows; ++i) {
    const auto &a = *arenas[i];
    at.push_back({{"main", a.main()}, {"heaps", a.heaps()}, {"size_bytes", a.size()}, {"live_rss", a.live_rss()},
                  {"overhead_rss", a.overhead_rss()}, {"free_rss", a.free_rss()}, {"cached_rss", a.cached_rss()},
                  {"tcache_rss", a.tcache_rss()}, {"fastbin_rss", a.fastbin_rss()},
                  {"top_rss", a.top_rss()}, {"free_chunks", a.free_chunks()}, {"trimmable_bytes", a.trimmable()},
                  {"complete", a.complete()}});
  }
  j["arenas"] = at;
  j["arenas_total"] = b.arenas.size();
  j["threads"] = b.threads;
  j["mappings"] = b.mappings;
  if (!b.error.empty()) j["error"] = b.error;
  json d = json::array();
  for (const auto &x : memory::diagnose(b)) d.push_back({{"id", x.id}, {"bytes", x.bytes}, {"text", x.text}});
  j["diagnoses"] = d;
  return j;
}

json rss_parts_json(const replay::ReplayResult &r) {
  if (r.rss_parts.empty()) return nullptr;
  json j;
  std::vector<double> t;
  std::vector<uint64_t> rss, heap, own, other, file, shmem;
  for (const auto &q : r.rss_parts) {
    t.push_back(double(q.time_ns) / 1e9);
    rss.push_back(q.rss);
    heap.push_back(q.heap);
    own.push_back(q.heapsnap);
    other.push_back(q.other_anon);
    file.push_back(q.file);
    shmem.push_back(q.shmem);
  }
  j["t"] = t;
  j["rss"] = rss;
  j["heap"] = heap;
  j["heapsnap"] = own;
  j["other_anon"] = other;
  j["file"] = file;
  j["shmem"] = shmem;
  return j;
}

}  // namespace heapsnap::report
