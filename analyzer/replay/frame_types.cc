#include "replay/frame_types.h"

#include <string_view>

#include "symbolize/readable_name.h"

namespace heapsnap::replay {
namespace {

// The top-level template arguments of the list that opens at s[open] ('<'), and where it ends
// (one past its '>'); false if unbalanced.
bool template_args(std::string_view s, size_t open, std::vector<std::string_view> *args, size_t *end) {
  int depth = 0, paren = 0;
  size_t start = open + 1;
  for (size_t i = open; i < s.size(); ++i) {
    char c = s[i];
    if (c == '(') ++paren;
    else if (c == ')') --paren;
    if (paren) continue;
    if (c == '<') {
      ++depth;
    } else if (c == '>') {
      if (--depth == 0) {
        std::string_view a = s.substr(start, i - start);
        while (!a.empty() && a.front() == ' ') a.remove_prefix(1);
        while (!a.empty() && a.back() == ' ') a.remove_suffix(1);
        if (!a.empty()) args->push_back(a);
        *end = i + 1;
        return true;
      }
    } else if (c == ',' && depth == 1) {
      std::string_view a = s.substr(start, i - start);
      while (!a.empty() && a.front() == ' ') a.remove_prefix(1);
      while (!a.empty() && a.back() == ' ') a.remove_suffix(1);
      args->push_back(a);
      start = i + 1;
    }
  }
  return false;
}

// The arguments of the template `prefix<...>` that `name` starts with (prefix without '<').
bool args_of(std::string_view name, std::string_view prefix, std::vector<std::string_view> *args) {
  if (name.substr(0, prefix.size()) != prefix || name.size() <= prefix.size() || name[prefix.size()] != '<')
    return false;
  size_t end = 0;
  return template_args(name, prefix.size(), args, &end);
}

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

std::string str(std::string_view s) { return std::string(s); }

// A type as a person writes it: the type's name made readable, then what part of it the block is.
struct Found {
  std::string type, part;  // "std::map<int, X>", "node"; type "" when nothing was found
};
Found found(std::string type, std::string part = "") { return {std::move(type), std::move(part)}; }

// A node or element type T, with the frames outside the allocator's to say whose it is.
Found classify(std::string_view t, const std::vector<std::string> &names, size_t from) {
  std::vector<std::string_view> a;
  if (args_of(t, "std::_Rb_tree_node", &a) && a.size() == 1) {
    std::vector<std::string_view> kv;
    if (args_of(a[0], "std::pair", &kv) && kv.size() == 2 && kv[0].size() > 6 && kv[0].substr(kv[0].size() - 6) == " const")
      return found("std::map<" + str(kv[0].substr(0, kv[0].size() - 6)) + ", " + str(kv[1]) + ">", "node");
    return found("std::set<" + str(a[0]) + ">", "node");
  }
  if (args_of(t, "std::__detail::_Hash_node", &a) && !a.empty()) {
    std::vector<std::string_view> kv;
    if (args_of(a[0], "std::pair", &kv) && kv.size() == 2 && kv[0].size() > 6 && kv[0].substr(kv[0].size() - 6) == " const")
      return found("std::unordered_map<" + str(kv[0].substr(0, kv[0].size() - 6)) + ", " + str(kv[1]) + ">", "node");
    return found("std::unordered_set<" + str(a[0]) + ">", "node");
  }
  if (args_of(t, "std::_List_node", &a) && a.size() == 1) return found("std::list<" + str(a[0]) + ">", "node");
  if (args_of(t, "std::_Sp_counted_ptr_inplace", &a) && !a.empty()) return found(str(a[0]), "(make_shared)");
  if (t == "std::__detail::_Hash_node_base*") {
    // The bucket array: whose, from a _Hashtable frame outside.
    for (size_t i = from; i < names.size(); ++i) {
      std::vector<std::string_view> h;
      if (args_of(names[i], "std::_Hashtable", &h) && h.size() >= 2) {
        std::vector<std::string_view> kv;
        if (args_of(h[1], "std::pair", &kv) && kv.size() == 2)
          return found("std::unordered_map<" + str(h[0]) + ", " + str(kv[1]) + ">", "buckets");
        return found("std::unordered_set<" + str(h[0]) + ">", "buckets");
      }
    }
    return found("std::unordered_map", "buckets");
  }
  // An element type: the container whose frame comes next outside.
  for (size_t i = from; i < names.size(); ++i) {
    const std::string &n = names[i];
    for (std::string_view c : {"std::vector", "std::_Vector_base"})
      if (args_of(n, c, &a) && !a.empty()) return found("std::vector<" + str(a[0]) + ">", "buffer");
    for (std::string_view c : {"std::deque", "std::_Deque_base"})
      if (args_of(n, c, &a) && !a.empty()) return found("std::deque<" + str(a[0]) + ">", "buffer");
    if (starts_with(n, "std::__cxx11::basic_string<") || starts_with(n, "std::basic_string<")) return found("std::string", "buffer");
    if (!starts_with(n, "std::") && !starts_with(n, "__gnu_cxx::")) break;  // the program's frame: no container
  }
  return found(str(t), "array");
}

}  // namespace

std::string type_from_functions(const std::vector<std::string> &functions) {
  std::vector<std::string> names;
  names.reserve(functions.size());
  for (const std::string &f : functions) names.push_back(symbolize::qualified_name(f));
  for (size_t i = 0; i < names.size(); ++i) {
    std::string_view n = names[i];
    std::vector<std::string_view> a;
    Found f;
    for (std::string_view alloc : {"std::__new_allocator", "__gnu_cxx::new_allocator", "std::allocator"}) {
      if (f.type.empty() && args_of(n, alloc, &a) && a.size() == 1 && n.size() > 10 && n.substr(n.size() - 10) == "::allocate")
        f = classify(a[0], names, i + 1);
      a.clear();
    }
    if (f.type.empty() && (starts_with(n, "std::__cxx11::basic_string<char") || starts_with(n, "std::basic_string<char")))
      f = found("std::string", "buffer");
    if (f.type.empty() && args_of(n, "std::make_unique", &a) && !a.empty()) f = found(str(a[0]));
    a.clear();
    if (f.type.empty() && (args_of(n, "std::make_shared", &a) || args_of(n, "std::allocate_shared", &a)) && !a.empty())
      f = found(str(a[0]), "(make_shared)");
    if (!f.type.empty()) {
      // (The type alone made readable: the whole phrase would read as a function "part" returning it.)
      std::string t = symbolize::readable_name(f.type);
      return f.part.empty() ? t : t + " " + f.part;
    }
    // Past the program's first frame nothing more is the library's allocation.
    if (!starts_with(n, "std::") && !starts_with(n, "__gnu_cxx::") && !starts_with(n, "operator new") && !n.empty())
      return "";
  }
  return "";
}

std::string type_from_class(const std::string &demangled) {
  std::vector<std::string_view> a;
  std::string_view n = demangled;
  if (args_of(n, "std::_Sp_counted_ptr_inplace", &a) && !a.empty())
    return symbolize::readable_name(str(a[0])) + " (make_shared)";
  a.clear();
  if ((args_of(n, "std::_Sp_counted_ptr", &a) || args_of(n, "std::_Sp_counted_deleter", &a)) && !a.empty()) {
    std::string_view p = a[0];
    if (!p.empty() && p.back() == '*') p.remove_suffix(1);
    return "std::shared_ptr<" + symbolize::readable_name(str(p)) + "> control block";
  }
  return symbolize::readable_name(demangled);
}

std::string type_from_frames(const std::vector<DisplayFrame> &frames) {
  std::vector<std::string> names;
  names.reserve(frames.size());
  for (const DisplayFrame &f : frames) names.push_back(f.function);
  return type_from_functions(names);
}

}  // namespace heapsnap::replay
