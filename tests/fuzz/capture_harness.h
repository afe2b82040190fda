// What the fuzz targets and the regression runner feed a capture through: the reader, the summary,
// both replay passes, every stack's frames and the stack symbolizer (with the module list the
// capture declares but no files behind it, so no input costs a file open); with `snapshots`, also
// every heap snapshot: listed, loaded, classified as memcheck does, and its object graph with
// dominators and retained sizes built.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace heapsnap::fuzz {

// A whole capture file (header, zstd frames), as read from disk.
void run_capture_bytes(const uint8_t *data, size_t size, bool snapshots = false);

// A decompressed record stream (varint length + Record, repeated): wrapped into a valid capture
// (header + zstd frames with checksums) first, so the fuzzer spends its time on protobuf-level
// content instead of on zstd. The stream is cut into frames at every occurrence of kFrameCut.
void run_record_stream(const uint8_t *data, size_t size, bool snapshots = false);
inline constexpr char kFrameCut[] = "HSFRAME!";

// Wraps a record stream the way run_record_stream does (for tests and corpus making).
std::string wrap_record_stream(const uint8_t *data, size_t size);

// Records without their length prefixes, separated by kRecordCut (frames still by kFrameCut): the
// harness adds the lengths, so a mutation inside a record, or one that copies a whole record
// elsewhere, still yields a well-formed stream. snapshot_fuzz's input format.
void run_delimited_records(const uint8_t *data, size_t size, bool snapshots);
inline constexpr char kRecordCut[] = "HSREC!";
std::string delimited_to_stream(const uint8_t *data, size_t size);

// Quiets libprotobuf's error log (a malformed string field logs a line per record).
void quiet_protobuf_logs();

}  // namespace heapsnap::fuzz
