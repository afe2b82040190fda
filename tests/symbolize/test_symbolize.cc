// Tests for analyzer/symbolize: symbolizes return addresses recorded inside
// libsymbolize_target.so (built -g -O2) and checks names, lines, inlined chains, separate debug
// files, and the degraded cases. Ends with a throughput measurement (printed, not asserted).
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <gelf.h>
#include <sys/stat.h>
#include <link.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <fstream>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "symbolize/symbolizer.h"
#include "symbolize_target.h"

#ifndef HEAPSNAP_OBJCOPY
#define HEAPSNAP_OBJCOPY ""
#endif

namespace fs = std::filesystem;
using heapsnap::symbolize::ModuleInfo;
using heapsnap::symbolize::Symbolized;
using heapsnap::symbolize::Symbolizer;
using heapsnap::symbolize::SymbolizerOptions;
using Status = Symbolized::Status;

namespace {

struct LoadedModule {
  ModuleInfo info;
  std::vector<std::pair<uint64_t, uint64_t>> exec;  // runtime ranges
  bool found = false;
};

// Finds a loaded object whose name contains `needle` ("" = the main program) the way the
// capture does: dl_iterate_phdr gives the bias, the PT_NOTE segments the build-id.
LoadedModule find_loaded(const char* needle) {
  struct Arg {
    const char* needle;
    LoadedModule out;
  } arg{needle, {}};
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* p) -> int {
        auto* a = static_cast<Arg*>(p);
        const char* name = info->dlpi_name ? info->dlpi_name : "";
        bool match = a->needle[0] == '\0' ? name[0] == '\0' : std::strstr(name, a->needle) != nullptr;
        if (!match) return 0;
        LoadedModule& m = a->out;
        m.found = true;
        m.info.path = name[0] ? name : fs::canonical("/proc/self/exe").string();
        m.info.load_bias = info->dlpi_addr;
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const ElfW(Phdr)& ph = info->dlpi_phdr[i];
          if (ph.p_type == PT_LOAD && (ph.p_flags & PF_X))
            m.exec.emplace_back(info->dlpi_addr + ph.p_vaddr, info->dlpi_addr + ph.p_vaddr + ph.p_memsz);
          if (ph.p_type != PT_NOTE) continue;
          const char* p = reinterpret_cast<const char*>(info->dlpi_addr + ph.p_vaddr);
          const char* end = p + ph.p_memsz;
          while (p + sizeof(ElfW(Nhdr)) <= end) {
            auto* nh = reinterpret_cast<const ElfW(Nhdr)*>(p);
            const char* nm = p + sizeof(ElfW(Nhdr));
            const char* desc = nm + ((nh->n_namesz + 3) & ~3u);
            if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 && std::memcmp(nm, "GNU", 4) == 0)
              m.info.build_id.assign(desc, nh->n_descsz);
            p = desc + ((nh->n_descsz + 3) & ~3u);
          }
        }
        m.info.exec_ranges = m.exec;
        return 1;
      },
      &arg);
  return arg.out;
}

const LoadedModule& target() {
  static LoadedModule m = find_loaded("libsymbolize_target.so");
  return m;
}

std::string base(const std::string& path) { return fs::path(path).filename().string(); }

std::string hex(uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

struct TempDir {
  fs::path path;
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "symbolize_test.XXXXXX").string();
    if (mkdtemp(tmpl.data()) != nullptr) path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path.empty()) fs::remove_all(path, ec);
  }
};

bool have_objcopy() { return HEAPSNAP_OBJCOPY[0] != '\0' && access(HEAPSNAP_OBJCOPY, X_OK) == 0; }

bool objcopy(const std::string& args) {
  std::string cmd = std::string("'") + HEAPSNAP_OBJCOPY + "' " + args + " 2>&1";
  return std::system(cmd.c_str()) == 0;
}

std::string q(const fs::path& p) {
  std::string out = "'";
  out += p.string();  // (not "'" + s + "'": GCC 12 warns falsely, -Wrestrict)
  out += '\'';
  return out;
}

std::string build_id_hex(const std::string& raw) {
  std::string out;
  char buf[3];
  for (unsigned char c : raw) {
    std::snprintf(buf, sizeof buf, "%02x", c);
    out += buf;
  }
  return out;
}

// st_with_inline's call: two inlined frames, then the function, each at its line.
void check_inlined(Symbolizer& s, uint32_t h) {
  st_capture_t c{};
  st_with_inline(&c);
  const Symbolized& r = s.symbolize(h, reinterpret_cast<uint64_t>(c.ret));
  CHECK(r.status == Status::ok);
  REQUIRE(r.frames.size() == 3);
  CHECK(r.frames[0].function == "st_inline_inner(st_capture_t*, int)");
  CHECK(base(r.frames[0].file) == "symbolize_target_inline.h");
  CHECK(r.frames[0].line == static_cast<uint32_t>(c.line));
  CHECK(r.frames[0].inlined);
  CHECK(r.frames[1].function == "st_inline_outer(st_capture_t*, int)");
  CHECK(base(r.frames[1].file) == "symbolize_target_inline.h");
  CHECK(r.frames[1].line == static_cast<uint32_t>(c.call_line[0]));
  CHECK(r.frames[1].inlined);
  CHECK(r.frames[2].function == "st_with_inline");
  CHECK(base(r.frames[2].file) == "symbolize_target.cc");
  CHECK(r.frames[2].line == static_cast<uint32_t>(c.call_line[1]));
  CHECK_FALSE(r.frames[2].inlined);
  CHECK(s.describe(r) == "st_inline_inner(st_capture_t*, int) (symbolize_target_inline.h:" +
                             std::to_string(c.line) +
                             ") inlined into st_inline_outer(st_capture_t*, int) "
                             "(symbolize_target_inline.h:" +
                             std::to_string(c.call_line[0]) +
                             ") inlined into st_with_inline (symbolize_target.cc:" +
                             std::to_string(c.call_line[1]) + ")");
}

void check_plain(Symbolizer& s, uint32_t h) {
  st_capture_t c{};
  st_plain(&c);
  const Symbolized& r = s.symbolize(h, reinterpret_cast<uint64_t>(c.ret));
  CHECK(r.status == Status::ok);
  REQUIRE(r.frames.size() == 1);
  CHECK(r.frames[0].function == "st_plain");
  CHECK(base(r.frames[0].file) == "symbolize_target.cc");
  CHECK(r.frames[0].line == static_cast<uint32_t>(c.line));
  CHECK_FALSE(r.frames[0].inlined);
}

}  // namespace

TEST_CASE("target module is loaded with a build-id") {
  REQUIRE(target().found);
  CHECK(target().info.build_id.size() >= 8);
  CHECK(base(target().info.path) == "libsymbolize_target.so");
}

TEST_CASE("plain call: function, file and line of the call") {
  REQUIRE(target().found);
  Symbolizer s;
  uint32_t h = s.add_module(target().info);
  st_capture_t c{};
  st_plain(&c);
  auto pc = reinterpret_cast<uint64_t>(c.ret);
  const Symbolized& r = s.symbolize(h, pc);
  CHECK(r.status == Status::ok);
  CHECK(r.module == "libsymbolize_target.so");
  CHECK(r.module_offset == pc - target().info.load_bias);
  REQUIRE(r.frames.size() == 1);
  CHECK(r.frames[0].function == "st_plain");
  CHECK(base(r.frames[0].file) == "symbolize_target.cc");
  CHECK(r.frames[0].line == static_cast<uint32_t>(c.line));
  CHECK_FALSE(r.frames[0].inlined);
  CHECK(s.describe(r) == "st_plain (symbolize_target.cc:" + std::to_string(c.line) + ")");
  CHECK(s.warnings().empty());
}

TEST_CASE("inlined chain: inlined callees first, each outer frame at its call line") {
  REQUIRE(target().found);
  Symbolizer s;
  check_inlined(s, s.add_module(target().info));
}

TEST_CASE("C++ names are demangled, or left mangled when asked") {
  REQUIRE(target().found);
  st_capture_t t{}, m{};
  st_template(&t);
  st_method(&m);
  {
    Symbolizer s;
    uint32_t h = s.add_module(target().info);
    const Symbolized& rt = s.symbolize(h, reinterpret_cast<uint64_t>(t.ret));
    REQUIRE(rt.frames.size() == 1);
    CHECK(rt.frames[0].function == "void heapsnap_test::templated<int>(st_capture_t*, int)");
    CHECK(rt.frames[0].line == static_cast<uint32_t>(t.line));
    const Symbolized& rm = s.symbolize(h, reinterpret_cast<uint64_t>(m.ret));
    REQUIRE(rm.frames.size() == 1);
    CHECK(rm.frames[0].function == "heapsnap_test::Widget::poke(st_capture_t*) const");
    CHECK(rm.frames[0].line == static_cast<uint32_t>(m.line));
    // No linkage name (internal linkage): DW_AT_name qualified by the enclosing scopes.
    st_capture_t hc{};
    st_hidden(&hc);
    const Symbolized& rh = s.symbolize(h, reinterpret_cast<uint64_t>(hc.ret));
    REQUIRE(rh.frames.size() == 1);
    CHECK(rh.frames[0].function == "heapsnap_test::(anonymous namespace)::Hidden::run");
    CHECK(rh.frames[0].line == static_cast<uint32_t>(hc.line));
  }
  {
    SymbolizerOptions o;
    o.demangle = false;
    Symbolizer s(o);
    uint32_t h = s.add_module(target().info);
    const Symbolized& rt = s.symbolize(h, reinterpret_cast<uint64_t>(t.ret));
    CHECK(rt.frames[0].function == "_ZN13heapsnap_test9templatedIiEEvP12st_capture_tT_");
  }
}

TEST_CASE("exact addresses are not moved back by one") {
  REQUIRE(target().found);
  Symbolizer s;
  uint32_t h = s.add_module(target().info);
  auto entry = reinterpret_cast<uint64_t>(dlsym(RTLD_DEFAULT, "st_with_inline"));
  REQUIRE(entry != 0);
  const Symbolized& exact = s.symbolize(h, entry, false);
  CHECK(exact.status == Status::ok);
  CHECK(exact.frames.back().function == "st_with_inline");
  // As a return address, entry - 1 lies before the function (padding or another function).
  const Symbolized& ret = s.symbolize(h, entry, true);
  CHECK(&ret != &exact);
  CHECK(ret.frames.back().function != "st_with_inline");
}

TEST_CASE("results are cached per (module, pc); modules are deduplicated") {
  REQUIRE(target().found);
  Symbolizer s;
  uint32_t h = s.add_module(target().info);
  CHECK(s.add_module(target().info) == h);
  st_capture_t c{};
  st_plain(&c);
  auto pc = reinterpret_cast<uint64_t>(c.ret);
  const Symbolized& a = s.symbolize(h, pc);
  const Symbolized& b = s.symbolize(h, pc);
  CHECK(&a == &b);
  // Many other lookups (growing the cache) keep earlier references valid.
  for (uint64_t i = 0; i < 5000; ++i) s.symbolize(h, pc + i + 1);
  CHECK(&s.symbolize(h, pc) == &a);
  CHECK(a.frames[0].function == "st_plain");

  // The same file mapped at another address in another process: same answer, own offset.
  ModuleInfo moved = target().info;
  moved.load_bias += 0x10000000;
  uint32_t h2 = s.add_module(moved);
  CHECK(h2 != h);
  const Symbolized& m = s.symbolize(h2, pc + 0x10000000);
  CHECK(m.frames[0].function == "st_plain");
  CHECK(m.module_offset == a.module_offset);
}

TEST_CASE("missing module degrades to module+offset with one warning") {
  Symbolizer s;
  ModuleInfo mi;
  mi.path = "/nonexistent/dir/libmissing.so";
  mi.load_bias = 0x7f0000000000;
  mi.build_id = "\x01\x02\x03\x04";
  uint32_t h = s.add_module(mi);
  CHECK(s.warnings().empty());  // lazy: nothing opened yet
  const Symbolized& r = s.symbolize(h, mi.load_bias + 0x1234);
  CHECK(r.status == Status::module_missing);
  CHECK(r.module == "libmissing.so");
  CHECK(r.module_offset == 0x1234);
  REQUIRE(r.frames.size() == 1);
  CHECK(r.frames[0].function.empty());
  CHECK(s.describe(r) == "libmissing.so+0x1234");
  s.symbolize(h, mi.load_bias + 0x5678);
  REQUIRE(s.warnings().size() == 1);
  CHECK(s.warnings()[0].find("/nonexistent/dir/libmissing.so") != std::string::npos);

  // vdso has no file: module+offset, no warning.
  ModuleInfo vdso;
  vdso.path = "linux-vdso.so.1";
  vdso.load_bias = 0x7fff0000;
  CHECK(s.describe(s.symbolize(s.add_module(vdso), 0x7fff0100)) == "linux-vdso.so.1+0x100");
  CHECK(s.warnings().size() == 1);

  // An invalid handle does not crash.
  CHECK(s.symbolize(12345, 0x1000).status == Status::module_missing);
}

TEST_CASE("an address outside every function: module+offset") {
  REQUIRE(target().found);
  Symbolizer s;
  uint32_t h = s.add_module(target().info);
  // The ELF header: mapped, but no symbol or DWARF covers it.
  const Symbolized& r = s.symbolize(h, target().info.load_bias + 0x10, false);
  CHECK(r.status == Status::no_symbols);
  CHECK(s.describe(r) == "libsymbolize_target.so+0x10");
}

TEST_CASE("truncated copies of a module never crash") {
  REQUIRE(target().found);
  TempDir tmp;
  REQUIRE(!tmp.path.empty());
  std::ifstream in(target().info.path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  REQUIRE(bytes.size() > 4096);
  st_capture_t c{};
  st_plain(&c);
  for (size_t len : {size_t{0}, size_t{16}, size_t{64}, size_t{1000}, bytes.size() / 3,
                     bytes.size() / 2, bytes.size() - 100}) {
    fs::path p = tmp.path / ("cut" + std::to_string(len) + ".so");
    std::ofstream(p, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(len));
    Symbolizer s;
    ModuleInfo mi = target().info;
    mi.path = p.string();
    mi.build_id.clear();
    const Symbolized& r = s.symbolize(s.add_module(mi), reinterpret_cast<uint64_t>(c.ret));
    CHECK(r.frames.size() >= 1);
    CHECK(!s.describe(r).empty());
  }
}

TEST_CASE("a file that is not ELF is treated as missing") {
  TempDir tmp;
  REQUIRE(!tmp.path.empty());
  fs::path junk = tmp.path / "libjunk.so";
  std::ofstream(junk) << "this is not an ELF file\n";
  Symbolizer s;
  ModuleInfo mi;
  mi.path = junk.string();
  mi.load_bias = 0x1000;
  const Symbolized& r = s.symbolize(s.add_module(mi), 0x1010);
  CHECK(r.status == Status::module_missing);
  CHECK(s.describe(r) == "libjunk.so+0x10");
  CHECK(s.warnings().size() == 1);
}

TEST_CASE("build-id mismatch: not trusted, module+offset, one warning per module") {
  REQUIRE(target().found);
  Symbolizer s;
  ModuleInfo mi = target().info;
  mi.build_id = std::string(20, '\x5a');
  uint32_t h = s.add_module(mi);
  st_capture_t c{};
  st_plain(&c);
  auto pc = reinterpret_cast<uint64_t>(c.ret);
  const Symbolized& r = s.symbolize(h, pc);
  CHECK(r.status == Status::build_id_mismatch);
  REQUIRE(r.frames.size() == 1);
  CHECK(r.frames[0].function.empty());
  CHECK(s.describe(r) == "libsymbolize_target.so+" + hex(pc - mi.load_bias));
  s.symbolize(h, pc + 4);
  REQUIRE(s.warnings().size() == 1);
  CHECK(s.warnings()[0].find("build-id mismatch") != std::string::npos);
  CHECK(s.warnings()[0].find(mi.path) != std::string::npos);

  // No recorded build-id: the file is trusted.
  ModuleInfo none = target().info;
  none.build_id.clear();
  CHECK(s.symbolize(s.add_module(none), pc).status == Status::ok);
}

TEST_CASE("prefetch: the same answers, warnings and mismatches as without it") {
  REQUIRE(target().found);
  st_capture_t c{};
  st_with_inline(&c);
  auto pc = reinterpret_cast<uint64_t>(c.ret);
  Symbolizer plain;
  const Symbolized& want = plain.symbolize(plain.add_module(target().info), pc);

  Symbolizer s;
  uint32_t h = s.add_module(target().info);
  ModuleInfo wrong = target().info;
  wrong.build_id = std::string(20, '\x5a');
  uint32_t hw = s.add_module(wrong);  // same file, another recorded build-id: must stay untrusted
  ModuleInfo missing;
  missing.path = "/nonexistent/libgone.so";
  uint32_t hm = s.add_module(missing);
  s.prefetch(h);
  s.prefetch(hw);
  s.prefetch(hm);
  s.prefetch(h);    // again: nothing more queued
  s.prefetch(999);  // no such module: ignored
  const Symbolized& got = s.symbolize(h, pc);
  CHECK(got.status == Status::ok);
  CHECK(s.describe(got) == plain.describe(want));
  CHECK(got.frames.size() == 3);
  CHECK(s.symbolize(hw, pc).status == Status::build_id_mismatch);
  CHECK(s.symbolize(hm, 0x1234).status == Status::module_missing);
  CHECK(s.warnings().size() == 2);
  s.prefetch(h);  // after the first answer: does nothing
  check_plain(s, h);
}

TEST_CASE("prefetch: a Symbolizer destroyed while its thread still works") {
  REQUIRE(target().found);
  for (int i = 0; i < 20; ++i) {
    Symbolizer s;
    s.prefetch(s.add_module(target().info));
  }
}

TEST_CASE("separate debug files: build-id directory, debuglink, CRC, symbols only") {
  REQUIRE(target().found);
  if (!have_objcopy()) {
    MESSAGE("objcopy not found; skipping separate debug file tests");
    return;
  }
  TempDir tmp;
  REQUIRE(!tmp.path.empty());
  const fs::path lib = target().info.path;
  const std::string id = build_id_hex(target().info.build_id);
  st_capture_t c{}, t{};
  st_plain(&c);
  st_template(&t);
  const uint64_t pc = reinterpret_cast<uint64_t>(c.ret);
  const uint64_t tpc = reinterpret_cast<uint64_t>(t.ret);

  // Fully stripped copy + debug file under <dir>/.build-id/xx/yyyy.debug.
  fs::path stripped_dir = tmp.path / "stripped";
  fs::path dbg = tmp.path / "debug";
  fs::create_directories(stripped_dir);
  fs::create_directories(dbg / ".build-id" / id.substr(0, 2));
  fs::path stripped = stripped_dir / "libsymbolize_target.so";
  REQUIRE(objcopy("--only-keep-debug " + q(lib) + " " +
                  q(dbg / ".build-id" / id.substr(0, 2) / (id.substr(2) + ".debug"))));
  REQUIRE(objcopy("--strip-all " + q(lib) + " " + q(stripped)));
  ModuleInfo mi = target().info;
  mi.path = stripped.string();

  SUBCASE("found by build-id in a configured debug dir") {
    SymbolizerOptions o;
    o.debug_dirs = {dbg.string()};
    Symbolizer s(o);
    check_plain(s, s.add_module(mi));
    CHECK(s.warnings().empty());
  }
  SUBCASE("no debug dir: .dynsym only") {
    SymbolizerOptions o;
    o.debug_dirs = {};
    Symbolizer s(o);
    uint32_t h = s.add_module(mi);
    const Symbolized& r = s.symbolize(h, pc);
    CHECK(r.status == Status::no_debug_info);
    REQUIRE(r.frames.size() == 1);
    CHECK(r.frames[0].function == "st_plain");
    CHECK(r.frames[0].file.empty());
    CHECK(s.describe(r) == "st_plain (libsymbolize_target.so+" + hex(pc - mi.load_bias) + ")");
    CHECK(s.symbolize(h, tpc).frames[0].function ==
          "void heapsnap_test::templated<int>(st_capture_t*, int)");
  }
  SUBCASE("found through .gnu_debuglink in the .debug subdir, checked by build-id") {
    fs::path dir = tmp.path / "linked";
    fs::create_directories(dir / ".debug");
    fs::path dfile = dir / ".debug" / "libsymbolize_target.so.debug";
    REQUIRE(objcopy("--only-keep-debug " + q(lib) + " " + q(dfile)));
    REQUIRE(objcopy("--strip-debug --add-gnu-debuglink=" + q(dfile) + " " + q(lib) + " " +
                    q(dir / "libsymbolize_target.so")));
    SymbolizerOptions o;
    o.debug_dirs = {};
    Symbolizer s(o);
    ModuleInfo linked = mi;
    linked.path = (dir / "libsymbolize_target.so").string();
    check_plain(s, s.add_module(linked));
  }
  SUBCASE("debuglink without build-id: validated by CRC32") {
    fs::path dir = tmp.path / "nobuildid";
    fs::create_directories(dir / ".debug");
    fs::path full = tmp.path / "full-nobuildid.so";
    fs::path dfile = dir / ".debug" / "libnoid.so.debug";
    REQUIRE(objcopy("--remove-section=.note.gnu.build-id " + q(lib) + " " + q(full)));
    REQUIRE(objcopy("--only-keep-debug " + q(full) + " " + q(dfile)));
    REQUIRE(objcopy("--strip-debug --add-gnu-debuglink=" + q(dfile) + " " + q(full) + " " +
                    q(dir / "libnoid.so")));
    ModuleInfo noid = mi;
    noid.path = (dir / "libnoid.so").string();
    noid.build_id.clear();
    {
      SymbolizerOptions o;
      o.debug_dirs = {};
      Symbolizer s(o);
      check_plain(s, s.add_module(noid));
    }
    std::ofstream(dfile, std::ios::app) << "x";  // CRC no longer matches
    {
      SymbolizerOptions o;
      o.debug_dirs = {};
      Symbolizer s(o);
      const Symbolized& r = s.symbolize(s.add_module(noid), pc);
      CHECK(r.status == Status::no_debug_info);
      CHECK(r.frames[0].function == "st_plain");
    }
  }
}

namespace {

// Sections of an ELF file: how many there are and how many are SHF_COMPRESSED (-1, -1: unreadable).
std::pair<int, int> section_counts(const fs::path& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {-1, -1};
  elf_version(EV_CURRENT);
  std::pair<int, int> n{-1, -1};
  if (Elf* elf = elf_begin(fd, ELF_C_READ, nullptr)) {
    n = {0, 0};
    for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn != nullptr; scn = elf_nextscn(elf, scn)) {
      GElf_Shdr sh;
      if (gelf_getshdr(scn, &sh) == nullptr) continue;
      ++n.first;
      if (sh.sh_flags & SHF_COMPRESSED) ++n.second;
    }
    elf_end(elf);
  }
  close(fd);
  return n;
}

uint64_t plain_pc() {
  st_capture_t c{};
  st_plain(&c);
  return reinterpret_cast<uint64_t>(c.ret);
}

}  // namespace

TEST_CASE("debug cache: a compressed debug file is kept inflated and used from there") {
  REQUIRE(target().found);
  if (!have_objcopy()) {
    MESSAGE("objcopy not found; skipping the debug cache tests");
    return;
  }
  TempDir tmp;
  REQUIRE(!tmp.path.empty());
  const fs::path lib = target().info.path;
  const std::string id = build_id_hex(target().info.build_id);
  REQUIRE(!id.empty());
  fs::path dbg = tmp.path / "debug";
  fs::path dfile = dbg / ".build-id" / id.substr(0, 2) / (id.substr(2) + ".debug");
  fs::create_directories(dfile.parent_path());
  fs::path stripped = tmp.path / "libsymbolize_target.so";
  REQUIRE(objcopy("--only-keep-debug --compress-debug-sections=zlib " + q(lib) + " " + q(dfile)));
  REQUIRE(objcopy("--strip-all " + q(lib) + " " + q(stripped)));
  auto [sections, compressed] = section_counts(dfile);
  REQUIRE(compressed > 0);  // what the cache is for
  ModuleInfo mi = target().info;
  mi.path = stripped.string();
  const fs::path cache = tmp.path / "cache" / "debug";
  const fs::path copy = cache / (id + ".debug");
  SymbolizerOptions with_debug;
  with_debug.debug_dirs = {dbg.string()};
  with_debug.cache_dir = cache.string();
  SymbolizerOptions cache_only = with_debug;
  cache_only.debug_dirs = {};

  {
    Symbolizer s(with_debug);
    uint32_t h = s.add_module(mi);
    s.prefetch(h);  // the copy is written by the thread that loads the file
    check_plain(s, h);
    check_inlined(s, h);
    CHECK(s.warnings().empty());
  }
  REQUIRE(fs::exists(copy));
  CHECK(section_counts(copy) == std::make_pair(sections, 0));  // every section, none compressed
  CHECK((fs::status(cache).permissions() & (fs::perms::group_all | fs::perms::others_all)) == fs::perms::none);

  SUBCASE("the copy answers alone: same functions, lines and inlined frames") {
    fs::remove(dfile);
    Symbolizer s(cache_only);
    uint32_t h = s.add_module(mi);
    check_plain(s, h);
    check_inlined(s, h);
    CHECK(s.warnings().empty());
  }
  SUBCASE("a copy that is not ELF, or of another build id, is not used; the next load replaces it") {
    for (int variant = 0; variant < 2; ++variant) {
      if (variant == 0) {
        std::ofstream(copy, std::ios::trunc) << "not an ELF file";
      } else {
        fs::remove(copy);
        fs::copy_file(stripped, copy);  // ELF, and this build id's file, but no DWARF: a debug file
        REQUIRE(objcopy("--remove-section=.note.gnu.build-id " + q(copy)));  // of no build id
      }
      {
        Symbolizer s(cache_only);
        const Symbolized& r = s.symbolize(s.add_module(mi), plain_pc());
        CHECK(r.status == Status::no_debug_info);  // .dynsym of the stripped file: no line
      }
      {
        Symbolizer s(with_debug);
        check_plain(s, s.add_module(mi));
      }
      CHECK(section_counts(copy) == std::make_pair(sections, 0));
    }
  }
  SUBCASE("a copy with DWARF but another build id, or a symlink to a good copy, is not used") {
    // The copy with one byte of its build id changed: DWARF that would answer, for another file
    // (libdwfl checks a debug file's build id too: either check keeps it out).
    fs::path note = tmp.path / "note.bin";
    REQUIRE(objcopy("-O binary --only-section=.note.gnu.build-id " + q(copy) + " " + q(note)));
    std::string bytes;
    {
      std::ifstream in(note, std::ios::binary);
      bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
    REQUIRE(bytes.size() > 16);
    bytes.back() = char(bytes.back() ^ 0x5a);
    std::ofstream(note, std::ios::binary | std::ios::trunc) << bytes;
    fs::path good = tmp.path / "good.debug";
    fs::copy_file(copy, good);
    REQUIRE(objcopy("--update-section .note.gnu.build-id=" + q(note) + " " + q(copy)));
    fs::remove(dfile);
    {
      Symbolizer s(cache_only);
      CHECK(s.symbolize(s.add_module(mi), plain_pc()).status == Status::no_debug_info);
    }
    fs::remove(copy);
    fs::create_symlink(good, copy);  // O_NOFOLLOW
    {
      Symbolizer s(cache_only);
      CHECK(s.symbolize(s.add_module(mi), plain_pc()).status == Status::no_debug_info);
    }
    fs::remove(copy);
    fs::copy_file(good, copy);  // the control: the same bytes as a file of the cache are used
    Symbolizer s(cache_only);
    check_plain(s, s.add_module(mi));
  }
  SUBCASE("a cache directory others can write is not used") {
    fs::remove(dfile);
    fs::permissions(cache, fs::perms::group_write | fs::perms::others_write, fs::perm_options::add);
    {
      Symbolizer s(cache_only);
      CHECK(s.symbolize(s.add_module(mi), plain_pc()).status == Status::no_debug_info);
    }
    fs::permissions(cache, fs::perms::group_write | fs::perms::others_write, fs::perm_options::remove);
    Symbolizer s(cache_only);
    check_plain(s, s.add_module(mi));
  }
  SUBCASE("a debug file linking a dwz alt file is not copied (the link may be relative to it)") {
    fs::remove(copy);
    fs::path link = tmp.path / "altlink.bin";
    std::ofstream(link, std::ios::binary) << std::string("../../.dwz/x.debug\0\x01\x02\x03\x04", 23);
    REQUIRE(objcopy("--add-section .gnu_debugaltlink=" + q(link) + " " + q(dfile)));
    {
      Symbolizer s(with_debug);
      check_plain(s, s.add_module(mi));
    }
    CHECK_FALSE(fs::exists(copy));
  }
  SUBCASE("a copy another user owns is not used") {
    if (geteuid() != 0) {
      MESSAGE("not root: cannot give the copy to another user");
      return;
    }
    REQUIRE(chown(copy.c_str(), 65534, 65534) == 0);
    fs::remove(dfile);
    Symbolizer s(cache_only);
    const Symbolized& r = s.symbolize(s.add_module(mi), plain_pc());
    CHECK(r.status == Status::no_debug_info);
  }
  SUBCASE("an uncompressed debug file is not copied; a cache that cannot be written changes no answer") {
    fs::remove(copy);
    REQUIRE(objcopy("--decompress-debug-sections " + q(dfile)));
    {
      Symbolizer s(with_debug);
      check_plain(s, s.add_module(mi));
    }
    CHECK_FALSE(fs::exists(copy));
    REQUIRE(objcopy("--compress-debug-sections=zlib " + q(dfile)));
    std::ofstream(tmp.path / "file") << "x";
    SymbolizerOptions blocked = with_debug;
    blocked.cache_dir = (tmp.path / "file" / "debug").string();  // under a regular file
    Symbolizer s(blocked);
    uint32_t h = s.add_module(mi);
    check_plain(s, h);
    check_inlined(s, h);
  }
}

TEST_CASE("system library through /usr/lib/debug (when libc debug info is installed)") {
  LoadedModule libc = find_loaded("libc.so.6");
  REQUIRE(libc.found);
  // libc's own qsort (RTLD_DEFAULT could find a sanitizer's interceptor instead).
  void* handle = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
  REQUIRE(handle != nullptr);
  auto addr = reinterpret_cast<uint64_t>(dlsym(handle, "qsort"));
  dlclose(handle);
  REQUIRE(addr != 0);
  Symbolizer s;
  const Symbolized& r = s.symbolize(s.add_module(libc.info), addr, false);
  std::string id = build_id_hex(libc.info.build_id);
  bool have_debug = !id.empty() && fs::exists("/usr/lib/debug/.build-id/" + id.substr(0, 2) + "/" +
                                              id.substr(2) + ".debug");
  MESSAGE("libc qsort: " << s.describe(r) << " ["
                          << std::string(heapsnap::symbolize::to_string(r.status)) << "]");
  CHECK(r.frames.back().function.find("qsort") != std::string::npos);
  if (have_debug) {
    CHECK(r.status == Status::ok);
    CHECK(r.frames.back().function == "qsort");  // DW_AT_name, not the __GI_qsort asm label
    CHECK(!r.frames[0].file.empty());
    CHECK(r.frames[0].line != 0);
  } else {
    CHECK(r.status == Status::no_debug_info);
  }
}

namespace {

size_t approx_bytes(const Symbolized& r) {
  size_t n = sizeof(Symbolized) + r.frames.capacity() * sizeof(heapsnap::symbolize::SourceFrame);
  for (const auto& f : r.frames) {
    if (f.function.capacity() > 15) n += f.function.capacity() + 1;
    if (f.file.capacity() > 15) n += f.file.capacity() + 1;
  }
  return n;
}

// Symbolizes addresses spread over the module's executable segments, in shuffled order (a
// capture's stacks do not arrive sorted), as return addresses.
void measure(const char* label, const LoadedModule& m, uint64_t step) {
  Symbolizer s;
  uint32_t h = s.add_module(m.info);
  std::vector<uint64_t> first, second;
  for (auto [lo, hi] : m.exec)
    for (uint64_t a = lo + 1; a + step / 2 < hi; a += step) {
      first.push_back(a);
      second.push_back(a + step / 2);
    }
  uint64_t seed = 0x9E3779B97F4A7C15ull;
  auto shuffle = [&seed](std::vector<uint64_t>& v) {
    for (size_t i = v.size(); i > 1; --i) {
      seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
      std::swap(v[i - 1], v[seed % i]);
    }
  };
  shuffle(first);
  shuffle(second);
  using clock = std::chrono::steady_clock;
  size_t frames = 0, bytes = 0, ok = 0;
  auto run = [&](const std::vector<uint64_t>& v) {
    auto t0 = clock::now();
    for (uint64_t pc : v) s.symbolize(h, pc);
    return static_cast<double>(v.size()) / std::chrono::duration<double>(clock::now() - t0).count();
  };
  double cold = run(first);    // includes opening the files and indexing the units touched
  double warm = run(second);   // distinct new addresses; module and units already indexed
  double cached = run(first);  // repeated addresses: cache hits
  for (uint64_t pc : second) {
    const Symbolized& r = s.symbolize(h, pc);
    ok += r.status == Status::ok;
    frames += r.frames.size();
    bytes += approx_bytes(r);
  }
  std::printf(
      "symbolize throughput [%s]: %zu distinct addresses per pass, %.0f%% with DWARF, "
      "%.2f frames and ~%zu bytes per result; first pass %.0f/s, warm distinct %.0f/s, "
      "cached %.0f/s\n",
      label, second.size(), 100.0 * static_cast<double>(ok) / static_cast<double>(second.size()),
      static_cast<double>(frames) / static_cast<double>(second.size()), bytes / second.size(),
      cold, warm, cached);
  std::fflush(stdout);
}

}  // namespace

TEST_CASE("throughput (printed, not asserted)") {
  LoadedModule self = find_loaded("");
  if (self.found) measure("test_symbolize (self)", self, 2);
  LoadedModule libc = find_loaded("libc.so.6");
  if (libc.found) measure("libc.so.6", libc, 3);
}
