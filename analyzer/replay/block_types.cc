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

BlockTyper::BlockTyper(const snapshot::HeapSnapshot &s, const capture::StackTree &stacks, StackSymbolizer &sym,
                       const snapshot::RootObjects *roots)
    : s_(s), stacks_(stacks), sym_(sym) {
  vtable_group_.assign(s.type_names.size() + 1, 0);
  for (size_t k = 0; k < s.type_names.size(); ++k) vtable_group_[k + 1] = t_.group_named(class_name(s.type_names[k]), "vtable");
  if (!roots) return;
  // A pointer variable's one word, at its start, pointing at a block's start: the block is what
  // the variable's type points to (when nothing better names it: see group()).
  for (uint32_t r = 0; r < s.roots.size(); ++r) {
    const auto &rr = s.roots[r];
    for (uint32_t k = rr.first; k < rr.first + rr.count; ++k) {
      const uint32_t o = roots->object_of_word[k];
      if (o == UINT32_MAX) continue;
      const snapshot::RootObject &ro = roots->objects[o];
      if (ro.what != snapshot::RootObject::kVariable || ro.size != 8 || rr.start + s.root_offset[k] != ro.start ||
          (k < s.root_interior.size() && s.root_interior[k]) || s.root_target[k] >= s.blocks())
        continue;
      std::string pointee = pointee_type(ro.type);
      if (!pointee.empty()) variable_group_.emplace(s.root_target[k], t_.group_named(pointee, "variable"));
    }
  }
}

uint32_t BlockTyper::group(uint32_t b) {
  if (all_) return t_.group_of[b];
  uint32_t g = 0;
  if (!s_.type.empty() && s_.type[b]) {
    g = vtable_group_[s_.type[b]];
  } else if (b < s_.stack.size() && s_.stack[b] && stacks_.valid(s_.stack[b])) {
    auto [it, fresh] = stack_group_.try_emplace(s_.stack[b], 0);
    if (fresh) {
      std::string name = type_from_frames(sym_.stack(stacks_, s_.stack[b]));
      it->second = name.empty() ? 0u : t_.group_named(name, "frames");
    }
    g = it->second;
  } else if (b < s_.call_site.size() && s_.call_site[b]) {
    auto [it, fresh] = call_site_group_.try_emplace(s_.call_site[b], 0);
    if (fresh) {
      std::string name = type_from_frames(sym_.frames_of(s_.call_site[b]));
      it->second = name.empty() ? 0u : t_.group_named(name, "frames");
    }
    g = it->second;
  }
  if (!g && !variable_group_.empty()) {
    auto v = variable_group_.find(b);
    if (v != variable_group_.end()) g = v->second;
  }
  return g;
}

const BlockTypes &BlockTyper::all() {
  if (!all_) {
    std::vector<uint32_t> group_of(s_.blocks());
    for (uint32_t b = 0; b < s_.blocks(); ++b) group_of[b] = group(b);
    t_.group_of = std::move(group_of);
    all_ = true;
  }
  return t_;
}

BlockTypes block_types(const snapshot::HeapSnapshot &s, const capture::StackTree &stacks, StackSymbolizer &sym,
                       const snapshot::RootObjects *roots) {
  BlockTyper typer(s, stacks, sym, roots);
  return typer.all();
}

}  // namespace heapsnap::replay
