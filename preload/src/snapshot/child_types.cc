#include "snapshot/child_types.h"

#include <cstring>

#include "core/private_heap.h"
#include "snapshot/child_internal.h"

namespace hs::snapshot::child {

struct TypeScan {
  // Read-only, file-backed mappings (a module's .rodata and .data.rel.ro after RELRO), in address
  // order, and the span they cover (the first, cheapest test).
  Range *ro = nullptr;
  uint32_t nro = 0;
  uint64_t lo = 0, hi = 0;
  VtableFilter filter;  // the main thread's (type_note)
  // vtable address -> type number (1-based), open addressing; 0 marks an empty slot. A vtable
  // that failed the checks is kept with type 0 (not looked at again).
  uint64_t *keys = nullptr;
  uint32_t *types = nullptr;
  uint32_t mask = 0, used = 0, next_type = 1;
  // The pending record: new types and typed blocks since the last one.
  wire::Buf names, vtables, block_delta, block_type;
  uint32_t first_type = 1, pending_types = 0, pending_blocks = 0;
  uint32_t base_block = 0, last_block = 0;
};

namespace {

constexpr uint32_t kMaxTypes = 1u << 20;
constexpr uint32_t kFlushBlocks = 1u << 18;
constexpr uint32_t kMaxName = 512;

bool in_ro(const TypeScan &t, uint64_t a) {
  if (a - t.lo >= t.hi - t.lo) return false;
  uint32_t l = 0, r = t.nro;
  while (l < r) {
    uint32_t m = (l + r) / 2;
    if (t.ro[m].hi <= a) l = m + 1;
    else r = m;
  }
  return l < t.nro && t.ro[l].lo <= a;
}

// Whether [a, a + n) lies in one readable mapping.
bool readable(const Child &c, uint64_t a, uint64_t n) {
  long m = mapping_of(c, a);
  return m >= 0 && c.maps[m].readable && a + n <= c.maps[m].end;
}

bool executable(const Child &c, uint64_t a) {
  long m = mapping_of(c, a);
  return m >= 0 && c.maps[m].executable;
}

// The mangled class name a vtable's type_info gives, or nullptr when the word w is no vtable
// pointer (see child_types.h).
const char *class_name_of(const Child &c, const TypeScan &t, uint64_t w, uint32_t *len) {
  if ((w & 7) || !in_ro(t, w - 16) || !readable(c, w - 16, 24)) return nullptr;
  const uint64_t *v = reinterpret_cast<const uint64_t *>(w);
  if (v[-2] != 0) return nullptr;  // offset-to-top of an object's own vtable
  uint64_t first_entry = v[0];
  if (first_entry && !executable(c, first_entry)) return nullptr;  // a virtual function (or pure: 0)
  uint64_t ti = v[-1];
  if (!ti || (ti & 7) || !readable(c, ti, 16)) return nullptr;
  uint64_t name = reinterpret_cast<const uint64_t *>(ti)[1];
  long m = mapping_of(c, name);
  if (m < 0 || !c.maps[m].readable) return nullptr;
  const char *s = reinterpret_cast<const char *>(name);
  uint64_t room = c.maps[m].end - name;
  uint32_t n = 0;
  if (room && *s == '*') ++s, --room;  // GCC's mark of a name compared by address
  while (n < room && n < kMaxName && s[n]) {
    char ch = s[n];
    bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_' || ch == '$' ||
              ch == '.';
    if (!ok) return nullptr;
    ++n;
  }
  // A mangled class: a length-prefixed name (7Session), a nested one (N...E), a std:: one (St...,
  // Sa...) or a template (I...E inside).
  if (n == 0 || n == room || n == kMaxName || s[n] != '\0') return nullptr;
  if (!(s[0] >= '1' && s[0] <= '9') && s[0] != 'N' && s[0] != 'S' && s[0] != 'Z') return nullptr;
  *len = n;
  return s;
}

bool grow_table(TypeScan &t) {
  uint32_t cap = t.mask ? (t.mask + 1) * 2 : 1024;
  auto *keys = static_cast<uint64_t *>(heap::alloc_zeroed(size_t(cap) * 8));
  auto *types = static_cast<uint32_t *>(heap::alloc_zeroed(size_t(cap) * 4));
  if (!keys || !types) return false;
  for (uint32_t i = 0; t.mask && i <= t.mask; ++i) {
    if (!t.keys[i]) continue;
    uint32_t h = uint32_t(mix64(t.keys[i])) & (cap - 1);
    while (keys[h]) h = (h + 1) & (cap - 1);
    keys[h] = t.keys[i];
    types[h] = t.types[i];
  }
  t.keys = keys;
  t.types = types;
  t.mask = cap - 1;
  return true;
}

// The type number of vtable pointer w (0: none), adding a new type to the pending record.
uint32_t type_of(Child &c, TypeScan &t, uint64_t w) {
  if (t.used * 2 >= t.mask + 1 && !grow_table(t)) return 0;
  uint32_t h = uint32_t(mix64(w)) & t.mask;
  while (t.keys[h] && t.keys[h] != w) h = (h + 1) & t.mask;
  if (t.keys[h]) return t.types[h];
  uint32_t len = 0;
  const char *name = t.next_type <= kMaxTypes ? class_name_of(c, t, w, &len) : nullptr;
  uint32_t type = 0;
  if (name) {
    type = t.next_type++;
    t.names.len(3, name, len);
    t.vtables.varint(w);
    ++t.pending_types;
  }
  t.keys[h] = w;
  t.types[h] = type;
  ++t.used;
  return type;
}

}  // namespace

bool types_begin(Child &c) {
  auto *t = static_cast<TypeScan *>(heap::alloc_zeroed(sizeof(TypeScan)));
  if (!t) return false;
  new (t) TypeScan();
  t->ro = static_cast<Range *>(heap::alloc(size_t(c.nmaps + 1) * sizeof(Range)));
  if (!t->ro || !grow_table(*t)) return false;
  for (long i = 0; i < c.nmaps; ++i) {
    const Mapping &m = c.maps[i];
    if (m.readable && !m.writable && !m.executable && m.path[0] == '/') t->ro[t->nro++] = {m.start, m.end};
  }
  if (t->nro) {
    t->lo = t->ro[0].lo;
    t->hi = t->ro[t->nro - 1].hi;
  }
  c.types = t;
  t->filter = types_filter(c);
  return true;
}

void type_note(Child &c, uint32_t i, uint64_t w) {
  TypeScan *t = c.types;
  if (HS_LIKELY(!t)) return;
  // (class_name_of's first tests, before the table: a word that fails them is no vtable pointer.)
  if (!t->filter.maybe(w)) return;
  uint32_t type = type_of(c, *t, w);
  if (!type) return;
  if (!t->pending_blocks) t->base_block = t->last_block = i;
  t->block_delta.varint(i - t->last_block);
  t->block_type.varint(type);
  t->last_block = i;
  if (++t->pending_blocks >= kFlushBlocks) types_flush(c);
}

bool VtableFilter::in_ro_or_new_gap(uint64_t a) {
  uint32_t l = 0, r = nro;
  while (l < r) {
    uint32_t m = (l + r) / 2;
    if (ro[m].hi <= a) l = m + 1;
    else r = m;
  }
  if (l < nro && ro[l].lo <= a) return true;
  gap_lo = l ? ro[l - 1].hi : 0;
  gap_hi = l < nro ? ro[l].lo : UINT64_MAX;
  return false;
}

VtableFilter types_filter(const Child &c) {
  VtableFilter f;
  if (const TypeScan *t = c.types) {
    f.ro = t->ro;
    f.nro = t->nro;
    f.lo = t->lo;
    f.hi = t->hi;
  }
  return f;
}

void types_flush(Child &c) {
  TypeScan *t = c.types;
  if (!t || (!t->pending_types && !t->pending_blocks)) return;
  wire::RecordMark m = wire::begin_record(c.out, wire::kSnapshotTypes);
  c.out.u64(1, c.index);
  c.out.u64(2, t->first_type);
  c.out.bytes(t->names.data(), t->names.size());  // (already field 3, length-prefixed)
  if (t->vtables.size()) c.out.len(4, t->vtables.data(), t->vtables.size());
  if (t->block_delta.size()) c.out.len(5, t->block_delta.data(), t->block_delta.size());
  if (t->block_type.size()) c.out.len(6, t->block_type.data(), t->block_type.size());
  c.out.u64(7, t->base_block);
  wire::end_record(c.out, m);
  if (t->names.failed() || t->vtables.failed() || t->block_delta.failed() || t->block_type.failed())
    c.error = "out of memory (types)";
  t->first_type = t->next_type;
  t->pending_types = t->pending_blocks = 0;
  t->names.clear();
  t->vtables.clear();
  t->block_delta.clear();
  t->block_type.clear();
  flush_frame(c, false);
}

}  // namespace hs::snapshot::child
