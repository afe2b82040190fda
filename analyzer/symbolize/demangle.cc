#include "symbolize/demangle.h"

#include <cxxabi.h>

#include <cstdlib>

namespace heapsnap::symbolize {

std::string demangle(const char* name) {
  if (name == nullptr) return {};
  // Itanium names start with _Z (also "__Z"/"___Z" on some platforms); anything else is a C name.
  const char* p = name;
  while (*p == '_' && p[1] == '_') ++p;
  if (p[0] != '_' || p[1] != 'Z') return name;
  int status = 0;
  char* out = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  std::string result = (status == 0 && out != nullptr) ? std::string(out) : std::string(name);
  std::free(out);
  return result;
}

}  // namespace heapsnap::symbolize
