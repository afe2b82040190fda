// A cache of separate debug files whose compressed sections are stored inflated, keyed by build id.
//
// Why: distributions compress the DWARF of their debug packages (libc6-dbg: 4.2 MB on disk, 10 MB
// inflated), and libdw inflates every debug section of a file when it opens it, whichever parts
// the lookups will touch. For a python capture that is about 55 ms of CPU and 19 MB of memory in
// each query, to answer from libc's debug file what the report mostly does not even show. The
// first query that loads such a file writes an inflated copy here (from the sections libdw has
// already inflated: no second decompression); later queries map the copy, which costs only the
// pages the lookups touch. debuginfod's client keeps a cache of the same kind.
//
// Layout: <dir>/<build id hex>.debug, written to a temporary name and renamed (concurrent
// analyzers and a crash leave no partial file). A copy is used only when it is a regular file of
// the current user carrying the expected build id; using it refreshes its modification time, and
// the oldest copies go when the directory holds more than kMaxTotalBytes.
#pragma once

#include <elfutils/libdwfl.h>

#include <cstdint>
#include <string>

namespace heapsnap::symbolize::debug_cache {

constexpr uint64_t kMaxFileBytes = 512ull << 20;   // larger inflated files are not copied
constexpr uint64_t kMaxTotalBytes = 2048ull << 20;  // the directory's budget

// The directory from the environment: HEAPSNAP_CACHE_DIR/debug ("" or "off": no cache), else
// $XDG_CACHE_HOME/heapsnap/debug, else $HOME/.cache/heapsnap/debug ("" when none of them is set).
std::string default_dir();

// The cached copy of the debug file with this build id: an open descriptor (and its name, from
// strdup, in *file_name), or -1 when there is none that can be trusted.
int open(const std::string& dir, const unsigned char* build_id, int len, char** file_name);

// After libdw loaded `dw` for `mod` from a separate debug file: when that file had compressed
// sections, writes the inflated copy for `build_id` (raw bytes) and trims the directory to its
// budget. True when a copy was written. A cache that cannot be written (read-only home, full
// disk) only means the next query inflates again: no error.
bool store(const std::string& dir, Dwfl_Module* mod, Dwarf* dw, const std::string& build_id);

}  // namespace heapsnap::symbolize::debug_cache
