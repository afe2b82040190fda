#include "export/pprof.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <unordered_map>
#include <utility>
#include <vector>

#include "export/stack_match.h"
#include "replay/frame_types.h"

namespace heapsnap::exporter {
namespace {

namespace pp = perftools::profiles;

std::string hex(const std::string &bytes) {
  static const char digits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

int64_t rounded(double v) { return v > 0 ? std::llround(v) : 0; }

class Builder {
 public:
  Builder(const replay::ReplayResult &r, replay::StackSymbolizer &sym) : r_(r), sym_(sym) {
    str("");  // string_table[0] must be ""
  }

  int64_t str(const std::string &s) {
    auto [it, added] = strings_.try_emplace(s, int64_t(strings_.size()));
    if (added) p_.add_string_table(s);
    return it->second;
  }

  // One Mapping per executable segment of each module, in capture order: the executable is the
  // first module the shim reports, and pprof takes mapping[0] as the main binary.
  void add_mappings() {
    for (const auto &m : r_.modules) {
      for (const auto &seg : m.exec) {
        pp::Mapping *pm = p_.add_mapping();
        pm->set_id(uint64_t(p_.mapping_size()));
        pm->set_memory_start(seg.start);
        pm->set_memory_limit(seg.end);
        // The capture keeps p_vaddr, not p_offset, per range (ModuleRecord::Range); the two are
        // equal for the text segments GNU ld lays out. pprof only uses it to symbolize itself,
        // which it skips for mappings that say they have functions.
        pm->set_file_offset(seg.start - m.load_bias);
        pm->set_filename(str(m.path));
        pm->set_build_id(str(hex(m.build_id)));
        ranges_.push_back({seg.start, seg.end, pm->id()});
      }
    }
    // Same choice as StackSymbolizer: where ranges overlap, the later module wins.
    std::stable_sort(ranges_.begin(), ranges_.end(),
                     [](const Range &a, const Range &b) { return a.start < b.start; });
  }

  uint64_t location(uint64_t address) {
    auto it = locations_.find(address);
    if (it != locations_.end()) return it->second;
    pp::Location *loc = p_.add_location();
    loc->set_id(uint64_t(p_.location_size()));
    loc->set_address(address);
    uint64_t mapping = address ? mapping_of(address) : 0;
    loc->set_mapping_id(mapping);
    pp::Mapping *pm = mapping ? p_.mutable_mapping(int(mapping - 1)) : nullptr;
    for (const auto &f : sym_.frames_of(address)) {  // innermost first, as Location.line wants
      pp::Line *line = loc->add_line();
      line->set_function_id(function(f));
      line->set_line(f.line);
      if (pm) {
        if (!f.function.empty()) pm->set_has_functions(true);
        if (!f.file.empty()) pm->set_has_filenames(true);
        if (f.line) pm->set_has_line_numbers(true);
        if (f.inlined) pm->set_has_inline_frames(true);
      }
    }
    locations_.emplace(address, loc->id());
    return loc->id();
  }

  pp::Profile &profile() { return p_; }

 private:
  struct Range {
    uint64_t start, end, id;
  };

  uint64_t mapping_of(uint64_t address) const {
    auto ub = std::upper_bound(ranges_.begin(), ranges_.end(), address,
                               [](uint64_t a, const Range &r) { return a < r.start; });
    for (auto r = ub; r != ranges_.begin();) {
      --r;
      if (address < r->end) return r->id;
    }
    return 0;
  }

  uint64_t function(const replay::DisplayFrame &f) {
    // label(false) is the function, or "module+0xoffset" / "[truncated]" without one.
    int64_t name = str(f.label(false));
    int64_t file = str(f.file);
    auto [it, added] = functions_.try_emplace({name, file}, 0);
    if (added) {
      pp::Function *fn = p_.add_function();
      fn->set_id(uint64_t(p_.function_size()));
      fn->set_name(name);
      // The symbolizer keeps only the demangled name. Equal names let pprof shorten C++ names as
      // it does its own (no parameters or template arguments; "(anonymous namespace)::f" shows
      // as "::f").
      fn->set_system_name(name);
      fn->set_filename(file);
      it->second = fn->id();
    }
    return it->second;
  }

  const replay::ReplayResult &r_;
  replay::StackSymbolizer &sym_;
  pp::Profile p_;
  std::unordered_map<std::string, int64_t> strings_;
  std::map<std::pair<int64_t, int64_t>, uint64_t> functions_;
  std::unordered_map<uint64_t, uint64_t> locations_;
  std::vector<Range> ranges_;
};

}  // namespace

pp::Profile build_pprof(const replay::ReplayResult &r, replay::StackSymbolizer &sym,
                        const PprofOptions &opts) {
  Builder b(r, sym);
  pp::Profile &p = b.profile();
  for (auto [type, unit] : {std::pair{"alloc_objects", "count"}, {"alloc_space", "bytes"},
                            {"inuse_objects", "count"}, {"inuse_space", "bytes"}}) {
    pp::ValueType *vt = p.add_sample_type();
    vt->set_type(b.str(type));
    vt->set_unit(b.str(unit));
  }
  p.set_default_sample_type(b.str("alloc_space"));
  p.mutable_period_type()->set_type(b.str("space"));
  p.mutable_period_type()->set_unit(b.str("bytes"));
  p.set_period(int64_t(r.sample_bytes()));
  p.set_time_nanos(int64_t(r.process.start_unix_ns()));
  p.set_duration_nanos(int64_t(r.end_time_ns));
  p.add_comment(b.str("heapsnap capture " + opts.capture_path + " of " + r.process.executable()));
  p.add_comment(b.str(r.sample_bytes() > 1
                          ? "values are estimates from sampled allocations (mean interval " +
                                std::to_string(r.sample_bytes()) + " bytes)"
                          : "every allocation recorded"));
  p.add_comment(b.str("inuse = not freed when the capture ended"));
  if (r.truncated) p.add_comment(b.str("the capture is truncated: figures cover what was read"));
  b.add_mappings();

  const int64_t type_key = b.str("type");
  std::vector<uint64_t> addrs;
  for (uint32_t id = 1; id < r.by_stack.size(); ++id) {
    const replay::StackFigures &f = r.by_stack[id];
    int64_t v[4] = {rounded(f.alloc_calls), rounded(f.alloc_bytes), rounded(f.live_calls),
                    rounded(f.live_bytes)};
    if (!v[0] && !v[1] && !v[2] && !v[3]) continue;
    const std::vector<replay::DisplayFrame> frames = sym.stack(r.stacks, id);
    if (!opts.match.empty() && !stack_matches(frames, opts.match)) continue;
    r.stacks.frames(id, &addrs);  // leaf first, as Sample.location_id wants
    if (addrs.empty()) continue;
    pp::Sample *s = p.add_sample();
    for (uint64_t a : addrs) s->add_location_id(b.location(a));
    for (int64_t x : v) s->add_value(x);
    // The type the allocation's frames name (replay/frame_types.h), as a label: `go tool pprof
    // -tagroot type` splits the profile by type, `-tagfocus type=...` keeps one.
    const std::string type = replay::type_from_frames(frames);
    if (!type.empty()) {
      pp::Label *l = s->add_label();
      l->set_key(type_key);
      l->set_str(b.str(type));
    }
  }
  return std::move(p);
}

}  // namespace heapsnap::exporter
