// gzip (RFC 1952) in memory: profile.proto says a serialized profile on disk must be
// gzip-compressed.
#pragma once
#include <string>
#include <string_view>

namespace heapsnap::exporter {

// Appends the gzip stream of `data` to *out. False (and *error) only if zlib fails.
bool gzip(std::string_view data, std::string *out, std::string *error);

}  // namespace heapsnap::exporter
