// A thin front over CLI11, so that only args.cc includes <CLI/CLI.hpp>. CLI11 2.1.2 defines all
// of its virtual functions (Formatter, ConfigBase, App, ...) inline, so every translation unit
// that includes it compiles and emits them again: about 8 s per file in the release build and
// 19 s under ASan+UBSan, paid by 16 files when each command included it.
//
// Cmd and Opt are handles to CLI11's App and Option (which the app owns) with the few calls the
// commands make, each passing straight through: the options, help text, validators and their
// messages are CLI11's own.
#pragma once
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace heapsnap::cli {

// One option or flag.
class Opt {
 public:
  explicit Opt(CLI::Option *o) : o_(o) {}
  Opt &required(bool on = true);
  // The value must be one of `names` (CLI::IsMember; the help shows {a,b}).
  Opt &one_of(std::vector<std::string> names);
  // lo <= value <= hi (CLI::Range; the help shows "INT in [lo - hi]" for int, UINT for unsigned
  // long). T: int or unsigned long, instantiated in args.cc.
  template <typename T>
  Opt &range(T lo, T hi);
  Opt &type_name(const std::string &name);
  Opt &expected(int lo, int hi);  // how many values it takes (0..1: a value is optional)
  Opt &allow_extra_args(bool on);
  size_t count() const;  // how many times it was given
 private:
  CLI::Option *o_;
};

// The application or one of its commands.
class Cmd {
 public:
  explicit Cmd(CLI::App *a) : a_(a) {}
  Cmd subcommand(const std::string &name, const std::string &help);
  // An option stored in `value`; its type names it in the help (TEXT, INT, UINT). T: std::string,
  // int, unsigned, unsigned long (size_t, uint64_t), std::vector<std::string> (repeatable),
  // instantiated in args.cc: another type is a link error until added there.
  template <typename T>
  Opt option(const std::string &name, T &value, const std::string &help);
  // An option whose value goes to `parse` when given; `parse` may call reject_value.
  Opt option_function(const std::string &name, std::function<void(const std::string &)> parse,
                      const std::string &help);
  Opt flag(const std::string &name, bool &value, const std::string &help);
  Cmd &footer(const std::string &text);
  Cmd &callback(std::function<void()> run);  // runs when the command is chosen, after parsing
  // The application's:
  Cmd &require_subcommand(int n);
  Cmd &fallthrough(bool on);
  Cmd &version_flag(const std::string &name, const std::string &text);
  std::vector<Cmd> subcommands() const;

 private:
  CLI::App *a_;
};

// For an option_function's parser: the value is a usage error, reported as "OPTION: WHY" (CLI11's
// ValidationError, thrown).
[[noreturn]] void reject_value(const std::string &option, const std::string &why);

// main's command line: the CLI11 app itself, so that main.cc need not include CLI11 either.
// A usage error is reported as print_error's are, naming the command whose --help helps.
class CommandLine {
 public:
  CommandLine(const std::string &description, const std::string &name);
  ~CommandLine();
  Cmd app() const { return Cmd(app_.get()); }

  enum class Parsed {
    kRan,         // the chosen command's callback ran
    kAnswered,    // --help or --version: printed
    kUsageError,  // printed
  };
  Parsed parse(int argc, char **argv);

 private:
  std::unique_ptr<CLI::App> app_;
};

}  // namespace heapsnap::cli
