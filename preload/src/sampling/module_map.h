// Loaded modules (executable, shared libraries, vdso), written to the stream so that the analyzer
// can symbolize return addresses offline. Refreshed cheaply: dl_iterate_phdr's adds/subs counters
// tell whether anything changed since the last look.
#pragma once

namespace hs::modules {

// Emits Module / ModuleUnload records for what changed since the last call. `force` re-emits
// everything (a new capture after fork).
void refresh(bool force);

// fork: the child must not inherit a half-updated table.
void lock();
void unlock();
void after_fork_child();

}  // namespace hs::modules
