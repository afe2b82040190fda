#include "sampling/module_map.h"

#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <unistd.h>

#include <cstring>

#include "sampling/fast_unwind.h"

#include "core/private_heap.h"
#include "core/tracer.h"

namespace hs::modules {
namespace {

struct Known {
  uint64_t load_bias;
  uint64_t first_vaddr;  // identifies the mapping together with the bias
  uint64_t name_hash;
  uint32_t id;
  bool seen;             // present in the current dl_iterate_phdr pass
};

pthread_mutex_t g_mutex = PTHREAD_MUTEX_INITIALIZER;
Known *g_known = nullptr;
size_t g_count = 0, g_cap = 0;
uint32_t g_next_id = 1;
unsigned long long g_adds = ~0ull, g_subs = ~0ull;

uint64_t hash_name(const char *s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; ++s) h = (h ^ uint8_t(*s)) * 1099511628211ull;
  return h;
}

// Collected under the module lock, emitted afterwards (no outbox lock inside dl_iterate_phdr).
struct Pending {
  wire::Buf records;
  bool force;
  bool counters_only;
  unsigned long long adds, subs;
};

void encode_module(wire::Buf &b, uint32_t id, const dl_phdr_info *info) {
  wire::RecordMark m = wire::begin_record(b, wire::kModule);
  b.u64(1, id);
  const char *name = info->dlpi_name;
  char exe[4096];
  if (!name || !*name) {
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    exe[n > 0 ? n : 0] = '\0';
    name = exe;
  }
  b.str(2, name);
  b.u64(3, info->dlpi_addr);
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr) &ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_NOTE) continue;
    const auto *p = reinterpret_cast<const uint8_t *>(info->dlpi_addr + ph.p_vaddr);
    const uint8_t *end = p + ph.p_memsz;
    while (p + sizeof(ElfW(Nhdr)) <= end) {
      const auto *nh = reinterpret_cast<const ElfW(Nhdr) *>(p);
      const uint8_t *nm = p + sizeof(ElfW(Nhdr));
      const uint8_t *desc = nm + ((nh->n_namesz + 3) & ~3u);
      const uint8_t *next = desc + ((nh->n_descsz + 3) & ~3u);
      if (next > end) break;
      if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 && memcmp(nm, "GNU", 4) == 0) {
        b.len(4, desc, nh->n_descsz);
        break;
      }
      p = next;
    }
  }
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr) &ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD) continue;
    size_t at = b.open(5);
    b.u64(1, ph.p_vaddr);
    b.u64(2, ph.p_memsz);
    b.u64(3, ph.p_offset);
    b.u64(4, ph.p_flags);
    b.close(at);
  }
  b.u64(6, coarse_rel_ns());
  wire::end_record(b, m);
}

int visit(dl_phdr_info *info, size_t size, void *arg) {
  auto *pend = static_cast<Pending *>(arg);
  if (size >= offsetof(dl_phdr_info, dlpi_subs) + sizeof(info->dlpi_subs)) {
    pend->adds = info->dlpi_adds;
    pend->subs = info->dlpi_subs;
    if (!pend->force && pend->adds == g_adds && pend->subs == g_subs) {
      pend->counters_only = true;
      return 1;  // nothing changed: stop at the first module
    }
  }
  uint64_t first_vaddr = 0;
  for (int i = 0; i < info->dlpi_phnum; ++i)
    if (info->dlpi_phdr[i].p_type == PT_LOAD) { first_vaddr = info->dlpi_phdr[i].p_vaddr; break; }
  uint64_t nh = hash_name(info->dlpi_name ? info->dlpi_name : "");
  for (size_t i = 0; i < g_count; ++i) {
    Known &k = g_known[i];
    if (k.load_bias == info->dlpi_addr && k.first_vaddr == first_vaddr && k.name_hash == nh) {
      k.seen = true;
      return 0;
    }
  }
  if (g_count == g_cap) {
    size_t cap = g_cap ? g_cap * 2 : 64;
    auto *n = static_cast<Known *>(heap::grow(g_known, cap * sizeof(Known)));
    if (!n) return 0;
    g_known = n;
    g_cap = cap;
  }
  uint32_t id = g_next_id++;
  g_known[g_count++] = {info->dlpi_addr, first_vaddr, nh, id, true};
  encode_module(pend->records, id, info);
  return 0;
}

}  // namespace

void lock() { pthread_mutex_lock(&g_mutex); }
void unlock() { pthread_mutex_unlock(&g_mutex); }
void after_fork_child() { pthread_mutex_init(&g_mutex, nullptr); }

void refresh(bool force) {
  Pending pend;
  pend.force = force;
  pend.counters_only = false;
  pend.adds = pend.subs = 0;
  pthread_mutex_lock(&g_mutex);
  if (force) g_count = 0;
  for (size_t i = 0; i < g_count; ++i) g_known[i].seen = false;
  dl_iterate_phdr(visit, &pend);
  if (!pend.counters_only) {
    size_t keep = 0;
    for (size_t i = 0; i < g_count; ++i) {
      if (g_known[i].seen) {
        g_known[keep++] = g_known[i];
        continue;
      }
      wire::RecordMark m = wire::begin_record(pend.records, wire::kModuleUnload);
      pend.records.u64(1, g_known[i].id);
      pend.records.u64(2, coarse_rel_ns());
      wire::end_record(pend.records, m);
    }
    // A library gone: its code's unwinding rules must not outlive it (another may load there).
    if (keep != g_count) fast_unwind::code_changed();
    g_count = keep;
    g_adds = pend.adds;
    g_subs = pend.subs;
  }
  pthread_mutex_unlock(&g_mutex);
  if (pend.records.size() && !pend.records.failed()) {
    outbox_lock();
    outbox().bytes(pend.records.data(), pend.records.size());
    outbox_unlock();
  }
}

}  // namespace hs::modules
