// Which frames of an allocation's stack are the library's rather than the program's: an
// allocation's site is its first frame, walking outward, that is not (replay/stack_symbolizer.h).
//
// Built in, a frame is the library's when
//   - its function is in the C++ standard library's namespaces (std::, __gnu_cxx::, __cxxabiv1::,
//     __gnu_debug::, __cxa_*), an operator new or operator delete (any class's), a function of the
//     C allocation API (malloc, calloc, realloc, free, posix_memalign, aligned_alloc, memalign,
//     valloc, pvalloc, reallocarray, strdup, strndup and glibc's __libc_ names for them), the C
//     run time's start-up (_start, __libc_start_main, __libc_start_call_main), or heapsnap's
//     client API (heapsnap_*, preload/include/heapsnap.h);
//   - or its source file is a C++ standard library header (under an include directory's c++/:
//     /usr/include/c++/12/bits/stl_vector.h, /usr/include/x86_64-linux-gnu/c++/12/bits/...,
//     libc++'s include/c++/v1/);
//   - or its module is the C or C++ run time or an allocator: libc.so, ld-linux*.so, libstdc++.so,
//     libc++.so, libc++abi.so, libgcc_s.so, libpthread.so, libdl.so, libjemalloc.so,
//     libtcmalloc*.so, libmimalloc.so, and heapsnap's own libheapsnap_preload.so.
// Users add their own (wrappers such as xmalloc) as regular expressions (ECMAScript), searched in
// the function's demangled name, its source file and its module's name: --hide-frames REGEX and
// HEAPSNAP_HIDE_FRAMES (patterns separated by newlines or ';').
#pragma once

#include <memory>
#include <regex>
#include <string>
#include <string_view>
#include <vector>

namespace heapsnap::symbolize {

class FrameFilter {
 public:
  // Adds a pattern. On a bad regular expression returns false and says why.
  bool add_pattern(const std::string &regex, std::string *error);
  // Adds the patterns of a HEAPSNAP_HIDE_FRAMES value (nullptr: none); empty ones are skipped.
  bool add_patterns_from_env(const char *value, std::string *error);
  // --all-frames: no frame is the library's (sites are the innermost frames, stacks are whole).
  void set_all_frames(bool on) { all_frames_ = on; }
  bool all_frames() const { return all_frames_; }
  size_t patterns() const { return patterns_.size(); }

  // Whether the frame is the library's (built-in rules, then the patterns). function: demangled;
  // file: the source path as DWARF gives it; module: the module's file name or path.
  bool library(std::string_view function, std::string_view file, std::string_view module) const;

  // The built-in rules alone.
  static bool builtin_library(std::string_view function, std::string_view file, std::string_view module);
  // Of those library frames, the allocator's: the C allocation API, any operator new or delete,
  // an allocator class's allocate and deallocate, or a frame of an allocator's module (jemalloc,
  // tcmalloc, mimalloc, heapsnap's shim). The report colours them apart.
  static bool allocator(std::string_view function, std::string_view module);

 private:
  bool all_frames_ = false;
  std::vector<std::shared_ptr<const std::regex>> patterns_;
};

}  // namespace heapsnap::symbolize
