// diff: heap growth by allocation site between two snapshots, of one capture or of two runs.
#include <iostream>
#include <map>
#include <unordered_map>

#include "cli/commands.h"
#include "cli/retainers_context.h"

namespace heapsnap::cli::retainers {


// --- diff: growth by site between two snapshots --------------------------------------------------

bool split_spec(const std::string &spec, std::string *file, int *index) {
  auto colon = spec.rfind(':');
  if (colon == std::string::npos) {
    *file = spec;
    *index = -1;
    return true;
  }
  *file = spec.substr(0, colon);
  char *end = nullptr;
  long v = strtol(spec.c_str() + colon + 1, &end, 10);
  if (*end || v < 0) return false;
  *index = int(v);
  return true;
}

// diff --by type: every block of each side by its type (replay/block_types.h; the vtable's
// class or what the allocation frames name), matched by the type's name.
int diff_by_type(const DiffArgs &d, const HeapSnapshot &x, const replay::ReplayResult &cx, replay::StackSymbolizer &sx,
                 const HeapSnapshot &y, const replay::ReplayResult &cy, replay::StackSymbolizer &sy) {
  struct Row {
    uint64_t count_a = 0, count_b = 0, bytes_a = 0, bytes_b = 0;
    int64_t count() const { return int64_t(count_b) - int64_t(count_a); }
    int64_t bytes() const { return int64_t(bytes_b) - int64_t(bytes_a); }
  };
  std::map<std::string, Row> rows;
  auto add = [&](const HeapSnapshot &h, const replay::ReplayResult &c, replay::StackSymbolizer &sym, bool after) {
    replay::BlockTypes t = replay::block_types(h, c.stacks, sym);
    for (uint32_t b = 0; b < h.blocks(); ++b) {
      const std::string &name = t.type_of(b);
      Row &r = rows[name.empty() ? "(no type known)" : name];
      (after ? r.count_b : r.count_a) += 1;
      (after ? r.bytes_b : r.bytes_a) += h.size[b];
    }
  };
  add(x, cx, sx, false);
  add(y, cy, sy, true);
  std::vector<std::pair<std::string, Row>> v;
  int64_t dbytes = 0, dcount = 0;
  for (auto &[name, r] : rows) {
    dbytes += r.bytes();
    dcount += r.count();
    if (r.count() || r.bytes()) v.push_back({name, r});
  }
  std::sort(v.begin(), v.end(), [](auto &p, auto &q) {
    return p.second.bytes() != q.second.bytes() ? p.second.bytes() > q.second.bytes() : p.first < q.first;
  });
  if (v.size() > d.limit) v.resize(d.limit);
  if (d.json) {
    json arr = json::array();
    for (auto &[name, r] : v)
      arr.push_back({{"type", name}, {"count_change", r.count()}, {"bytes_change", r.bytes()}, {"count_before", r.count_a},
                     {"count_after", r.count_b}, {"bytes_before", r.bytes_a}, {"bytes_after", r.bytes_b}});
    json out{{"before", d.a}, {"after", d.b}, {"by", "type"}, {"bytes_change", dbytes}, {"count_change", dcount}, {"types", arr}};
    std::cout << out.dump(2) << "\n";
    return kExitOk;
  }
  auto sz = [&](int64_t b) { return std::string(b >= 0 ? "+" : "") + (d.raw_bytes ? std::to_string(b) : human_bytes(double(b))); };
  auto change = [&](int64_t b, int width) {
    return out_style(b > 0 ? Style::kGrowth : b < 0 ? Style::kShrink : Style::kSize, sz(b), width);
  };
  printf("%s: %s -> %s: %s in %+lld blocks\n\n", out_style(Style::kHeading, "heap growth by type").c_str(), d.a.c_str(),
         d.b.c_str(), change(dbytes, 0).c_str(), (long long)dcount);
  print_styled(Style::kHeader, "%14s %10s  %s\n", "bytes", "blocks", "type");
  for (auto &[name, r] : v) printf("%s %+10lld  %s\n", change(r.bytes(), 14).c_str(), (long long)r.count(), name.c_str());
  return kExitOk;
}

int run_diff(const DiffArgs &d) {
  SnapshotArgs sa, sb;
  if (!split_spec(d.a, &sa.file, &sa.snapshot) || !split_spec(d.b, &sb.file, &sb.snapshot)) {
    print_error("diff: expected FILE[:INDEX] FILE[:INDEX]");
    return kExitUsage;
  }
  symbolize::FrameFilter filter;
  if (!make_frame_filter(d.sites, &filter)) return kExitUsage;
  HeapSnapshot x, y;
  if (!load_chosen_snapshot(sa, &x) || !load_chosen_snapshot(sb, &y)) return kExitInput;
  // Sites are matched by module and offset, not by address: two runs of a program load it at
  // different addresses (ASLR), and each side is symbolized with its own capture's modules and
  // stacks. A block's site is the first frame of the program in its stack or its call site's
  // inline chain (StackSymbolizer::site_address): the offset is the address holding that frame.
  struct Side {
    replay::ReplayResult capture;
    std::unique_ptr<replay::StackSymbolizer> sym;
  };
  auto context = [&](const std::string &file) {
    auto side = std::make_unique<Side>();
    side->capture = load_capture_context(file);
    side->sym = std::make_unique<replay::StackSymbolizer>(side->capture.modules, symbolize::command_options(d.debug_dirs));
    side->sym->set_frame_filter(filter);
    return side;
  };
  std::unique_ptr<Side> side_b = context(sb.file);
  std::unique_ptr<Side> side_a = sa.file == sb.file ? nullptr : context(sa.file);
  Side &before_side = side_a ? *side_a : *side_b;
  replay::StackSymbolizer &before = *before_side.sym;
  replay::StackSymbolizer *sym_b = side_b->sym.get();
  if (d.by == "type") return diff_by_type(d, x, before_side.capture, *before_side.sym, y, side_b->capture, *side_b->sym);
  struct Row {
    int64_t count = 0, bytes = 0;
    uint64_t count_a = 0, count_b = 0, bytes_a = 0, bytes_b = 0;
    uint64_t site = 0;          // an address of it: the after side's when it has one
    uint64_t call_site = 0;     // a call site of its blocks, on the same side
    bool site_after = false;
  };
  std::unordered_map<std::string, Row> rows;
  std::unordered_map<uint64_t, Row *> by_address;  // per side: each distinct address keyed once
  auto row_of = [&](replay::StackSymbolizer &sym, uint64_t site, uint64_t call_site, bool after) -> Row & {
    auto [it, fresh] = by_address.try_emplace(site, nullptr);
    if (fresh) {
      Row &r = rows[sym.stable_site(site)];
      if (!r.site_after) {
        r.site = site;
        r.call_site = call_site;
        r.site_after = after;
      }
      it->second = &r;
    }
    return *it->second;
  };
  // Stacks only where a block has one in either run alike: within one capture, or between two
  // that recorded every allocation's stack. Between two sampled runs a block's stack depends on
  // the draw, and the same code would key two ways; there the call site's inline chain alone
  // names the site.
  bool use_stacks = sa.file == sb.file ||
                    (before_side.capture.sample_bytes() == 1 && side_b->capture.sample_bytes() == 1);
  auto site_of = [use_stacks](Side &side, const HeapSnapshot &h, uint32_t i) {
    uint32_t st = use_stacks && i < h.stack.size() ? h.stack[i] : 0;
    return side.sym->site_address(side.capture.stacks, side.capture.stacks.valid(st) ? st : 0, h.call_site[i]);
  };
  for (uint32_t i = 0; i < x.blocks(); ++i) {
    Row &r = row_of(before, site_of(before_side, x, i), x.call_site[i], false);
    ++r.count_a;
    r.bytes_a += x.size[i];
  }
  by_address.clear();
  for (uint32_t i = 0; i < y.blocks(); ++i) {
    Row &r = row_of(*sym_b, site_of(*side_b, y, i), y.call_site[i], true);
    ++r.count_b;
    r.bytes_b += y.size[i];
  }
  std::vector<std::pair<std::string, Row>> v;
  for (auto &[key, r] : rows) {
    r.count = int64_t(r.count_b) - int64_t(r.count_a);
    r.bytes = int64_t(r.bytes_b) - int64_t(r.bytes_a);
    if (r.count || r.bytes) v.push_back({key, r});
  }
  std::sort(v.begin(), v.end(), [](auto &p, auto &q) {
    return p.second.bytes != q.second.bytes ? p.second.bytes > q.second.bytes : p.first < q.first;
  });
  if (v.size() > d.limit) v.resize(d.limit);
  auto label = [&](const Row &r) {
    replay::StackSymbolizer &sym = r.site_after ? *sym_b : before;
    return sym.site_label(sym.site_frame(r.site));
  };
  auto frame = [&](const Row &r) {
    replay::StackSymbolizer &sym = r.site_after ? *sym_b : before;
    const replay::DisplayFrame &f = sym.site_frame(r.site);
    return std::make_pair(sym.site_function(f), &f);
  };
  auto innermost = [&](const Row &r) { return (r.site_after ? *sym_b : before).frames_of(r.call_site)[0].label(); };
  int64_t dbytes = 0, dcount = 0;
  for (auto &[key, r] : rows) {
    dbytes += r.bytes;
    dcount += r.count;
  }
  if (d.json) {
    json arr = json::array();
    for (auto &[key, r] : v)
      arr.push_back({{"site", label(r)}, {"function", frame(r).first}, {"file", frame(r).second->file},
                     {"line", frame(r).second->line}, {"site_key", key}, {"call_site", hex(r.call_site)},
                     {"site_address", hex(r.site)}, {"site_innermost", innermost(r)}, {"count_change", r.count},
                     {"bytes_change", r.bytes},
                     {"count_before", r.count_a}, {"count_after", r.count_b}, {"bytes_before", r.bytes_a},
                     {"bytes_after", r.bytes_b}});
    json out{{"before", d.a}, {"after", d.b}, {"bytes_change", dbytes}, {"count_change", dcount}, {"sites", arr}};
    std::cout << out.dump(2) << "\n";
    return kExitOk;
  }
  auto sz = [&](int64_t b) { return std::string(b >= 0 ? "+" : "") + (d.raw_bytes ? std::to_string(b) : human_bytes(double(b))); };
  // Growth is what a diff is read for: it stands out; what shrank is green.
  auto change = [&](int64_t b, int width) {
    return out_style(b > 0 ? Style::kGrowth : b < 0 ? Style::kShrink : Style::kSize, sz(b), width);
  };
  printf("%s: %s -> %s: %s in %+lld blocks\n\n", out_style(Style::kHeading, "heap growth by allocation site").c_str(),
         d.a.c_str(), d.b.c_str(), change(dbytes, 0).c_str(), (long long)dcount);
  print_styled(Style::kHeader, "%14s %10s  %s\n", "bytes", "blocks", "site");
  for (auto &[key, r] : v) printf("%s %+10lld  %s\n", change(r.bytes, 14).c_str(), (long long)r.count, label(r).c_str());
  return kExitOk;
}

}  // namespace heapsnap::cli::retainers
