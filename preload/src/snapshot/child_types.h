// The classes of a snapshot's polymorphic objects, read in the snapshot child (child_internal.h).
//
// A C++ object with virtual functions starts with its vtable pointer: it points two words into
// the vtable, past offset-to-top (0 for the object's own, most-derived class) and the class's
// std::type_info, whose name() is the mangled class name ("7Session"). Read at snapshot time from
// the frozen memory, it names the class of every such block, whatever allocated it (a factory's
// `Base *` is its Derived) and whether or not the program has symbols: chap's "signatures",
// macOS `heap`. A word passes only if the vtable lies in a module's read-only mapping, its first
// entry is code or 0, and the type_info's name is a mangled name in readable memory: a pointer to
// a string literal or to other data does not.
#pragma once
#include <cstdint>

namespace hs::snapshot::child {

struct Child;
struct Range;

// Before the scan: the mappings a vtable may lie in. False if out of memory (types then unknown).
bool types_begin(Child &c);
// Block i's first word (its scan reads it anyway): notes the block's class when the word is a
// vtable pointer. Cheap when it is not: one range check.
void type_note(Child &c, uint32_t i, uint64_t first_word);
// The first, cheap tests of a word as a vtable pointer: inside the span of the read-only
// mappings, aligned, and not in the gap between two of them where the latest miss fell. That span
// runs from the executable's to the last library's, so the program's brk heap, its mmapped chunks
// and its thread arenas all lie inside it, and most blocks start with a heap pointer (a list's
// next, a tree's left): hashing every such word as a candidate filled the type table with an entry
// per distinct heap pointer (10^7 at 10^7 blocks) and took a third of the child's time; the gap
// remembered rejects nearly all of them with two compares. One per thread (the gap changes).
struct VtableFilter {
  const struct Range *ro = nullptr;  // the read-only mappings, in address order
  uint32_t nro = 0;
  uint64_t lo = 0, hi = 0;           // their span
  uint64_t gap_lo = 0, gap_hi = 0;
  bool maybe(uint64_t w) {
    if (w - lo >= hi - lo || (w & 7)) return false;
    uint64_t a = w - 16;  // (where its type_info pointer and offset-to-top are)
    if (a - gap_lo < gap_hi - gap_lo) return false;
    return in_ro_or_new_gap(a);
  }
  bool in_ro_or_new_gap(uint64_t a);  // binary search; on a miss, remembers the gap
};
// A filter for the current snapshot (empty, passing nothing, when types are off).
VtableFilter types_filter(const Child &c);
// Writes the pending SnapshotTypes record (new types, typed blocks); at the end of the scan, or
// when it grows large.
void types_flush(Child &c);

}  // namespace hs::snapshot::child
