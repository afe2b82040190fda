// The type of an allocation, from the frames that made it (issue 29's first source of types):
// the C++ library's allocation frames name what they allocate. `std::__new_allocator<T>::allocate`
// allocates T's; T = `std::_Rb_tree_node<std::pair<K const, M>>` is a std::map<K, M> node,
// `_Hash_node<...>` an unordered_map's, `_List_node<V>` a list's, `_Sp_counted_ptr_inplace<X>`
// the block of a make_shared<X>; a plain T with a std::vector<T> frame outside it is the vector's
// buffer; basic_string's own frames make a string's buffer; make_unique<X> an X.
//
// Limits, said where the type is shown: GCC's identical-code folding (-fipa-icf, on at -O2) merges
// instantiations with the same machine code, so a frame may name another T of the same size; and
// a plain `new T` leaves no frame that names T (its constructor runs after the allocation).
#pragma once
#include <string>
#include <vector>

#include "replay/stack_symbolizer.h"

namespace heapsnap::replay {

// frames: one allocation's display frames, innermost first (inlined frames included). The type
// as a person writes it ("std::map<int, std::unique_ptr<Session>> node", "std::string buffer",
// "Widget (make_shared)"), or "" when the frames do not say.
std::string type_from_frames(const std::vector<DisplayFrame> &frames);

// A class a vtable names (demangled), as the same person writes it: the library's own classes that
// carry a user type say so ("std::_Sp_counted_ptr_inplace<Widget, ...>" is "Widget (make_shared)",
// "std::_Sp_counted_ptr<Widget*, ...>" a "std::shared_ptr<Widget> control block"); others made
// readable.
std::string type_from_class(const std::string &demangled);

// The same from demangled function names alone, innermost first (for tests).
std::string type_from_functions(const std::vector<std::string> &functions);

}  // namespace heapsnap::replay
