// Every subcommand registers itself on the CLI11 app and stores its exit code in *rc when run.
// Exit codes: 0 success, 1 bad or unreadable input, 2 usage error, 3 the traced program failed
// to start; `record` passes the program's own status through (128+N when killed by signal N).
#pragma once
#include "cli/args.h"

namespace heapsnap::cli {

constexpr int kExitOk = 0;
constexpr int kExitInput = 1;
constexpr int kExitUsage = 2;
constexpr int kExitCannotRun = 3;

void add_record_command(Cmd app, int *rc);
// Splits `record`'s program and arguments off argv; returns the argc CLI11 should parse.
int split_record_command(int argc, char **argv);
// Whether the command is record, with nothing but --color before it (no --help or --version,
// which need every command): main then sets up record's options alone.
bool command_is_record(int argc, char **argv);
void add_summary_command(Cmd app, int *rc);
void add_replay_commands(Cmd app, int *rc);  // top-allocators, leaks, peak, timeline
void add_snapshots_command(Cmd app, int *rc);
void add_unreachable_command(Cmd app, int *rc);
void add_types_command(Cmd app, int *rc);  // types (classes of polymorphic objects)
void add_memory_command(Cmd app, int *rc);  // memory (RSS explained at a snapshot)
void add_retainer_commands(Cmd app, int *rc);  // top-retainers, dominators, path, suspects, diff
void add_export_commands(Cmd app, int *rc);  // flamegraph, export
void add_report_command(Cmd app, int *rc);   // report (self-contained HTML)

}  // namespace heapsnap::cli
