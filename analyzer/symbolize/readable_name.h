// Demangled C++ names made readable for sites and stacks: what the standard library spells out
// in full is shortened to what a programmer wrote.
//
//   std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >  ->  std::string
//   std::map<int, std::unique_ptr<X, std::default_delete<X> >, std::less<int>,
//            std::allocator<std::pair<int const, std::unique_ptr<X, std::default_delete<X> > > > >
//                                                                     ->  std::map<int, std::unique_ptr<X>>
//
// - inline namespaces and implementation namespaces go: std::__cxx11::, std::__1::, __detail::,
//   and ABI tags ([abi:cxx11]);
// - default template arguments go, from the end of each argument list: std::allocator<...> (any,
//   when not the first argument), std::char_traits<T>, std::less<T>, std::equal_to<T>,
//   std::hash<T> and std::default_delete<T> where T is the first argument;
// - basic_string, basic_string_view and the iostreams over char (wchar_t, char8/16/32_t) take
//   their typedef's name (std::string, std::wstring, std::ostream, ...);
// - "> >" becomes ">>";
// - a function template's return type goes ("void std::vector<int>::_M_realloc_insert<...>(...)"
//   is "std::vector<int>::_M_realloc_insert<...>(...)").
//
// A name still longer than max_len is elided in the middle, in this order, until it fits: the
// parameter list becomes "(…)", then template arguments nested deeper than N become "<…>" (N
// from the deepest level down to the outermost), then the scope's middle becomes "…". The
// function's own name (the last component, with its parameter list) is never cut: the result may
// stay longer than max_len for that. A name that does not parse (unbalanced brackets) is only
// cut in the middle.
//
// Pure: no state, no allocation beyond the result's; readable_name(readable_name(x)) == readable_name(x).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace heapsnap::symbolize {

constexpr size_t kReadableNameMax = 120;

std::string readable_name(std::string_view demangled, size_t max_len = kReadableNameMax);

// A demangled function name without its return type, parameter list and qualifiers, as it was
// given otherwise: "void std::vector<int>::push_back(int const&) const" ->
// "std::vector<int>::push_back", "operator new(unsigned long)" -> "operator new",
// "(anonymous namespace)::f()" -> "(anonymous namespace)::f". For matching names against rules
// (frame_filter.h). A name that does not parse is returned as it is.
std::string qualified_name(std::string_view demangled);

}  // namespace heapsnap::symbolize
