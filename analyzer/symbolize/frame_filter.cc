#include "symbolize/frame_filter.h"

#include <array>

#include "symbolize/readable_name.h"

namespace heapsnap::symbolize {
namespace {

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
bool ends_with(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && s.substr(s.size() - p.size()) == p;
}

std::string_view basename_of(std::string_view p) {
  size_t s = p.rfind('/');
  return s == std::string_view::npos ? p : p.substr(s + 1);
}

// A header of the C++ standard library: ".../include/c++/..." or ".../include/<one dir>/c++/...".
bool cxx_header(std::string_view file) {
  for (size_t at = file.find("/include/"); at != std::string_view::npos; at = file.find("/include/", at + 1)) {
    std::string_view rest = file.substr(at + 9);
    if (starts_with(rest, "c++/")) return true;
    size_t slash = rest.find('/');
    if (slash != std::string_view::npos && starts_with(rest.substr(slash + 1), "c++/")) return true;
  }
  return false;
}

bool allocator_module(std::string_view m) {
  static constexpr std::array<std::string_view, 4> prefixes = {"libjemalloc.so", "libtcmalloc", "libmimalloc.so",
                                                               "libheapsnap_preload"};
  for (std::string_view p : prefixes)
    if (starts_with(m, p)) return true;
  return false;
}

bool runtime_module(std::string_view module) {
  std::string_view m = basename_of(module);
  static constexpr std::array<std::string_view, 9> prefixes = {
      "libc.so", "ld-linux", "libstdc++.so", "libc++.so", "libc++abi.so", "libgcc_s.so", "libpthread.so",
      "libdl.so", "ld64.so"};
  for (std::string_view p : prefixes)
    if (starts_with(m, p)) return true;
  return allocator_module(m);
}

// n: a qualified name (qualified_name).
bool allocation_function(std::string_view n) {
  // Any class's operator new and delete (their own overloads are allocation wrappers too).
  for (std::string_view op : {"operator new", "operator new[]", "operator delete", "operator delete[]"})
    if (n == op || ends_with(n, std::string("::") + std::string(op))) return true;
  static constexpr std::array<std::string_view, 19> c_names = {
      "malloc", "calloc", "realloc", "free", "reallocarray", "posix_memalign", "aligned_alloc", "memalign",
      "valloc", "pvalloc", "strdup", "strndup", "__libc_malloc", "__libc_calloc", "__libc_realloc",
      "__libc_free", "__libc_memalign", "__libc_valloc", "__libc_pvalloc"};
  for (std::string_view c : c_names)
    if (n == c) return true;
  return false;
}

bool library_function(std::string_view function) {
  if (function.empty()) return false;
  std::string q = qualified_name(function);
  std::string_view n = q;
  static constexpr std::array<std::string_view, 6> namespaces = {"std::", "__gnu_cxx::", "__cxxabiv1::",
                                                                 "__gnu_debug::", "__pstl::", "__cxa_"};
  for (std::string_view p : namespaces)
    if (starts_with(n, p)) return true;
  if (allocation_function(n)) return true;
  static constexpr std::array<std::string_view, 5> start_up = {"_start", "__libc_start_main", "__libc_start_call_main",
                                                               "_dl_start_user", "_dl_start"};
  for (std::string_view c : start_up)
    if (n == c) return true;
  return starts_with(n, "heapsnap_");
}

}  // namespace

bool FrameFilter::allocator(std::string_view function, std::string_view module) {
  if (!module.empty() && allocator_module(basename_of(module))) return true;
  if (function.empty()) return false;
  std::string q = qualified_name(function);
  std::string_view n = q;
  // An allocator class's members (std::allocator<T>::allocate, __gnu_cxx::new_allocator<T>::allocate).
  if (n.find("allocator") != std::string_view::npos && (ends_with(n, "::allocate") || ends_with(n, "::deallocate")))
    return true;
  return allocation_function(n);
}

bool FrameFilter::builtin_library(std::string_view function, std::string_view file, std::string_view module) {
  if (library_function(function)) return true;
  if (!file.empty() && (cxx_header(file) || basename_of(file) == "heapsnap.h")) return true;
  return !module.empty() && runtime_module(module);
}

bool FrameFilter::library(std::string_view function, std::string_view file, std::string_view module) const {
  if (all_frames_) return false;
  if (builtin_library(function, file, module)) return true;
  for (const auto &re : patterns_) {
    auto hit = [&](std::string_view s) { return !s.empty() && std::regex_search(s.begin(), s.end(), *re); };
    if (hit(function) || hit(file) || hit(module)) return true;
  }
  return false;
}

bool FrameFilter::add_pattern(const std::string &regex, std::string *error) {
  try {
    patterns_.push_back(std::make_shared<const std::regex>(regex, std::regex::ECMAScript | std::regex::optimize));
    return true;
  } catch (const std::regex_error &e) {
    if (error) *error = "'" + regex + "' is not a regular expression: " + e.what();
    return false;
  }
}

bool FrameFilter::add_patterns_from_env(const char *value, std::string *error) {
  if (value == nullptr) return true;
  std::string_view v = value;
  size_t i = 0;
  while (i <= v.size()) {
    size_t j = v.find_first_of(";\n", i);
    if (j == std::string_view::npos) j = v.size();
    std::string p(v.substr(i, j - i));
    while (!p.empty() && (p.back() == '\r' || p.back() == ' ' || p.back() == '\t')) p.pop_back();
    size_t k = p.find_first_not_of(" \t");
    if (k != std::string::npos && !add_pattern(p.substr(k), error)) return false;
    i = j + 1;
  }
  return true;
}

}  // namespace heapsnap::symbolize
