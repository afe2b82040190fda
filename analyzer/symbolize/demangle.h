// C++ demangling (Itanium ABI) through abi::__cxa_demangle.
#pragma once

#include <string>

namespace heapsnap::symbolize {

// Returns the demangled form of `name`, or `name` unchanged when it is not a mangled C++ name
// (or cannot be demangled). nullptr gives "".
std::string demangle(const char* name);

}  // namespace heapsnap::symbolize
