#include "symbolize/type_layouts.h"

#include <algorithm>
#include <string_view>

namespace heapsnap::symbolize {
namespace {

bool ends_with(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && s.substr(s.size() - p.size()) == p;
}
bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

// (Strings are built by appending: GCC 12's -Wrestrict misfires on `"literal" + std::string`.)
std::string plus(const char *what, uint64_t offset, uint64_t base) {
  std::string s = what;
  if (offset != base) s.append(" (+").append(std::to_string(offset - base)).append(")");
  return s;
}

std::string index(uint64_t i) {
  std::string s = "[";
  return s.append(std::to_string(i)).append("]");
}

// The element type of "std::vector<T>" (T), or "".
std::string_view element_of(std::string_view container) {
  size_t lt = container.find('<');
  if (lt == std::string_view::npos || container.back() != '>') return {};
  return container.substr(lt + 1, container.size() - lt - 2);
}

// The size of a pointer-like element (a raw or smart pointer), or 0.
uint64_t pointer_size(std::string_view t) {
  if (ends_with(t, "*") || starts_with(t, "std::unique_ptr<")) return 8;
  if (starts_with(t, "std::shared_ptr<") || starts_with(t, "std::weak_ptr<")) return 16;  // (and its control block)
  return 0;
}

// The size and alignment of a type named as BlockTyper writes it, for the few that key maps most
// often; 0 when not known.
uint64_t known_size(std::string_view t, uint64_t *align) {
  *align = 8;
  if (t == "int" || t == "unsigned int" || t == "float" || t == "char32_t") return *align = 4;
  if (t == "long" || t == "unsigned long" || t == "long long" || t == "unsigned long long" || t == "double" ||
      ends_with(t, "*") || starts_with(t, "std::unique_ptr<"))
    return 8;
  if (t == "std::string" || starts_with(t, "std::vector<")) return t == "std::string" ? 32 : 24;
  if (starts_with(t, "std::shared_ptr<")) return 16;
  return 0;
}

// The top-level template arguments of "std::map<K, V>" (K and V), split at depth 0 commas.
std::vector<std::string_view> template_args(std::string_view t) {
  std::vector<std::string_view> out;
  std::string_view in = element_of(t);
  int depth = 0;
  size_t from = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] == '<' || in[i] == '(') ++depth;
    else if (in[i] == '>' || in[i] == ')') --depth;
    else if (in[i] == ',' && depth == 0) {
      out.push_back(in.substr(from, i - from));
      from = i + 1;
      while (from < in.size() && in[from] == ' ') ++from;
    }
  }
  if (from < in.size()) out.push_back(in.substr(from));
  return out;
}

// A map's value, std::pair<const K, V> at `base`: "key" or "value" where K's size and V's
// alignment are known, else "value (+N)".
std::string pair_field(std::string_view map, uint64_t offset, uint64_t base) {
  std::vector<std::string_view> kv = template_args(map.substr(0, map.size() - 5));  // (less " node")
  uint64_t kalign = 0, valign = 0, ksize = kv.size() == 2 ? known_size(kv[0], &kalign) : 0;
  if (ksize && known_size(kv[1], &valign) == 0) valign = 8;  // (a class: most hold a pointer)
  if (!ksize) return plus("value", offset, base);
  const uint64_t second = (ksize + valign - 1) / valign * valign;
  if (offset - base < ksize) return plus("key", offset, base);
  return plus("value", offset, base + second);
}

constexpr uint64_t kMakeSharedHeader = 16;  // _Sp_counted_base: its vtable pointer and two counts

}  // namespace

void TypeLayouts::add(const std::string &name, uint64_t size, std::vector<TypeMember> members) {
  std::sort(members.begin(), members.end(), [](const TypeMember &a, const TypeMember &b) { return a.offset < b.offset; });
  by_name_.try_emplace(name, Layout{size, std::move(members)});
}

void TypeLayouts::merge(TypeLayouts &&other) {
  for (auto &[name, layout] : other.by_name_) by_name_.try_emplace(name, std::move(layout));
  other.by_name_.clear();
}

size_t TypeLayouts::memory_bytes() const {
  size_t b = by_name_.bucket_count() * sizeof(void *);
  for (const auto &[name, l] : by_name_) {
    b += sizeof(l) + name.capacity() + 32 + l.members.capacity() * sizeof(TypeMember);
    for (const TypeMember &m : l.members) b += m.name.capacity() + m.type.capacity();
  }
  return b;
}

// The innermost named member at `offset` (nested classes joined with '.'), "" if none. A member
// whose bytes hold the offset; the last one that starts at or below it for one of size 0 (a
// flexible array).
std::string TypeLayouts::member_at(const std::string &type, uint64_t offset, int depth) const {
  auto it = by_name_.find(type);
  if (it == by_name_.end() || depth > 6) return "";
  const TypeMember *hit = nullptr;
  for (const TypeMember &m : it->second.members) {
    if (m.offset > offset) break;
    if (offset - m.offset < m.size || (m.size == 0 && (!hit || hit->offset < m.offset))) hit = &m;
  }
  if (!hit) return "";
  std::string inner = hit->type.empty() ? "" : member_at(hit->type, offset - hit->offset, depth + 1);
  if (hit->name.empty()) return inner;  // a base class: its own members name the bytes
  std::string s = hit->name;
  if (!inner.empty()) s.append(".").append(inner);
  return s;
}

std::string TypeLayouts::field_at(const std::string &type, uint64_t offset) const {
  std::string c = container_field(type, offset);
  if (!c.empty()) return c;
  if (ends_with(type, " (make_shared)")) {
    if (offset < kMakeSharedHeader) return "control block";
    return member_at(type.substr(0, type.size() - 14), offset - kMakeSharedHeader, 0);
  }
  if (ends_with(type, " array")) {
    // new T[n]: the element's index, and its field when T's layout is known.
    std::string t = type.substr(0, type.size() - 6);
    auto it = by_name_.find(t);
    if (it == by_name_.end() || it->second.size == 0) return "";
    std::string f = member_at(t, offset % it->second.size, 0);
    std::string s = index(offset / it->second.size);
    if (!f.empty()) s.append(".").append(f);
    return s;
  }
  return member_at(type, offset, 0);
}

std::string container_field(const std::string &type, uint64_t offset) {
  if (ends_with(type, " node")) {
    // libstdc++: _Rb_tree_node_base {color, parent, left, right} then the value; _Hash_node
    // {next} then the value (then the cached hash); _List_node_base {next, prev} then the value.
    if (starts_with(type, "std::map<") || starts_with(type, "std::set<") || starts_with(type, "std::multimap<") ||
        starts_with(type, "std::multiset<")) {
      static const char *const kBase[] = {"color", "parent", "left", "right"};
      if (offset < 32) return kBase[offset / 8];
      return starts_with(type, "std::map<") || starts_with(type, "std::multimap<") ? pair_field(type, offset, 32)
                                                                                : plus("value", offset, 32);
    }
    if (starts_with(type, "std::unordered_map<") || starts_with(type, "std::unordered_multimap<"))
      return offset < 8 ? "next" : pair_field(type, offset, 8);
    if (starts_with(type, "std::unordered_set<") || starts_with(type, "std::unordered_multiset<"))
      return offset < 8 ? "next" : plus("value", offset, 8);
    if (starts_with(type, "std::list<")) return offset < 8 ? "next" : offset < 16 ? "prev" : plus("value", offset, 16);
    return "";
  }
  if (ends_with(type, " buckets")) return std::string("bucket ").append(index(offset / 8));
  if (ends_with(type, " buffer")) {
    std::string_view e = element_of(std::string_view(type).substr(0, type.size() - 7));
    if (uint64_t n = pointer_size(e)) return index(offset / n);
    return "";  // (the element's size is not in the name)
  }
  return "";
}

}  // namespace heapsnap::symbolize
