#include "symbolize/build_id.h"

#include <elfutils/libdwelf.h>

#include <cstring>

namespace heapsnap::symbolize {

std::string build_id_hex(std::string_view raw) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(raw.size() * 2);
  for (unsigned char c : raw) {
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 15]);
  }
  return out;
}

bool build_id_matches(int fd, const unsigned char* bits, int len) {
  Elf* elf = elf_begin(fd, ELF_C_READ_MMAP, nullptr);
  if (elf == nullptr) return false;
  const void* id = nullptr;
  ssize_t n = dwelf_elf_gnu_build_id(elf, &id);
  bool ok = n == len && std::memcmp(id, bits, static_cast<size_t>(len)) == 0;
  elf_end(elf);
  return ok;
}

}  // namespace heapsnap::symbolize
