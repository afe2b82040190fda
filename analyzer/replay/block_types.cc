#include "replay/block_types.h"

#include "replay/frame_types.h"
#include "symbolize/demangle.h"

namespace heapsnap::replay {

uint32_t BlockTypes::group_named(const std::string &type, const char *source) {
  auto [it, fresh] = by_name_.try_emplace(type, uint32_t(name.size()));
  if (fresh) {
    name.push_back(type);
    how.emplace_back(source);
  } else {
    std::string &h = how[it->second];
    if (h != source && h.find(source) == std::string::npos) h += std::string(", ") + source;
  }
  return it->second;
}

std::string class_name(const std::string &mangled) {
  std::string d = symbolize::demangle(("_ZTS" + mangled).c_str());
  const std::string prefix = "typeinfo name for ";
  return d.rfind(prefix, 0) == 0 ? type_from_class(d.substr(prefix.size())) : mangled;
}

std::string pointee_type(const std::string &declared) {
  std::string t = declared;
  while (!t.empty() && t.back() == ' ') t.pop_back();
  if (t.size() < 2 || t.back() != '*') return "";
  t.pop_back();
  while (!t.empty() && t.back() == ' ') t.pop_back();
  if (t.rfind("const ", 0) == 0) t = t.substr(6);
  if (t.size() > 6 && t.compare(t.size() - 6, 6, " const") == 0) t.resize(t.size() - 6);
  // Not a class: a pointer to a pointer, a function, or a builtin type (a char * is any buffer).
  if (t.empty() || t.find('*') != std::string::npos || t.find('(') != std::string::npos) return "";
  static const char *const builtin[] = {"void", "char", "signed char", "unsigned char", "short", "unsigned short",
                                        "int", "unsigned int", "long", "unsigned long", "long long",
                                        "unsigned long long", "float", "double", "long double", "bool", "wchar_t",
                                        "char8_t", "char16_t", "char32_t"};
  for (const char *b : builtin)
    if (t == b) return "";
  return t;
}

BlockTypes block_types(const snapshot::HeapSnapshot &s, const capture::StackTree &stacks, StackSymbolizer &sym,
                       const snapshot::RootObjects *roots) {
  BlockTypes t;
  t.group_of.assign(s.blocks(), 0);
  std::vector<uint32_t> vtable_group(s.type_names.size() + 1, 0);
  for (size_t k = 0; k < s.type_names.size(); ++k) vtable_group[k + 1] = t.group_named(class_name(s.type_names[k]), "vtable");
  std::unordered_map<uint64_t, uint32_t> call_site_group;  // an unsampled block's type: its call site's
  std::unordered_map<uint32_t, uint32_t> stack_group;      // a sampled one's: its stack's
  auto frames_group = [&](const std::vector<DisplayFrame> &frames) {
    std::string name = type_from_frames(frames);
    return name.empty() ? 0u : t.group_named(name, "frames");
  };
  for (uint32_t b = 0; b < s.blocks(); ++b) {
    if (!s.type.empty() && s.type[b]) {
      t.group_of[b] = vtable_group[s.type[b]];
    } else if (b < s.stack.size() && s.stack[b] && stacks.valid(s.stack[b])) {
      auto [it, fresh] = stack_group.try_emplace(s.stack[b], 0);
      if (fresh) it->second = frames_group(sym.stack(stacks, s.stack[b]));
      t.group_of[b] = it->second;
    } else if (b < s.call_site.size() && s.call_site[b]) {
      auto [it, fresh] = call_site_group.try_emplace(s.call_site[b], 0);
      if (fresh) it->second = frames_group(sym.frames_of(s.call_site[b]));
      t.group_of[b] = it->second;
    }
  }
  if (!roots) return t;
  // A pointer variable's one word, at its start, pointing at a block's start: the block is what
  // the variable's type points to.
  for (uint32_t r = 0; r < s.roots.size(); ++r) {
    const auto &rr = s.roots[r];
    for (uint32_t k = rr.first; k < rr.first + rr.count; ++k) {
      const uint32_t o = roots->object_of_word[k];
      if (o == UINT32_MAX) continue;
      const snapshot::RootObject &ro = roots->objects[o];
      if (ro.what != snapshot::RootObject::kVariable || ro.size != 8 || rr.start + s.root_offset[k] != ro.start ||
          (k < s.root_interior.size() && s.root_interior[k]))
        continue;
      const uint32_t b = s.root_target[k];
      if (b >= s.blocks() || t.group_of[b]) continue;
      std::string pointee = pointee_type(ro.type);
      if (!pointee.empty()) t.group_of[b] = t.group_named(pointee, "variable");
    }
  }
  return t;
}

}  // namespace heapsnap::replay
