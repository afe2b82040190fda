// GNU build-id helpers.
#pragma once

#include <string>
#include <string_view>

namespace heapsnap::symbolize {

// Lower-case hex of the raw build-id bytes ("" for an empty id).
std::string build_id_hex(std::string_view raw);

// Whether the ELF file open on fd carries the GNU build-id `bits` (len bytes).
bool build_id_matches(int fd, const unsigned char* bits, int len);

}  // namespace heapsnap::symbolize
