#include "symbolize/debug_cache.h"

#include <fcntl.h>
#include <gelf.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <vector>

#include "symbolize/build_id.h"

namespace heapsnap::symbolize::debug_cache {
namespace {

namespace fs = std::filesystem;

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.size() >= prefix.size() && s.compare(0, prefix.size(), prefix) == 0;
}

// Whether the file at `path` has SHF_COMPRESSED sections (what the copy saves inflating), and none
// of these: GNU-style .zdebug sections (libdw inflates those too, but the copy would keep their
// names, which say "compressed"); a dwz alt file link (.gnu_debugaltlink, .debug_sup), which libdw
// may resolve relative to the debug file's directory: from a copy in the cache it would look in
// the wrong place and answer differently.
bool worth_copying(const char* path) {
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool compressed = false, refused = false;
  if (Elf* elf = elf_begin(fd, ELF_C_READ_MMAP, nullptr)) {
    size_t shstrndx = 0;
    if (elf_getshdrstrndx(elf, &shstrndx) == 0) {
      for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn != nullptr; scn = elf_nextscn(elf, scn)) {
        GElf_Shdr sh;
        if (gelf_getshdr(scn, &sh) == nullptr) continue;
        if (sh.sh_type != SHT_NOBITS && (sh.sh_flags & SHF_COMPRESSED)) compressed = true;
        const char* name = elf_strptr(elf, shstrndx, sh.sh_name);
        if (name != nullptr && (std::strncmp(name, ".zdebug", 7) == 0 || std::strcmp(name, ".gnu_debugaltlink") == 0 ||
                                std::strcmp(name, ".debug_sup") == 0))
          refused = true;
      }
    }
    elf_end(elf);
  }
  ::close(fd);
  return compressed && !refused;
}

// Bytes the copy of `in` would take (section contents as they are in memory now).
uint64_t copy_size(Elf* in) {
  uint64_t total = 0;
  for (Elf_Scn* scn = elf_nextscn(in, nullptr); scn != nullptr; scn = elf_nextscn(in, scn)) {
    GElf_Shdr sh;
    if (gelf_getshdr(scn, &sh) != nullptr && sh.sh_type != SHT_NOBITS) total += sh.sh_size;
  }
  return total;
}

// Writes `in` as it is in memory (libdw inflated its debug sections in place) to descriptor fd:
// the same headers, segments and sections in the same order, laid out anew by libelf.
bool write_elf(Elf* in, int fd) {
  GElf_Ehdr eh;
  size_t phnum = 0, shstrndx = 0;
  if (gelf_getehdr(in, &eh) == nullptr || elf_getphdrnum(in, &phnum) != 0 ||
      elf_getshdrstrndx(in, &shstrndx) != 0 || shstrndx >= SHN_LORESERVE)
    return false;
  Elf* out = elf_begin(fd, ELF_C_WRITE, nullptr);
  if (out == nullptr) return false;
  bool ok = gelf_newehdr(out, gelf_getclass(in)) != nullptr;
  if (ok && phnum > 0) {
    ok = gelf_newphdr(out, phnum) != nullptr;
    for (size_t i = 0; ok && i < phnum; ++i) {
      GElf_Phdr ph;
      ok = gelf_getphdr(in, int(i), &ph) != nullptr && gelf_update_phdr(out, int(i), &ph) != 0;
    }
  }
  for (Elf_Scn* scn = elf_nextscn(in, nullptr); ok && scn != nullptr; scn = elf_nextscn(in, scn)) {
    Elf_Scn* copy = elf_newscn(out);  // the first call also makes section 0: indexes stay the same
    GElf_Shdr sh;
    ok = copy != nullptr && gelf_getshdr(scn, &sh) != nullptr;
    if (ok && sh.sh_type != SHT_NOBITS) {
      elf_errno();  // clear: a read error ends the loop below like the last buffer does
      for (Elf_Data* d = elf_getdata(scn, nullptr); ok && d != nullptr; d = elf_getdata(scn, d)) {
        Elf_Data* nd = elf_newdata(copy);
        if (nd == nullptr) ok = false;
        else *nd = *d;  // points at `in`'s buffers, which outlive elf_update below
      }
      ok = ok && elf_errno() == 0;
    }
    ok = ok && gelf_update_shdr(copy, &sh) != 0;
  }
  if (ok) {
    GElf_Ehdr oh;
    ok = gelf_getehdr(out, &oh) != nullptr;
    if (ok) {
      eh.e_phnum = oh.e_phnum;
      eh.e_shnum = oh.e_shnum;
      eh.e_shstrndx = static_cast<GElf_Half>(shstrndx);
      ok = gelf_update_ehdr(out, &eh) != 0 && elf_update(out, ELF_C_WRITE) >= 0;
    }
  }
  elf_end(out);
  return ok;
}

// Removes the least recently used copies until the directory is within its budget (never `keep`),
// and temporary files an interrupted analyzer left more than an hour ago.
void trim(const std::string& dir, const std::string& keep) {
  struct Entry {
    fs::file_time_type mtime;
    uint64_t size;
    fs::path path;
  };
  std::vector<Entry> entries;
  uint64_t total = 0;
  std::error_code ec;
  auto now = fs::file_time_type::clock::now();
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code e2;
    if (it->symlink_status(e2).type() != fs::file_type::regular) continue;  // not a planted symlink
    std::string name = it->path().filename().string();
    auto mtime = it->last_write_time(e2);
    if (e2) continue;
    if (name.find(".tmp.") != std::string::npos) {
      if (now - mtime > std::chrono::hours(1)) fs::remove(it->path(), e2);
      continue;
    }
    if (name.size() < 7 || name.compare(name.size() - 6, 6, ".debug") != 0) continue;
    uint64_t size = it->file_size(e2);
    if (e2) continue;
    total += size;
    if (it->path().string() != keep) entries.push_back({mtime, size, it->path()});
  }
  if (total <= kMaxTotalBytes) return;
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.mtime < b.mtime; });
  for (const Entry& e : entries) {
    if (total <= kMaxTotalBytes) break;
    std::error_code e2;
    if (fs::remove(e.path, e2)) total -= e.size;
  }
}

// The cache directory is a directory (not a symlink) of the current user that no one else can
// write: otherwise another user could replace copies between the checks and their use, or fill
// the directory to evict them.
bool private_dir(const std::string& dir) {
  struct stat st {};
  return lstat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == geteuid() &&
         (st.st_mode & (S_IWGRP | S_IWOTH)) == 0;
}

}  // namespace

std::string default_dir() {
  if (const char* d = std::getenv("HEAPSNAP_CACHE_DIR")) {
    if (d[0] == '\0' || std::strcmp(d, "off") == 0) return "";
    return std::string(d) + "/debug";
  }
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x != nullptr && x[0] == '/') return std::string(x) + "/heapsnap/debug";
  if (const char* h = std::getenv("HOME"); h != nullptr && h[0] == '/') return std::string(h) + "/.cache/heapsnap/debug";
  return "";
}

int open(const std::string& dir, const unsigned char* build_id, int len, char** file_name) {
  if (dir.empty() || len <= 0 || !private_dir(dir)) return -1;
  std::string path = dir + "/" + build_id_hex({reinterpret_cast<const char*>(build_id), size_t(len)}) + ".debug";
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return -1;
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() || !build_id_matches(fd, build_id, len)) {
    ::close(fd);
    return -1;
  }
  futimens(fd, nullptr);  // recently used: the last to go when the directory is trimmed
  *file_name = strdup(path.c_str());
  if (*file_name == nullptr) {
    ::close(fd);
    return -1;
  }
  return fd;
}

bool store(const std::string& dir, Dwfl_Module* mod, Dwarf* dw, const std::string& build_id) {
  if (dir.empty() || build_id.empty() || dw == nullptr) return false;
  Elf* elf = dwarf_getelf(dw);
  GElf_Addr bias = 0;
  if (elf == nullptr || elf == dwfl_module_getelf(mod, &bias)) return false;  // DWARF of the module's own file
  const char* debug_file = nullptr;
  dwfl_module_info(mod, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, &debug_file);
  if (debug_file == nullptr || starts_with(debug_file, dir + "/") || !worth_copying(debug_file)) return false;
  uint64_t size = copy_size(elf);
  if (size > kMaxFileBytes) return false;

  std::error_code ec;
  fs::path d(dir);
  if (d.has_parent_path()) fs::create_directories(d.parent_path(), ec);
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return false;
  if (!private_dir(dir)) return false;
  struct statvfs fs_free {};
  if (statvfs(dir.c_str(), &fs_free) == 0 &&
      uint64_t(fs_free.f_bavail) * fs_free.f_frsize < size + (64ull << 20))
    return false;  // a full disk: not every query writing and removing hundreds of MB
  std::string path = dir + "/" + build_id_hex(build_id) + ".debug";
  std::string tmp = path + ".tmp." + std::to_string(getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return false;
  bool ok = write_elf(elf, fd);
  ok = ::close(fd) == 0 && ok;
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    return false;
  }
  trim(dir, path);
  return true;
}

}  // namespace heapsnap::symbolize::debug_cache
