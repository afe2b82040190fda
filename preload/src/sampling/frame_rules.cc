// .eh_frame_hdr lookup and a DWARF CFA-program interpreter for the x86-64 subset compilers emit
// (see frame_rules.h). References: the System V x86-64 psABI (DWARF register numbers, .eh_frame
// layout), the LSB's description of .eh_frame / .eh_frame_hdr and DWARF 4 section 6.4.
// Hand-written: libunwind and libgcc have the same interpreter inside, but neither exposes the
// rule it finds for an address, and libdw's (dwarf_cfi_addrframe) allocates through malloc.
#include "sampling/frame_rules.h"

#include <dlfcn.h>

#include <cstring>

namespace hs::frame_rules {
namespace {

// DWARF register numbers (x86-64 psABI).
constexpr uint64_t kRegBp = 6, kRegSp = 7, kRegRa = 16;

// Pointer encodings (DW_EH_PE_*).
constexpr uint8_t kPeOmit = 0xff, kPeUleb = 0x01, kPeUdata2 = 0x02, kPeUdata4 = 0x03, kPeUdata8 = 0x04,
                  kPeSleb = 0x09, kPeSdata2 = 0x0a, kPeSdata4 = 0x0b, kPeSdata8 = 0x0c, kPePcrel = 0x10,
                  kPeDatarel = 0x30, kPeIndirect = 0x80;

// Reads within [p, end); any read past end (or an unknown encoding) clears ok.
struct Reader {
  const uint8_t *p, *end;
  bool ok = true;

  bool has(size_t n) {
    if (ok && size_t(end - p) >= n) return true;
    ok = false;
    return false;
  }
  template <typename T>
  T fixed() {
    T v{};
    if (!has(sizeof(T))) return v;
    memcpy(&v, p, sizeof(T));
    p += sizeof(T);
    return v;
  }
  uint64_t uleb() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (!has(1)) return 0;
      uint8_t b = *p++;
      v |= uint64_t(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
    ok = false;
    return 0;
  }
  int64_t sleb() {
    uint64_t v = 0;
    int shift = 0;
    uint8_t b = 0x80;
    while (shift < 64) {
      if (!has(1)) return 0;
      b = *p++;
      v |= uint64_t(b & 0x7f) << shift;
      shift += 7;
      if (!(b & 0x80)) break;
    }
    if (b & 0x80) {
      ok = false;
      return 0;
    }
    if (shift < 64 && (b & 0x40)) v |= ~uint64_t(0) << shift;
    return int64_t(v);
  }
  // A pointer in encoding enc; pcrel is relative to the field's own address, datarel to base.
  uint64_t encoded(uint8_t enc, uintptr_t datarel_base) {
    if (enc == kPeOmit) {
      ok = false;
      return 0;
    }
    uintptr_t field = reinterpret_cast<uintptr_t>(p);
    uint64_t v = 0;
    switch (enc & 0x0f) {
      case 0x00: v = fixed<uint64_t>(); break;  // absptr
      case kPeUleb: v = uleb(); break;
      case kPeUdata2: v = fixed<uint16_t>(); break;
      case kPeUdata4: v = fixed<uint32_t>(); break;
      case kPeUdata8: v = fixed<uint64_t>(); break;
      case kPeSleb: v = uint64_t(sleb()); break;
      case kPeSdata2: v = uint64_t(int64_t(fixed<int16_t>())); break;
      case kPeSdata4: v = uint64_t(int64_t(fixed<int32_t>())); break;
      case kPeSdata8: v = fixed<uint64_t>(); break;
      default: ok = false; return 0;
    }
    switch (enc & 0x70) {
      case 0x00: break;
      case kPePcrel: v += field; break;
      case kPeDatarel: v += datarel_base; break;
      default: ok = false; return 0;  // textrel, funcrel, aligned: not used on x86-64 Linux
    }
    if (enc & kPeIndirect) {
      if (!v) {
        ok = false;
        return 0;
      }
      memcpy(&v, reinterpret_cast<const void *>(v), sizeof(v));
    }
    return v;
  }
};

// The register rules the walker cares about while the CFA program runs.
enum : uint8_t { kSame = 0, kAtCfa = 1, kUndefined = 2, kOther = 3 };
struct State {
  uint64_t cfa_reg;
  int64_t cfa_offset;
  bool cfa_ok;  // false after a CFA expression
  uint8_t bp_rule, ra_rule;
  int64_t bp_offset, ra_offset;
};

struct Cie {
  uint64_t code_align;
  int64_t data_align;
  uint8_t fde_encoding;
  bool has_z;
  const uint8_t *insns, *end;
};

bool parse_cie(const uint8_t *cie, Cie *out) {
  Reader r{cie, cie + 4};
  uint64_t len = r.fixed<uint32_t>();
  if (!r.ok || len == 0 || len == 0xffffffffu) return false;  // 64-bit DWARF: not emitted here
  r.end = cie + 4 + len;
  if (r.fixed<uint32_t>() != 0) return false;  // not a CIE
  uint8_t version = r.fixed<uint8_t>();
  if (version != 1 && version != 3) return false;
  const char *aug = reinterpret_cast<const char *>(r.p);
  size_t aug_len = strnlen(aug, size_t(r.end - r.p));
  if (!r.has(aug_len + 1)) return false;
  r.p += aug_len + 1;
  out->code_align = r.uleb();
  out->data_align = r.sleb();
  uint64_t ra = version == 1 ? r.fixed<uint8_t>() : r.uleb();
  if (!r.ok || ra != kRegRa) return false;
  out->fde_encoding = 0;  // absptr
  out->has_z = aug_len > 0 && aug[0] == 'z';
  if (aug_len > 0 && !out->has_z) return false;  // pre-'z' augmentations ("eh"): not emitted since gcc 3
  if (out->has_z) {
    uint64_t data_len = r.uleb();
    if (!r.ok || data_len > uint64_t(r.end - r.p)) return false;
    const uint8_t *after = r.p + data_len;
    for (size_t i = 1; i < aug_len && r.ok; ++i) {
      switch (aug[i]) {
        case 'R': out->fde_encoding = r.fixed<uint8_t>(); break;
        case 'L': r.fixed<uint8_t>(); break;  // LSDA encoding (the FDE's data has the pointer)
        case 'P': {
          uint8_t enc = r.fixed<uint8_t>();
          r.encoded(enc & 0x7f, 0);  // the personality routine: skipped, never read through
          break;
        }
        case 'S': return false;  // a signal frame: its CFI is expressions over the sigcontext
        default: i = aug_len; break;  // unknown: 'z' says where the data ends
      }
    }
    if (!r.ok) return false;
    r.p = after;
  }
  out->insns = r.p;
  out->end = r.end;
  return r.ok;
}

// Runs a CFA program up to (not past) pc. initial: the CIE's rules, for DW_CFA_restore.
bool run_program(const uint8_t *p, const uint8_t *end, const Cie &cie, uintptr_t loc, uintptr_t pc,
                 State *s, const State *initial) {
  constexpr int kStackDepth = 8;
  State saved[kStackDepth];
  int depth = 0;
  Reader r{p, end};
  auto set_rule = [&](uint64_t reg, uint8_t rule, int64_t off) {
    if (reg == kRegBp) {
      s->bp_rule = rule;
      s->bp_offset = off;
    } else if (reg == kRegRa) {
      s->ra_rule = rule;
      s->ra_offset = off;
    }
  };
  auto restore = [&](uint64_t reg) {
    if (!initial) return set_rule(reg, kSame, 0);  // inside the CIE: back to the default
    if (reg == kRegBp) set_rule(reg, initial->bp_rule, initial->bp_offset);
    else if (reg == kRegRa) set_rule(reg, initial->ra_rule, initial->ra_offset);
  };
  auto advance = [&](uint64_t delta) {
    loc += delta * cie.code_align;
    return loc <= pc;
  };
  while (r.p < r.end && r.ok) {
    uint8_t op = r.fixed<uint8_t>();
    uint8_t low = op & 0x3f;
    switch (op & 0xc0) {
      case 0x40:  // advance_loc
        if (!advance(low)) return true;
        continue;
      case 0x80:  // offset
        set_rule(low, kAtCfa, int64_t(r.uleb()) * cie.data_align);
        continue;
      case 0xc0:  // restore
        restore(low);
        continue;
      default: break;
    }
    switch (op) {
      case 0x00: break;  // nop
      case 0x01: {       // set_loc
        uintptr_t to = uintptr_t(r.encoded(cie.fde_encoding, 0));
        if (!r.ok) return false;
        if (to > pc) return true;
        loc = to;
        break;
      }
      case 0x02: if (!advance(r.fixed<uint8_t>())) return r.ok; break;
      case 0x03: if (!advance(r.fixed<uint16_t>())) return r.ok; break;
      case 0x04: if (!advance(r.fixed<uint32_t>())) return r.ok; break;
      case 0x05: {  // offset_extended
        uint64_t reg = r.uleb();
        set_rule(reg, kAtCfa, int64_t(r.uleb()) * cie.data_align);
        break;
      }
      case 0x06: restore(r.uleb()); break;                 // restore_extended
      case 0x07: set_rule(r.uleb(), kUndefined, 0); break;  // undefined
      case 0x08: set_rule(r.uleb(), kSame, 0); break;       // same_value
      case 0x09: {                                          // register
        uint64_t reg = r.uleb();
        r.uleb();
        set_rule(reg, kOther, 0);
        break;
      }
      case 0x0a:  // remember_state
        if (depth == kStackDepth) return false;
        saved[depth++] = *s;
        break;
      case 0x0b:  // restore_state: the whole row, CFA included (DWARF 4 6.4.2.4; gcc relies on it)
        if (depth == 0) return false;
        *s = saved[--depth];
        break;
      case 0x0c:  // def_cfa
        s->cfa_reg = r.uleb();
        s->cfa_offset = int64_t(r.uleb());
        s->cfa_ok = true;
        break;
      case 0x0d: s->cfa_reg = r.uleb(); break;                   // def_cfa_register
      case 0x0e: s->cfa_offset = int64_t(r.uleb()); break;       // def_cfa_offset
      case 0x0f: {                                               // def_cfa_expression
        uint64_t n = r.uleb();
        if (!r.has(n)) return false;
        r.p += n;
        s->cfa_ok = false;
        break;
      }
      case 0x10:    // expression
      case 0x16: {  // val_expression
        uint64_t reg = r.uleb();
        uint64_t n = r.uleb();
        if (!r.has(n)) return false;
        r.p += n;
        set_rule(reg, kOther, 0);
        break;
      }
      case 0x11: {  // offset_extended_sf
        uint64_t reg = r.uleb();
        set_rule(reg, kAtCfa, r.sleb() * cie.data_align);
        break;
      }
      case 0x12:  // def_cfa_sf
        s->cfa_reg = r.uleb();
        s->cfa_offset = r.sleb() * cie.data_align;
        s->cfa_ok = true;
        break;
      case 0x13: s->cfa_offset = r.sleb() * cie.data_align; break;  // def_cfa_offset_sf
      case 0x14:    // val_offset
      case 0x15: {  // val_offset_sf
        uint64_t reg = r.uleb();
        if (op == 0x14) r.uleb();
        else r.sleb();
        set_rule(reg, kOther, 0);
        break;
      }
      case 0x2e: r.uleb(); break;  // GNU_args_size
      case 0x2f: {                 // GNU_negative_offset_extended
        uint64_t reg = r.uleb();
        set_rule(reg, kAtCfa, -int64_t(r.uleb()) * cie.data_align);
        break;
      }
      default: return false;
    }
  }
  return r.ok;
}

// The FDE covering pc, by binary search in the module's .eh_frame_hdr table.
const uint8_t *find_fde(const uint8_t *hdr, uintptr_t pc) {
  if (hdr[0] != 1) return nullptr;
  uint8_t ptr_enc = hdr[1], count_enc = hdr[2], table_enc = hdr[3];
  const uintptr_t base = reinterpret_cast<uintptr_t>(hdr);
  Reader r{hdr + 4, hdr + 4 + 32};
  r.encoded(ptr_enc, base);
  uint64_t count = r.encoded(count_enc, base);
  // The table sorted by initial location, as 4-byte offsets from the header: the only layout
  // linkers write (and the only one a binary search can index).
  if (!r.ok || table_enc != (kPeDatarel | kPeSdata4) || count == 0) return nullptr;
  const auto *table = reinterpret_cast<const int32_t *>(r.p);
  int64_t rel = int64_t(pc - base);
  uint64_t lo = 0, hi = count;  // the last entry with start <= pc
  while (hi - lo > 1) {
    uint64_t mid = lo + (hi - lo) / 2;
    if (table[2 * mid] <= rel) lo = mid;
    else hi = mid;
  }
  if (table[2 * lo] > rel) return nullptr;
  return reinterpret_cast<const uint8_t *>(base + intptr_t(table[2 * lo + 1]));
}

}  // namespace

bool find(uintptr_t pc, Rule *out) {
  dl_find_object obj;
  if (_dl_find_object(reinterpret_cast<void *>(pc), &obj) != 0 || !obj.dlfo_eh_frame) return false;
  const uint8_t *fde = find_fde(static_cast<const uint8_t *>(obj.dlfo_eh_frame), pc);
  if (!fde) return false;
  Reader r{fde, fde + 8};
  uint64_t len = r.fixed<uint32_t>();
  if (!r.ok || len == 0 || len == 0xffffffffu) return false;
  const uint8_t *fde_end = fde + 4 + len;
  const uint8_t *id_field = r.p;
  uint32_t cie_offset = r.fixed<uint32_t>();
  if (!r.ok || cie_offset == 0) return false;  // a CIE, not an FDE
  Cie cie;
  if (!parse_cie(id_field - cie_offset, &cie)) return false;
  r.end = fde_end;
  uintptr_t start = uintptr_t(r.encoded(cie.fde_encoding, 0));
  uint64_t range = r.encoded(cie.fde_encoding & 0x0f, 0);
  if (!r.ok || pc < start || pc - start >= range) return false;
  if (cie.has_z) {
    uint64_t n = r.uleb();
    if (!r.has(n)) return false;
    r.p += n;
  }
  State s{kRegSp, 8, true, kSame, kUndefined, 0, 0};
  if (!run_program(cie.insns, cie.end, cie, start, pc, &s, nullptr)) return false;
  State initial = s;
  if (!run_program(r.p, fde_end, cie, start, pc, &s, &initial)) return false;
  if (!s.cfa_ok || (s.cfa_reg != kRegSp && s.cfa_reg != kRegBp)) return false;
  if (s.cfa_offset < INT32_MIN || s.cfa_offset > INT32_MAX) return false;
  Rule rule{int32_t(s.cfa_offset), 0, uint8_t(s.cfa_reg == kRegBp ? kCfaFromBp : kCfaFromSp), 0};
  if (s.ra_rule == kUndefined) {
    rule.flags |= kOutermost;
  } else if (s.ra_rule != kAtCfa || s.ra_offset != -8) {
    return false;
  }
  if (rule.flags & kOutermost) {
    // No caller: rbp's rule does not matter (_start marks it undefined too).
  } else if (s.bp_rule == kAtCfa) {
    if (s.bp_offset < INT16_MIN || s.bp_offset > INT16_MAX) return false;
    rule.flags |= kBpSaved;
    rule.bp_offset = int16_t(s.bp_offset);
  } else if (s.bp_rule != kSame) {
    return false;  // rbp undefined or elsewhere: unusual, leave it to libunwind
  }
  *out = rule;
  return true;
}

}  // namespace hs::frame_rules
