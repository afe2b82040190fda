// Types from allocation frames (analyzer/replay/frame_types.h), on the demangled names g++ 12 and
// libstdc++ give the allocations of tests/programs/sites_app.cc.
#include <doctest/doctest.h>

#include "replay/frame_types.h"

using heapsnap::replay::type_from_functions;

TEST_CASE("frame types: containers' nodes and buffers, from their allocator's frames") {
  CHECK(type_from_functions({"std::__new_allocator<std::_Rb_tree_node<std::pair<int const, std::unique_ptr<Session, "
                             "std::default_delete<Session> > > > >::allocate(unsigned long, void const*)",
                             "add_sessions(int)"}) == "std::map<int, std::unique_ptr<Session>> node");
  CHECK(type_from_functions({"std::__new_allocator<std::_Rb_tree_node<int> >::allocate(unsigned long, void const*)"}) ==
        "std::set<int> node");
  CHECK(type_from_functions(
            {"std::__new_allocator<std::__detail::_Hash_node<std::pair<std::__cxx11::basic_string<char, "
             "std::char_traits<char>, std::allocator<char> > const, std::vector<int, std::allocator<int> > >, true> "
             ">::allocate(unsigned long, void const*)"}) == "std::unordered_map<std::string, std::vector<int>> node");
  CHECK(type_from_functions({"std::__new_allocator<std::__detail::_Hash_node_base*>::allocate(unsigned long, void const*)",
                             "std::_Hashtable<std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >, "
                             "std::pair<std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> > const, "
                             "std::vector<int, std::allocator<int> > >, std::allocator<std::pair<std::__cxx11::basic_string<char, "
                             "std::char_traits<char>, std::allocator<char> > const, std::vector<int, std::allocator<int> > > >, "
                             "std::__detail::_Select1st, std::equal_to<std::__cxx11::basic_string<char, std::char_traits<char>, "
                             "std::allocator<char> > >, std::hash<std::__cxx11::basic_string<char, std::char_traits<char>, "
                             "std::allocator<char> > >, std::__detail::_Mod_range_hashing, std::__detail::_Default_ranged_hash, "
                             "std::__detail::_Prime_rehash_policy, std::__detail::_Hashtable_traits<true, false, true> "
                             ">::_M_allocate_buckets(unsigned long)"}) == "std::unordered_map<std::string, std::vector<int>> buckets");
  CHECK(type_from_functions({"std::__new_allocator<std::_List_node<std::__cxx11::basic_string<char, std::char_traits<char>, "
                             "std::allocator<char> > > >::allocate(unsigned long, void const*)"}) == "std::list<std::string> node");
  CHECK(type_from_functions({"std::__new_allocator<std::_Sp_counted_ptr_inplace<Widget, std::allocator<void>, "
                             "(__gnu_cxx::_Lock_policy)2> >::allocate(unsigned long, void const*)"}) == "Widget (make_shared)");
  CHECK(type_from_functions({"std::__new_allocator<int>::allocate(unsigned long, void const*)",
                             "std::allocator_traits<std::allocator<int> >::allocate(std::allocator<int>&, unsigned long)",
                             "std::_Vector_base<int, std::allocator<int> >::_M_allocate(unsigned long)",
                             "void std::vector<int, std::allocator<int> >::_M_realloc_insert<int const&>(__gnu_cxx::"
                             "__normal_iterator<int*, std::vector<int, std::allocator<int> > >, int const&)",
                             "fill_cache(int)"}) == "std::vector<int> buffer");
  CHECK(type_from_functions({"std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >::_M_construct("
                             "unsigned long, char)"}) == "std::string buffer");
  CHECK(type_from_functions({"std::__detail::_MakeUniq<Session>::__single_object std::make_unique<Session>()",
                             "add_sessions(int)"}) == "Session");
}

TEST_CASE("frame types: the library's classes that carry a user type, from a vtable") {
  using heapsnap::replay::type_from_class;
  CHECK(type_from_class("std::_Sp_counted_ptr_inplace<Widget, std::allocator<void>, (__gnu_cxx::_Lock_policy)2>") ==
        "Widget (make_shared)");
  CHECK(type_from_class("std::_Sp_counted_ptr<Widget*, (__gnu_cxx::_Lock_policy)2>") == "std::shared_ptr<Widget> control block");
  CHECK(type_from_class("geo::Circle") == "geo::Circle");
}

TEST_CASE("frame types: nothing when the frames do not say") {
  CHECK(type_from_functions({"xmalloc", "parse_config(char const*)"}) == "");
  CHECK(type_from_functions({"leak_records(int)"}) == "");
  CHECK(type_from_functions({}) == "");
  // An element type with no container frame before the program's own.
  CHECK(type_from_functions({"std::__new_allocator<char*>::allocate(unsigned long, void const*)", "main"}) == "char* array");
}
