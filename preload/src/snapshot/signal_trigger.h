// The snapshot signal (--snapshot-on-signal), and the pipe `heapsnap record` asks through.
//
// The signal's handler only sets a flag; the writer serves it at its next tick. A program may
// install its own handler for that signal after the shim did: the Go runtime takes every signal
// at start-up and never passes a SIGUSR2 sent with kill() on, so such requests did nothing,
// without a word. The writer checks each tick that the handler is still the shim's, and says once
// (on stderr and as a capture marker) when it is not.
//
// `heapsnap record` does not forward its snapshot signal to the program: it writes a byte into a
// pipe whose read end the program inherits (HEAPSNAP_CONTROL=FD:PID; only the process of that pid
// reads it, the one record started or what it exec'd). That works whatever the program does with
// its signals, so `kill -USR2 <record's pid>` takes a snapshot of a Go program too.
#pragma once

namespace hs::snapshot::trigger {

// At start-up: the handler for sig (0: none), and the pipe from record if the environment names
// one for this process.
void init(int sig);
// Writer thread: whether a snapshot was asked for since the last call (the signal, or a byte from
// record). Also checks the handler once a tick.
bool take();
// At exit: the same without waiting for anything.
bool pending();
// A forked child: record's pipe is the parent's.
void after_fork_child();

}  // namespace hs::snapshot::trigger
