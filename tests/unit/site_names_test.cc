// symbolize::readable_name on names GCC 12's demangler gives (those of tests/programs/sites_app.cc
// and of libstdc++), symbolize::qualified_name, and symbolize::FrameFilter's rules: which frames
// are the library's, so that an allocation's site is the program's own frame.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "symbolize/frame_filter.h"
#include "symbolize/readable_name.h"

using heapsnap::symbolize::FrameFilter;
using heapsnap::symbolize::qualified_name;
using heapsnap::symbolize::readable_name;

namespace {

// Real demangled names (nm -C of sites_app at -O0/-O1/-O2, and libstdc++.so.6).
const char *kString = "std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >";
const char *kNewAllocator =
    "std::__new_allocator<std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> > >::allocate("
    "unsigned long, void const*)";
const char *kMapDtor =
    "std::map<int, std::unique_ptr<Session, std::default_delete<Session> >, std::less<int>, std::allocator<std::pair<"
    "int const, std::unique_ptr<Session, std::default_delete<Session> > > > >::~map()";
const char *kUnorderedDtor =
    "std::unordered_map<std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >, std::vector<"
    "int, std::allocator<int> >, std::hash<std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char"
    "> > >, std::equal_to<std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> > >, std::"
    "allocator<std::pair<std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> > const, std::"
    "vector<int, std::allocator<int> > > > >::~unordered_map()";
const char *kReallocInsert =
    "void std::vector<std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >, std::allocator<"
    "std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> > > >::_M_realloc_insert<int, char>"
    "(__gnu_cxx::__normal_iterator<std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >*, "
    "std::vector<std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >, std::allocator<std::"
    "__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> > > > >, int&&, char&&)";
const char *kInsertUniqueNode =
    "std::_Hashtable<std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >, std::pair<std::"
    "__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> > const, std::vector<int, std::allocator<"
    "int> > >, std::allocator<std::pair<std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >"
    " const, std::vector<int, std::allocator<int> > > >, std::__detail::_Select1st, std::equal_to<std::__cxx11::basic_"
    "string<char, std::char_traits<char>, std::allocator<char> > >, std::hash<std::__cxx11::basic_string<char, std::"
    "char_traits<char>, std::allocator<char> > >, std::__detail::_Mod_range_hashing, std::__detail::_Default_ranged_"
    "hash, std::__detail::_Prime_rehash_policy, std::__detail::_Hashtable_traits<true, false, true> >::_M_insert_"
    "unique_node(unsigned long, unsigned long, std::__detail::_Hash_node<std::pair<std::__cxx11::basic_string<char, "
    "std::char_traits<char>, std::allocator<char> > const, std::vector<int, std::allocator<int> > >, true>*, unsigned "
    "long)";
const char *kAllocateNode =
    "std::__detail::_Hash_node<std::pair<std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> "
    "> const, std::vector<int, std::allocator<int> > >, true>* std::__detail::_Hashtable_alloc<std::allocator<std::__"
    "detail::_Hash_node<std::pair<std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> > "
    "const, std::vector<int, std::allocator<int> > >, true> > >::_M_allocate_node<std::piecewise_construct_t const&, "
    "std::tuple<std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> > const&>, std::tuple<> "
    ">(std::piecewise_construct_t const&, std::tuple<std::__cxx11::basic_string<char, std::char_traits<char>, std::"
    "allocator<char> > const&>&&, std::tuple<>&&)";
const char *kEmplaceHint =
    "std::_Rb_tree_iterator<std::pair<int const, std::unique_ptr<Session, std::default_delete<Session> > > > std::_Rb_"
    "tree<int, std::pair<int const, std::unique_ptr<Session, std::default_delete<Session> > >, std::_Select1st<std::"
    "pair<int const, std::unique_ptr<Session, std::default_delete<Session> > > >, std::less<int>, std::allocator<std::"
    "pair<int const, std::unique_ptr<Session, std::default_delete<Session> > > > >::_M_emplace_hint_unique<std::"
    "piecewise_construct_t const&, std::tuple<int const&>, std::tuple<> >(std::_Rb_tree_const_iterator<std::pair<int "
    "const, std::unique_ptr<Session, std::default_delete<Session> > > >, std::piecewise_construct_t const&, std::tuple<"
    "int const&>&&, std::tuple<>&&)";
const char *kSpInplace =
    "std::_Sp_counted_ptr_inplace<Widget, std::allocator<void>, (__gnu_cxx::_Lock_policy)2>::_M_dispose()";
const char *kOstream =
    "std::basic_ostream<char, std::char_traits<char> >& std::operator<< <std::char_traits<char> >(std::basic_ostream<"
    "char, std::char_traits<char> >&, char const*)";

size_t utf8_chars(const std::string &s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

}  // namespace

TEST_CASE("readable_name: std::string and no default template arguments") {
  CHECK(readable_name(std::string(kString) + "::_M_create(unsigned long&, unsigned long)") ==
        "std::string::_M_create(unsigned long&, unsigned long)");
  CHECK(readable_name(kNewAllocator) == "std::__new_allocator<std::string>::allocate(unsigned long, void const*)");
  CHECK(readable_name(kMapDtor) == "std::map<int, std::unique_ptr<Session>>::~map()");
  CHECK(readable_name(kUnorderedDtor) == "std::unordered_map<std::string, std::vector<int>>::~unordered_map()");
  CHECK(readable_name(
            "std::__cxx11::list<std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >, "
            "std::allocator<std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> > > >::~list()") ==
        "std::list<std::string>::~list()");
  CHECK(readable_name("std::__cxx11::basic_string<wchar_t, std::char_traits<wchar_t>, std::allocator<wchar_t> >::reserve("
                      "unsigned long)") == "std::wstring::reserve(unsigned long)");
  // What is not a default stays: a comparator, a hash, std::less<void>, a lock policy.
  CHECK(readable_name("std::set<int, MyLess, std::allocator<int> >::insert(int const&)") ==
        "std::set<int, MyLess>::insert(int const&)");
  CHECK(readable_name("std::unordered_map<int, int, MyHash, std::equal_to<int>, std::allocator<std::pair<int const, int> "
                      "> >::clear()") == "std::unordered_map<int, int, MyHash>::clear()");
  CHECK(readable_name("std::map<std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >, int, "
                      "std::less<void>, std::allocator<std::pair<std::__cxx11::basic_string<char, std::char_traits<char>, "
                      "std::allocator<char> > const, int> > >::find(char const*)") ==
        "std::map<std::string, int, std::less<void>>::find(char const*)");
  CHECK(readable_name(kSpInplace) == kSpInplace);
}

TEST_CASE("readable_name: return types, operators, lambdas, tags") {
  CHECK(readable_name(kReallocInsert, 1000) ==
        "std::vector<std::string>::_M_realloc_insert<int, char>(__gnu_cxx::__normal_iterator<std::string*, "
        "std::vector<std::string>>, int&&, char&&)");
  CHECK(readable_name(kEmplaceHint, 1000).rfind("std::_Rb_tree<int, std::pair<int const, std::unique_ptr<Session>>, ", 0) == 0);
  CHECK(readable_name(kOstream) == "std::operator<< <std::char_traits<char>>(std::ostream&, char const*)");
  CHECK(readable_name("operator new(unsigned long)") == "operator new(unsigned long)");
  CHECK(readable_name("operator delete[](void*, unsigned long)") == "operator delete[](void*, unsigned long)");
  CHECK(readable_name("main::{lambda()#1}::operator()() const") == "main::{lambda()#1}::operator()() const");
  CHECK(readable_name("(anonymous namespace)::pool::allocate(unsigned long)") ==
        "(anonymous namespace)::pool::allocate(unsigned long)");
  CHECK(readable_name("std::__cxx11::to_string[abi:cxx11](int)") == "std::to_string(int)");
  CHECK(readable_name("fill_cache(int) [clone .cold]") == "fill_cache(int) [clone .cold]");
  CHECK(readable_name("Config::operator bool() const") == "Config::operator bool() const");
  CHECK(readable_name("fill_cache") == "fill_cache");
  CHECK(readable_name("main") == "main");
  CHECK(readable_name("") == "");
  // A program's function template keeps its name when its return type goes.
  CHECK(readable_name("std::vector<int, std::allocator<int> > make_table<int>(int)") == "make_table<int>(int)");
  // Unbalanced: as it is.
  CHECK(readable_name("broken<name(int") == "broken<name(int");
}

TEST_CASE("readable_name: long names are elided in the middle, never losing the function's name") {
  for (const char *n : {kInsertUniqueNode, kAllocateNode, kEmplaceHint, kReallocInsert}) {
    std::string r = readable_name(n, 120);
    INFO(n << " -> " << r);
    CHECK(utf8_chars(r) <= 120);
    CHECK(r.find("\xE2\x80\xA6") != std::string::npos);
  }
  CHECK(readable_name(kInsertUniqueNode).rfind("std::_Hashtable<", 0) == 0);
  CHECK(readable_name(kInsertUniqueNode).find(">::_M_insert_unique_node(\xE2\x80\xA6)") != std::string::npos);
  CHECK(readable_name(kAllocateNode).find("::_M_allocate_node<") != std::string::npos);
  CHECK(readable_name(kAllocateNode).rfind("std::_Hashtable_alloc<", 0) == 0);
  CHECK(readable_name(kReallocInsert) == "std::vector<std::string>::_M_realloc_insert<int, char>(…)");
  // Narrower than the function's own name: the name stays whole.
  std::string longfn = "ns_one::ns_two::ns_three::Container<int>::a_function_with_a_very_long_name_indeed(int, char)";
  std::string r = readable_name(longfn, 30);
  INFO(r);
  CHECK(r.find("::a_function_with_a_very_long_name_indeed(\xE2\x80\xA6)") != std::string::npos);
  CHECK(r.rfind("ns_one", 0) == 0);
  // The scope's middle goes at a "::".
  std::string deep = "alpha::beta::gamma::delta::epsilon::zeta::eta::theta::iota::kappa::lambda::mu::function(int)";
  std::string d = readable_name(deep, 60);
  INFO(d);
  CHECK(utf8_chars(d) <= 60);
  CHECK(d.rfind("alpha::beta::", 0) == 0);
  CHECK(d.find("::mu::function(int)") == std::string::npos);  // params collapsed first: (…)
  CHECK(d.find("::function(\xE2\x80\xA6)") != std::string::npos);
}

TEST_CASE("readable_name is idempotent and a pure function") {
  std::vector<std::string> names = {kString, kNewAllocator, kMapDtor, kUnorderedDtor, kReallocInsert, kInsertUniqueNode,
                                    kAllocateNode, kEmplaceHint, kSpInplace, kOstream, "main", "operator new(unsigned long)"};
  for (size_t max : {30, 60, 120, 1000})
    for (const auto &n : names) {
      std::string once = readable_name(n, max);
      INFO(n << " @" << max << " -> " << once);
      CHECK(readable_name(once, max) == once);
      CHECK(readable_name(n, max) == once);
    }
}

TEST_CASE("qualified_name: no return type, no parameters") {
  CHECK(qualified_name("void std::vector<int, std::allocator<int> >::push_back(int const&)") ==
        "std::vector<int, std::allocator<int>>::push_back");
  CHECK(qualified_name("operator new(unsigned long)") == "operator new");
  CHECK(qualified_name("operator delete[](void*)") == "operator delete[]");
  CHECK(qualified_name("Pool::operator new(unsigned long)") == "Pool::operator new");
  CHECK(qualified_name("std::vector<int, std::allocator<int> > make_table<int>(int)") == "make_table<int>");
  CHECK(qualified_name("Config::operator bool() const") == "Config::operator bool");
  CHECK(qualified_name("fill_cache(int) [clone .cold]") == "fill_cache");
  CHECK(qualified_name(kAllocateNode).rfind("std::__detail::_Hashtable_alloc<", 0) == 0);
  CHECK(qualified_name("malloc") == "malloc");
}

TEST_CASE("FrameFilter: the built-in rules") {
  auto lib = [](const char *fn, const char *file, const char *module) {
    return FrameFilter::builtin_library(fn, file, module);
  };
  CHECK(lib(kNewAllocator, "/usr/include/c++/12/bits/new_allocator.h", "app"));
  CHECK(lib(kNewAllocator, "", "app"));                        // by name alone
  CHECK(lib(kReallocInsert, "", "app"));                       // behind its return type
  CHECK(lib(kAllocateNode, "", "app"));
  CHECK(lib("__gnu_cxx::new_allocator<int>::allocate(unsigned long, void const*)", "", "app"));
  CHECK(lib("operator new(unsigned long)", "", "libheapsnap_preload.so"));
  CHECK(lib("operator new[](unsigned long)", "/src/x.cc", "app"));
  CHECK(lib("Pool::operator new(unsigned long)", "/src/pool.cc", "app"));  // a class's own
  CHECK(lib("malloc", "", "app"));
  CHECK(lib("strdup", "", "app"));
  CHECK(lib("heapsnap_pool_alloc", "/work/preload/include/heapsnap.h", "app"));
  CHECK(lib("", "/work/preload/include/heapsnap.h", "app"));
  CHECK(lib("", "", "/lib/x86_64-linux-gnu/libc.so.6"));
  CHECK(lib("(anonymous namespace)::pool::allocate(unsigned long)", "", "/lib/x86_64-linux-gnu/libstdc++.so.6"));
  CHECK(lib("", "", "/lib64/ld-linux-x86-64.so.2"));
  CHECK(lib("helper", "/usr/include/c++/12/bits/stl_vector.h", "app"));
  CHECK(lib("helper", "/usr/include/x86_64-linux-gnu/c++/12/bits/c++config.h", "app"));
  CHECK(lib("_start", "", "app"));
  CHECK(lib("__libc_start_call_main", "", "libc.so.6"));
  // The program's own.
  CHECK_FALSE(lib("fill_cache(int)", "/src/sites_app.cc", "sites_app"));
  CHECK_FALSE(lib("xmalloc", "/src/sites_app.cc", "sites_app"));
  CHECK_FALSE(lib("main", "/src/sites_app.cc", "sites_app"));
  CHECK_FALSE(lib("std::vector<int, std::allocator<int> > make_table<int>(int)", "/src/a.cc", "app"));
  CHECK_FALSE(lib("main::{lambda()#1}::operator()() const", "/src/a.cc", "app"));
  CHECK_FALSE(lib("stdio_helper(int)", "/src/a.cc", "app"));  // "std" without "::"
  CHECK_FALSE(lib("", "", "/usr/lib/libsqlite3.so.0"));
  CHECK_FALSE(lib("", "/src/include/app/cache.h", "app"));
  CHECK_FALSE(lib("", "", ""));
}

TEST_CASE("FrameFilter: --hide-frames, HEAPSNAP_HIDE_FRAMES and --all-frames") {
  FrameFilter f;
  std::string err;
  CHECK_FALSE(f.library("xmalloc", "/src/sites_app.cc", "sites_app"));
  REQUIRE(f.add_pattern("^xmalloc$", &err));
  CHECK(f.library("xmalloc", "/src/sites_app.cc", "sites_app"));
  CHECK_FALSE(f.library("xmalloc_stats", "/src/sites_app.cc", "sites_app"));
  CHECK(f.library(kNewAllocator, "", "app"));  // the built-in rules still apply

  FrameFilter g;
  REQUIRE(g.add_patterns_from_env("my_alloc; pool_\\w+ \n\nwrappers\\.c$", &err));
  CHECK(g.patterns() == 3);
  CHECK(g.library("my_alloc(unsigned long)", "/src/a.cc", "app"));
  CHECK(g.library("pool_get", "/src/a.cc", "app"));
  CHECK(g.library("anything", "/src/wrappers.c", "app"));  // by its file
  CHECK_FALSE(g.library("fill_cache(int)", "/src/a.cc", "app"));
  CHECK(g.add_patterns_from_env(nullptr, &err));
  CHECK(g.add_patterns_from_env("", &err));
  CHECK(g.patterns() == 3);

  FrameFilter bad;
  CHECK_FALSE(bad.add_pattern("([", &err));
  CHECK(err.find("([") != std::string::npos);
  CHECK_FALSE(bad.add_patterns_from_env("ok;([", &err));

  f.set_all_frames(true);
  CHECK_FALSE(f.library(kNewAllocator, "/usr/include/c++/12/bits/new_allocator.h", "app"));
  CHECK_FALSE(f.library("xmalloc", "/src/sites_app.cc", "sites_app"));
}
