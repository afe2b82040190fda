#pragma once
// Descriptors the tracer holds (the capture file, libunwind's validation pipe) live far above the
// low numbers a program uses, so that a program closing "every descriptor it did not open" and
// then opening files of its own does not get our numbers back: the tracer never reads, writes or
// closes a program's file by mistake.

namespace hs {

// Returns a close-on-exec duplicate of fd at a high number and closes fd; returns fd unchanged
// if no high number is free.
int move_fd_high(int fd);

}  // namespace hs
