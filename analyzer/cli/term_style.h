// Colour on a terminal, and nowhere else. Every command styles its output through these few
// calls, so the policy (--color, NO_COLOR, TERM=dumb, isatty) lives in one place and no escape
// code is written anywhere else.
//
// Policy, per stream: --color=always colours, --color=never does not; auto (the default) colours
// when the stream is a terminal, NO_COLOR is unset or empty (https://no-color.org) and TERM is
// not "dumb". Piped output, JSON and exported data are therefore never coloured in auto mode.
#pragma once
#include <cstdio>
#include <string>
#include <string_view>

namespace heapsnap::cli {

class Cmd;  // cli/args.h

enum class Style {
  kHeading,   // a command's title line, summary section names: bold
  kHeader,    // a table's column names: bold
  kSize,      // byte figures in tables: cyan
  kEstimate,  // "sampled estimates" and similar hedges: dim
  kGrowth,    // a figure that grew (diff): yellow
  kShrink,    // a figure that shrank (diff): green
  kWarning,   // "warning:", "note:", TRUNCATED, INCOMPLETE: yellow
  kError,     // "error:": bold red
};

enum class ColorMode { kAuto, kAlways, kNever };

// Adds --color=auto|always|never to `cmd` (the app and every subcommand share one setting).
void add_color_option(Cmd cmd);
// Decides for both streams; called by --color's parser, or lazily with the default.
void set_color_mode(ColorMode mode);
bool color_on_stdout();
bool color_on_stderr();

// `text` padded like printf's %*s (width > 0 right-aligns, < 0 left-aligns) and then wrapped in
// the style's codes when the stream gets colour: padding first, so columns still line up.
std::string out_style(Style s, std::string_view text, int width = 0);
std::string err_style(Style s, std::string_view text, int width = 0);

// printf to stdout with the whole line in one style (trailing newlines stay outside the codes).
void print_styled(Style s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

// Messages on stderr: "heapsnap: error: ...", "heapsnap: warning: ...", "heapsnap: note: ...".
// A newline is added.
void print_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void print_warning(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void print_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

}  // namespace heapsnap::cli
