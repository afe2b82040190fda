// The capture file itself: its header, and records compressed into zstd frames as they reach it.
// capture_writer.cc decides what goes in and when; this file owns the descriptor, the compressor
// and the frame being written.
#pragma once
#include <cstddef>
#include <cstdint>

#include "output/wire_encoder.h"

namespace hs::frames {

// Before the first open: the compressor and its output buffer. False if out of memory.
bool init();
// Creates the capture for process pid (its name from the configured output, with a suffix if the
// name is taken), writes the file header. The descriptor holds an exclusive flock for as long as
// any process (the program, its forked copies until they close it, the tail guard) keeps it open:
// `heapsnap record` waits on it for a capture to be complete.
bool open(int pid);
const char *path();
// The descriptor, checked to still be the capture (see fd_ok); -1 when none is open.
bool fd_ok();
int fd();
// Compresses whole records (length-prefixed, as in a wire::Buf) into the open frame, cut into
// frames of at most kMaxFrameInput bytes; end_frame: the last frame ends too. pending is cleared
// (on a failure too: its records went into a frame that is now lost).
bool write_records(wire::Buf &pending, bool end_frame);
// Whether the next frame is the capture's first (it always ends with its flush).
bool first_frame_pending();
// Appends bytes that are already whole frames (a snapshot child's output) after the frame the last
// write_records ended.
bool append_raw(const void *data, size_t n);
void close();
// A forked child: the parent's file and open frame are the parent's.
void after_fork_child();
// The tail guard's salvage, alone in the address space of a process that ended: the writer may
// have died inside a write. The file goes back to where the last complete write left it, and the
// next records start a frame of their own.
void abandon_partial_write();
// The tail guard's salvage: writing goes on through fd (the guard's own copy of the descriptor)
// where the last write ended, or, mid_write (the writer died in one), where the last complete
// write ended (abandon_partial_write). False if fd is not the capture.
bool salvage_begin(int fd, bool mid_write);

}  // namespace hs::frames
