// libFuzzer target, structure-aware: the input is the decompressed record stream (what
// `zstd -dc capture.hsnap` prints), wrapped here into a valid capture (header, zstd frames with
// checksums; a frame ends at every "HSFRAME!"), so mutations land on protobuf content instead of
// breaking zstd. Seeds: real captures decompressed (scripts/fuzz makes them).
#include <cstddef>
#include <cstdint>

#include "capture_harness.h"

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  heapsnap::fuzz::quiet_protobuf_logs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  heapsnap::fuzz::run_record_stream(data, size);
  return 0;
}
