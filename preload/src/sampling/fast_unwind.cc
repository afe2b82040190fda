#include "sampling/fast_unwind.h"

#include <atomic>
#include <cstring>

#include "core/common.h"
#include "sampling/frame_rules.h"
#include "core/private_heap.h"
#include "sampling/unwinder.h"

namespace hs::fast_unwind {

// The stack pointer, rbp and return address of its caller just after the call returns.
struct Regs {
  uintptr_t ip, sp, bp;
};
extern "C" void hs_unwind_regs(Regs *r) __attribute__((visibility("hidden")));
asm(R"(
  .text
  .p2align 4
  .globl hs_unwind_regs
  .hidden hs_unwind_regs
  .type hs_unwind_regs, @function
hs_unwind_regs:
  .cfi_startproc
  movq (%rsp), %rax
  movq %rax, 0(%rdi)
  leaq 8(%rsp), %rax
  movq %rax, 8(%rdi)
  movq %rbp, 16(%rdi)
  ret
  .cfi_endproc
  .size hs_unwind_regs, .-hs_unwind_regs
)");

namespace {

std::atomic<uint32_t> g_code_gen{1};

// The code of the module this walker is linked into (the shim), from its ELF header to the end of
// its .text: the linker defines both symbols for whoever refers to them.
extern "C" char __ehdr_start[] __attribute__((visibility("hidden")));
extern "C" char __etext[] __attribute__((visibility("hidden")));

// A frame of the tracer itself (the walk, the recording function, the allocation entry point).
// Walks start at the program's frame: the tracer's own frames are crossed by an OwnPath (below),
// never stepped into a remembered walk or looked up in the join index.
HS_INLINE bool own_frame(uintptr_t ip) {
  return ip - reinterpret_cast<uintptr_t>(__ehdr_start) <
         uintptr_t(reinterpret_cast<uintptr_t>(__etext) - reinterpret_cast<uintptr_t>(__ehdr_start));
}

constexpr int kFrames = unwind::kMaxDepth + unwind::kOwnFrames + 8;
// Rules remembered per thread (direct-mapped by address): python's interpreter has more return
// addresses than 1024 slots hold (550,000 misses in 6.3 M walks, each a search of .eh_frame).
constexpr uint32_t kRuleSlotsDense = 16384, kRuleSlotsSparse = 1024;
// Walks remembered per thread when sampling is dense. Programs cycle through a few call paths:
// of sqlite3's 6.4 M sampled stacks 3% equal the thread's previous one, 14% one of the last 4 and
// 98.5% one of the last 8 (python: 3%, 19%, 33%, and 75% of the last 16). callgrind, every
// allocation, instructions of the whole run with 8 / 12 / 16 / 24 / 32 walks: python (py
// workload at scale 0.2) 3.446 / 3.260 / 2.876 / 2.927 / 2.955 G; sqlite3 (100,000 rows) 3.095 G
// with 8, 3.124 G with 16 (each walk looks at every remembered first frame).
constexpr int kWalksDense = 16;
// Sparse sampling (the default) remembers fewer. One was too few: a program samples from a few
// call sites in turn (the stress's malloc, realloc and free), so each walk found the other site's
// stack remembered and stepped from its first frame, on rules long evicted from the cache. perf,
// 4-thread stress, default sampling, 3 runs: samples in the walker 969 with one walk, 296 with 4,
// 253 with 8; python's were the same (200) with 1, 4 or 8.
constexpr int kWalksSparse = 4;
// Sampling at least this dense (mean bytes between samples) remembers kWalksDense walks and
// kRuleSlotsDense rules (8.5 KiB each walk, 256 KiB of rules: pages untouched until used); sparser
// sampling kWalksSparse walks and 16 KiB of rules.
constexpr uint64_t kDenseSampleBytes = 4096;
bool g_dense = false;

// A frame's rule as the walk used it, and whether the frames from it outwards need its rbp
// (to compute a CFA before some frame restores rbp from the stack).
// kCheckBp: the frame saved rbp and the frame above needs it (kept by mark_bp_needed, so that
// first_change tests one flag a frame).
enum : uint8_t { kBpSaved = frame_rules::kBpSaved, kCheckBp = 0x20, kBpNeeded = 0x40 };
struct Meta {
  int16_t bp_offset;
  uint8_t flags;
};
// A frame's state apart from its return address (the walks' return addresses are an array of
// their own, handed out as the result): together, so that a join copies two arrays, not four,
// and a check finds a frame's words on one line.
struct Frame {
  uintptr_t sp, bp;
  Meta meta;
};

enum End : uint8_t { kEndOutermost, kEndZeroReturn };

// The join index (Cache::join_index) finds a remembered frame in the state of the frame being
// stepped, in any remembered walk. It replaced a merge of the frames of the two walks that served
// last with the new ones at every step, which on python cost as much as the stepping itself (a
// quarter of the walker's instructions) and could not join any of the other six walks.
constexpr int kJoinSlots = 1024;
constexpr int kJoinFrameBits = 9;
static_assert(kFrames < (1 << kJoinFrameBits) && kWalksDense << kJoinFrameBits < 65535, "join entries fit");
HS_INLINE uint32_t join_slot(uintptr_t sp, uintptr_t ip) {
  return uint32_t(((sp >> 3) ^ (ip << 11)) * 0x9e3779b97f4a7c15ull >> 54) & (kJoinSlots - 1);
}

struct RuleSlot {
  uintptr_t pc;  // the frame's return address (0: empty)
  frame_rules::Rule rule;  // flags kRuleMissing: none usable
};
constexpr uint8_t kRuleMissing = 0x80;

// The tracer's own frames between the walk and the program's frame, as one walk stepped them:
// their rules, and where each frame's CFA was relative to the walk's stack pointer. Every walk
// began by stepping them (python, every allocation: 3 of the 3.4 frames a walk stepped, a sixth
// of the walker's instructions), yet they are a handful of fixed paths through the tracer's
// code: the walk's frame, the recording function's, an entry point's. Crossing a remembered path
// is the same stepping without the rule lookups: each return address read must be the one the
// path read (it names the next frame's code, hence its rule), and a frame whose CFA comes from
// rbp must find rbp where the path did.
constexpr int kOwnMax = unwind::kOwnFrames;
constexpr int32_t kNone = INT32_MIN;
struct OwnPath {
  int n;                     // own frames (0: empty)
  uintptr_t ip;              // the walk's own frame
  int32_t cfa[kOwnMax];      // each frame's CFA, from the walk's sp
  int32_t cfa_from_bp[kOwnMax];  // kNone, or the rule's offset from rbp (the CFA must agree)
  int32_t bp_at[kOwnMax];    // kNone, or where the frame saved its caller's rbp, from the walk's sp
  uintptr_t ra[kOwnMax];     // the return address at each CFA - 8 (the last, the program's: not compared)
};
// Paths remembered per thread (replaced in turn): one per recording function and entry point that
// samples (malloc's, calloc's, realloc's, operator new's, ...).
constexpr int kOwnPaths = 4;

}  // namespace

// One remembered walk, outermost frame last, in [start, kFrames): its return addresses are the
// result handed out, leaf first, without a copy.
struct Walk {
  int start;          // kFrames: empty
  uint32_t stack_id;  // the interned id of its stack (0: not known)
  uint8_t end;        // End
  uintptr_t end_cfa;  // kEndZeroReturn: where the walk read the 0
  uintptr_t ip[kFrames];
  Frame f[kFrames];
};

struct Cache {
  uint32_t gen;
  uint32_t clock;
  int walks;  // remembered walks (kWalksDense or kWalksSparse)
  // Per walk, here rather than in the walks (each look at them all touches one line, not eight):
  // the clock when it last served, and its first frame's state (sp 0: empty).
  uint32_t last_use[kWalksDense];
  uintptr_t leaf_sp[kWalksDense], leaf_ip[kWalksDense];
  uintptr_t declined_pc;  // the frame of the last kNoRule
  // The frames of the walk in progress until it joins a remembered one (here, not on the
  // program's stack: the walk runs inside its malloc, maybe on a small thread stack).
  uintptr_t fip[kFrames];
  Frame ff[kFrames];
  Walk *walk;        // [walks], just after the Cache
  RuleSlot *rules;   // [rule_mask + 1], after the walks
  uint32_t rule_mask;
  // Where a frame state (sp, ip) was last stepped: 1 + walk << kJoinFrameBits | frame, 0 if none.
  // See index_frames.
  uint16_t join_index[kJoinSlots];
  OwnPath own[kOwnPaths];
  uint32_t own_next;  // the path to replace next
};

namespace {

HS_INLINE bool in_stack(uintptr_t a, uint64_t lo, uint64_t hi) { return a >= lo && a <= hi - 8; }

HS_INLINE bool rule_of(Cache *c, uintptr_t ip, frame_rules::Rule *out) {
  RuleSlot &s = c->rules[(ip ^ (ip >> 13)) & c->rule_mask];
  if (HS_UNLIKELY(s.pc != ip)) {
    s.pc = ip;
    if (!frame_rules::find(ip - 1, &s.rule)) s.rule.flags = kRuleMissing;
  }
  *out = s.rule;
  return !(s.rule.flags & kRuleMissing);
}

// One step of a frame in state (sp, bp) by its rule: its CFA and the return address stored just
// below it. False if that address is outside the stack [lo, hi) or the CFA does not move up.
HS_INLINE bool step_frame(const frame_rules::Rule &rule, uintptr_t sp, uintptr_t bp, uint64_t lo, uint64_t hi,
                          uintptr_t *cfa, uintptr_t *ra) {
  uintptr_t c = (rule.base == frame_rules::kCfaFromBp ? bp : sp) + intptr_t(rule.cfa_offset);
  if (c <= sp || !in_stack(c - 8, lo, hi)) return false;
  *cfa = c;
  *ra = *reinterpret_cast<const uintptr_t *>(c - 8);
  return true;
}

// Crosses the tracer's own frames from the walk's (r) to the program's: *ip, *sp, *bp are its
// state, as stepping leaves it. 0, or why the walk is left to libunwind. A remembered path costs
// a load and a compare or two per own frame; else the frames are stepped and the path remembered.
// (A path holds for any call site of the program: its last return address is not compared.)
__attribute__((no_sanitize("address", "undefined"))) int cross_own_frames(Cache *c, const Regs &r, uint64_t lo,
                                                                        uint64_t hi, uintptr_t *ip,
                                                                        uintptr_t *sp, uintptr_t *bp) {
  for (int i = 0; i < kOwnPaths; ++i) {
    const OwnPath &p = c->own[i];
    // (Every word a path reads lies between the walk's sp and its last CFA: see below.)
    if (p.n == 0 || p.ip != r.ip) continue;
    if (!in_stack(r.sp + uintptr_t(intptr_t(p.cfa[p.n - 1])) - 8, lo, hi)) continue;
    uintptr_t fbp = r.bp;
    int j = 0;
    uintptr_t cfa = 0, ra = 0;
    for (; j < p.n; ++j) {
      cfa = r.sp + uintptr_t(intptr_t(p.cfa[j]));
      if (p.cfa_from_bp[j] != kNone && fbp + uintptr_t(intptr_t(p.cfa_from_bp[j])) != cfa) break;
      ra = *reinterpret_cast<const uintptr_t *>(cfa - 8);
      // The last is the program's call site, whatever it is (not the tracer's: a longer path).
      if (j + 1 < p.n ? ra != p.ra[j] : ra == 0 || own_frame(ra)) break;
      if (p.bp_at[j] != kNone)
        fbp = *reinterpret_cast<const uintptr_t *>(r.sp + uintptr_t(intptr_t(p.bp_at[j])));
    }
    if (j < p.n) continue;
    *ip = ra;
    *sp = cfa;
    *bp = fbp;
    return 0;
  }
  OwnPath p;
  p.ip = r.ip;
  uintptr_t fip = r.ip, fsp = r.sp, fbp = r.bp;
  for (int j = 0;; ++j) {
    if (j == kOwnMax) return kTooDeep;
    frame_rules::Rule rule;
    if (!rule_of(c, fip, &rule)) {
      c->declined_pc = fip;
      return kNoRule;
    }
    if (rule.flags & frame_rules::kOutermost) return kNoRule;  // (never in the tracer's code)
    uintptr_t cfa, ra;
    if (!step_frame(rule, fsp, fbp, lo, hi, &cfa, &ra)) return kOutOfStack;
    // (The distance bound keeps offsets in 32 bits; own frames are a few KiB. The tracer's frames
    // always have a caller.)
    if (cfa - r.sp > (uintptr_t(1) << 20) || ra == 0) return kOutOfStack;
    p.bp_at[j] = kNone;
    if (rule.flags & frame_rules::kBpSaved) {
      uintptr_t at = cfa + intptr_t(rule.bp_offset);
      // (Inside the frame, between the walk's sp and the path's last CFA: a rule that says
      // otherwise is not taken.)
      if (at < fsp || at + 8 > cfa) return kOutOfStack;
      fbp = *reinterpret_cast<const uintptr_t *>(at);
      p.bp_at[j] = int32_t(at - r.sp);
    }
    p.cfa[j] = int32_t(cfa - r.sp);
    p.cfa_from_bp[j] = rule.base == frame_rules::kCfaFromBp ? rule.cfa_offset : kNone;
    p.ra[j] = ra;
    fip = ra;
    fsp = cfa;
    if (!own_frame(ra)) {
      p.n = j + 1;
      break;
    }
  }
  c->own[c->own_next++ % kOwnPaths] = p;
  *ip = fip;
  *sp = fsp;
  *bp = fbp;
  return 0;
}

// Whether the remembered walk w still holds from its frame k outwards: every word it read from
// there on is unchanged. Returns -1 if so, else the first frame whose step read a changed word (a
// join at any frame up to it fails as well). (Every address was inside the stack, at or above
// the walk's first frame, when w read it.) Reads the stack's words raw: no sanitizer may object
// to a return-address slot.
__attribute__((no_sanitize("address", "undefined"))) int first_change(const Walk &w, int k) {
  for (int m = k; m + 1 < kFrames; ++m) {
    uintptr_t cfa = w.f[m + 1].sp;
    if (*reinterpret_cast<const uintptr_t *>(cfa - 8) != w.ip[m + 1]) return m;
    // The rbp it restored matters only if a frame above computes its CFA from it (kCheckBp):
    // elsewhere rbp is an ordinary register holding the program's data, different every call.
    if (HS_UNLIKELY(w.f[m].meta.flags & kCheckBp)) {
      uintptr_t at = cfa + intptr_t(w.f[m].meta.bp_offset);
      if (*reinterpret_cast<const uintptr_t *>(at) != w.f[m + 1].bp) return m;
    }
  }
  if (w.end == kEndZeroReturn && *reinterpret_cast<const uintptr_t *>(w.end_cfa - 8) != 0) return kFrames - 1;
  return -1;
}

// kBpNeeded and kCheckBp of frames [from, to) of w, given kBpNeeded of frame `to` (need_above): a
// frame needs rbp if its CFA comes from it, or if it passes rbp on unchanged to a frame that needs
// it.
void mark_bp_needed(Walk &w, int from, int to, bool need_above) {
  bool need = need_above;
  for (int i = to - 1; i >= from; --i) {
    Meta &m = w.f[i].meta;
    bool check = (m.flags & kBpSaved) && need;  // (need: the frame above's)
    need = (m.flags & kBpNeeded) || (!(m.flags & kBpSaved) && need);
    m.flags = uint8_t((m.flags & kBpSaved) | (need ? kBpNeeded : 0) | (check ? kCheckBp : 0));
  }
}

// Frame state at k agrees on rbp with the remembered walk's, where rbp matters.
HS_INLINE bool bp_agrees(const Walk &w, int k, uintptr_t bp) {
  return w.f[k].bp == bp || !(w.f[k].meta.flags & kBpNeeded);
}

// n frames into w at [at, at + n).
void copy_frames(Walk &w, int at, const uintptr_t *ip, const Frame *f, int n) {
  memcpy(&w.ip[at], ip, size_t(n) * sizeof(uintptr_t));
  memcpy(&w.f[at], f, size_t(n) * sizeof(Frame));
}

void used(Cache *c, int i) { c->last_use[i] = c->clock; }

void set_start(Cache *c, int i, int start) {
  Walk &w = c->walk[i];
  w.start = start;
  w.stack_id = 0;
  c->leaf_sp[i] = start < kFrames ? w.f[start].sp : 0;
  c->leaf_ip[i] = start < kFrames ? w.ip[start] : 0;
}

// Frames [from, to) of walk i into the join index: the frames a walk stepped, not those it took
// from the walk it joined (whose entries name that walk, or the one that stepped them first).
// Entering those too cost more than the merge it replaced (python: 19 frames a walk against 2.7
// stepped). An entry goes stale when its walk is replaced; a probe checks the frame it names and
// then the walk must step on, maybe to the outermost frame, which enters every frame again.
void index_frames(Cache *c, int i, int from, int to) {
  const Walk &w = c->walk[i];
  for (int k = from; k < to; ++k)
    c->join_index[join_slot(w.f[k].sp, w.ip[k])] = uint16_t(1 + (i << kJoinFrameBits | k));
}

// The walk to replace: an empty one, else the one that served longest ago.
int victim(const Cache *c) {
  int v = 0;
  for (int i = 1; i < c->walks; ++i)
    if (c->last_use[i] < c->last_use[v]) v = i;  // (an empty walk's is 0)
  return v;
}

// Whether remembered frame k of walk i (a join index entry, maybe stale) is this stack's frame
// n: the same state, and the walk holds from there. A check that failed at frame m of a walk
// rules out every join with it up to m (first_join).
HS_INLINE bool joins(Cache *c, int i, int k, int n, int *first_join, uintptr_t sp, uintptr_t ip, uintptr_t bp) {
  if (i >= c->walks) return false;
  const Walk &w = c->walk[i];
  if (k < w.start || k < n || k < first_join[i] || w.f[k].sp != sp || w.ip[k] != ip || !bp_agrees(w, k, bp))
    return false;
  if (int bad = first_change(w, k); bad >= 0) {
    first_join[i] = bad + 1;
    return false;
  }
  return true;
}

// The join: this stack is the n fresh frames (c->fip...), then walk i's from frame k. Returns
// walk()'s result.
int join(Cache *c, int i, int k, int n, const uintptr_t **out, uint32_t **id) {
  Walk &w = c->walk[i];
  used(c, i);
  if (n == 0) {
    // A part of w (its frames below k are not this stack's): no id of its own.
    *out = &w.ip[k];
    *id = nullptr;
    return kFrames - k;
  }
  int d = victim(c);
  Walk &to = c->walk[d];
  if (d != i) {
    // w stays (it may serve again); the new walk takes the place of the oldest.
    copy_frames(to, k, &w.ip[k], &w.f[k], kFrames - k);
    to.end = w.end;
    to.end_cfa = w.end_cfa;
  }
  int start = k - n;
  copy_frames(to, start, c->fip, c->ff, n);
  mark_bp_needed(to, start, k, to.f[k].meta.flags & kBpNeeded);
  set_start(c, d, start);
  index_frames(c, d, start, k);
  used(c, d);
  *out = &to.ip[start];
  *id = &to.stack_id;
  return kFrames - start;
}

}  // namespace

uintptr_t declined_pc(const Cache *c) { return c ? c->declined_pc : 0; }

void forget_ids(Cache *c) {
  for (int i = 0; c && i < c->walks; ++i) c->walk[i].stack_id = 0;
}

void code_changed() { g_code_gen.fetch_add(1, std::memory_order_relaxed); }

void set_sampling(uint64_t mean_bytes) { g_dense = mean_bytes <= kDenseSampleBytes; }

void release(Cache *cache) {
  if (cache) heap::release(cache);
}

__attribute__((no_sanitize("address", "undefined"))) HS_NOINLINE int walk(Cache *&cache, uint64_t lo, uint64_t hi,
                                                                        const uintptr_t **out, uint32_t **id) {
  Regs r;
  hs_unwind_regs(&r);
  if (!lo || !in_stack(r.sp, lo, hi)) return kOtherStack;  // sigaltstack, a coroutine's
  Cache *c = cache;
  if (HS_UNLIKELY(!c)) {
    int walks = g_dense ? kWalksDense : kWalksSparse;
    uint32_t slots = g_dense ? kRuleSlotsDense : kRuleSlotsSparse;
    c = cache = static_cast<Cache *>(
        heap::alloc_zeroed(sizeof(Cache) + sizeof(Walk) * size_t(walks) + sizeof(RuleSlot) * slots));
    if (!c) return kNoMemory;
    c->walks = walks;
    c->walk = reinterpret_cast<Walk *>(c + 1);
    c->rules = reinterpret_cast<RuleSlot *>(c->walk + walks);
    c->rule_mask = slots - 1;
    for (int i = 0; i < walks; ++i) set_start(c, i, kFrames);
    // Zeroed rules are empty: no clearing below (it would touch every page of a table that
    // python's interpreter fills only in part, 256 KiB when sampling densely).
    c->gen = g_code_gen.load(std::memory_order_relaxed);
  }
  uint32_t gen = g_code_gen.load(std::memory_order_relaxed);
  if (HS_UNLIKELY(c->gen != gen)) {
    memset(c->rules, 0, sizeof(RuleSlot) * (c->rule_mask + 1));
    memset(c->join_index, 0, sizeof(c->join_index));
    for (int i = 0; i < c->walks; ++i) {
      set_start(c, i, kFrames);
      c->last_use[i] = 0;
    }
    memset(c->own, 0, sizeof(c->own));  // (their rules may have been wrong: as the others)
    c->gen = gen;
  }
  ++c->clock;

  uintptr_t ip, sp, bp;
  if (int declined = cross_own_frames(c, r, lo, hi, &ip, &sp, &bp)) return declined;
  uintptr_t *fip = c->fip;
  Frame *ff = c->ff;
  int n = 0;
  // Most stacks are one of the remembered walks whole (sqlite3: 98.5% of them): the first frame
  // against every walk's first.
  for (int i = 0; i < c->walks; ++i) {
    if (c->leaf_sp[i] != sp || c->leaf_ip[i] != ip) continue;
    Walk &w = c->walk[i];
    int k = w.start;
    if (!bp_agrees(w, k, bp) || first_change(w, k) >= 0) continue;
    used(c, i);
    *out = &w.ip[k];
    *id = &w.stack_id;
    return kFrames - k;
  }
  // Else a join further out: at each frame, the remembered frame in the same state, if any, and
  // whether its walk holds from there. A check that failed at frame m of a walk rules out every
  // join with it up to m.
  int first_join[kWalksDense] = {};
  uint8_t end;
  uintptr_t end_cfa = 0;
  for (;;) {
    if (uint32_t e = c->join_index[join_slot(sp, ip)]) {
      int i = int(e - 1) >> kJoinFrameBits, k = int(e - 1) & ((1 << kJoinFrameBits) - 1);
      if (joins(c, i, k, n, first_join, sp, ip, bp)) return join(c, i, k, n, out, id);
    }
    if (n == kFrames) return kTooDeep;
    frame_rules::Rule rule;
    if (!rule_of(c, ip, &rule)) {
      c->declined_pc = ip;
      return kNoRule;
    }
    fip[n] = ip;
    // kBpNeeded here means "this frame's CFA comes from rbp"; made cumulative by mark_bp_needed.
    ff[n] = Frame{sp, bp, Meta{rule.bp_offset, uint8_t((rule.flags & kBpSaved) |
                                                       (rule.base == frame_rules::kCfaFromBp ? kBpNeeded : 0))}};
    ++n;
    if (rule.flags & frame_rules::kOutermost) {
      end = kEndOutermost;
      break;
    }
    uintptr_t cfa, ra;
    if (!step_frame(rule, sp, bp, lo, hi, &cfa, &ra)) return kOutOfStack;
    if (ra == 0) {
      end = kEndZeroReturn;
      end_cfa = cfa;
      break;
    }
    if (rule.flags & frame_rules::kBpSaved) {
      // (At or above the frame's stack pointer, like every read: the stack is mapped from the
      // walk's first frame up, whatever lo says about pages below.)
      uintptr_t at = cfa + intptr_t(rule.bp_offset);
      if (at < sp || !in_stack(at, lo, hi)) return kOutOfStack;
      bp = *reinterpret_cast<const uintptr_t *>(at);
    }
    ip = ra;
    sp = cfa;
  }
  // A walk of its own: it replaces the oldest remembered one.
  int d = victim(c);
  Walk &to = c->walk[d];
  int start = kFrames - n;
  copy_frames(to, start, fip, ff, n);
  mark_bp_needed(to, start, kFrames, false);
  set_start(c, d, start);
  index_frames(c, d, start, kFrames);
  to.end = end;
  to.end_cfa = end_cfa;
  used(c, d);
  *out = &to.ip[start];
  *id = &to.stack_id;
  return n;
}

}  // namespace hs::fast_unwind
