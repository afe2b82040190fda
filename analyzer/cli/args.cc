// The one file that includes CLI11 (args.h says why).
#include "cli/args.h"

#include <CLI/CLI.hpp>

#include "cli/term_style.h"

namespace heapsnap::cli {

Opt &Opt::required(bool on) {
  o_->required(on);
  return *this;
}

Opt &Opt::one_of(std::vector<std::string> names) {
  o_->check(CLI::IsMember(std::move(names)));
  return *this;
}

template <typename T>
Opt &Opt::range(T lo, T hi) {
  o_->check(CLI::Range(lo, hi));
  return *this;
}
template Opt &Opt::range<int>(int, int);
template Opt &Opt::range<unsigned long>(unsigned long, unsigned long);

Opt &Opt::type_name(const std::string &name) {
  o_->type_name(name);
  return *this;
}

Opt &Opt::expected(int lo, int hi) {
  o_->expected(lo, hi);
  return *this;
}

Opt &Opt::allow_extra_args(bool on) {
  o_->allow_extra_args(on);
  return *this;
}

size_t Opt::count() const { return o_->count(); }

Cmd Cmd::subcommand(const std::string &name, const std::string &help) { return Cmd(a_->add_subcommand(name, help)); }

template <typename T>
Opt Cmd::option(const std::string &name, T &value, const std::string &help) {
  return Opt(a_->add_option(name, value, help));
}
template Opt Cmd::option(const std::string &, std::string &, const std::string &);
template Opt Cmd::option(const std::string &, int &, const std::string &);
template Opt Cmd::option(const std::string &, unsigned &, const std::string &);
template Opt Cmd::option(const std::string &, unsigned long &, const std::string &);
template Opt Cmd::option(const std::string &, std::vector<std::string> &, const std::string &);

Opt Cmd::option_function(const std::string &name, std::function<void(const std::string &)> parse,
                         const std::string &help) {
  return Opt(a_->add_option_function<std::string>(name, std::move(parse), help));
}

Opt Cmd::flag(const std::string &name, bool &value, const std::string &help) {
  return Opt(a_->add_flag(name, value, help));
}

Cmd &Cmd::footer(const std::string &text) {
  a_->footer(text);
  return *this;
}

Cmd &Cmd::callback(std::function<void()> run) {
  a_->callback(std::move(run));
  return *this;
}

Cmd &Cmd::require_subcommand(int n) {
  a_->require_subcommand(n);
  return *this;
}

Cmd &Cmd::fallthrough(bool on) {
  a_->fallthrough(on);
  return *this;
}

Cmd &Cmd::version_flag(const std::string &name, const std::string &text) {
  a_->set_version_flag(name, text);
  return *this;
}

std::vector<Cmd> Cmd::subcommands() const {
  std::vector<Cmd> out;
  for (CLI::App *s : a_->get_subcommands({})) out.emplace_back(s);
  return out;
}

void reject_value(const std::string &option, const std::string &why) { throw CLI::ValidationError(option, why); }

namespace {

// CLI11's message for a usage error, in the same form as print_error (plus a pointer to --help).
std::string usage_failure_message(const CLI::App *app, const CLI::Error &e) {
  // The main app reports every error: name the subcommand being parsed, whose help is the useful one.
  std::string name = app->get_name();
  std::string what = e.what();
  if (auto subs = app->get_subcommands(); !subs.empty()) {
    name += " " + subs.front()->get_name();
  } else if (auto rest = app->remaining(); !rest.empty() && rest.front()[0] != '-') {
    // CLI11 would say "A subcommand is required" about a misspelt one.
    what = "unknown command '" + rest.front() + "'";
  }
  return "heapsnap: " + err_style(Style::kError, "error:") + " " + what + "\nRun '" + name +
         " --help' for more information.\n";
}

}  // namespace

CommandLine::CommandLine(const std::string &description, const std::string &name)
    : app_(std::make_unique<CLI::App>(description, name)) {
  app_->failure_message(usage_failure_message);
}

CommandLine::~CommandLine() = default;

CommandLine::Parsed CommandLine::parse(int argc, char **argv) {
  try {
    app_->parse(argc, argv);
  } catch (const CLI::ParseError &e) {
    return app_->exit(e) == 0 ? Parsed::kAnswered : Parsed::kUsageError;
  }
  return Parsed::kRan;
}

}  // namespace heapsnap::cli
