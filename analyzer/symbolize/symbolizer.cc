#include "symbolize/symbolizer.h"

#include <pthread.h>

#include <algorithm>
#include <cinttypes>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <map>
#include <mutex>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include "symbolize/address_cache.h"
#include "symbolize/build_id.h"
#include "symbolize/debug_cache.h"
#include "symbolize/debug_file_locator.h"
#include "symbolize/module_file.h"

namespace heapsnap::symbolize {
namespace {

std::string basename_of(const std::string& path) {
  if (path.empty()) return "[unknown]";
  auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// Kernel-provided pseudo modules have no file; not worth a warning.
bool is_pseudo_module(const std::string& path) {
  return path.empty() || path.rfind("linux-vdso", 0) == 0 || path.rfind("linux-gate", 0) == 0 ||
         (path.front() == '[' && path.back() == ']');
}

std::string hex_offset(const std::string& module, uint64_t offset) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "+0x%" PRIx64, offset);
  return module + buf;
}

}  // namespace

const char* to_string(Symbolized::Status s) {
  switch (s) {
    case Symbolized::Status::ok: return "ok";
    case Symbolized::Status::no_debug_info: return "no_debug_info";
    case Symbolized::Status::no_symbols: return "no_symbols";
    case Symbolized::Status::module_missing: return "module_missing";
    case Symbolized::Status::build_id_mismatch: return "build_id_mismatch";
  }
  return "?";
}

struct Symbolizer::Impl {
  struct Module {
    ModuleInfo info;
    std::string display;
    enum class State { unresolved, ok, missing, mismatch } state = State::unresolved;
    ModuleFile* file = nullptr;
    uint64_t unnamed = 0;  // distinct addresses looked up in it that no symbol or debug file names
  };

  explicit Impl(SymbolizerOptions o)
      : opts(std::move(o)), locator(opts.debug_dirs, opts.use_debuginfod, opts.cache_dir) {}
  ~Impl() { settle(); }

  // Prefetching. Until settle(), the worker alone touches `files` and `locator`; the caller's
  // thread only queues (path, expected build-id) pairs. settle() joins the worker: after it,
  // one thread does everything again.
  struct Prefetch {
    std::string path, build_id;
  };
  void queue_prefetch(const ModuleInfo& info) {
    if (settled || !queued.insert(info.path).second) return;
    {
      std::lock_guard<std::mutex> lock(mu);
      pending.push_back({info.path, info.build_id});
    }
    cv.notify_one();
    if (!worker.joinable()) worker = std::thread([this] { prefetch_loop(); });
  }
  void prefetch_loop() {
    pthread_setname_np(pthread_self(), "hs-debug-info");  // for top -H and perf's --sort comm
    std::unique_lock<std::mutex> lock(mu);
    for (;;) {
      cv.wait(lock, [this] { return !pending.empty() || stopping; });
      if (pending.empty()) return;
      Prefetch job = std::move(pending.front());
      pending.pop_front();
      lock.unlock();
      auto& slot = files[job.path];
      if (!slot) slot = std::make_unique<ModuleFile>(job.path, &locator, opts.demangle);
      slot->preload(job.build_id);
      lock.lock();
    }
  }
  void settle() {
    if (settled) return;
    settled = true;
    if (!worker.joinable()) return;
    {
      std::lock_guard<std::mutex> lock(mu);
      stopping = true;
    }
    cv.notify_one();
    worker.join();
  }

  Module& resolve(Module& m) {
    if (m.state != Module::State::unresolved) return m;
    auto& slot = files[m.info.path];
    if (!slot) slot = std::make_unique<ModuleFile>(m.info.path, &locator, opts.demangle);
    m.file = slot.get();
    if (!m.file->open()) {
      m.state = Module::State::missing;
      if (!is_pseudo_module(m.info.path))
        warnings.push_back("cannot open module " + m.info.path + ": " + m.file->error() +
                           "; its addresses are shown as module+offset");
    } else if (!m.info.build_id.empty() && m.info.build_id != m.file->build_id()) {
      m.state = Module::State::mismatch;
      std::string file_id = m.file->build_id().empty() ? "none" : build_id_hex(m.file->build_id());
      warnings.push_back("build-id mismatch for " + m.info.path + ": capture recorded " +
                         build_id_hex(m.info.build_id) + ", file has " + file_id +
                         "; its addresses are shown as module+offset");
    } else {
      m.state = Module::State::ok;
    }
    return m;
  }

  SymbolizerOptions opts;
  DebugFileLocator locator;
  std::vector<Module> modules;
  std::map<std::tuple<std::string, uint64_t, std::string>, uint32_t> module_ids;
  std::unordered_map<std::string, std::unique_ptr<ModuleFile>> files;
  std::deque<Symbolized> results;  // stable references
  AddressCache cache;
  std::vector<std::string> warnings;
  Symbolized invalid;  // answer for an unknown module handle

  bool settled = false;                  // caller's thread only
  std::unordered_set<std::string> queued;  // caller's thread only
  std::mutex mu;
  std::condition_variable cv;
  std::deque<Prefetch> pending;  // under mu
  bool stopping = false;         // under mu: finish the queue, then end
  std::thread worker;
};

Symbolizer::Symbolizer(SymbolizerOptions opts) : impl_(std::make_unique<Impl>(std::move(opts))) {
  impl_->invalid.module = "[invalid module]";
  impl_->invalid.status = Symbolized::Status::module_missing;
  impl_->invalid.frames.emplace_back();
}

Symbolizer::~Symbolizer() = default;

uint32_t Symbolizer::add_module(const ModuleInfo& info) {
  auto key = std::make_tuple(info.path, info.load_bias, info.build_id);
  auto it = impl_->module_ids.find(key);
  if (it != impl_->module_ids.end()) return it->second;
  auto id = static_cast<uint32_t>(impl_->modules.size());
  Impl::Module m;
  m.info = info;
  m.display = basename_of(info.path);
  impl_->modules.push_back(std::move(m));
  impl_->module_ids.emplace(std::move(key), id);
  return id;
}

void Symbolizer::prefetch(uint32_t module) {
  if (module < impl_->modules.size()) impl_->queue_prefetch(impl_->modules[module].info);
}

const Symbolized& Symbolizer::symbolize(uint32_t module, uint64_t runtime_pc,
                                        bool is_return_address) {
  Impl& d = *impl_;
  d.settle();
  // Handles are < 2^31, so the kind fits in the low bit of the tag.
  if (module >= d.modules.size() || module >= (1u << 31)) {
    d.invalid.module_offset = runtime_pc;
    return d.invalid;
  }
  uint32_t tag = (module << 1) | (is_return_address ? 1u : 0u);
  uint32_t hit = d.cache.find(runtime_pc, tag);
  if (hit != AddressCache::kAbsent) return d.results[hit];

  Impl::Module& m = d.resolve(d.modules[module]);
  Symbolized& out = d.results.emplace_back();
  out.module = m.display;
  out.module_offset = runtime_pc - m.info.load_bias;
  switch (m.state) {
    case Impl::Module::State::ok: {
      uint64_t addr = out.module_offset;
      if (is_return_address && addr > 0) --addr;  // inside the call instruction
      out.status = m.file->lookup(addr, out.frames);
      if (out.frames.empty() || out.frames.back().function.empty()) ++m.unnamed;
      break;
    }
    case Impl::Module::State::mismatch:
      out.status = Symbolized::Status::build_id_mismatch;
      out.frames.emplace_back();
      break;
    default:
      out.status = Symbolized::Status::module_missing;
      out.frames.emplace_back();
      break;
  }
  if (out.frames.empty()) out.frames.emplace_back();
  d.cache.insert(runtime_pc, tag, static_cast<uint32_t>(d.results.size() - 1));
  return out;
}

std::string Symbolizer::describe(const Symbolized& s) const {
  std::string module_offset = hex_offset(s.module, s.module_offset);
  if (s.frames.empty()) return module_offset;
  std::string out;
  for (size_t i = 0; i < s.frames.size(); ++i) {
    const SourceFrame& f = s.frames[i];
    if (i > 0) out += " inlined into ";
    out += f.function.empty() ? module_offset : f.function;
    if (!f.file.empty()) {
      out += " (";
      out += basename_of(f.file);
      if (f.line != 0) {
        out += ':';
        out += std::to_string(f.line);
      }
      out += ')';
    } else if (!f.function.empty() && i + 1 == s.frames.size()) {
      out += " (";
      out += module_offset;
      out += ')';
    }
  }
  return out;
}

std::vector<std::string> Symbolizer::warnings() const {
  impl_->settle();
  std::vector<std::string> out = impl_->warnings;
  // Modules whose frames print as module+offset: said once each, with how to get their symbols
  // (most affected first; a stripped program's own frames, a distribution library without its
  // debug package).
  std::vector<const Impl::Module*> unnamed;
  for (const auto& m : impl_->modules)
    if (m.state == Impl::Module::State::ok && m.unnamed) unnamed.push_back(&m);
  std::stable_sort(unnamed.begin(), unnamed.end(), [](auto* a, auto* b) { return a->unnamed > b->unnamed; });
  std::string list;
  size_t shown = 0;
  for (const auto* m : unnamed) {
    if (++shown > 5) break;
    list += (list.empty() ? "" : ", ") + m->display + " (" + std::to_string(m->unnamed) + " address" +
            (m->unnamed == 1 ? "" : "es") + ")";
  }
  if (unnamed.size() > 5) list += " and " + std::to_string(unnamed.size() - 5) + " more";
  if (!list.empty())
    out.push_back("frames without a function name, shown as module+offset: " + list +
                  ". These modules are stripped and no debug file was found for them: install their debug "
                  "symbols (Debian: the package's -dbgsym, from the debian-debug archive, or its -dbg package), or "
                  "pass --debug-dir DIR with DIR/.build-id/xx/yyyy.debug files (debuginfod-find debuginfo FILE fetches one)");
  return out;
}

SymbolizerOptions command_options(const std::vector<std::string>& debug_dirs) {
  SymbolizerOptions o;
  if (!debug_dirs.empty()) o.debug_dirs = debug_dirs;
  o.cache_dir = debug_cache::default_dir();
  return o;
}

}  // namespace heapsnap::symbolize
