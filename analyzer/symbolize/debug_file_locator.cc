#include "symbolize/debug_file_locator.h"

#include "symbolize/build_id.h"
#include "symbolize/debug_cache.h"

#include <elfutils/libdwelf.h>
#include <fcntl.h>
#include <gelf.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <system_error>

namespace heapsnap::symbolize {
namespace {

int no_find_elf(Dwfl_Module*, void**, const char*, Dwarf_Addr, char**, Elf**) {
  return -1;  // every module is reported with its file; never search for one
}

uint32_t crc32_update(uint32_t crc, const unsigned char* p, size_t n) {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  crc = ~crc;
  for (size_t i = 0; i < n; ++i) crc = table[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
  return ~crc;
}

bool file_crc32(int fd, uint32_t* out) {
  unsigned char buf[1 << 16];
  uint32_t crc = 0;
  off_t off = 0;
  for (;;) {
    ssize_t n = pread(fd, buf, sizeof buf, off);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    if (n == 0) break;
    crc = crc32_update(crc, buf, static_cast<size_t>(n));
    off += n;
  }
  *out = crc;
  return true;
}

std::string dirname_of(const std::string& path) {
  auto slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

}  // namespace

DebugFileLocator::DebugFileLocator(std::vector<std::string> debug_dirs, bool use_debuginfod,
                                   std::string cache_dir)
    : use_debuginfod_(use_debuginfod), cache_dir_(std::move(cache_dir)) {
  // libdwfl reads relative elements as subdirectories of each module's directory: make the
  // configured dirs absolute.
  for (auto& d : debug_dirs) {
    if (d.empty()) continue;
    if (d[0] != '/') {
      std::error_code ec;
      auto abs = std::filesystem::absolute(d, ec);
      if (ec) continue;
      d = abs.string();
    }
    while (d.size() > 1 && d.back() == '/') d.pop_back();
    debug_dirs_.push_back(std::move(d));
  }
  // libdwfl's syntax: empty element = the module's dir, ".debug" = its subdir, absolute elements
  // = debug dirs (also where .build-id/ is searched).
  path_ = ":.debug";
  for (const auto& d : debug_dirs_) {
    if (d.find(':') != std::string::npos) continue;  // not expressible; debuglink search only
    path_ += ':';
    path_ += d;
  }
  path_ptr_ = path_.data();
  callbacks_.find_elf = no_find_elf;
  callbacks_.find_debuginfo = &DebugFileLocator::find_debuginfo;
  callbacks_.section_address = dwfl_offline_section_address;
  callbacks_.debuginfo_path = &path_ptr_;
}

void DebugFileLocator::attach(Dwfl_Module* mod, ModuleContext* ctx) {
  void** slot = nullptr;
  dwfl_module_info(mod, &slot, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr);
  if (slot != nullptr) *slot = ctx;
  GElf_Addr bias = 0;
  if (Elf* elf = dwfl_module_getelf(mod, &bias)) {
    GElf_Word crc = 0;
    if (const char* link = dwelf_elf_gnu_debuglink(elf, &crc)) {
      ctx->has_debuglink = true;
      ctx->debuglink = link;
    }
  }
}

int DebugFileLocator::find_debuginfo(Dwfl_Module* mod, void** userdata, const char* modname,
                                     Dwarf_Addr base, const char* file_name,
                                     const char* debuglink_file, GElf_Word debuglink_crc,
                                     char** debuginfo_file_name) {
  auto* ctx = userdata != nullptr ? static_cast<ModuleContext*>(*userdata) : nullptr;
  if (ctx != nullptr && ctx->locator != nullptr && !ctx->locator->cache_dir_.empty()) {
    // dwbias is -1 until the module has its debug file: a later call is libdwfl looking for a
    // dwz alt file (its own test), which the cache does not hold.
    Dwarf_Addr dwbias = 0;
    dwfl_module_info(mod, nullptr, nullptr, nullptr, &dwbias, nullptr, nullptr, nullptr);
    const unsigned char* bits = nullptr;
    GElf_Addr vaddr = 0;
    int n = dwbias == Dwarf_Addr(-1) ? dwfl_module_build_id(mod, &bits, &vaddr) : 0;
    if (n > 0) {
      int fd = debug_cache::open(ctx->locator->cache_dir_, bits, n, debuginfo_file_name);
      if (fd >= 0) return fd;
    }
  }
  // Build-id first: covers the main debug file and dwz "alt" files, validated by libdwfl.
  int fd = dwfl_build_id_find_debuginfo(mod, userdata, modname, base, file_name, debuglink_file,
                                        debuglink_crc, debuginfo_file_name);
  if (fd >= 0) return fd;
  if (ctx == nullptr || ctx->locator == nullptr) return -1;
  const DebugFileLocator& self = *ctx->locator;
  if (self.use_debuginfod_) {
    return dwfl_standard_find_debuginfo(mod, userdata, modname, base, file_name, debuglink_file,
                                        debuglink_crc, debuginfo_file_name);
  }
  // Only the main file's own debuglink is searched by name here; a call for anything else is
  // libdwfl looking for a dwz alt file, which only the build-id lookup above can validate.
  if (debuglink_file == nullptr || !ctx->has_debuglink || ctx->debuglink != debuglink_file) {
    errno = 0;
    return -1;
  }
  fd = self.find_by_debuglink(mod, file_name, debuglink_file, debuglink_crc, debuginfo_file_name);
  if (fd < 0) errno = 0;
  return fd;
}

int DebugFileLocator::find_by_debuglink(Dwfl_Module* mod, const char* file_name,
                                        const char* debuglink, GElf_Word crc,
                                        char** debuginfo_file_name) const {
  if (file_name == nullptr || debuglink == nullptr || debuglink[0] == '\0') return -1;
  std::string link = debuglink;
  if (link.find('/') != std::string::npos) link = link.substr(link.rfind('/') + 1);

  struct stat main_st {};
  bool have_main_st = stat(file_name, &main_st) == 0;
  const unsigned char* bits = nullptr;
  GElf_Addr vaddr = 0;
  int id_len = dwfl_module_build_id(mod, &bits, &vaddr);

  std::vector<std::string> dirs;
  dirs.push_back(dirname_of(file_name));
  if (char* canon = realpath(file_name, nullptr)) {
    std::string c = dirname_of(canon);
    std::free(canon);
    if (c != dirs[0]) dirs.push_back(std::move(c));
  }
  std::vector<std::string> candidates;
  for (const auto& dir : dirs) {
    candidates.push_back(dir + "/" + link);
    candidates.push_back(dir + "/.debug/" + link);
    if (!dir.empty() && dir[0] == '/') {
      for (const auto& d : debug_dirs_) candidates.push_back(d + dir + "/" + link);
    }
  }
  for (const auto& cand : candidates) {
    int fd = open(cand.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    struct stat st {};
    bool same_as_main = have_main_st && fstat(fd, &st) == 0 && st.st_dev == main_st.st_dev &&
                        st.st_ino == main_st.st_ino;
    bool valid = false;
    if (!same_as_main) {
      if (id_len > 0) {
        valid = build_id_matches(fd, bits, id_len);
      } else {
        uint32_t file_crc = 0;
        valid = file_crc32(fd, &file_crc) && file_crc == crc;
      }
    }
    if (valid) {
      *debuginfo_file_name = strdup(cand.c_str());
      return fd;
    }
    close(fd);
  }
  return -1;
}

}  // namespace heapsnap::symbolize
