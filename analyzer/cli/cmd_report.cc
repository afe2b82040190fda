// `report`: one self-contained HTML file (scripts, styles and data inlined; nothing fetched) with
// the heap over time, an allocation flame graph, the dominator tree by site, and the tables of
// top allocators, leaks and top retainers. The data is aggregated to a stated budget first (see
// report/report_data.h), so the page opens fast whatever the capture's size.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "cli/format.h"
#include "cli/progress.h"
#include "cli/site_options.h"
#include "cli/term_style.h"
#include "report/html_page.h"
#include "report/report_data.h"

namespace heapsnap::cli {
// Named as well as anonymous: the sanitizer builds' unity units put several cmd_*.cc in one
// translation unit, and each has its own Options and run().
namespace cmd_report {
namespace {

struct ReportArgs {
  report::ReportOptions opts;
  std::string output;
  std::string interior = "on";
  bool quiet = false;
  SiteOptions sites;
};

std::string default_output(const std::string &capture) {
  std::string base = capture;
  auto slash = base.rfind('/');
  auto dot = base.rfind('.');
  if (dot != std::string::npos && (slash == std::string::npos || dot > slash)) base.resize(dot);
  return base + ".html";
}

int run_report(ReportArgs a) {
  auto &o = a.opts;
  if (o.flame.max_nodes < 2 || o.icicle.max_nodes < 1) {
    print_error("report: --max-flame-nodes must be at least 2 and --max-tree-nodes at least 1");
    return kExitUsage;
  }
  o.follow_interior = a.interior == "on";
  if (!make_frame_filter(a.sites, &o.frame_filter)) return kExitUsage;
  std::string output = a.output.empty() ? default_output(o.file) : a.output;
  if (output == o.file) {
    print_error("report: the output would overwrite the capture: give -o FILE.html");
    return kExitUsage;
  }
  // One progress line per phase, on a terminal only.
  std::unique_ptr<Progress> prog;
  std::string phase;
  o.progress = [&](const std::string &p, uint64_t done, uint64_t total) {
    if (p != phase) {
      prog.reset();
      phase = p;
      prog = std::make_unique<Progress>(p);
    }
    if (auto cb = prog->callback()) cb(done, total ? total : 1);
  };
  nlohmann::ordered_json data;
  std::string err;
  bool ok = report::build_report_data(o, &data, &err);
  prog.reset();
  if (!ok) {
    print_error("%s", err.c_str());
    return kExitInput;
  }
  std::string html = report::render_html(data);
  bool to_stdout = output == "-";
  FILE *f = to_stdout ? stdout : fopen(output.c_str(), "wb");
  if (!f) {
    print_error("%s: %s", output.c_str(), strerror(errno));
    return kExitInput;
  }
  bool written = fwrite(html.data(), 1, html.size(), f) == html.size();
  written = (to_stdout ? fflush(f) : fclose(f)) == 0 && written;
  if (!written) {
    print_error("writing %s: %s", output.c_str(), strerror(errno));
    if (!to_stdout) remove(output.c_str());
    return kExitInput;
  }
  if (!a.quiet && !to_stdout) {
    const auto &b = data["budget"];
    fprintf(stderr, "heapsnap: wrote %s (%s): flame graph %s of %s nodes, %zu snapshot%s\n", output.c_str(),
            human_bytes(double(html.size())).c_str(), human_count(b["flame_nodes"].get<uint64_t>()).c_str(),
            human_count(b["flame_nodes_full"].get<uint64_t>()).c_str(), data["snapshots"].size(),
            data["snapshots"].size() == 1 ? "" : "s");
    for (const auto &n : data["notes"]) print_note("%s", n.get<std::string>().c_str());
  }
  return kExitOk;
}

}  // namespace
}  // namespace cmd_report

void add_report_command(Cmd app, int *rc) {
  using namespace cmd_report;
  auto a = std::make_shared<ReportArgs>();
  auto &o = a->opts;
  Cmd cmd = app.subcommand(
      "report", "One self-contained HTML report: heap over time, flame graph, dominator tree, top allocators, leaks, retainers.");
  cmd.option("file", o.file, "capture file (.hsnap)").required();
  cmd.option("-o,--output", a->output, "HTML file to write (default: the capture's name with .html; - for stdout)");
  cmd.option("--title", o.title, "page title (default: the program's command line)");
  cmd.option("-n,--limit", o.table_rows, "rows per table (default 50)");
  cmd.option("--frames", o.stack_frames, "frames per stack in the tables (default 16)");
  cmd.option("--max-flame-nodes", o.flame.max_nodes,
             "flame graph size budget: at most N nodes; smaller frames merge into [other] (default 10000)");
  cmd.option("--max-tree-nodes", o.icicle.max_nodes, "dominator tree budget per snapshot: at most N nodes (default 2000)");
  cmd.option("--tree-depth", o.icicle.max_depth, "dominator tree levels shown (default 12)");
  cmd.option("--max-snapshots", o.max_snapshots, "snapshots analysed, evenly spread (default 10)");
  cmd.option("--interior", a->interior, "follow interior pointers in snapshots: on (default) or off")
      .one_of({"on", "off"});
  cmd.option("--debug-dir", o.debug_dirs, "directory with separate debug files (default /usr/lib/debug); repeatable");
  cmd.flag("-q,--quiet", a->quiet, "say nothing on stderr but errors");
  add_site_options(cmd, a->sites);
  cmd.footer(
      "The page needs no network: scripts, styles and data are inside the one file. Figures are\n"
      "aggregated before they are embedded (the size budget): the flame graph keeps the N nodes\n"
      "that matter most for any of its metrics, tables keep their top rows, the heap line at most\n"
      "~3000 points, and each snapshot's dominator tree at most --max-tree-nodes groups.\n\n"
      "Examples:\n"
      "  heapsnap report app.hsnap -o app.html\n"
      "  heapsnap record --snapshot-every 5 -o srv.hsnap -- ./server && heapsnap report srv.hsnap\n"
      "  heapsnap report --max-flame-nodes 50000 -n 200 big.hsnap -o big.html");
  cmd.callback([a, rc] { *rc = run_report(*a); });
}

}  // namespace heapsnap::cli
