#include "symbolize/readable_name.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <vector>

namespace heapsnap::symbolize {
namespace {

constexpr std::string_view kEllipsis = "\xE2\x80\xA6";  // "…"

// A demangled name as a tree: runs of text, operator names (never split), and bracketed groups
// whose arguments (split at their top-level commas) are trees again.
struct Item {
  enum Kind : uint8_t { kText, kAtom, kGroup } kind = kText;
  std::string text;  // kText, kAtom
  char open = 0, close = 0;
  std::vector<std::vector<Item>> args;  // kGroup
};
using Seq = std::vector<Item>;

bool ident_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '$';
}

char closer_of(char open) {
  switch (open) {
    case '<': return '>';
    case '(': return ')';
    case '[': return ']';
    default: return '}';
  }
}

void trim(Seq &s);

class Parser {
 public:
  explicit Parser(std::string_view s) : s_(s) {}

  std::optional<Seq> parse() {
    Seq out = seq(0);
    if (!ok_ || i_ != s_.size()) return std::nullopt;
    return out;
  }

 private:
  static void add_char(Seq &out, char c) {
    if (out.empty() || out.back().kind != Item::kText) out.push_back(Item{});
    out.back().text += c;
  }

  // "operator" at s_[i_] as a word of its own: the operator's name, or 0 when it is not one.
  size_t operator_length() const {
    constexpr std::string_view kw = "operator";
    if (s_.substr(i_, kw.size()) != kw) return 0;
    if (i_ > 0 && ident_char(s_[i_ - 1])) return 0;
    size_t j = i_ + kw.size();
    if (j < s_.size() && ident_char(s_[j])) return 0;
    if (j < s_.size() && s_[j] == ' ') {
      // operator new, operator delete[], or a conversion: "operator unsigned long", "operator
      // std::vector" (its template arguments follow as a group).
      size_t k = j;
      while (k < s_.size() && (ident_char(s_[k]) || s_[k] == ':' || s_[k] == ' ' || s_[k] == '*' || s_[k] == '&')) ++k;
      while (k > j && s_[k - 1] == ' ') --k;
      if (s_.substr(k, 2) == "[]") k += 2;
      return k - i_;
    }
    if (s_.substr(j, 2) == "\"\"") {
      size_t k = j + 2;
      while (k < s_.size() && (s_[k] == ' ' || ident_char(s_[k]))) ++k;
      return k - i_;
    }
    static constexpr std::array<std::string_view, 42> ops = {
        "<<=", ">>=", "<=>", "->*", "()", "[]", "<<", ">>", "<=", ">=", "==", "!=", "&&", "||", "++",
        "--",  "+=",  "-=",  "*=",  "/=", "%=", "&=", "|=", "^=", "->", "<",  ">",  "+",  "-",  "*",
        "/",   "%",   "^",   "&",   "|",  "~",  "!",  "=",  ",",  "co_await", "new", "delete"};
    for (std::string_view op : ops)
      if (s_.substr(j, op.size()) == op) return j + op.size() - i_;
    return 0;
  }

  Seq seq(char closer) {
    Seq out;
    while (ok_ && i_ < s_.size()) {
      char c = s_[i_];
      if (closer && (c == closer || c == ',')) return out;
      if (size_t n = operator_length()) {
        Item a;
        a.kind = Item::kAtom;
        a.text = std::string(s_.substr(i_, n));
        out.push_back(std::move(a));
        i_ += n;
        continue;
      }
      if (c == '<' || c == '(' || c == '[' || c == '{') {
        if (++depth_ > 256) {
          ok_ = false;
          return out;
        }
        Item g;
        g.kind = Item::kGroup;
        g.open = c;
        g.close = closer_of(c);
        ++i_;
        for (;;) {
          while (i_ < s_.size() && s_[i_] == ' ') ++i_;
          g.args.push_back(seq(g.close));
          trim(g.args.back());
          if (!ok_ || i_ >= s_.size()) {
            ok_ = false;
            return out;
          }
          if (s_[i_++] == g.close) break;  // else a comma: the next argument
        }
        --depth_;
        out.push_back(std::move(g));
        continue;
      }
      if (c == '>' || c == ')' || c == ']' || c == '}') {
        ok_ = false;  // a closer that closes nothing
        return out;
      }
      add_char(out, c);
      ++i_;
    }
    if (closer) ok_ = false;  // the end came before the group's closer
    return out;
  }

  std::string_view s_;
  size_t i_ = 0;
  int depth_ = 0;
  bool ok_ = true;
};

void trim(Seq &s) {
  while (!s.empty() && s.front().kind == Item::kText) {
    auto &t = s.front().text;
    size_t k = t.find_first_not_of(' ');
    if (k == std::string::npos) {
      s.erase(s.begin());
      continue;
    }
    t.erase(0, k);
    break;
  }
  while (!s.empty() && s.back().kind == Item::kText) {
    auto &t = s.back().text;
    size_t k = t.find_last_not_of(' ');
    if (k == std::string::npos) {
      s.pop_back();
      continue;
    }
    t.erase(k + 1);
    break;
  }
}

// Template arguments shown down to nesting level max_level (1: the outermost lists' own
// arguments; 0: none); deeper lists as "<…>". -1: all.
void emit(const Seq &s, std::string &out, int max_level = -1, int level = 0) {
  for (const Item &it : s) {
    if (it.kind != Item::kGroup) {
      out += it.text;
      continue;
    }
    out += it.open;
    int inner = it.open == '<' ? level + 1 : level;
    if (it.open == '<' && max_level >= 0 && inner > max_level) {
      out += kEllipsis;
    } else {
      for (size_t a = 0; a < it.args.size(); ++a) {
        if (a) out += ", ";
        emit(it.args[a], out, max_level, inner);
      }
    }
    out += it.close;
  }
}

std::string str(const Seq &s) {
  std::string out;
  emit(s, out);
  return out;
}

int template_depth(const Seq &s) {
  int d = 0;
  for (const Item &it : s)
    if (it.kind == Item::kGroup)
      for (const Seq &a : it.args) d = std::max(d, template_depth(a) + (it.open == '<' ? 1 : 0));
  return d;
}

void erase_all(std::string &t, std::string_view what, std::string_view with = {}) {
  for (size_t p = t.find(what); p != std::string::npos; p = t.find(what, p + with.size()))
    t.replace(p, what.size(), with);
}

void normalize_text(std::string &t) {
  erase_all(t, "std::__1::", "std::");
  erase_all(t, "std::__cxx11::", "std::");
  erase_all(t, "__cxx11::");
  erase_all(t, "__detail::");
}

// The qualified identifier that ends `t` ("std::basic_string" of "x, std::basic_string").
std::string_view trailing_name(std::string_view t) {
  size_t k = t.size();
  while (k > 0 && (ident_char(t[k - 1]) || t[k - 1] == ':')) --k;
  return t.substr(k);
}

// "std::hash<X>" -> "X" when `arg` is prefix<...>.
std::optional<std::string> inner_of(const std::string &arg, std::string_view prefix) {
  if (arg.size() < prefix.size() + 2 || arg.compare(0, prefix.size(), prefix) != 0 || arg[prefix.size()] != '<' ||
      arg.back() != '>')
    return std::nullopt;
  return arg.substr(prefix.size() + 1, arg.size() - prefix.size() - 2);
}

void drop_defaults(std::vector<Seq> &args) {
  while (args.size() > 1) {
    std::string last = str(args.back());
    std::string first = str(args.front());
    bool drop = inner_of(last, "std::allocator").has_value();
    for (std::string_view p : {"std::char_traits", "std::less", "std::equal_to", "std::hash", "std::default_delete"})
      if (!drop) {
        auto in = inner_of(last, p);
        drop = in && *in == first;
      }
    if (!drop) break;
    args.pop_back();
  }
}

// basic_string<char> and friends -> their typedef: the name's replacement, or "".
std::string typedef_of(std::string_view name, const std::string &arg) {
  static constexpr std::array<std::string_view, 16> streams = {
      "basic_string", "basic_string_view", "basic_ostream", "basic_istream", "basic_iostream", "basic_ios",
      "basic_streambuf", "basic_stringbuf", "basic_stringstream", "basic_ostringstream", "basic_istringstream",
      "basic_filebuf", "basic_fstream", "basic_ofstream", "basic_ifstream", "basic_regex"};
  if (name.substr(0, 5) != "std::") return {};
  std::string_view base = name.substr(5);
  bool known = false;
  for (std::string_view s : streams) known = known || base == s;
  if (!known) return {};
  std::string_view plain = base.substr(6);  // after "basic_"
  bool is_string = plain == "string" || plain == "string_view";
  std::string prefix;
  if (arg == "char") prefix = "";
  else if (arg == "wchar_t") prefix = "w";
  else if (is_string && arg == "char8_t") prefix = "u8";
  else if (is_string && arg == "char16_t") prefix = "u16";
  else if (is_string && arg == "char32_t") prefix = "u32";
  else return {};
  if (base == "basic_regex") return std::string("std::") + prefix + "regex";
  return std::string("std::") + prefix + std::string(plain);
}

void simplify(Seq &s) {
  for (size_t i = 0; i < s.size(); ++i) {
    Item &it = s[i];
    if (it.kind == Item::kText) {
      normalize_text(it.text);
      continue;
    }
    if (it.kind != Item::kGroup) continue;
    for (Seq &a : it.args) {
      simplify(a);
      trim(a);
    }
    if (it.open == '[' && it.args.size() == 1 && str(it.args[0]).rfind("abi:", 0) == 0) {
      s.erase(s.begin() + long(i));  // an ABI tag
      --i;
      continue;
    }
    if (it.open != '<' || i == 0 || s[i - 1].kind != Item::kText) continue;
    drop_defaults(it.args);
    std::string &prev = s[i - 1].text;
    std::string_view name = trailing_name(prev);
    if (it.args.size() == 1) {
      std::string td = typedef_of(name, str(it.args[0]));
      if (!td.empty()) {
        prev.replace(prev.size() - name.size(), name.size(), td);
        s.erase(s.begin() + long(i));
        --i;
      }
    }
  }
  // Merge text runs that the erasures above brought together.
  for (size_t i = 1; i < s.size();) {
    if (s[i].kind == Item::kText && s[i - 1].kind == Item::kText) {
      s[i - 1].text += s[i].text;
      s.erase(s.begin() + long(i));
    } else {
      ++i;
    }
  }
}

// Leading words that are not part of the name: kept as they are.
constexpr std::array<std::string_view, 6> kSpecialPrefixes = {
    "non-virtual thunk to ", "virtual thunk to ", "covariant return thunk to ", "guard variable for ",
    "transaction clone for ", "construction vtable for "};

bool qualifier_text(std::string_view t) {
  size_t i = 0;
  while (i < t.size()) {
    while (i < t.size() && t[i] == ' ') ++i;
    size_t j = i;
    while (j < t.size() && t[j] != ' ') ++j;
    std::string_view w = t.substr(i, j - i);
    if (!w.empty() && w != "const" && w != "volatile" && w != "noexcept" && w != "&" && w != "&&" && w != "const&" &&
        w != "const&&" && w != "restrict" && w != "__restrict")
      return false;
    i = j;
  }
  return true;
}

// A function name split: [return type] name params qualifiers.
struct Parts {
  Seq name;        // the qualified name (trimmed)
  Item params;     // the parameter list (kind kGroup), when has_params
  bool has_params = false;
  Seq suffix;      // " const", "[clone .cold]", ...
};

Parts split(Seq s) {
  Parts p;
  // The parameter list: the last top-level (...) with only qualifiers after it.
  size_t k = s.size();
  while (k > 0) {
    const Item &it = s[k - 1];
    if (it.kind == Item::kText && qualifier_text(it.text)) {
      --k;
      continue;
    }
    if (it.kind == Item::kGroup && it.open == '[') {
      --k;
      continue;
    }
    break;
  }
  size_t end = s.size();
  if (k > 1 && s[k - 1].kind == Item::kGroup && s[k - 1].open == '(') {
    p.has_params = true;
    p.params = s[k - 1];
    p.suffix.assign(s.begin() + long(k), s.end());
    end = k - 1;
  } else {
    k = s.size();
  }
  // The return type ends at the last top-level space before the name that is not followed by '<'.
  size_t cut_item = SIZE_MAX, cut_pos = 0;
  for (size_t i = 0; i < end; ++i) {
    if (s[i].kind != Item::kText) continue;
    const std::string &t = s[i].text;
    for (size_t c = 0; c < t.size(); ++c) {
      if (t[c] != ' ') continue;
      char next = 0;
      if (c + 1 < t.size()) next = t[c + 1];
      else if (i + 1 < end) next = s[i + 1].kind == Item::kGroup ? s[i + 1].open : 'a';
      if (next == 0 || next == '<' || next == ' ' || next == '&' || next == '*') continue;
      cut_item = i;
      cut_pos = c + 1;
    }
  }
  size_t begin = 0;
  if (cut_item != SIZE_MAX) {
    begin = cut_item;
    s[cut_item].text.erase(0, cut_pos);
  }
  p.name.assign(s.begin() + long(begin), s.begin() + long(end));
  trim(p.name);
  return p;
}

std::string middle_cut(std::string_view s, size_t max_len) {
  if (s.size() <= max_len) return std::string(s);
  size_t head = max_len / 2, tail = max_len - head;
  while (head > 0 && (static_cast<unsigned char>(s[head]) & 0xC0) == 0x80) --head;
  size_t from = s.size() - tail;
  while (from < s.size() && (static_cast<unsigned char>(s[from]) & 0xC0) == 0x80) ++from;
  return std::string(s.substr(0, head)) + std::string(kEllipsis) + std::string(s.substr(from));
}

std::string_view strip_special(std::string_view &s) {
  for (std::string_view p : kSpecialPrefixes)
    if (s.substr(0, p.size()) == p) {
      s.remove_prefix(p.size());
      return p;
    }
  return {};
}

}  // namespace

std::string readable_name(std::string_view demangled, size_t max_len) {
  std::string_view s = demangled;
  std::string_view special = strip_special(s);
  std::optional<Seq> tree = Parser(s).parse();
  if (!tree) {
    std::string t(demangled);
    normalize_text(t);
    return middle_cut(t, max_len);
  }
  simplify(*tree);
  Parts p = split(std::move(*tree));
  std::string params, suffix;
  if (p.has_params) emit({p.params}, params);
  emit(p.suffix, suffix);
  std::string out = std::string(special) + str(p.name) + params + suffix;
  if (out.size() <= max_len) return out;

  // 1. The parameter list.
  if (p.has_params && !(p.params.args.size() == 1 && p.params.args[0].empty()) && params != "(" + std::string(kEllipsis) + ")") {
    params = "(" + std::string(kEllipsis) + ")";
    out = std::string(special) + str(p.name) + params + suffix;
    if (out.size() <= max_len) return out;
  }
  // 2. Template arguments, the deepest first.
  std::string name;
  for (int level = template_depth(p.name) - 1; level >= 0; --level) {
    name.clear();
    emit(p.name, name, level);
    out = std::string(special) + name + params + suffix;
    if (out.size() <= max_len) return out;
  }
  if (name.empty()) name = str(p.name);
  // 3. The middle of the scope: keep its start and the last component whole. Cuts fall in
  // top-level text (never inside brackets), after a "::" where one fits.
  size_t last = std::string::npos;  // where the last component starts (its "::")
  std::vector<std::pair<size_t, bool>> cuts;  // (offset, right after "::")
  size_t pos = 0;
  for (const Item &it : p.name) {
    std::string piece;
    emit({it}, piece, 0);
    if (it.kind == Item::kText) {
      for (size_t c = 0; c < it.text.size(); ++c) {
        if (it.text.compare(c, 2, "::") == 0) last = pos + c;
        cuts.push_back({pos + c, c >= 2 && it.text.compare(c - 2, 2, "::") == 0});
      }
    } else {
      cuts.push_back({pos, false});
    }
    pos += piece.size();
  }
  if (last == std::string::npos || last == 0) return out;  // one component: the function's name, never cut
  std::string tailpart = name.substr(last);                 // "::func<…>"
  size_t fixed = special.size() + tailpart.size() + params.size() + suffix.size() + kEllipsis.size();
  size_t keep = max_len > fixed ? max_len - fixed : 0;
  keep = std::max<size_t>(keep, 8);
  if (keep >= last) return out;
  size_t best = SIZE_MAX, best_colons = SIZE_MAX;
  for (auto [off, after_colons] : cuts) {
    if (off > keep || off == 0) continue;
    if (best == SIZE_MAX || off > best) best = off;
    if (after_colons && (best_colons == SIZE_MAX || off > best_colons)) best_colons = off;
  }
  size_t cut = best_colons != SIZE_MAX && best_colons * 2 >= keep ? best_colons : best;
  if (cut == SIZE_MAX) cut = std::min(keep, last);
  while (cut > 0 && (static_cast<unsigned char>(name[cut]) & 0xC0) == 0x80) --cut;
  return std::string(special) + name.substr(0, cut) + std::string(kEllipsis) + tailpart + params + suffix;
}

std::string qualified_name(std::string_view demangled) {
  std::string_view s = demangled;
  strip_special(s);
  std::optional<Seq> tree = Parser(s).parse();
  if (!tree) return std::string(demangled);
  Parts p = split(std::move(*tree));
  return str(p.name);
}

}  // namespace heapsnap::symbolize
