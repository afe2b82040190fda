#include "cli/term_style.h"

#include <unistd.h>

#include <cstdarg>
#include <cstdlib>
#include <cstring>

#include "cli/args.h"

namespace heapsnap::cli {
namespace {

ColorMode g_mode = ColorMode::kAuto;
// -1: not decided yet. Decided on first use so that --color, parsed before any command runs,
// is what counts, and isatty/getenv are asked once.
int g_stdout = -1, g_stderr = -1;

bool auto_color(int fd) {
  if (!isatty(fd)) return false;
  const char *no = getenv("NO_COLOR");
  if (no && *no) return false;  // no-color.org: present and not empty
  const char *term = getenv("TERM");
  return !(term && strcmp(term, "dumb") == 0);
}

bool decide(int fd) {
  switch (g_mode) {
    case ColorMode::kAlways: return true;
    case ColorMode::kNever: return false;
    case ColorMode::kAuto: break;
  }
  return auto_color(fd);
}

const char *sgr(Style s) {
  switch (s) {
    case Style::kHeading:
    case Style::kHeader: return "\033[1m";
    case Style::kSize: return "\033[36m";
    case Style::kEstimate: return "\033[2m";
    case Style::kGrowth: return "\033[33m";
    case Style::kShrink: return "\033[32m";
    case Style::kWarning: return "\033[33m";
    case Style::kError: return "\033[1;31m";
  }
  return "";
}

constexpr const char *kReset = "\033[0m";

std::string styled(bool on, Style s, std::string_view text, int width) {
  std::string t(text);
  size_t w = size_t(width < 0 ? -width : width);
  if (t.size() < w) t.insert(width > 0 ? size_t(0) : t.size(), w - t.size(), ' ');
  if (!on || text.empty()) return t;
  return sgr(s) + t + kReset;
}

std::string vformat(const char *fmt, va_list ap) {
  va_list copy;
  va_copy(copy, ap);
  int n = vsnprintf(nullptr, 0, fmt, copy);
  va_end(copy);
  if (n <= 0) return {};
  std::string s(size_t(n) + 1, '\0');
  vsnprintf(s.data(), s.size(), fmt, ap);
  s.resize(size_t(n));
  return s;
}

void message(Style label_style, const char *label, const std::string &text) {
  fprintf(stderr, "heapsnap: %s %s\n", err_style(label_style, label).c_str(), text.c_str());
}

}  // namespace

void set_color_mode(ColorMode mode) {
  g_mode = mode;
  g_stdout = g_stderr = -1;
}

bool color_on_stdout() {
  if (g_stdout < 0) g_stdout = decide(1);
  return g_stdout;
}

bool color_on_stderr() {
  if (g_stderr < 0) g_stderr = decide(2);
  return g_stderr;
}

void add_color_option(Cmd cmd) {
  cmd.option_function(
         "--color",
         [](const std::string &v) {
           set_color_mode(v == "always" ? ColorMode::kAlways : v == "never" ? ColorMode::kNever : ColorMode::kAuto);
         },
         "colour: auto (default: when writing to a terminal and NO_COLOR is unset or empty), always or never")
      .one_of({"auto", "always", "never"});
}

std::string out_style(Style s, std::string_view text, int width) { return styled(color_on_stdout(), s, text, width); }
std::string err_style(Style s, std::string_view text, int width) { return styled(color_on_stderr(), s, text, width); }

void print_styled(Style s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::string line = vformat(fmt, ap);
  va_end(ap);
  size_t text_end = line.find_last_not_of('\n') + 1;  // 0 when the line is only newlines
  fputs(out_style(s, std::string_view(line).substr(0, text_end)).c_str(), stdout);
  fputs(line.c_str() + text_end, stdout);
}

void print_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::string text = vformat(fmt, ap);
  va_end(ap);
  message(Style::kError, "error:", text);
}

void print_warning(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::string text = vformat(fmt, ap);
  va_end(ap);
  message(Style::kWarning, "warning:", text);
}

void print_note(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::string text = vformat(fmt, ap);
  va_end(ap);
  message(Style::kWarning, "note:", text);
}

}  // namespace heapsnap::cli
