#include "fast_unwind.h"

#include <atomic>
#include <cstring>

#include "common.h"
#include "frame_rules.h"
#include "private_heap.h"
#include "unwinder.h"

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

constexpr int kFrames = unwind::kMaxDepth + unwind::kOwnFrames + 8;
constexpr uint32_t kRuleSlots = 1024;

// A frame's rule as the walk used it, and whether the frames from it outwards need its rbp
// (to compute a CFA before some frame restores rbp from the stack).
enum : uint8_t { kBpSaved = frame_rules::kBpSaved, kBpNeeded = 0x40 };
struct Meta {
  int16_t bp_offset;
  uint8_t flags;
};

enum End : uint8_t { kEndOutermost, kEndZeroReturn };

struct RuleSlot {
  uintptr_t pc;  // the frame's return address (0: empty)
  frame_rules::Rule rule;  // flags kRuleMissing: none usable
};
constexpr uint8_t kRuleMissing = 0x80;

}  // namespace

struct Cache {
  uint32_t gen;
  // The previous walk, outermost frame last, in [start, kFrames): its return addresses are the
  // result handed out, leaf first, without a copy.
  int start;         // kFrames: no previous walk
  uint8_t end;       // End
  uintptr_t end_cfa; // kEndZeroReturn: where the walk read the 0
  uintptr_t declined_pc;  // the frame of the last kNoRule
  uintptr_t ip[kFrames], sp[kFrames], bp[kFrames];
  Meta meta[kFrames];
  // The frames of the walk in progress until it joins the previous one (here, not on the
  // program's stack: the walk runs inside its malloc, maybe on a small thread stack).
  uintptr_t fip[kFrames], fsp[kFrames], fbp[kFrames];
  Meta fmeta[kFrames];
  RuleSlot rules[kRuleSlots];
};

namespace {

HS_INLINE bool in_stack(uintptr_t a, uint64_t lo, uint64_t hi) { return a >= lo && a <= hi - 8; }

HS_INLINE bool rule_of(Cache *c, uintptr_t ip, frame_rules::Rule *out) {
  RuleSlot &s = c->rules[(ip ^ (ip >> 10)) & (kRuleSlots - 1)];
  if (HS_UNLIKELY(s.pc != ip)) {
    s.pc = ip;
    if (!frame_rules::find(ip - 1, &s.rule)) s.rule.flags = kRuleMissing;
  }
  *out = s.rule;
  return !(s.rule.flags & kRuleMissing);
}

// The previous walk from its frame k outwards still holds: every word it read is unchanged.
// (Reads the stack's words raw: no sanitizer may object to a return-address slot.)
__attribute__((no_sanitize("address", "undefined"))) bool still_holds(const Cache *c, int k, uint64_t lo,
                                                                      uint64_t hi) {
  for (int m = k; m + 1 < kFrames; ++m) {
    uintptr_t cfa = c->sp[m + 1];
    if (*reinterpret_cast<const uintptr_t *>(cfa - 8) != c->ip[m + 1]) return false;
    if (c->meta[m].flags & kBpSaved) {
      uintptr_t at = cfa + intptr_t(c->meta[m].bp_offset);
      if (*reinterpret_cast<const uintptr_t *>(at) != c->bp[m + 1]) return false;
    }
  }
  if (c->end == kEndZeroReturn && *reinterpret_cast<const uintptr_t *>(c->end_cfa - 8) != 0) return false;
  (void)lo;
  (void)hi;  // (every address above was inside the stack when the previous walk read it)
  return true;
}

}  // namespace

uintptr_t declined_pc(const Cache *c) { return c ? c->declined_pc : 0; }

void code_changed() { g_code_gen.fetch_add(1, std::memory_order_relaxed); }

void release(Cache *cache) {
  if (cache) heap::release(cache);
}

__attribute__((no_sanitize("address", "undefined"))) HS_NOINLINE int walk(Cache *&cache, uint64_t lo, uint64_t hi,
                                                                        const uintptr_t **out) {
  Regs r;
  hs_unwind_regs(&r);
  if (!lo || !in_stack(r.sp, lo, hi)) return kOtherStack;  // sigaltstack, a coroutine's
  Cache *c = cache;
  if (HS_UNLIKELY(!c)) {
    c = cache = static_cast<Cache *>(heap::alloc_zeroed(sizeof(Cache)));
    if (!c) return kNoMemory;
    c->start = kFrames;
  }
  uint32_t gen = g_code_gen.load(std::memory_order_relaxed);
  if (HS_UNLIKELY(c->gen != gen)) {
    memset(c->rules, 0, sizeof(c->rules));
    c->start = kFrames;
    c->gen = gen;
  }

  uintptr_t *fip = c->fip, *fsp = c->fsp, *fbp = c->fbp;
  Meta *fmeta = c->fmeta;
  int n = 0;
  int k = c->start;  // the previous walk's first frame not below the current one
  uintptr_t ip = r.ip, sp = r.sp, bp = r.bp;
  uint8_t end;
  uintptr_t end_cfa = 0;
  for (;;) {
    while (k < kFrames && c->sp[k] < sp) ++k;
    if (k < kFrames && c->sp[k] == sp && c->ip[k] == ip &&
        (c->bp[k] == bp || !(c->meta[k].flags & kBpNeeded)) && k >= n && still_holds(c, k, lo, hi)) {
      // Join: the fresh frames go just below frame k.
      int start = k - n;
      for (int i = 0; i < n; ++i) {
        c->ip[start + i] = fip[i];
        c->sp[start + i] = fsp[i];
        c->bp[start + i] = fbp[i];
        c->meta[start + i] = fmeta[i];
      }
      // kBpNeeded of the new frames (those from k on are unchanged).
      bool need = c->meta[k].flags & kBpNeeded;
      for (int i = k - 1; i >= start; --i) {
        Meta &m = c->meta[i];
        need = (m.flags & kBpNeeded) || (!(m.flags & kBpSaved) && need);
        m.flags = uint8_t((m.flags & ~kBpNeeded) | (need ? kBpNeeded : 0));
      }
      c->start = start;
      *out = &c->ip[start];
      return kFrames - start;
    }
    if (n == kFrames) return kTooDeep;
    frame_rules::Rule rule;
    if (!rule_of(c, ip, &rule)) {
      c->declined_pc = ip;
      return kNoRule;
    }
    fip[n] = ip;
    fsp[n] = sp;
    fbp[n] = bp;
    // kBpNeeded here means "this frame's CFA comes from rbp"; made cumulative below.
    fmeta[n] = Meta{rule.bp_offset, uint8_t((rule.flags & kBpSaved) |
                                            (rule.base == frame_rules::kCfaFromBp ? kBpNeeded : 0))};
    ++n;
    if (rule.flags & frame_rules::kOutermost) {
      end = kEndOutermost;
      break;
    }
    uintptr_t cfa = (rule.base == frame_rules::kCfaFromBp ? bp : sp) + intptr_t(rule.cfa_offset);
    if (cfa <= sp || !in_stack(cfa - 8, lo, hi)) return kOutOfStack;
    uintptr_t ra = *reinterpret_cast<const uintptr_t *>(cfa - 8);
    if (ra == 0) {
      end = kEndZeroReturn;
      end_cfa = cfa;
      break;
    }
    if (rule.flags & frame_rules::kBpSaved) {
      uintptr_t at = cfa + intptr_t(rule.bp_offset);
      if (!in_stack(at, lo, hi)) return kOutOfStack;
      bp = *reinterpret_cast<const uintptr_t *>(at);
    }
    ip = ra;
    sp = cfa;
  }
  // A walk of its own: it replaces the previous one.
  int start = kFrames - n;
  bool need = false;
  for (int i = n - 1; i >= 0; --i) {
    Meta m = fmeta[i];
    need = (m.flags & kBpNeeded) || (!(m.flags & kBpSaved) && need);
    m.flags = uint8_t((m.flags & ~kBpNeeded) | (need ? kBpNeeded : 0));
    c->ip[start + i] = fip[i];
    c->sp[start + i] = fsp[i];
    c->bp[start + i] = fbp[i];
    c->meta[start + i] = m;
  }
  c->start = start;
  c->end = end;
  c->end_cfa = end_cfa;
  *out = &c->ip[start];
  return n;
}

}  // namespace hs::fast_unwind
