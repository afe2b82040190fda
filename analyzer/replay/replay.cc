#include "replay/replay.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <unordered_map>

#include "capture/batch_decoder.h"
#include "capture/decoded_batch.h"
#include "capture/event_decoder.h"
#include "replay/live_table.h"
#include "util/flat_map.h"

namespace heapsnap::replay {
namespace {

// Per-event helpers are forced inline: the replay runs them tens of millions of times.
#define HS_HOT __attribute__((always_inline))

// Where a live sampled object of a client-API pool is (moves are by address).
struct PoolPlace {
  uint32_t pool;
  uint64_t addr;
};

// A stack's figures while replaying, split by how often events touch them. Every ALLOC and FREE
// updates its stack's allocation and live figures and checks its peak epoch (see sync_peak):
// those share one cache line. In one StackFigures (80 bytes, so most straddle two lines) with the
// epochs in an array of their own, a FREE of an old block's stack missed the cache twice, and those
// two misses were a fifth of the replay thread's samples. Realloc counts and the pool are cold.
struct alignas(64) HotFigures {
  double alloc_calls = 0, alloc_bytes = 0;
  double live_calls = 0, live_bytes = 0;
  double peak_calls = 0, peak_bytes = 0;
  uint64_t samples = 0;
  uint32_t epoch = 0;  // the peak epoch of its last change (see sync_peak)
};
static_assert(sizeof(HotFigures) == 64);
struct ColdFigures {
  uint64_t reallocs = 0, realloc_moves = 0;
  uint32_t pool = 0;
};

class Replayer {
  // What every event reads and writes besides its stack's figures and the live table. A batch
  // works on a local copy (apply_decoded, Visitor) that stays in registers: as members reached
  // through `this`, after stores the compiler could not tell apart from them, each was a load and
  // a store per event, and the live-bytes estimate a dependency chain through memory.
  struct Running {
    double live_bytes = 0;  // the estimate of bytes live now
    double peak_bytes = 0;  // its highest so far (ReplayResult::sampled_peak_bytes)
    uint64_t events = 0;    // events applied (ReplayResult::events)
    uint32_t epoch = 0;     // peak epochs begun (see sync_peak)
    double celled = 0;      // live_bytes as the heap cells last counted it (see count_cell)
    bool cells = false;     // ReplayOptions::heap_cells (here, not read through `this`: see above)
  };
 public:
  Replayer(ReplayResult &r, const ReplayOptions &o) : r_(r), o_(o) {
    if (o.heap_cells) cells_.assign(kHeapCells, 0.0);
    run_.cells = o.heap_cells;
  }

  // An EventBatch the reader handed over as bytes (see CaptureReader::set_raw_events_handler),
  // with the reader's padding after it: decoded in one pass, specialised per event kind.
  void raw_events(const capture::RawColumns &cols, const capture::RecordPos &pos) {
    begin_batch(pos);
    std::string err = mean_ <= 1 ? visit<true>(cols) : visit<false>(cols);
    end_batch(cols.tid(), err);
  }

  // A batch the reader's read-ahead thread decoded (see CaptureReader::set_decoded_events_handler).
  void decoded_events(const capture::DecodedBatch &b, const capture::RecordPos &pos) {
    begin_batch(pos);
    if (mean_ <= 1) apply_decoded<true>(b);
    else apply_decoded<false>(b);
    end_batch(b.tid(), b.error());
  }

  void record(const wire::Record &rec, const capture::RecordPos &pos) {
    switch (rec.body_case()) {
      case wire::Record::kProcess:
        if (!r_.have_process) {
          r_.have_process = true;
          r_.process = rec.process();
          mean_ = rec.process().sample_bytes();
          live_.set_mean(mean_);  // the first record: the table is still empty
        }
        break;
      case wire::Record::kModule:
        add_module(rec.module());
        if (o_.on_module) o_.on_module(r_.modules.back());
        break;
      case wire::Record::kModuleUnload:
        for (auto &m : r_.modules)
          if (m.id == rec.module_unload().id()) m.unloaded_ns = rec.module_unload().time_ns();
        break;
      case wire::Record::kStack: {
        std::string err;
        size_t before = r_.stacks.nodes();
        if (!r_.stacks.add(rec.stack(), &err)) {
          r_.problems.push_back({pos.frame_offset, err});
          break;
        }
        if (r_.stacks.nodes() > before) {
          first_write(rec.stack().id());
          if (o_.on_stack_nodes) o_.on_stack_nodes(r_.stacks, uint32_t(before + 1));
        }
        break;
      }
      case wire::Record::kEvents:
        if (!o_.context_only) events(rec.events(), pos);
        break;
      case wire::Record::kTotals:
        if (!r_.ended) r_.totals = rec.totals();
        r_.have_totals = true;
        point(rec.totals());
        break;
      case wire::Record::kEnd:
        r_.ended = true;
        r_.have_totals = true;
        r_.totals = rec.end().totals();
        point(rec.end().totals());
        break;
      case wire::Record::kMarker:
        r_.markers.push_back({rec.marker().time_ns(), rec.marker().tid(), rec.marker().text()});
        see_time(rec.marker().time_ns());
        break;
      case wire::Record::kPool:
        if (!r_.pool(rec.pool().id())) r_.pools.push_back({rec.pool().id(), rec.pool().name()});
        break;
      case wire::Record::kMoves: moves(rec.moves()); break;
      case wire::Record::kSnapshotBegin:
        r_.snapshots.push_back({rec.snapshot_begin().index(), rec.snapshot_begin().time_ns(),
                                int(rec.snapshot_begin().trigger()), rec.snapshot_begin().label()});
        break;
      default: break;
    }
  }

  // .NET MovedReferences semantics: an object at old[i] + k is now at new[i] + k; with
  // compacting, live objects of the pool that no range covers did not survive.
  void moves(const wire::MoveRanges &m) {
    struct R {
      uint64_t from, to, len;
    };
    int n = std::min(m.old_start_delta_size(), std::min(m.new_start_delta_size(), m.length_size()));
    std::vector<R> rs;
    rs.reserve(size_t(n));
    uint64_t o = 0, nw = 0;
    for (int i = 0; i < n; ++i) {
      o += uint64_t(m.old_start_delta(i));
      nw += uint64_t(m.new_start_delta(i));
      rs.push_back({o, nw, m.length(i)});
    }
    std::sort(rs.begin(), rs.end(), [](const R &a, const R &b) { return a.from < b.from; });
    PoolInfo *info = nullptr;
    for (auto &p : r_.pools)
      if (p.id == m.pool()) info = &p;
    if (!info) {
      r_.pools.push_back({m.pool(), "pool " + std::to_string(m.pool())});
      info = &r_.pools.back();
    }
    ++info->moves;
    info->ranges += rs.size();
    auto &index = pool_index_[m.pool()];
    std::unordered_map<uint64_t, uint64_t> moved;
    moved.reserve(index.size());
    for (auto &[addr, id] : index) {
      auto it = std::upper_bound(rs.begin(), rs.end(), addr, [](uint64_t v, const R &r) { return v < r.from; });
      if (it != rs.begin() && addr < (it - 1)->from + (it - 1)->len) {
        uint64_t na = (it - 1)->to + (addr - (it - 1)->from);
        moved[na] = id;
        if (PoolPlace *pl = pool_place_.find(id)) pl->addr = na;
        if (na != addr) ++info->moved_objects;
      } else if (m.compacting()) {
        LiveEntry b;
        if (live_.erase(id, &b)) live_remove(run_, b);
        pool_place_.erase(id);
        ++info->compacted_away;
      } else {
        moved[addr] = id;
      }
    }
    index.swap(moved);
  }

  void finish() {
    r_.events = run_.events;
    if (run_.cells) {
      while (!cells_.empty() && cells_.back() == 0) cells_.pop_back();
      r_.heap_cells.shift = cell_shift_;
      r_.heap_cells.delta = std::move(cells_);
    }
    r_.sampled_peak_bytes = run_.peak_bytes;
    for (auto &[pool, index] : pool_index_)
      for (auto &[addr, id] : index)
        if (LiveEntry b; live_.get(id, &b))
          r_.live_pool_objects.push_back({pool, {id, addr, b.size, node_of_[b.stack]}});
    std::sort(r_.live_pool_objects.begin(), r_.live_pool_objects.end(),
              [](const auto &a, const auto &b) { return a.first != b.first ? a.first < b.first : a.second.addr < b.second.addr; });
    if (bad_stack_events_)
      r_.problems.push_back({bad_stack_offset_, std::to_string(bad_stack_events_) +
                                                    " events name a stack no Stack record defined before them; "
                                                    "counted under an unknown stack"});
    if (bad_id_events_)
      r_.problems.push_back({bad_id_offset_, std::to_string(bad_id_events_) +
                                                 " events name block id 0 (not a valid id); ignored"});
    if (r_.unknown_frees) {
      // The earliest frame among those still unmatched (an end matched later by its ALLOC is not
      // a problem).
      uint64_t at = lost_ ? lost_offset_ : UINT64_MAX;
      early_.for_each([&](uint64_t, const Early &e) { at = std::min(at, e.offset); });
      r_.problems.push_back({at, std::to_string(r_.unknown_frees) +
                                     " blocks are freed or resized but no allocation in the capture defined "
                                     "them (this frame holds the first of those ends)"});
    }
    r_.live_sampled_blocks = live_.size() > pool_place_.size() ? live_.size() - pool_place_.size() : 0;
    // Stacks unchanged since the highest peak: their live figures are their peak figures.
    for (HotFigures &f : hot_) {
      if (f.epoch == run_.epoch) continue;
      f.peak_calls = f.live_calls;
      f.peak_bytes = f.live_bytes;
    }
    r_.memory_bytes = live_.memory_bytes() + pool_place_.memory_bytes() + r_.stacks.memory_bytes() +
                      dense_of_.memory_bytes() + hot_.capacity() * sizeof(HotFigures) +
                      cold_.capacity() * sizeof(ColdFigures) + node_of_.capacity() * sizeof(uint32_t);
    // The figures by stack id, for the result: written after the live table's memory is given
    // back, so that the two are never resident together (by_stack spans every node of the tree,
    // four times the dense figures on a python capture).
    live_.release_memory();
    r_.by_stack.resize(std::max(dense_of_.size(), size_t(1)));
    for (size_t d = 0; d < hot_.size(); ++d) {
      const HotFigures &h = hot_[d];
      const ColdFigures &c = cold_[d];
      StackFigures &f = r_.by_stack[node_of_[d]];
      f.alloc_calls = h.alloc_calls;
      f.alloc_bytes = h.alloc_bytes;
      f.live_calls = h.live_calls;
      f.live_bytes = h.live_bytes;
      f.peak_calls = h.peak_calls;
      f.peak_bytes = h.peak_bytes;
      f.samples = h.samples;
      f.reallocs = c.reallocs;
      f.realloc_moves = c.realloc_moves;
      f.pool = c.pool;
    }
  }

 private:
  // Per-stack figures are kept densely while replaying, in the order stacks first allocate: the
  // tree's node ids interleave the few leaves that allocate with interior nodes (python: 14.6 K
  // of 52 K), so figures indexed by node id spread the hot ones over four times the memory (and
  // the cache lines). Live blocks name their stack by dense index; finish() lays the figures
  // out by node id for the result.
  //
  // The dense index of node `stack`, given one at its first use. Every stack an event may name
  // has its entry: begin_batch() grew dense_of_ to the nodes defined before the batch, and apply()
  // sends any other stack to 0 (dense index 0, made by the constructor).
  HS_HOT uint32_t dense(uint32_t stack) {
    assert(stack < dense_of_.size());
    uint32_t d = dense_of_[stack];
    if (__builtin_expect(d == 0 && stack != 0, 0)) d = add_dense(stack);
    return d;
  }
  __attribute__((noinline)) uint32_t add_dense(uint32_t stack) {
    uint32_t d = uint32_t(hot_.size());
    hot_.emplace_back();
    cold_.emplace_back();
    node_of_.push_back(stack);
    dense_of_[stack] = d;
    return d;
  }
  // To every node the tree has (stack <= batch_nodes_): growing a ZeroArray copies and clears
  // nothing, so there is no need to grow ahead.
  __attribute__((noinline)) void grow(uint32_t stack) {
    dense_of_.resize(std::max(size_t(stack), size_t(batch_nodes_)) + 1);
  }

  // A new stack's entry is written first here, where it is known to be zero. Its first event
  // reads it: a page of the ZeroArray first read maps the kernel's zero page, and the write after
  // it faults again to replace that page, flushing the TLB of every CPU the process runs on (an
  // interrupt to the read-ahead thread's CPU: 3-5% of the replay thread's samples). A first
  // write maps a fresh page in one fault, with nothing to flush.
  void first_write(uint32_t stack) {
    if (stack >= dense_of_.size()) grow(stack);
    dense_of_[stack] = 0;
  }

  // The per-stack "live at the peak" figures in one pass. Each new highest estimate of live bytes
  // starts a peak epoch; a stack remembers the epoch of its last change. Before a stack's live
  // figures change, if a peak came since its last change, its live figures are what it held at
  // that peak: copy them. finish() does the same for the stacks that never changed again.
  // (d: a dense index, as every function below takes.)
  HS_HOT void sync_peak(Running &run, uint32_t d) {
    HotFigures &f = hot_[d];
    if (f.epoch == run.epoch) return;
    f.epoch = run.epoch;
    f.peak_calls = f.live_calls;
    f.peak_bytes = f.live_bytes;
  }

  HS_HOT void see_time(uint64_t t) {
    if (t > r_.end_time_ns) r_.end_time_ns = t;
  }

  // After each event: follow the highest estimate (a new one starts a peak epoch, see sync_peak).
  // rose: the estimate may have gone up (after a free or nothing done it only went down or stayed).
  HS_HOT void after_event(Running &run, uint64_t time, bool rose = true) {
    if (run.cells) count_cell(run, time);
    uint64_t ordinal = run.events++;
    if (rose && run.live_bytes > run.peak_bytes) {
      run.peak_bytes = run.live_bytes;
      r_.sampled_peak_event = ordinal;
      r_.sampled_peak_time_ns = time;
      r_.sampled_peak_blocks = live_.size();
      ++run.epoch;
    }
  }

  // The event's change of the estimate into the cell of its time (each event ends in after_event;
  // what a compacting pool move drops counts with the next event).
  HS_HOT void count_cell(Running &run, uint64_t time) {
    uint64_t c = time >> cell_shift_;
    if (__builtin_expect(c >= kHeapCells, 0)) c = widen_cells(time);
    cells_[c] += run.live_bytes - run.celled;
    run.celled = run.live_bytes;
  }
  // Cells twice as wide until `time` falls in one: pairs merge into the lower half.
  __attribute__((noinline)) uint64_t widen_cells(uint64_t time) {
    while ((time >> cell_shift_) >= kHeapCells) {
      for (size_t i = 0; i < kHeapCells / 2; ++i) cells_[i] = cells_[2 * i] + cells_[2 * i + 1];
      std::fill(cells_.begin() + kHeapCells / 2, cells_.end(), 0.0);
      ++cell_shift_;
    }
    return time >> cell_shift_;
  }

  void point(const wire::Totals &t) {
    see_time(t.time_ns());
    if (t.heap_bytes() > r_.highest_heap) r_.highest_heap = t.heap_bytes();
    r_.timeline.push_back({t.time_ns(), t.heap_bytes(), t.rss_bytes(), t.alloc_calls(), run_.live_bytes});
    if (t.has_rss_parts()) r_.rss_parts.push_back(rss_parts_of(t));
  }

  void add_module(const wire::Module &m) {
    ModuleRecord rec{m.id(), m.path(), m.load_bias(), m.build_id(), {}, m.time_ns(), UINT64_MAX};
    for (const auto &s : m.segments())
      if (s.flags() & 1) rec.exec.push_back({m.load_bias() + s.vaddr(), m.load_bias() + s.vaddr() + s.memsz()});
    r_.modules.push_back(std::move(rec));
  }

  template <bool kExact = false>
  HS_HOT void live_add(Running &run, const LiveEntry &b) { live_add<kExact>(run, b, hot_[b.stack]); }
  template <bool kExact = false>
  HS_HOT void live_add(Running &run, const LiveEntry &b, HotFigures &f) {  // f: b.stack's figures
    sync_peak(run, b.stack);
    double bytes = kExact ? double(b.size) : double(b.size) * b.weight;
    f.live_calls += b.weight;
    f.live_bytes += bytes;
    run.live_bytes += bytes;
  }
  template <bool kExact = false>
  HS_HOT void live_remove(Running &run, const LiveEntry &b) {
    HotFigures &f = hot_[b.stack];
    sync_peak(run, b.stack);
    double bytes = kExact ? double(b.size) : double(b.size) * b.weight;
    f.live_calls -= b.weight;
    f.live_bytes -= bytes;
    run.live_bytes -= bytes;
  }

  // A batch libprotobuf parsed (a layout RawColumns does not take).
  void events(const wire::EventBatch &batch, const capture::RecordPos &pos) {
    capture::EventDecoder dec(batch);
    begin_batch(pos);
    capture::Event e;
    while (dec.next(&e)) {
      if (mean_ <= 1) apply<true>(run_, e.kind, e.time_ns, e.id, e.addr, e.size, e.stack, e.pool, e.moved);
      else apply<false>(run_, e.kind, e.time_ns, e.id, e.addr, e.size, e.stack, e.pool, e.moved);
    }
    end_batch(batch.tid(), dec.error());
  }

  void begin_batch(const capture::RecordPos &pos) {
    batch_latest_ = 0;
    batch_nodes_ = r_.stacks.nodes();
    if (dense_of_.size() <= batch_nodes_) grow(uint32_t(batch_nodes_));
    batch_offset_ = pos.frame_offset;
  }
  void end_batch(uint32_t tid, const std::string &error) {
    see_time(batch_latest_);  // once per batch: r_ lives in memory
    if (!error.empty())
      r_.problems.push_back({batch_offset_, "event batch of thread " + std::to_string(tid) + ": " + error});
  }

  // decode_batch's visitor: each kind is apply() with the kind a constant (its switch folds away).
  template <bool kExact>
  struct Visitor {
    Replayer &rp;
    Running run;  // rp.run_ while the batch lasts (see Running)
    HS_HOT void alloc(uint64_t t, uint64_t id, uint64_t size, uint32_t stack) {
      rp.apply<kExact>(run, wire::ALLOC, t, id, 0, size, stack, 0, false);
    }
    HS_HOT void free(uint64_t t, uint64_t id) { rp.apply<kExact>(run, wire::FREE, t, id, 0, 0, 0, 0, false); }
    HS_HOT void realloc(uint64_t t, uint64_t id, uint64_t size, uint32_t stack, bool moved) {
      rp.apply<kExact>(run, wire::REALLOC, t, id, 0, size, stack, 0, moved);
    }
    void pool_alloc(uint64_t t, uint64_t id, uint64_t addr, uint64_t size, uint32_t stack, uint32_t pool) {
      rp.apply<kExact>(run, wire::POOL_ALLOC, t, id, addr, size, stack, pool, false);
    }
    void pool_free(uint64_t t, uint64_t id, uint32_t pool) {
      rp.apply<kExact>(run, wire::POOL_FREE, t, id, 0, 0, 0, pool, false);
    }
  };
  template <bool kExact>
  std::string visit(const capture::RawColumns &cols) {
    static_assert(capture::kRawEventsPadding >= capture::kDecodePadding);
    Visitor<kExact> v{*this, run_};
    std::string err = capture::decode_batch(cols, cursors_, v);
    run_ = v.run;
    return err;
  }

  // A batch whose events name only stacks defined before it and no block id 0 (the decoder
  // says so: DecodedBatch::max_stack, zero_id) skips those checks event by event.
  template <bool kExact>
  void apply_decoded(const capture::DecodedBatch &b) {
    if (!b.zero_id() && b.max_stack() <= batch_nodes_) {
      apply_decoded<kExact, false>(b);
      if (b.size() && b.max_time() > batch_latest_) batch_latest_ = b.max_time();
    } else {
      apply_decoded<kExact, true>(b);
    }
  }
  template <bool kExact, bool kChecked>
  void apply_decoded(const capture::DecodedBatch &b) {
    Running run = run_;
    for (size_t i = 0, n = b.size(); i < n; ++i) {
      const capture::DecodedEvent &e = b[i];
      switch (e.kind) {
        case wire::ALLOC: apply<kExact, kChecked>(run, wire::ALLOC, e.time_ns, e.id, 0, e.size, e.stack, 0, false); break;
        case wire::FREE: apply<kExact, kChecked>(run, wire::FREE, e.time_ns, e.id, 0, 0, 0, 0, false); break;
        case wire::REALLOC:
          apply<kExact, kChecked>(run, wire::REALLOC, e.time_ns, e.id, 0, e.size, e.stack, 0, e.moved);
          break;
        case wire::POOL_ALLOC: {  // its place in the next entry (see DecodedEvent)
          const capture::DecodedEvent &place = b[++i];
          apply<kExact, kChecked>(run, wire::POOL_ALLOC, e.time_ns, e.id, place.id, e.size, e.stack, place.stack, false);
          break;
        }
        default: apply<kExact, kChecked>(run, wire::POOL_FREE, e.time_ns, e.id, 0, 0, 0, e.stack, false); break;
      }
    }
    run_ = run;
  }

  // One event. kExact: every allocation recorded (weight 1; the products by it are skipped,
  // which leaves every figure bit for bit the same). !kChecked: the caller has made sure of what
  // the checks below look at (the batch's latest time is taken once, after it).
  template <bool kExact, bool kChecked = true>
  HS_HOT void apply(Running &run, wire::EventKind kind, uint64_t time, uint64_t id, uint64_t addr, uint64_t size,
                    uint32_t stack, uint32_t pool, bool moved) {
    if constexpr (kChecked) {
      if (time > batch_latest_) batch_latest_ = time;
      // Ids come from the file. A stack the tree does not hold has no entry in dense_of_ (which
      // must not grow to the id: up to 2^32 entries); id 0 is the live table's empty-slot key.
      bool uses_stack = kind == wire::ALLOC || kind == wire::POOL_ALLOC || kind == wire::REALLOC;
      if (uses_stack && __builtin_expect(stack > batch_nodes_, 0)) {
        if (!bad_stack_events_++) bad_stack_offset_ = batch_offset_;
        stack = 0;
      }
      if (__builtin_expect(id == 0, 0)) {
        if (!bad_id_events_++) bad_id_offset_ = batch_offset_;
        after_event(run, time, false);
        return;
      }
    }
    switch (kind) {
      case wire::ALLOC:
      case wire::POOL_ALLOC: {
        uint32_t d = dense(stack);
        LiveEntry b{d, kExact ? 1.0f : float(sample_weight(size, mean_)), size};
        HotFigures &f = hot_[d];
        if (kind == wire::POOL_ALLOC) cold_[d].pool = pool;
        f.alloc_calls += b.weight;
        f.alloc_bytes += kExact ? double(size) : double(size) * b.weight;
        ++f.samples;
        if (__builtin_expect(early_.size() != 0, 0) && early_filter_[id & kEarlyMask] && early_end(id, &b)) break;
        if (kind == wire::POOL_ALLOC) {  // (an object ended before it came has no place)
          pool_index_[pool][addr] = id;
          pool_place_[id] = PoolPlace{pool, addr};
        }
        LiveEntry old = live_.insert(id, b);
        if (__builtin_expect(old.weight != 0, 0)) {  // a repeated id: the capture is damaged
          live_remove<kExact>(run, old);
          live_add<kExact>(run, b);
        } else {
          live_add<kExact>(run, b, f);
        }
        if (live_.size() > r_.live_blocks_peak) r_.live_blocks_peak = live_.size();
        after_event(run, time, true);
        return;
      }
      case wire::FREE: {
        LiveEntry b;
        if (live_.erase(id, &b)) live_remove<kExact>(run, b);
        else note_early(id, 0);
        after_event(run, time, false);  // the estimate only went down
        return;
      }
      case wire::REALLOC: {
        LiveEntry b, nb;
        bool live = live_.resize(id, size, &b, &nb);  // b: the entry before, nb: after
        uint32_t sd = dense(stack);
        HotFigures &site = hot_[sd];
        ++cold_[sd].reallocs;
        if (moved) ++cold_[sd].realloc_moves;
        if (!live) {
          note_early(id, size);
          after_event(run, time, false);
          return;
        }
        // The block keeps its identity and allocation stack; the realloc call counts as an
        // allocation of the new size at the realloc's own stack, weighted as the block now is
        // (resized_weight).
        site.alloc_calls += nb.weight;
        site.alloc_bytes += kExact ? double(size) : double(size) * nb.weight;
        live_remove<kExact>(run, b);
        live_add<kExact>(run, nb);
        after_event(run, time, true);
        return;
      }
      case wire::POOL_FREE: {
        LiveEntry b;
        if (live_.erase(id, &b)) {
          live_remove<kExact>(run, b);
          PoolPlace pl;
          if (pool_place_.erase(id, &pl)) {
            auto it = pool_index_.find(pl.pool);
            if (it != pool_index_.end()) it->second.erase(pl.addr);
          }
        } else {
          note_early(id, 0);  // another thread's POOL_FREE, written before the POOL_ALLOC (as FREE)
        }
        after_event(run, time, false);
        return;
      }
      default: after_event(run, time, false); return;
    }
    after_event(run, time, false);  // an ALLOC whose block was freed before it (early_end)
  }

  // Events of different threads reach the file in batches, so a block freed (or resized) by
  // another thread than the one that allocated it may come before its ALLOC: the freeing thread's
  // batch was written first (it filled up, or that thread ended). Such an end is kept here until
  // its ALLOC comes; without it the block would stay live for ever (a false leak). What is still
  // here at the end belongs to ALLOCs the file does not hold (a damaged or cut capture).
  // unknown_frees counts blocks (not events: a block resized, then freed, by another thread
  // before its ALLOC was written has two early ends and one ALLOC).
  struct Early {
    uint64_t size;    // REALLOC's new size; 0 = freed
    uint64_t offset;  // the frame holding its first early end
  };
  __attribute__((noinline)) void note_early(uint64_t id, uint64_t realloc_size) {
    if (Early *e = early_.find(id)) {
      if (e->size != 0) e->size = realloc_size;  // a later free or resize wins
      return;
    }
    if (early_.size() >= (uint64_t(1) << 24)) return note_lost();  // a hostile file: bounded memory
    ++r_.unknown_frees;
    early_[id] = Early{realloc_size, batch_offset_};
    uint16_t &f = early_filter_[id & kEarlyMask];
    if (f != UINT16_MAX) ++f;  // saturated: stays "maybe" for ever
  }
  // An end that no later ALLOC can match.
  void note_lost() {
    ++r_.unknown_frees;
    if (!lost_++) lost_offset_ = batch_offset_;
  }
  // The ALLOC of a block whose end came first: true if it was freed (never live); a resize
  // updates *b.
  __attribute__((noinline)) bool early_end(uint64_t id, LiveEntry *b) {
    Early e;
    if (!early_.erase(id, &e)) return false;
    uint16_t &f = early_filter_[id & kEarlyMask];
    if (f != UINT16_MAX) --f;
    uint64_t size = e.size;
    --r_.unknown_frees;
    if (size == 0) return true;
    b->size = size;
    // Resized before its ALLOC was read: weighted as a resize seen in order is (the sizes of
    // several early reallocs are not kept: the last one counts).
    if (mean_ > 1) b->weight = float(resized_weight(b->weight, size, mean_));
    return false;
  }

  ReplayResult &r_;
  const ReplayOptions &o_;
  // Flat: with threads freeing each other's blocks it is rarely empty, and every ALLOC looks
  // here (early_filter_ first).
  util::FlatMap64<Early> early_;
  // How many ids of early_ have each value of the id's low 16 bits: an ALLOC whose counter is
  // 0 has no early end, without a hash lookup (which missed the cache: 12% of that replay).
  static constexpr uint64_t kEarlyMask = 0xffff;
  std::vector<uint16_t> early_filter_ = std::vector<uint16_t>(kEarlyMask + 1, 0);
  uint64_t mean_ = 1;
  LiveTable live_;
  util::FlatMap64<PoolPlace> pool_place_;  // sample id -> pool and address, pool objects only
  util::ZeroArray<uint32_t> dense_of_;     // per stack node: its dense index (0: none yet)
  // Per dense index (see dense()): the hot figures (with the peak epoch of the last change), the
  // cold ones, the node.
  std::vector<HotFigures> hot_ = std::vector<HotFigures>(1);
  std::vector<ColdFigures> cold_ = std::vector<ColdFigures>(1);
  std::vector<uint32_t> node_of_ = std::vector<uint32_t>(1, 0);
  // Per pool: address -> sample id of its live sampled objects (moves are by address).
  std::unordered_map<uint32_t, std::unordered_map<uint64_t, uint64_t>> pool_index_;
  Running run_;
  capture::SiteCursors cursors_;  // decode_batch's, kept from batch to batch
  uint64_t batch_latest_ = 0;  // the batch's latest time (see_time once per batch)
  uint64_t batch_nodes_ = 0;   // stack nodes defined before the batch
  uint64_t batch_offset_ = 0;  // the frame holding it
  uint64_t bad_stack_events_ = 0, bad_stack_offset_ = 0;
  uint64_t bad_id_events_ = 0, bad_id_offset_ = 0;
  uint64_t lost_ = 0, lost_offset_ = 0;  // note_lost's count, and the frame of the first
  // ReplayOptions::heap_cells: 2^17 ns (131 us) at first, kHeapCells of them (0.5 s), wider as
  // events come later.
  std::vector<double> cells_;
  uint32_t cell_shift_ = 17;
};

}  // namespace

double sample_weight(uint64_t size, uint64_t mean) {
  if (mean <= 1) return 1.0;
  if (size == 0) size = 1;  // a zero-byte block still had a chance to be sampled
  double p = -std::expm1(-double(size) / double(mean));
  return p > 0 ? 1.0 / p : 1.0;
}

double resized_weight(double weight, uint64_t size, uint64_t mean) {
  if (mean <= 1 || weight <= 1) return 1.0;
  // P(not tracked) so far is 1 - 1/weight; this size was one more draw: times exp(-size/mean).
  double untracked = (1.0 - 1.0 / weight) * std::exp(-double(size ? size : 1) / double(mean));
  return 1.0 / (1.0 - untracked);
}

ReplayResult replay(capture::CaptureReader &reader, const ReplayOptions &opts) {
  ReplayResult r;
  Replayer rp(r, opts);
  if (opts.progress) reader.set_progress(opts.progress);
  if (opts.context_only) {
    reader.set_record_filter([](uint32_t f) {
      return f == wire::Record::kProcess || f == wire::Record::kModule || f == wire::Record::kModuleUnload ||
             f == wire::Record::kStack || f == wire::Record::kTotals || f == wire::Record::kEnd ||
             f == wire::Record::kMarker || f == wire::Record::kSnapshotBegin;
    });
  }
  if (!opts.context_only) {
    reader.set_raw_events_handler([&](const uint8_t *p, size_t n, const capture::RecordPos &pos) {
      capture::RawColumns cols;
      if (!cols.parse(p, n)) return false;  // not the shim's layout: libprotobuf parses it
      rp.raw_events(cols, pos);
      return true;
    });
    reader.set_decoded_events_handler(
        [&](const capture::DecodedBatch &b, const capture::RecordPos &pos) { rp.decoded_events(b, pos); });
  }
  reader.for_each_record([&](const wire::Record &rec, const capture::RecordPos &pos) {
    rp.record(rec, pos);
    return true;
  });
  rp.finish();
  r.truncated = reader.truncated() || !r.ended;
  for (const auto &p : reader.problems()) r.problems.push_back(p);
  return r;
}

ReplayResult replay_with_peak(const std::string &path, std::string *error,
                              std::function<void(uint64_t, uint64_t)> progress) {
  ReplayOptions o;
  o.progress = std::move(progress);
  return replay_with_peak(path, error, o);
}

ReplayResult replay_with_peak(const std::string &path, std::string *error, const ReplayOptions &opts) {
  auto first = capture::CaptureReader::open(path, error);
  if (!first) return {};
  return replay(*first, opts);
}

}  // namespace heapsnap::replay
