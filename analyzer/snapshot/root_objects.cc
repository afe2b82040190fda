#include "snapshot/root_objects.h"

#include <algorithm>
#include <map>
#include <memory>

namespace heapsnap::snapshot {
namespace {

std::string base_name(const std::string &path) {
  auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string hex(uint64_t v) {
  char b[32];
  snprintf(b, sizeof(b), "0x%llx", static_cast<unsigned long long>(v));
  return b;
}

// The module record for a global range: same path (else same file name), loaded at or below the
// range, the closest such.
const RootModule *module_of(const RootRange &rr, const std::vector<RootModule> &modules) {
  const RootModule *best = nullptr;
  for (int pass = 0; pass < 2 && !best; ++pass) {
    const std::string want = pass ? base_name(rr.name) : rr.name;
    for (const RootModule &m : modules) {
      if ((pass ? base_name(m.path) : m.path) != want || m.load_bias > rr.start) continue;
      if (!best || m.load_bias > best->load_bias) best = &m;
    }
  }
  return best;
}

}  // namespace

std::string RootObject::kind(const HeapSnapshot &s) const {
  if (what == kVariable) return local ? "static" : "global";
  if (what == kThread) return "thread";
  const RootRange &rr = s.roots[range];
  if (rr.kind == kGlobal) return "data";
  return root_kind_name(rr.kind);
}

std::string RootObject::label(const HeapSnapshot &s, bool kind_first) const {
  const RootRange &rr = s.roots[range];
  if (what == kVariable) {
    std::vector<std::string> parts;
    if (!kind_first) parts.push_back(kind(s));
    if (!type.empty()) parts.push_back(type);
    if (!file.empty()) parts.push_back(base_name(file) + (line ? ":" + std::to_string(line) : ""));
    if (module.find(".so") != std::string::npos) parts.push_back("in " + module);
    std::string out = kind_first ? kind(s) + " " + name : name;
    for (size_t i = 0; i < parts.size(); ++i) out += (i ? ", " : " (") + parts[i];
    return parts.empty() ? out : out + ")";
  }
  if (what == kThread) {
    std::string parts;
    for (auto [bit, word] : {std::pair{kStackPart, "stack"}, {kRegistersPart, "registers"}, {kTlsPart, "tls"}})
      if (thread_parts & bit) parts += (parts.empty() ? "" : ", ") + std::string(word);
    return (main_thread ? "main thread " : "thread ") + std::to_string(tid) +
           (thread_name.empty() ? "" : " \"" + thread_name + "\"") + " (" + parts + ")";
  }
  switch (rr.kind) {
    case kGlobal:
      return (module.empty() ? base_name(rr.name) + " " + hex(start) : module + "+" + hex(module_offset)) +
             " (data, no symbol)";
    case kStack:
      return "stack of " + std::string(rr.name.find("main thread") != std::string::npos ? "the main thread" : "thread") +
             " (tid " + std::to_string(rr.detail) + (rr.thread_name.empty() ? "" : ", \"" + rr.thread_name + "\"") + ")";
    case kRegisters:
      return "registers of thread " + std::to_string(rr.detail) + (rr.thread_name.empty() ? "" : " \"" + rr.thread_name + "\"");
    case kTls: return "tls of thread " + std::to_string(rr.detail);
    default: return "anonymous memory at " + hex(start) + (rr.name.empty() || rr.name == "anonymous" ? "" : " (" + rr.name + ")");
  }
}

size_t RootObjects::memory_bytes() const {
  size_t b = object_of_word.capacity() * 4 + objects.capacity() * sizeof(RootObject);
  for (const auto &o : objects)
    b += o.name.capacity() + o.type.capacity() + o.file.capacity() + o.module.capacity() + o.thread_name.capacity();
  return b + layouts.memory_bytes();
}

RootObjects root_objects(const HeapSnapshot &s, const std::vector<RootModule> &modules,
                         const symbolize::DataSymbolsOptions &opts, bool symbols) {
  RootObjects out;
  out.object_of_word.assign(s.root_target.size(), UINT32_MAX);
  std::map<std::string, std::unique_ptr<symbolize::DataSymbols>> files;  // each module file read once
  std::map<uint64_t, uint32_t> thread_object;  // by tid
  // Variables by symbol and load bias (a module loaded twice has each variable twice; the
  // symbols live in `files`).
  std::map<std::pair<const symbolize::DataSymbol *, uint64_t>, uint32_t> variable_object;
  for (uint32_t r = 0; r < s.roots.size(); ++r) {
    const RootRange &rr = s.roots[r];
    // A thread is an object even when its stack holds no pointer into the heap (nothing held is an
    // answer too, and a thread's name and frames say where it was); a global range without
    // pointers is not (there are hundreds).
    if (!rr.count && rr.kind != kStack) continue;
    if (rr.kind == kStack || rr.kind == kRegisters || rr.kind == kTls) {
      auto [it, fresh] = thread_object.try_emplace(rr.detail, uint32_t(out.objects.size()));
      if (fresh) {
        RootObject o;
        o.what = RootObject::kThread;
        o.range = r;
        o.tid = rr.detail;
        o.start = rr.start;
        o.size = rr.length;
        out.objects.push_back(std::move(o));
      }
      RootObject &o = out.objects[it->second];
      if (o.thread_name.empty()) o.thread_name = rr.thread_name;
      o.thread_parts |= rr.kind == kStack ? RootObject::kStackPart
                        : rr.kind == kRegisters ? RootObject::kRegistersPart : RootObject::kTlsPart;
      if (rr.kind == kStack) {  // the stack gives the object its extent
        o.range = r;
        o.start = rr.start;
        o.size = rr.length;
        o.main_thread = rr.name.find("main thread") != std::string::npos;
      }
      for (uint32_t k = rr.first; k < rr.first + rr.count; ++k) out.object_of_word[k] = it->second;
      continue;
    }
    const RootModule *mod = rr.kind == kGlobal ? module_of(rr, modules) : nullptr;
    const symbolize::DataSymbols *syms = nullptr;
    if (mod && symbols) {
      auto &slot = files[mod->path];
      if (!slot) slot = std::make_unique<symbolize::DataSymbols>(mod->path, mod->build_id, opts);
      syms = slot.get();
    }
    uint32_t rest = UINT32_MAX;  // the range's object for words in no symbol
    uint32_t last = UINT32_MAX;  // the last variable's object (words come in address order)
    const symbolize::DataSymbol *last_sym = nullptr;
    for (uint32_t k = rr.first; k < rr.first + rr.count; ++k) {
      const uint64_t a = rr.start + s.root_offset[k];
      const symbolize::DataSymbol *sym = nullptr;
      if (syms) {
        if (last_sym && a - mod->load_bias - last_sym->addr < std::max<uint64_t>(last_sym->size, 1))
          sym = last_sym;
        else
          sym = syms->find(a - mod->load_bias);
      }
      if (sym) {
        if (sym != last_sym) {
          last_sym = sym;
          // A variable that straddles two ranges (the kernel splits .bss where its file-backed
          // part ends and the anonymous part begins) is one object, not one per range.
          auto [it, fresh] = variable_object.try_emplace({sym, mod->load_bias}, uint32_t(out.objects.size()));
          last = it->second;
          if (fresh) {
            RootObject o;
            o.what = RootObject::kVariable;
            o.range = r;
            o.start = sym->addr + mod->load_bias;
            o.size = sym->size;
            o.name = sym->name;
            o.type = sym->type;
            o.file = sym->file;
            o.line = sym->line;
            o.local = sym->local;
            o.module = base_name(mod->path);
            o.module_offset = sym->addr;
            out.objects.push_back(std::move(o));
          }
        }
        out.object_of_word[k] = last;
        continue;
      }
      if (rest == UINT32_MAX) {
        RootObject o;
        o.range = r;
        o.start = rr.start;
        o.size = rr.length;
        o.name = rr.name;
        if (mod) {
          o.module = base_name(mod->path);
          o.module_offset = rr.start - mod->load_bias;
        }
        rest = uint32_t(out.objects.size());
        out.objects.push_back(std::move(o));
      }
      out.object_of_word[k] = rest;
    }
  }
  for (auto &[path, syms] : files) out.layouts.merge(syms->take_layouts());
  return out;
}

}  // namespace heapsnap::snapshot
