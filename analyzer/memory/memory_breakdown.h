// "Why is RSS 3 GB when my heap is 1 GB?" (issue 32): a snapshot's SnapshotMemory record read
// back and checked (the capture is untrusted input), and what it says in numbers: the parts of
// RSS, and diagnoses (fragmentation, memory freed but not returned, too many arenas, stacks much
// bigger than used) each with its figures.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "capture/capture_reader.h"

namespace heapsnap::memory {

constexpr int kKinds = 15;  // MemoryKind 1..15
const char *kind_name(int kind);     // MemoryKind's: "heap live", ...
const char *kind_key(int kind);      // for JSON: "heap_live", ...
const char *kind_about(int kind);    // one line: what the part is, and whether it is estimated
// Whether a part's resident bytes are an estimate (a page shared by chunks of two kinds is split by
// bytes; cached chunks are tcache, fastbins and pre-tracing blocks together).
bool kind_estimated(int kind);

struct Part {
  int kind = 0;
  uint64_t rss = 0, size = 0, swap = 0, anonymous = 0, shared = 0;
  uint32_t mappings = 0;
};

struct Breakdown {
  uint32_t index = 0;
  uint64_t rss = 0, vm_rss = 0;
  std::vector<Part> parts;  // by kind, each once, in MemoryKind order
  std::vector<wire::MemoryArena> arenas;
  std::vector<wire::MemoryStack> stacks;
  uint32_t threads = 0, mappings = 0, page_size = 4096;
  uint64_t unmatched = 0, cost_ns = 0, mmapped_chunks = 0, mmapped_live = 0;
  std::string error;
  uint64_t frame_offset = 0;  // where the record is (for messages)
  uint64_t part(int kind) const;
};

// Reads snapshot `index`'s record. Returns false with *error (naming the file offset of the frame at
// fault) when it is missing (*missing = true: a capture from before format 3.3, or a snapshot
// whose child failed first) or damaged (inconsistent figures).
bool load_breakdown(capture::CaptureReader &reader, uint32_t index, Breakdown *out, std::string *error, bool *missing);

struct Diagnosis {
  std::string id;     // fragmentation, not_returned, arenas, stacks
  std::string text;   // one paragraph, with the numbers
  uint64_t bytes;     // what it is about (what could be saved, at most)
};
std::vector<Diagnosis> diagnose(const Breakdown &b);

}  // namespace heapsnap::memory
