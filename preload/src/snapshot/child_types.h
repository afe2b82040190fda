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

// Before the scan: the mappings a vtable may lie in. False if out of memory (types then unknown).
bool types_begin(Child &c);
// Block i's first word (its scan reads it anyway): notes the block's class when the word is a
// vtable pointer. Cheap when it is not: one range check.
void type_note(Child &c, uint32_t i, uint64_t first_word);
// Writes the pending SnapshotTypes record (new types, typed blocks); at the end of the scan, or
// when it grows large.
void types_flush(Child &c);

}  // namespace hs::snapshot::child
