// Replay queries: top-allocators, leaks, peak, timeline. Each prints a table for people, or JSON
// with --json. Sampled figures are estimates (scaled by sampling weight) and say so; the exact
// totals from the stream stand beside them.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>

#include "cli/commands.h"
#include "cli/format.h"
#include "cli/replay_load.h"
#include "cli/retainers_context.h"
#include "cli/site_options.h"
#include "cli/term_style.h"
#include "replay/estimate_fit.h"
#include "replay/replay.h"
#include "replay/frame_types.h"
#include "replay/stack_symbolizer.h"

namespace heapsnap::cli {
// Named as well as anonymous: the sanitizer builds' unity units put several cmd_*.cc in one
// translation unit, and each has its own Options and run().
namespace cmd_replay {
namespace {

using json = nlohmann::ordered_json;

struct Common {
  std::string file;
  std::string by = "stack";  // leaks, peak: rows by stack, or by the type the frames name
  size_t limit = 20;
  bool json = false;
  bool raw_bytes = false;
  std::string match;
  std::vector<std::string> debug_dirs;
  size_t stack_frames = 8;
  SiteOptions sites;
};

// stacks: the command lists stacks (rows, --match, --frames apply); timeline does not.
void add_common(Cmd cmd, Common &c, bool stacks = true) {
  cmd.option("file", c.file, "capture file (.hsnap)").required();
  if (stacks) cmd.option("-n,--limit", c.limit, "rows to show (default 20)");
  cmd.flag("--json", c.json, "machine-readable output");
  cmd.flag("--bytes", c.raw_bytes, "print sizes as plain byte counts");
  if (!stacks) return;
  cmd.option("--match", c.match, "only stacks with a frame whose function, file or module contains this text");
  cmd.option("--debug-dir", c.debug_dirs, "directory with separate debug files (default /usr/lib/debug); repeatable");
  cmd.option("--frames", c.stack_frames, "frames to show per stack (default 8)");
  add_site_options(cmd, c.sites);
}

// The replay with the site rules of the options; false (and why, on stderr) with the exit status
// in *rc.
bool load(const Common &c, LoadedReplay *L, int *rc) {
  symbolize::FrameFilter filter;
  if (!make_frame_filter(c.sites, &filter)) {
    *rc = kExitUsage;
    return false;
  }
  if (!load_replay(c.file, c.debug_dirs, L)) {
    *rc = kExitInput;
    return false;
  }
  L->sym->set_frame_filter(std::move(filter));
  return true;
}

// A stack's site, for --json: its frame of the program (see StackSymbolizer::site_address), and
// the innermost frame of its allocation call as it is (site_innermost).
void add_site_json(json &j, replay::StackSymbolizer &sym, const capture::StackTree &tree, uint32_t stack) {
  const replay::DisplayFrame &f = sym.site_frame(sym.site_address(tree, stack));
  j["site"] = sym.site_label(f);
  j["function"] = sym.site_function(f);
  j["file"] = f.file;
  j["line"] = f.line;
  j["module"] = f.module;
  j["site_innermost"] = tree.valid(stack) ? sym.frames_of(tree.address(stack))[0].label() : std::string();
  if (tree.valid(stack)) {
    std::string type = replay::type_from_frames(sym.stack(tree, stack));
    if (!type.empty()) j["type"] = type;
  }
}

std::string size_str(const Common &c, double b) {
  if (c.raw_bytes) return std::to_string(int64_t(b + 0.5));
  return human_bytes(b);
}

std::string count_str(double n) { return human_count(uint64_t(n + 0.5)); }

// An estimated count: a fraction where rounding would hide it (0.4 of a block, when an exact total
// of 5 blocks is split over 12 stacks).
std::string est_count_str(double n) {
  if (n > 0 && n < 9.95 && std::fabs(n - std::round(n)) > 0.05) {
    char b[16];
    snprintf(b, sizeof(b), "%.1f", n);
    return b;
  }
  return count_str(n);
}

// The peak as the shim measured it, in the words every command uses (cli/format.h).
PeakFigure peak_of(const replay::ReplayResult &r) { return peak_figure(r.totals, r.highest_heap); }

// The sampled per-stack figures fitted to the exact totals beside them (replay/estimate_fit.h).
replay::EstimateFits fits_of(const replay::ReplayResult &r) {
  PeakFigure p = peak_of(r);
  return replay::fit_estimates(r, double(p.low), double(p.high));
}

bool stack_matches(const std::vector<replay::DisplayFrame> &frames, const std::string &m) {
  if (m.empty()) return true;
  for (const auto &f : frames)
    if (f.function.find(m) != std::string::npos || f.file.find(m) != std::string::npos ||
        f.module.find(m) != std::string::npos)
      return true;
  return false;
}

std::string hex_addr(uint64_t v) {
  char a[32];
  snprintf(a, sizeof(a), "0x%llx", static_cast<unsigned long long>(v));
  return a;
}

json frame_json(const replay::DisplayFrame &f) {
  json j;
  j["function"] = f.function;
  j["file"] = f.file;
  j["line"] = f.line;
  j["module"] = f.module;
  char a[32];
  snprintf(a, sizeof(a), "0x%llx", static_cast<unsigned long long>(f.address));
  j["address"] = a;
  j["inlined"] = f.inlined;
  j["library"] = f.library;
  return j;
}

json header_json(const Common &c, const replay::ReplayResult &r) {
  json j;
  j["file"] = c.file;
  j["estimated"] = r.sample_bytes() > 1;
  j["sample_bytes"] = r.sample_bytes();
  j["truncated"] = r.truncated;
  j["problems"] = problems_json(r.problems);
  json ex;
  ex["alloc_calls"] = r.totals.alloc_calls();
  ex["bytes_allocated"] = r.totals.bytes_allocated();
  add_peak_json(ex, peak_of(r));
  ex["leaked_blocks"] = r.totals.live_blocks();
  ex["leaked_bytes"] = r.totals.heap_bytes();
  j["exact"] = ex;
  return j;
}

void print_notes(const replay::ReplayResult &r, replay::StackSymbolizer &sym) {
  std::string note = out_style(Style::kWarning, "note:");
  if (r.truncated)
    printf("\n%s the capture is truncated (no end record or damaged frames): figures cover what was read\n", note.c_str());
  for (const auto &p : r.problems) printf("%s offset 0x%llx: %s\n", note.c_str(), (unsigned long long)p.offset, p.what.c_str());
  for (const auto &w : sym.warnings()) printf("%s %s\n", note.c_str(), w.c_str());
}

// A stack, innermost frame first, readable (as it was with --all-frames). Cut to --frames, it
// shows the program's frames first: each run of the library's frames is one line ("... 6 library
// frames"), and only the program's frames count towards --frames.
void print_stack(const Common &c, replay::StackSymbolizer &sym, const std::vector<replay::DisplayFrame> &frames,
                 const char *indent) {
  auto line = [&](const replay::DisplayFrame &f) {
    printf("%s%s %s\n", indent, f.inlined ? out_style(Style::kEstimate, "(inlined)").c_str() : "  at",
           sym.site_label(f).c_str());
  };
  bool program = false;
  for (const auto &f : frames) program = program || !f.library;
  if (frames.size() <= c.stack_frames || sym.all_frames() || !program) {
    size_t shown = 0;
    for (const auto &f : frames) {
      if (shown++ == c.stack_frames) {
        printf("%s  ... %zu more\n", indent, frames.size() - c.stack_frames);
        break;
      }
      line(f);
    }
    return;
  }
  size_t shown = 0, i = 0;
  while (i < frames.size()) {
    if (frames[i].library) {
      size_t j = i;
      while (j < frames.size() && frames[j].library) ++j;
      printf("%s%s\n", indent,
             out_style(Style::kEstimate, "  ... " + std::to_string(j - i) + " library frame" + (j - i == 1 ? "" : "s")).c_str());
      i = j;
      continue;
    }
    if (shown == c.stack_frames) break;
    line(frames[i++]);
    ++shown;
  }
  if (i < frames.size()) printf("%s  ... %zu more\n", indent, frames.size() - i);
}

// --- top-allocators ---------------------------------------------------------------------------

struct TopOpts : Common {
  std::string by = "bytes";
  size_t stacks_per_site = 2;
};

struct SiteRow {
  std::string key;    // what groups stacks into the site: its frame's label as symbolized
  std::string label;  // as shown (StackSymbolizer::site_label)
  replay::DisplayFrame frame;
  replay::StackFigures sum;  // as shown: fitted to the exact totals (EstimateFits::apply)
  replay::StackFigures raw;  // the sampled estimates before fitting
  std::vector<std::pair<uint32_t, replay::StackFigures>> stacks;  // fitted
};

// A figure's sampled estimate before it was fitted to the exact total (JSON: raw_estimate).
json raw_figures_json(const replay::StackFigures &f) {
  return {{"alloc_calls", f.alloc_calls}, {"alloc_bytes", f.alloc_bytes}, {"peak_bytes", f.peak_bytes},
          {"leaked_blocks", f.live_calls}, {"leaked_bytes", f.live_bytes}};
}

// How the figures relate to the exact totals (JSON: sampled_estimate).
json fits_json(const replay::EstimateFits &e) {
  auto fit = [](const replay::Fit &f) { return json{{"raw", f.raw}, {"scaled", f.fitted}, {"factor", f.factor}}; };
  json j;
  j["scaled_to_exact"] = e.fitted;
  j["alloc_calls"] = fit(e.alloc_calls);
  j["alloc_bytes"] = fit(e.alloc_bytes);
  j["peak_bytes"] = fit(e.peak_bytes);
  j["leaked_blocks"] = fit(e.live_blocks);
  j["leaked_bytes"] = fit(e.live_bytes);
  return j;
}

double metric(const replay::StackFigures &f, const std::string &by) {
  if (by == "calls") return f.alloc_calls;
  if (by == "peak") return f.peak_bytes;
  if (by == "leaked") return f.live_bytes;
  return f.alloc_bytes;
}

int run_top(const TopOpts &o) {
  LoadedReplay L;
  int rc = kExitOk;
  if (!load(o, &L, &rc)) return rc;
  auto &r = L.r;
  replay::EstimateFits fits = fits_of(r);
  const bool by_type = o.by == "type";  // rows are types, ranked by bytes allocated
  const std::string by = by_type ? "bytes" : o.by;
  uint64_t samples = 0;  // sampled allocation events the split by site is estimated from
  std::map<std::string, SiteRow> sites;
  for (uint32_t id = 1; id < r.by_stack.size(); ++id) {
    const auto &f = r.by_stack[id];
    if (f.unused()) continue;
    // The site is the stack's first frame of the program (StackSymbolizer::site_address): only
    // the addresses up to it need symbolizing (whole stacks are symbolized for the rows shown).
    if (!r.stacks.valid(id)) continue;
    if (!o.match.empty() && !stack_matches(L.sym->stack(r.stacks, id), o.match)) continue;
    const replay::DisplayFrame &site = L.sym->site_frame(L.sym->site_address(r.stacks, id));
    std::string key = site.label();
    std::string label = L.sym->site_label(site);
    if (by_type) {  // the type the allocation's frames name (replay/frame_types.h)
      label = replay::type_from_frames(L.sym->stack(r.stacks, id));
      if (label.empty()) label = "(no type in the frames)";
      key = label;
    }
    if (f.pool) {
      // Objects of a client-API pool are labelled with the pool's name.
      const replay::PoolInfo *pi = r.pool(f.pool);
      std::string pool = "[pool " + (pi ? pi->name : std::to_string(f.pool)) + "] ";
      key = pool + key;
      label = pool + label;
    }
    SiteRow &row = sites[key];
    if (row.key.empty()) {
      row.key = key;
      row.label = label;
      row.frame = site;
    }
    replay::StackFigures shown = fits.apply(f);
    row.sum += shown;
    row.raw += f;
    row.stacks.push_back({id, shown});
    samples += f.samples;
  }
  std::vector<SiteRow *> rows;
  for (auto &[k, v] : sites) rows.push_back(&v);
  std::sort(rows.begin(), rows.end(), [&](SiteRow *a, SiteRow *b) {
    return metric(a->sum, by) > metric(b->sum, by);
  });
  if (rows.size() > o.limit) rows.resize(o.limit);
  for (SiteRow *row : rows)
    std::sort(row->stacks.begin(), row->stacks.end(), [&](auto &a, auto &b) {
      return metric(a.second, by) > metric(b.second, by);
    });

  if (o.json) {
    json j = header_json(o, r);
    j["by"] = o.by;
    // Site figures are fitted to the exact totals (scaled so that all sites add up to them); each
    // site's raw_estimate keeps the sampled estimate before that.
    j["sampled_estimate"] = fits_json(fits);
    json arr = json::array();
    for (SiteRow *row : rows) {
      json s;
      if (by_type) s["type"] = row->label;
      s["site"] = by_type ? L.sym->site_label(row->frame) : row->label;
      s["function"] = L.sym->site_function(row->frame);
      s["file"] = row->frame.file;
      s["line"] = row->frame.line;
      s["module"] = row->frame.module;
      // The innermost frame of the heaviest stack's allocation call, as symbolized.
      s["site_innermost"] = row->stacks.empty() ? std::string()
                                                : L.sym->frames_of(r.stacks.address(row->stacks[0].first))[0].label();
      s["alloc_calls"] = row->sum.alloc_calls;
      s["alloc_bytes"] = row->sum.alloc_bytes;
      s["peak_bytes"] = row->sum.peak_bytes;
      s["leaked_blocks"] = row->sum.live_calls;
      s["leaked_bytes"] = row->sum.live_bytes;
      s["samples"] = row->sum.samples;
      s["reallocs"] = row->sum.reallocs;
      s["realloc_moves"] = row->sum.realloc_moves;
      s["realloc_in_place"] = row->sum.reallocs - row->sum.realloc_moves;
      if (fits.fitted) s["raw_estimate"] = raw_figures_json(row->raw);
      json st = json::array();
      for (size_t i = 0; i < row->stacks.size() && i < o.stacks_per_site; ++i) {
        const auto &f = row->stacks[i].second;
        json sj;
        sj["alloc_calls"] = f.alloc_calls;
        sj["alloc_bytes"] = f.alloc_bytes;
        sj["peak_bytes"] = f.peak_bytes;
        sj["leaked_bytes"] = f.live_bytes;
        json fr = json::array();
        for (const auto &d : L.sym->stack(r.stacks, row->stacks[i].first)) fr.push_back(frame_json(d));
        sj["frames"] = fr;
        st.push_back(sj);
      }
      s["stacks"] = st;
      arr.push_back(s);
    }
    j["sites"] = arr;
    std::cout << j.dump(2) << "\n";
    return kExitOk;
  }
  bool est = r.sample_bytes() > 1;
  printf("%s%s — %s\n", out_style(Style::kHeading, by_type ? "top allocated types by bytes" : "top allocation sites by " + o.by).c_str(),
         out_style(Style::kEstimate, est ? " (sampled estimates, ~)" : " (every allocation recorded)").c_str(),
         o.file.c_str());
  auto sz = [&](double b) { return size_str(o, b); };
  printf("exact: %s calls, %s allocated, peak %s, %s not freed\n",
         human_count(r.totals.alloc_calls()).c_str(), size_str(o, double(r.totals.bytes_allocated())).c_str(),
         peak_text(peak_of(r), sz).c_str(), size_str(o, double(r.totals.heap_bytes())).c_str());
  if (fits.fitted)
    print_styled(Style::kEstimate, "%s below split those totals as estimated from %s sampled allocations (~)\n", by_type ? "types" : "sites",
                 human_count(samples).c_str());
  printf("\n");
  print_styled(Style::kHeader, "%12s %12s %12s %12s  %s\n", "allocated", "calls", "at peak", "leaked", by_type ? "type" : "site");
  // The column the table is ranked by is the one in colour.
  auto cell = [&](const char *column, const std::string &text) {
    char padded[64];
    snprintf(padded, sizeof(padded), "%12s", text.c_str());
    return by == column ? out_style(Style::kSize, padded) : std::string(padded);
  };
  for (SiteRow *row : rows) {
    printf("%s %s %s %s  %s\n", cell("bytes", size_str(o, row->sum.alloc_bytes)).c_str(),
           cell("calls", count_str(row->sum.alloc_calls)).c_str(), cell("peak", size_str(o, row->sum.peak_bytes)).c_str(),
           cell("leaked", size_str(o, row->sum.live_bytes)).c_str(), row->label.c_str());
    if (row->sum.reallocs)
      printf("%12s %s reallocs: %s moved, %s in place\n", "", human_count(row->sum.reallocs).c_str(),
             human_count(row->sum.realloc_moves).c_str(),
             human_count(row->sum.reallocs - row->sum.realloc_moves).c_str());
    for (size_t i = 0; i < row->stacks.size() && i < o.stacks_per_site; ++i) {
      printf("%12s %s of it from:\n", "",
             out_style(Style::kSize, size_str(o, metric(row->stacks[i].second, by == "calls" ? "bytes" : by))).c_str());
      auto frames = L.sym->stack(r.stacks, row->stacks[i].first);
      print_stack(o, *L.sym, frames, "              ");
    }
  }
  print_notes(r, *L.sym);
  return kExitOk;
}

// --- leaks and peak: live blocks grouped by stack -------------------------------------------------

// The capture's at-peak snapshot (--snapshot-at-peak), if it has one.
const replay::SnapshotPoint *peak_snapshot(const replay::ReplayResult &r) {
  const replay::SnapshotPoint *found = nullptr;
  for (const auto &s : r.snapshots)
    if (s.trigger == wire::TRIGGER_PEAK) found = &s;
  return found;
}

// peak's retention part: the at-peak snapshot's top retainers, or how to get them.
int print_peak_retention(const Common &o, const replay::ReplayResult &r) {
  const replay::SnapshotPoint *s = peak_snapshot(r);
  if (!s) {
    printf("\n(what held the peak, object by object: record with --snapshot-at-peak)\n");
    return kExitOk;
  }
  printf("\n%s: snapshot %u, %s: %s\n", out_style(Style::kHeading, "what held the heap at its peak").c_str(), s->index,
         human_duration(double(s->time_ns) / 1e9).c_str(), s->label.c_str());
  printf("(dominators, path and diff take --snapshot %u too)\n\n", s->index);
  fflush(stdout);
  retainers::TopArgs a;
  a.file = o.file;
  a.snapshot = int(s->index);
  a.limit = 5;
  a.debug_dirs = o.debug_dirs;
  return retainers::run_top(a);
}

int run_live(const Common &o, bool at_peak) {
  LoadedReplay L;
  int rc = kExitOk;
  if (!load(o, &L, &rc)) return rc;
  auto &r = L.r;
  PeakFigure peak = peak_of(r);
  replay::EstimateFits fits = fits_of(r);
  // Sampled estimates beside an exact total are scaled to it (replay/estimate_fit.h): the rows
  // split the exact total by stack, as the sampled blocks suggest. Objects of client-API pools
  // are not in the exact totals: their rows stay as estimated, and add up apart.
  const replay::Fit &fit_blocks = at_peak ? fits.peak_blocks : fits.live_blocks;
  const replay::Fit &fit_bytes = at_peak ? fits.peak_bytes : fits.live_bytes;
  uint64_t sampled_blocks = at_peak ? fits.peak_samples : fits.live_samples;
  struct Row {
    uint32_t id;
    double blocks, bytes;          // as shown
    double raw_blocks, raw_bytes;  // the sampled estimate before fitting
    bool pool;
    std::string type;  // --by type: the row's type (its stacks merged)
    size_t stacks = 1;
    double heaviest = 0;  // --by type: the bytes of the stack `id` (the heaviest merged)
  };
  std::vector<Row> rows;
  double total_blocks = 0, total_bytes = 0, raw_blocks = 0, raw_bytes = 0;
  double pool_blocks = 0, pool_bytes = 0;
  for (uint32_t id = 1; id < r.by_stack.size(); ++id) {
    const auto &f = r.by_stack[id];
    double blocks = at_peak ? f.peak_calls : f.live_calls;
    double bytes = at_peak ? f.peak_bytes : f.live_bytes;
    if (blocks < 0.5) continue;  // (an estimate: a sampled block weighs 1 or more)
    if (!o.match.empty() && !stack_matches(L.sym->stack(r.stacks, id), o.match)) continue;
    bool pool = f.pool != 0;
    bool scale = fits.fitted && !pool;
    Row row{id, scale ? fit_blocks(blocks) : blocks, scale ? fit_bytes(bytes) : bytes, blocks, bytes, pool, {}, 1, 0};
    rows.push_back(row);
    if (pool && fits.fitted) {
      pool_blocks += row.blocks;
      pool_bytes += row.bytes;
    } else {
      total_blocks += row.blocks;
      total_bytes += row.bytes;
    }
    raw_blocks += blocks;
    raw_bytes += bytes;
  }
  if (o.by == "type") {
    // One row per type the frames name (replay/frame_types.h); its stack is its heaviest one's.
    std::map<std::string, Row> merged;
    for (const Row &row : rows) {
      std::string type = replay::type_from_frames(L.sym->stack(r.stacks, row.id));
      if (type.empty()) type = "(no type in the frames)";
      auto [it, fresh] = merged.try_emplace(type, row);
      Row &m = it->second;
      if (fresh) {
        m.type = type;
        m.heaviest = row.bytes;
        continue;
      }
      if (row.bytes > m.heaviest) {
        m.heaviest = row.bytes;
        m.id = row.id;
      }
      m.blocks += row.blocks;
      m.bytes += row.bytes;
      m.raw_blocks += row.raw_blocks;
      m.raw_bytes += row.raw_bytes;
      m.pool = m.pool && row.pool;
      ++m.stacks;
    }
    rows.clear();
    for (auto &[t, m] : merged) rows.push_back(m);
  }
  std::sort(rows.begin(), rows.end(), [](const Row &a, const Row &b) { return a.bytes > b.bytes; });
  size_t all = rows.size();
  if (rows.size() > o.limit) rows.resize(o.limit);
  if (o.json) {
    json j = header_json(o, r);
    if (at_peak) {
      j["peak_time_s"] = double(r.sampled_peak_time_ns) / 1e9;
      j["sampled_peak_bytes"] = r.sampled_peak_bytes;
    }
    // blocks, bytes: the rows' total as shown (fitted to the exact total when scaled_to_exact);
    // raw_blocks, raw_bytes: the sampled estimate before that; sampled_blocks: how many sampled
    // blocks it comes from.
    j["blocks"] = total_blocks + pool_blocks;
    j["bytes"] = total_bytes + pool_bytes;
    j["scaled_to_exact"] = fits.fitted && (fit_blocks.scaled || fit_bytes.scaled);
    j["raw_blocks"] = raw_blocks;
    j["raw_bytes"] = raw_bytes;
    j["sampled_blocks"] = sampled_blocks;
    if (fits.fitted) {
      j["pool_blocks"] = pool_blocks;
      j["pool_bytes"] = pool_bytes;
    }
    j["stacks_total"] = all;
    json arr = json::array();
    for (const Row &row : rows) {
      json e;
      e["blocks"] = row.blocks;
      e["bytes"] = row.bytes;
      e["raw_blocks"] = row.raw_blocks;
      e["raw_bytes"] = row.raw_bytes;
      add_site_json(e, *L.sym, r.stacks, row.id);
      if (!row.type.empty()) {
        e["type"] = row.type;
        e["stacks"] = row.stacks;
      }
      json fr = json::array();
      for (const auto &d : L.sym->stack(r.stacks, row.id)) fr.push_back(frame_json(d));
      e["frames"] = fr;
      arr.push_back(e);
    }
    j[at_peak ? "live_at_peak" : "leaks"] = arr;
    if (at_peak) {
      const replay::SnapshotPoint *s = peak_snapshot(r);
      j["peak_snapshot"] = s ? json{{"index", s->index}, {"time_s", double(s->time_ns) / 1e9}, {"label", s->label}} : json();
    }
    if (!at_peak) {
      // Client-API pool objects still live at the end, where the replay followed them to.
      json po = json::array();
      for (const auto &[pool, o] : r.live_pool_objects) {
        const replay::PoolInfo *pi = r.pool(pool);
        po.push_back({{"pool", pool}, {"pool_name", pi ? pi->name : ""}, {"id", o.id}, {"address", hex_addr(o.addr)},
                      {"size", o.size}});
      }
      j["pool_objects"] = po;
      json pl = json::array();
      for (const auto &p : r.pools)
        pl.push_back({{"id", p.id}, {"name", p.name}, {"moves", p.moves}, {"ranges", p.ranges},
                      {"moved_objects", p.moved_objects}, {"compacted_away", p.compacted_away}});
      j["pools"] = pl;
    }
    std::cout << j.dump(2) << "\n";
    return kExitOk;
  }
  bool est = r.sample_bytes() > 1;
  // How the rows relate to the exact total: a split of it estimated from N sampled blocks.
  std::string from = "estimated from " + human_count(sampled_blocks) + " sampled block" + (sampled_blocks == 1 ? "" : "s");
  std::string split = "split by stack " + from;
  if (at_peak) {
    printf("%s — %s\n", out_style(Style::kHeading, "heap at its peak").c_str(), o.file.c_str());
    std::string figure = (peak.exact ? "exact peak " : "peak ") + peak_text(peak, [&](double b) {
      return out_style(Style::kSize, size_str(o, b));
    });
    if (!est && peak.exact && uint64_t(r.sampled_peak_bytes + 0.5) == peak.bytes) {
      // Every allocation recorded, one thread, and the replay's peak is the shim's: the event's
      // time is the peak's (the shim's totals stamp it when a flush or a fold first sees it, up to
      // a flush later).
      printf("exact peak %s at %s; live blocks below: every block, at that moment\n\n",
             out_style(Style::kSize, size_str(o, double(peak.bytes))).c_str(),
             human_duration(double(r.sampled_peak_time_ns) / 1e9).c_str());
    } else if (!est) {
      // Several threads: their events are replayed batch by batch, so the replay's highest point
      // need not be one moment of the program.
      printf("%s; live blocks below: every block, at the replay's highest point (%s)\n\n", figure.c_str(),
             human_duration(double(r.sampled_peak_time_ns) / 1e9).c_str());
    } else {
      printf("%s; live blocks below are %s at %s\n", figure.c_str(),
             out_style(Style::kEstimate, "sampled estimates (~)").c_str(),
             human_duration(double(r.sampled_peak_time_ns) / 1e9).c_str());
      if (fits.fitted && fit_bytes.scaled)
        print_styled(Style::kEstimate, "scaled to the peak's %s, %s\n",
                     peak.exact ? "exact figure" : "bounds", split.c_str());
      printf("\n");
    }
  } else {
    printf("%s — %s\n", out_style(Style::kHeading, "not freed at exit").c_str(), o.file.c_str());
    printf("exact: %s %s, %s%s\n\n", human_count(r.totals.live_blocks()).c_str(), blocks_word(double(r.totals.live_blocks())),
           out_style(Style::kSize, size_str(o, double(r.totals.heap_bytes()))).c_str(),
           r.ended ? "" : out_style(Style::kWarning, " (as of the last flush: the capture has no end)").c_str());
    if (est && fits.fitted && fit_bytes.raw <= 0 && r.totals.live_blocks() > 0)
      print_styled(Style::kEstimate, "no sampled block among them: record with --sample-bytes 1 for their stacks\n\n");
    else if (est && fits.fitted)
      print_styled(Style::kEstimate, "stacks below split the exact total as %s (~); record with --sample-bytes 1 for every leak\n\n",
                   from.c_str());
    else if (est)
      print_styled(Style::kEstimate, "stacks below are sampled estimates (~); record with --sample-bytes 1 for every leak\n\n");
  }
  for (const Row &row : rows) {
    const replay::DisplayFrame &site = L.sym->site_frame(L.sym->site_address(r.stacks, row.id));
    const auto frames = L.sym->stack(r.stacks, row.id);
    const std::string type = replay::type_from_frames(frames);
    if (!row.type.empty())
      printf("%s in %s %s of %s%s, %s %s:\n", out_style(Style::kSize, size_str(o, row.bytes)).c_str(),
             (est ? est_count_str(row.blocks) : count_str(row.blocks)).c_str(), blocks_word(row.blocks), row.type.c_str(),
             row.pool && fits.fitted ? out_style(Style::kEstimate, " (client-API pool: not in the exact totals)").c_str() : "",
             row.stacks == 1 ? "from" : ("from " + human_count(row.stacks) + " stacks, the heaviest from").c_str(),
             L.sym->site_label(site).c_str());
    else
      printf("%s in %s %s%s from %s%s:\n", out_style(Style::kSize, size_str(o, row.bytes)).c_str(),
             (est ? est_count_str(row.blocks) : count_str(row.blocks)).c_str(), blocks_word(row.blocks),
             row.pool && fits.fitted ? out_style(Style::kEstimate, " (client-API pool: not in the exact totals)").c_str() : "",
             L.sym->site_label(site).c_str(), type.empty() ? "" : (" [" + type + "]").c_str());
    print_stack(o, *L.sym, frames, "  ");
  }
  if (all > rows.size()) print_styled(Style::kEstimate, "... %zu more stacks (-n to show more)\n", all - rows.size());
  if (all == 0) printf("(no %s)\n", at_peak ? "sampled blocks live at the peak" : "sampled block left allocated");
  std::string total_note;
  if (!est) {
    total_note = "";
  } else if (!fits.fitted) {
    total_note = " (estimated)";
  } else if (!o.match.empty()) {
    total_note = " (of the stacks matching --match; estimated)";
  } else if (fit_bytes.scaled) {
    total_note = at_peak ? (peak.exact ? " (the exact peak; " + split + ")" : " (within the peak's bounds; " + split + ")")
                         : " (exact; " + split + ")";
  } else if (fit_bytes.raw == 0 && !at_peak && r.totals.live_blocks() > 0) {
    // Blocks are left, but no sampled one among them: there is nothing to split the total by.
    total_note = " (no sampled block among the exact " + human_count(r.totals.live_blocks()) + " blocks, " +
                 size_str(o, double(r.totals.heap_bytes())) + ")";
  } else {
    total_note = " (estimated)";
  }
  printf("\n%s%s: %s in %s %s\n", out_style(Style::kHeading, "total").c_str(),
         out_style(Style::kEstimate, total_note).c_str(), out_style(Style::kSize, size_str(o, total_bytes)).c_str(),
         est ? est_count_str(total_blocks).c_str() : count_str(total_blocks).c_str(), blocks_word(double(total_blocks)));
  if (pool_blocks > 0)
    printf("%s: %s in %s objects (estimated; not in the exact totals)\n",
           out_style(Style::kHeading, "plus client-API pools").c_str(), out_style(Style::kSize, size_str(o, pool_bytes)).c_str(),
           est_count_str(pool_blocks).c_str());
  print_notes(r, *L.sym);
  if (at_peak) return print_peak_retention(o, r);
  return kExitOk;
}

// --- timeline ---------------------------------------------------------------------------------------

// The coarse RSS parts (about one a second): what of the RSS is the heap, heapsnap's own, other
// anonymous memory and file-backed pages. Captures before format 3.4 have none: nothing printed.
void print_rss_parts(const Common &o, const replay::ReplayResult &r, size_t rows_wanted) {
  if (r.rss_parts.empty()) return;
  printf("\n%s (smaps_rollup, parts add up to rss; heapsnap's own is apart: subtract it)\n",
         out_style(Style::kHeading, "rss parts over time").c_str());
  print_styled(Style::kHeader, "%9s %10s %10s %10s %10s %10s %10s\n", "time", "rss", "heap", "other anon", "file", "(shmem)",
               "heapsnap");
  size_t n = r.rss_parts.size(), step = n > rows_wanted ? (n + rows_wanted - 1) / rows_wanted : 1;
  for (size_t i = 0; i < n; i += step) {
    const auto &q = r.rss_parts[i];
    printf("%9s %10s %10s %10s %10s %10s %10s%s\n", human_duration(double(q.time_ns) / 1e9).c_str(),
           size_str(o, double(q.rss)).c_str(), size_str(o, double(q.heap)).c_str(), size_str(o, double(q.other_anon)).c_str(),
           size_str(o, double(q.file)).c_str(), size_str(o, double(q.shmem)).c_str(), size_str(o, double(q.heapsnap)).c_str(),
           q.clamped ? "  (figures cut to fit)" : "");
  }
}

int run_timeline(const Common &o, size_t rows_wanted) {
  LoadedReplay L;
  if (!load_replay(o.file, o.debug_dirs, &L)) return kExitInput;
  auto &r = L.r;
  if (o.json) {
    json j = header_json(o, r);
    json pts = json::array();
    for (const auto &p : r.timeline)
      pts.push_back({{"time_s", double(p.time_ns) / 1e9}, {"heap_bytes", p.heap_bytes}, {"rss_bytes", p.rss_bytes},
                     {"alloc_calls", p.alloc_calls}, {"sampled_live_bytes", p.sampled_live_bytes}});
    j["points"] = pts;
    json parts = json::array();
    for (const auto &q : r.rss_parts)
      parts.push_back({{"time_s", double(q.time_ns) / 1e9}, {"rss_bytes", q.rss}, {"heap_bytes", q.heap},
                       {"heapsnap_bytes", q.heapsnap}, {"other_anonymous_bytes", q.other_anon},
                       {"file_bytes", q.file}, {"shmem_bytes", q.shmem}, {"swap_bytes", q.swap},
                       {"cost_ns", q.cost_ns}, {"clamped", q.clamped}});
    j["rss_parts"] = parts;
    json mk = json::array();
    for (const auto &m : r.markers) mk.push_back({{"time_s", double(m.time_ns) / 1e9}, {"tid", m.tid}, {"text", m.text}});
    j["markers"] = mk;
    json sn = json::array();
    for (const auto &s : r.snapshots)
      sn.push_back({{"index", s.index}, {"time_s", double(s.time_ns) / 1e9}, {"trigger", s.trigger}, {"label", s.label}});
    j["snapshots"] = sn;
    std::cout << j.dump(2) << "\n";
    return kExitOk;
  }
  printf("%s — %s (exact heap from the shim's totals)\n\n", out_style(Style::kHeading, "heap over time").c_str(), o.file.c_str());
  int64_t peak = 1;
  for (const auto &p : r.timeline) peak = std::max(peak, p.heap_bytes);
  size_t n = r.timeline.size();
  size_t step = n > rows_wanted ? (n + rows_wanted - 1) / rows_wanted : 1;
  print_styled(Style::kHeader, "%9s %12s %12s\n", "time", "heap", "rss");
  for (size_t i = 0; i < n; i += step) {
    const auto &p = r.timeline[i];
    int bar = int(40.0 * double(p.heap_bytes) / double(peak));
    printf("%9s %s %12s  %s\n", human_duration(double(p.time_ns) / 1e9).c_str(),
           out_style(Style::kSize, size_str(o, double(p.heap_bytes)), 12).c_str(), size_str(o, double(p.rss_bytes)).c_str(),
           std::string(size_t(std::max(0, bar)), '#').c_str());
  }
  print_rss_parts(o, r, rows_wanted);
  printf("\n%s %s\n", out_style(Style::kHeading, "peak").c_str(),
         peak_text(peak_of(r), [&](double b) { return out_style(Style::kSize, size_str(o, b)); }).c_str());
  for (const auto &m : r.markers) printf("marker at %s: %s\n", human_duration(double(m.time_ns) / 1e9).c_str(), m.text.c_str());
  for (const auto &s : r.snapshots)
    printf("snapshot %u at %s%s%s\n", s.index, human_duration(double(s.time_ns) / 1e9).c_str(),
           s.label.empty() ? "" : ": ", s.label.c_str());
  print_notes(r, *L.sym);
  return kExitOk;
}

}  // namespace
}  // namespace cmd_replay

void add_replay_commands(Cmd app, int *rc) {
  using namespace cmd_replay;
  {
    auto o = std::make_shared<TopOpts>();
    Cmd cmd = app.subcommand("top-allocators", "Allocation sites ranked by bytes, calls, bytes live at the peak, or bytes leaked.");
    add_common(cmd, *o);
    cmd.option("--by", o->by, "bytes (default), calls, peak or leaked; type: rows are the types the allocations' frames name, by bytes")
        .one_of({"bytes", "calls", "peak", "leaked", "type"});
    cmd.option("--stacks", o->stacks_per_site, "heaviest stacks shown per site (default 2)");
    cmd.footer("A site is the allocation's first frame, walking outward (inlined frames count), that is the program's:\n"
                "not the C++ or C library's (std::, operator new, malloc, libstdc++.so, libc.so, /usr/include/c++/...),\n"
                "nor one --hide-frames names; sampled allocations walk their whole stack, the others their call site's\n"
                "inline chain. --all-frames: the innermost frame, as recorded. --json keeps it as site_innermost.\n"
                "Examples:\n  heapsnap top-allocators app.hsnap -n 10\n  heapsnap top-allocators --by leaked --json app.hsnap\n"
                "  heapsnap top-allocators --hide-frames 'xmalloc|xcalloc' app.hsnap");
    cmd.callback([o, rc] { *rc = run_top(*o); });
  }
  {
    auto o = std::make_shared<Common>();
    Cmd cmd = app.subcommand("leaks", "Blocks not freed at exit, grouped by allocation stack.");
    add_common(cmd, *o);
    cmd.option("--by", o->by, "stack (default) or type: one row per type the allocations' frames name")
        .one_of({"stack", "type"});
    cmd.footer("The total is exact; sampled, its split by stack is estimated from the sampled blocks left (their\n"
                "unscaled estimate in --json: raw_bytes, raw_blocks). Every leak, exactly: record with --sample-bytes 1.\n"
                "Example: heapsnap leaks --match mylib app.hsnap");
    cmd.callback([o, rc] { *rc = run_live(*o, false); });
  }
  {
    auto o = std::make_shared<Common>();
    Cmd cmd = app.subcommand("peak", "What was live when the heap was at its peak, grouped by allocation stack.");
    add_common(cmd, *o);
    cmd.option("--by", o->by, "stack (default) or type: one row per type the allocations' frames name")
        .one_of({"stack", "type"});
    cmd.footer("The peak is exact when one thread allocated; with several it is an estimate with bounds (summary gives the\n"
                "same). The blocks live then are sampled estimates, scaled into the peak's bounds, unless recorded with\n"
                "--sample-bytes 1.\n"
                "Examples:\n  heapsnap peak app.hsnap -n 5\n  heapsnap peak --match libfoo --json app.hsnap");
    cmd.callback([o, rc] { *rc = run_live(*o, true); });
  }
  {
    auto o = std::make_shared<Common>();
    auto rows = std::make_shared<size_t>(30);
    Cmd cmd = app.subcommand("timeline", "Heap and RSS over time, with markers and snapshots.");
    add_common(cmd, *o, false);
    cmd.option("--rows", *rows, "rows of the text chart (default 30)").range(size_t(1), size_t(1) << 20);
    cmd.footer("Examples:\n  heapsnap timeline app.hsnap --rows 60\n  heapsnap timeline --json app.hsnap | jq '.points[-1]'");
    cmd.callback([o, rows, rc] { *rc = run_timeline(*o, *rows); });
  }
}

}  // namespace heapsnap::cli
