#!/usr/bin/python3
"""The engine of scripts/bench (issue 8): heapsnap side by side with native and its peers.

Every workload runs under every tool, interleaved: round 1 runs native, heapsnap (three modes),
heaptrack, gperftools and massif once each (in an order that rotates from round to round), then
round 2 does the same, and so on. Figures are medians over the rounds; a ratio is the median of the
per-round ratios (tool run / native run of the same round), which keeps slow drifts of a shared
machine's load out of it. A run that fails (non-zero exit, wrong output, timeout, memory limit,
a tool's own error) is reported as a failure, never as a number.

Measured per run:
  wall s       from spawn to the end of the whole tool (heaptrack's interpreter and compressor,
               heapsnap's launcher, valgrind) -- what a user waits for
  cpu s        user + system time of the run's whole process tree (wait4)
  rss          peak RSS (VmHWM) of the traced program itself, reported at its exit by a tiny
               preloaded library (tests/bench/peak_rss.c); the largest process of the tree
               (heaptrack_interpret, the snapshot child...) is kept too, as "tree max"
  capture      bytes of every file the tool wrote
  analysis s   time to a top-allocators report from that capture: heapsnap top-allocators,
               heaptrack_print (allocators only), google-pprof --text --alloc_space, ms_print
"""
import argparse
import datetime
import hashlib
import json
import os
import platform
import re
import resource
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_fastpath  # noqa: E402 (beside this file)

TCMALLOC = "/usr/lib/x86_64-linux-gnu/libtcmalloc.so.4"
PYTHON = "/usr/bin/python3"

TOOLS = ["native", "hs", "hs-all", "hs-snap", "hs-peak", "hs-growth", "heaptrack", "gperf", "massif"]
TOOL_TITLE = {
    "native": "native",
    "hs": "heapsnap default",
    "hs-all": "heapsnap --sample-bytes 1",
    "hs-snap": "heapsnap --snapshot-at-exit",
    "hs-peak": "heapsnap --snapshot-at-peak",
    "hs-growth": "heapsnap --snapshot-on-growth 10%",
    "heaptrack": "heaptrack",
    "gperf": "gperftools HEAPPROFILE",
    "massif": "massif",
}
# Helper processes of the tools: never "the traced program" when peak RSS lines are read.
HELPER_COMMS = {"bash", "sh", "dash", "heaptrack_inter", "heaptrack_interpret", "zstd", "gzip",
                "heapsnap", "readlink", "dirname", "basename", "hostname", "sed", "mkfifo", "rm",
                "uname", "cat", "timeout", "prlimit", "env", "time"}

SIZES = {
    # name: (full, quick)
    "py_scale": (1.0, 0.1),
    "sqlite_rows": (1000000, 50000),
    "gxx_scale": (1, 0),
    "stress_ops": (2000000, 200000),
    "micro_pairs": (10000000, 2000000),
    "micro_pairs_slow": (1000000, 100000),  # every-allocation tools: per-pair cost is the same
}
FULL_ROUNDS, QUICK_ROUNDS = 5, 1
# gperftools (10-70x) and massif (10-30x) take most of the time; their ratios are far from any
# target, so by default they run in the first rounds only.
SLOW_TOOLS = ("gperf", "massif")
FULL_SLOW_ROUNDS = 3


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def human_mb(b):
    return b / (1024.0 * 1024.0)


class Workload:
    def __init__(self, name, title, argv, tools, env=None, stdin=None, check="stdout",
                 program=None, out_file=None, timeout_base=60):
        self.name, self.title, self.argv, self.tools = name, title, argv, tools
        self.env = env or {}
        self.stdin = stdin
        self.check = check          # "stdout", "file", "stress", "micro"
        self.program = program or argv[0]
        self.out_file = out_file    # argv placeholder {OUT} is replaced by the run's output file
        self.expected = None
        self.native_estimate = None
        self.timeout_base = timeout_base


class Bench:
    def __init__(self, args):
        self.args = args
        self.top = os.path.abspath(args.top)
        self.build = os.path.abspath(args.build)
        self.quick = args.quick
        q = 1 if self.quick else 0
        self.size = {k: v[q] for k, v in SIZES.items()}
        self.rounds = args.rounds or (QUICK_ROUNDS if self.quick else FULL_ROUNDS)
        self.slow_rounds = min(self.rounds, args.slow_rounds or (QUICK_ROUNDS if self.quick else FULL_SLOW_ROUNDS))
        self.work = args.workdir or tempfile.mkdtemp(prefix="heapsnap-bench-")
        os.makedirs(self.work, exist_ok=True)
        self.results = []   # one dict per run
        self.started = datetime.datetime.now(datetime.timezone.utc)
        self.load_start = os.getloadavg()

    # --- preparation ---------------------------------------------------------------------------

    def sh(self, argv, **kw):
        return subprocess.run(argv, check=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, **kw).stdout

    def prepare(self):
        w = self.work
        bench = os.path.join(self.top, "tests", "bench")
        # The binaries under test are copied first (same layout, so that `heapsnap record` finds its
        # shim beside it): a rebuild of the tree during a long run cannot change what is measured.
        for rel in ("analyzer/heapsnap", "preload/libheapsnap_preload.so", "tests/stress_threads"):
            src = os.path.join(self.build, rel)
            if not os.path.exists(src):
                raise SystemExit("bench: %s is missing: build the tree first" % src)
            os.makedirs(os.path.join(w, "bin", os.path.dirname(rel)), exist_ok=True)
            shutil.copy2(src, os.path.join(w, "bin", rel))
        self.heapsnap = os.path.join(w, "bin", "analyzer", "heapsnap")
        self.shim = os.path.join(w, "bin", "preload", "libheapsnap_preload.so")
        self.peak_rss_so = os.path.join(w, "peak_rss.so")
        self.sh(["gcc", "-O2", "-shared", "-fPIC", "-o", self.peak_rss_so, os.path.join(bench, "peak_rss.c")])
        self.micro = os.path.join(w, "malloc_micro")
        self.sh(["gcc", "-O2", "-o", self.micro, os.path.join(bench, "malloc_micro.c")])
        # sqlite: the SQL with the row count filled in.
        sql = open(os.path.join(bench, "sqlite_workload.sql")).read().replace("@ROWS@", str(self.size["sqlite_rows"]))
        self.sql = os.path.join(w, "sqlite_workload.sql")
        open(self.sql, "w").write(sql)
        # gxx: preprocessed once; the cc1plus command line is the one `g++ -O2 -c` runs.
        self.ii = os.path.join(w, "gxx_workload.ii")
        self.sh(["g++", "-std=c++20", "-E", "-DBENCH_SCALE=%d" % self.size["gxx_scale"],
                 os.path.join(bench, "gxx_workload.cc"), "-o", self.ii])
        driver = subprocess.run(["g++", "-std=c++20", "-O2", "-c", "-###", self.ii, "-o", os.path.join(w, "x.o")],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=w).stderr
        cc1 = [l for l in driver.splitlines() if "cc1plus" in l and not l.startswith("COLLECT")]
        if not cc1:
            raise SystemExit("bench: cannot find the cc1plus step of g++ -O2 -c:\n" + driver)
        gxx = shlex.split(cc1[0])
        i = gxx.index("-o")
        gxx[i + 1] = "{OUT}"
        gxx.insert(i, "-frandom-seed=1")
        stress = os.path.join(w, "bin", "tests", "stress_threads")
        micro_n, micro_slow = self.size["micro_pairs"], self.size["micro_pairs_slow"]
        hs_modes = ["hs", "hs-all", "hs-snap", "hs-peak", "hs-growth"]
        self.workloads = [
            Workload("py", "PYTHONMALLOC=malloc python3 (dict/list/str/json/regex)",
                     [PYTHON, os.path.join(bench, "py_workload.py")] +
                     ([str(self.size["py_scale"])] if self.size["py_scale"] != 1.0 else []),
                     ["native"] + hs_modes + ["heaptrack", "gperf", "massif"],
                     env={"PYTHONMALLOC": "malloc"}, program=os.path.realpath(PYTHON)),
            Workload("gxx", "cc1plus -O2 (the compile step of g++ -O2 -c) on tests/bench/gxx_workload.cc",
                     gxx, ["native"] + hs_modes + ["heaptrack", "gperf"], check="file", out_file="out.s"),
            Workload("sqlite", "sqlite3 :memory: building and indexing %d rows" % self.size["sqlite_rows"],
                     ["/usr/bin/sqlite3", ":memory:"], ["native"] + hs_modes + ["heaptrack", "gperf", "massif"],
                     stdin=self.sql),
            Workload("stress", "stress_threads 4 %d (4 threads, cross-thread frees)" % self.size["stress_ops"],
                     [stress, "4", str(self.size["stress_ops"])],
                     ["native"] + hs_modes + ["heaptrack", "gperf", "massif"], check="stress"),
            Workload("micro", "malloc_micro: malloc+free pairs of 32-47 bytes, one thread",
                     [self.micro, str(micro_n)], ["native"] + hs_modes + ["heaptrack", "gperf"], check="micro"),
        ]
        self.micro_slow = micro_slow
        if self.args.workloads:
            keep = self.args.workloads.split(",")
            self.workloads = [x for x in self.workloads if x.name in keep]
        if self.args.tools:
            keep = set(self.args.tools.split(",")) | {"native"}
            for x in self.workloads:
                x.tools = [t for t in x.tools if t in keep]

    # --- one run -------------------------------------------------------------------------------

    def base_env(self, wl, rss_file):
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin", "HOME": os.environ.get("HOME", "/root"),
               "LC_ALL": "C", "TMPDIR": os.path.join(self.work, "tmp"),
               "HEAPSNAP_BENCH_RSS_FILE": rss_file, "LD_PRELOAD": self.peak_rss_so}
        env.update(wl.env)
        return env

    def command(self, wl, tool, rundir):
        argv = [a.replace("{OUT}", os.path.join(rundir, wl.out_file or "out")) for a in wl.argv]
        if wl.check == "micro" and tool in ("hs-all", "heaptrack", "gperf"):
            argv = [argv[0], str(self.micro_slow)]
        rss_file = os.path.join(rundir, "rss.txt")
        env = self.base_env(wl, rss_file)
        limit_as = None
        cap = os.path.join(rundir, "capture")
        if tool == "native":
            pass
        elif tool.startswith("hs"):
            opts = {"hs": [], "hs-all": ["--sample-bytes", "1"], "hs-snap": ["--snapshot-at-exit"],
                    "hs-peak": ["--snapshot-at-peak"], "hs-growth": ["--snapshot-on-growth", "10%"]}[tool]
            argv = [self.heapsnap, "record", "-q", "-f", "-o", cap + ".hsnap"] + opts + ["--"] + argv
            env["HEAPSNAP_PRELOAD"] = self.shim
        elif tool == "heaptrack":
            argv = ["/usr/bin/heaptrack", "-o", cap] + argv
            limit_as = self.args.heaptrack_as_gb * (1 << 30)
        elif tool == "gperf":
            env["LD_PRELOAD"] = TCMALLOC + ":" + self.peak_rss_so
            env["HEAPPROFILE"] = cap
        elif tool == "massif":
            argv = ["/usr/bin/valgrind", "-q", "--tool=massif", "--massif-out-file=" + cap + ".massif"] + argv
        return argv, env, limit_as

    def timeout_for(self, wl, tool):
        est = wl.native_estimate or 5.0
        factor = {"native": 10, "hs": 20, "hs-all": 40, "hs-snap": 20, "hs-peak": 20, "hs-growth": 20, "heaptrack": 40,
                  "gperf": 400, "massif": 250}[tool]
        return max(60.0, factor * est) * self.args.timeout_scale

    def spawn(self, argv, env, stdin, stdout, stderr, timeout, limit_as=None, cwd=None):
        """Runs argv; returns (wall s, status, rusage, timed_out)."""
        def pre():
            if limit_as:
                resource.setrlimit(resource.RLIMIT_AS, (limit_as, limit_as))
        t0 = time.monotonic()
        p = subprocess.Popen(argv, env=env, stdin=stdin, stdout=stdout, stderr=stderr,
                             start_new_session=True, preexec_fn=pre, cwd=cwd)
        timed_out = []

        def kill():
            timed_out.append(True)
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        timer = threading.Timer(timeout, kill)
        timer.start()
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.monotonic() - t0
        timer.cancel()
        p.returncode = 0  # reaped by wait4; keep Popen from waiting again
        if timed_out:
            time.sleep(0.2)
        else:
            # Whatever the tool left behind in its session (none expected) goes too.
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        return wall, status, ru, bool(timed_out)

    def run_one(self, wl, tool, rnd):
        rundir = os.path.join(self.work, "runs", "%s-%s-r%d" % (wl.name, tool, rnd))
        shutil.rmtree(rundir, ignore_errors=True)
        os.makedirs(rundir)
        os.makedirs(os.path.join(self.work, "tmp"), exist_ok=True)
        argv, env, limit_as = self.command(wl, tool, rundir)
        timeout = self.timeout_for(wl, tool)
        out_path, err_path = os.path.join(rundir, "stdout"), os.path.join(rundir, "stderr")
        with open(out_path, "w") as so, open(err_path, "w") as se, \
                open(wl.stdin if wl.stdin else os.devnull) as si:
            wall, status, ru, timed_out = self.spawn(argv, env, si, so, se, timeout, limit_as, cwd=rundir)
        r = {"workload": wl.name, "tool": tool, "round": rnd, "wall": wall,
             "cpu": ru.ru_utime + ru.ru_stime, "command": argv,
             "ok": True, "error": None}
        stdout = open(out_path, errors="replace").read()
        stderr = open(err_path, errors="replace").read()
        r["error"] = self.failure(wl, tool, status, timed_out, timeout, stdout, stderr, rundir, limit_as)
        r["ok"] = r["error"] is None
        r["rss_kb"], r["tree_rss_kb"] = self.traced_rss(rundir, ru.ru_maxrss)
        if wl.check == "micro" and r["ok"]:
            m = re.search(r"([0-9.]+) ns per malloc\+free pair \((\d+) pairs", self.program_stdout(tool, stdout))
            r["ns_per_pair"], r["pairs"] = float(m.group(1)), int(m.group(2))
        files = self.capture_files(tool, rundir)
        r["capture_bytes"] = sum(os.path.getsize(f) for f in files) if tool != "native" else None
        if tool == "gperf" and files and max(os.path.getsize(f) for f in files) >= 1048000:
            r["note"] = "gperftools cut its heap dump at 1 MiB: stack list incomplete"
        if r["ok"] and tool == "hs-peak":
            self.at_peak_figures(os.path.join(rundir, "capture.hsnap"), r)
        if r["ok"] and tool == "hs-growth":
            self.growth_figures(os.path.join(rundir, "capture.hsnap"), r)
        if r["ok"] and tool == "hs-snap" and wl.check != "micro":
            self.memory_figures(os.path.join(rundir, "capture.hsnap"), r)
        if r["ok"] and tool != "native" and wl.check != "micro" and not self.args.no_analysis:
            self.analyze(wl, tool, files, rundir, r)
        if not self.args.keep:
            shutil.rmtree(rundir, ignore_errors=True)
        return r

    @staticmethod
    def program_stdout(tool, stdout):
        if tool != "heaptrack":
            return stdout
        # heaptrack's script talks on stdout around the program's own output.
        lines, inside = [], False
        for line in stdout.splitlines(keepends=True):
            if line.startswith("starting application, this might take some time"):
                inside = True
                continue
            if line.startswith("Heaptrack finished!"):
                inside = False
                continue
            if inside:
                lines.append(line)
        return "".join(lines)

    def failure(self, wl, tool, status, timed_out, timeout, stdout, stderr, rundir, limit_as):
        if timed_out:
            return "timed out after %.0f s" % timeout
        if os.WIFSIGNALED(status):
            return "killed by %s" % signal.Signals(os.WTERMSIG(status)).name
        code = os.WEXITSTATUS(status)
        tail = stderr.strip().splitlines()[-1:] if stderr.strip() else []
        if tool == "heaptrack" and ("bad_alloc" in stderr or "terminate called" in stderr):
            what = "heaptrack_interpret died (std::bad_alloc under a %d GiB address-space limit)" % (
                (limit_as or 0) >> 30)
            if code:
                what += "; the program then exited %d%s" % (code, " (SIGPIPE)" if code == 141 else "")
            return what
        if code != 0:
            return "exit status %d%s" % (code, (": " + tail[0][:120]) if tail else "")
        out = self.program_stdout(tool, stdout)
        if wl.check == "stdout":
            got = hashlib.sha256(out.encode()).hexdigest()
        elif wl.check == "file":
            p = os.path.join(rundir, wl.out_file)
            got = hashlib.sha256(open(p, "rb").read()).hexdigest() if os.path.exists(p) else "missing"
        elif wl.check == "stress":
            m = re.search(r"mallocs (\d+) reallocs (\d+) frees (\d+)", out)
            got = "ok" if m and m.group(1) == m.group(3) else "bad: " + out.strip()[:80]
        else:
            got = "ok" if re.search(r"ns per malloc\+free pair", out) else "bad"
        if wl.expected is None:
            wl.expected = got
        if got != wl.expected:
            return "wrong program output (differs from the native run)"
        return None

    @staticmethod
    def traced_rss(rundir, wait4_kb):
        """(traced program's peak RSS, largest process of the run) in KiB, from peak_rss.so's lines.
        wait4's ru_maxrss is only the fallback: it also counts the pages a child had between fork
        and exec (the harness's own), which swamps a small program's figure."""
        best = most = None
        try:
            for line in open(os.path.join(rundir, "rss.txt")):
                parts = line.split()
                if len(parts) != 3 or not parts[2].isdigit():
                    continue
                kb = int(parts[2])
                most = kb if most is None else max(most, kb)
                if parts[1] not in HELPER_COMMS:
                    best = kb if best is None else max(best, kb)
        except FileNotFoundError:
            pass
        return (best if best is not None else wait4_kb), (most if most is not None else wait4_kb)

    @staticmethod
    def capture_files(tool, rundir):
        fs = sorted(os.listdir(rundir))
        if tool.startswith("hs"):
            sel = [f for f in fs if f.startswith("capture.hsnap")]
        elif tool == "heaptrack":
            sel = [f for f in fs if f.startswith("capture.") and (f.endswith(".zst") or f.endswith(".gz"))]
        elif tool == "gperf":
            sel = [f for f in fs if f.startswith("capture") and f.endswith(".heap")]
        elif tool == "massif":
            sel = [f for f in fs if f.startswith("capture.massif")]
        else:
            sel = []
        return [os.path.join(rundir, f) for f in sel]

    def at_peak_figures(self, cap, r):
        """--snapshot-at-peak: the kept snapshot's heap against the run's exact maximum, and how many
        were forked (the shim's marker)."""
        def q(*args):
            p = subprocess.run([self.heapsnap] + list(args) + ["--json", cap], stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, text=True)
            return json.loads(p.stdout) if p.returncode == 0 else {}
        snaps = [x for x in q("snapshots").get("snapshots", []) if x.get("trigger") == "peak"]
        r["peak_bytes"] = q("summary").get("peak_heap_bytes")
        r["peak_snapshot_bytes"] = snaps[-1]["bytes"] if snaps else None
        for m in q("timeline").get("markers", []):
            g = re.search(r"at-peak snapshot .*\((\d+) taken, (\d+) failed\)", m.get("text", ""))
            if g:
                r["peak_taken"], r["peak_failed"] = int(g.group(1)), int(g.group(2))

    def growth_figures(self, cap, r):
        """--snapshot-on-growth: how many growth snapshots were taken and kept (the shim's marker)."""
        p = subprocess.run([self.heapsnap, "timeline", "--json", cap], stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, text=True)
        if p.returncode == 0:
            r["growth_kept"] = r["growth_taken"] = r["growth_failed"] = 0  # (no marker: none taken)
        for m in (json.loads(p.stdout) if p.returncode == 0 else {}).get("markers", []):
            g = re.search(r"growth snapshots: (\d+) kept of (\d+) taken \((\d+) failed", m.get("text", ""))
            if g:
                r["growth_kept"], r["growth_taken"], r["growth_failed"] = (int(x) for x in g.groups())

    def memory_figures(self, cap, r):
        """--snapshot-at-exit: the exit snapshot's RSS parts (heapsnap memory, issue 32), their sum
        against the kernel's VmRSS read beside them (the program waits at exit: the two moments are
        one), and the largest parts."""
        p = subprocess.run([self.heapsnap, "memory", "--json", "--snapshot", "exit", cap], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
        if p.returncode != 0:
            r["memory_error"] = (p.stderr.strip().splitlines() or ["exit %d" % p.returncode])[-1][:160]
            return
        d = json.loads(p.stdout)
        r["memory_rss"], r["memory_vm_rss"], r["memory_sum"] = d["rss_bytes"], d["vm_rss_bytes"], d["parts_sum_bytes"]
        r["memory_parts"] = {x["kind"]: x["rss_bytes"] for x in d["parts"]}
        r["memory_cost_s"] = d.get("cost_s")

    def analyze(self, wl, tool, files, rundir, r):
        if not files:
            r["analysis_error"] = "no capture file"
            return
        if tool.startswith("hs"):
            argv = [self.heapsnap, "top-allocators", os.path.join(rundir, "capture.hsnap")]
        elif tool == "heaptrack":
            argv = ["/usr/bin/heaptrack_print", "--print-peaks=0", "--print-temporary=0",
                    "--print-allocators=1", "-f", files[0]]
        elif tool == "gperf":
            # The last dump is the one written at exit.
            argv = ["/usr/bin/google-pprof", "--text", "--alloc_space", wl.program, files[-1]]
        else:
            argv = ["/usr/bin/ms_print", files[0]]
        env = {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/root"), "LC_ALL": "C",
               # heapsnap's debug cache (inflated copies of compressed debug files) is the bench's
               # own: the first heapsnap analysis fills it, later ones use it (see Method).
               "HEAPSNAP_CACHE_DIR": os.path.join(self.work, "heapsnap-cache")}
        with open(os.path.join(rundir, "analysis.out"), "w") as so, open(os.path.join(rundir, "analysis.err"), "w") as se:
            wall, status, ru, timed_out = self.spawn(argv, env, subprocess.DEVNULL, so, se, 600 * self.args.timeout_scale)
        if timed_out or not os.WIFEXITED(status) or os.WEXITSTATUS(status) != 0:
            err = open(os.path.join(rundir, "analysis.err"), errors="replace").read().strip().splitlines()
            r["analysis_error"] = "timed out" if timed_out else "failed: %s" % (err[-1][:120] if err else status)
            return
        r["analysis"] = wall
        r["analysis_rss_kb"] = ru.ru_maxrss
        r["analysis_command"] = argv

    # --- the rounds ----------------------------------------------------------------------------

    def run(self):
        self.prepare()
        log("bench: work directory %s; %d round(s); %s sizes" % (self.work, self.rounds, "quick" if self.quick else "full"))
        # Warm-up: one native run per workload (page cache, expected output, timeout estimates).
        for wl in self.workloads:
            r = self.run_one(wl, "native", 0)
            if not r["ok"]:
                raise SystemExit("bench: the native %s run failed: %s" % (wl.name, r["error"]))
            wl.native_estimate = r["wall"]
            log("bench: warm-up %-7s native %.2f s" % (wl.name, r["wall"]))
        for rnd in range(1, self.rounds + 1):
            for wl in self.workloads:
                k = (rnd - 1) % len(wl.tools)
                order = wl.tools[k:] + wl.tools[:k]
                for tool in order:
                    if tool in SLOW_TOOLS and rnd > self.slow_rounds:
                        continue
                    r = self.run_one(wl, tool, rnd)
                    self.results.append(r)
                    extra = ""
                    if "ns_per_pair" in r:
                        extra = " %.2f ns/pair" % r["ns_per_pair"]
                    if r.get("analysis") is not None:
                        extra += " analysis %.2f s" % r["analysis"]
                    if r.get("capture_bytes"):
                        extra += " capture %.2f MB" % human_mb(r["capture_bytes"])
                    if r.get("peak_snapshot_bytes") and r.get("peak_bytes"):
                        extra += " at-peak snapshot %.1f%% of the peak (%d forked)" % (
                            100.0 * r["peak_snapshot_bytes"] / r["peak_bytes"], r.get("peak_taken", 0))
                    log("bench: round %d/%d %-7s %-10s %s" % (
                        rnd, self.rounds, wl.name, tool,
                        ("%.2f s  rss %.0f MB%s" % (r["wall"], r["rss_kb"] / 1024.0, extra)) if r["ok"]
                        else "FAILED: " + r["error"]))
        self.stress_profile = self.profile_stress()
        self.py_profile = self.profile_py()
        self.load_end = os.getloadavg()
        self.finished = datetime.datetime.now(datetime.timezone.utc)
        self.machine_info = self.machine()

    def profile(self, workload, subdir, what, run):
        """A callgrind profile behind a workload's default-sampling row (scripts/bench_fastpath.py):
        run(work) in its own directory; None when the workload is not measured or for --quick, the
        error when it fails."""
        if self.quick or not any(x.name == workload and "hs" in x.tools for x in self.workloads):
            return None
        work = os.path.join(self.work, subdir)
        os.makedirs(work, exist_ok=True)
        log("bench: callgrind profile of %s" % what)
        try:
            return run(work)
        except (subprocess.CalledProcessError, SystemExit, OSError, ValueError, KeyError) as e:
            return {"error": str(e)[:200]}

    def profile_stress(self):
        """Instructions per stress operation natively, unsampled and at the default mean
        (scripts/bench_fastpath.py --stress)."""
        prog = os.path.join(self.work, "bin", "tests", "stress_threads")
        return self.profile("stress", "fastpath", "the stress (native, unsampled, default)",
                            lambda work: bench_fastpath.stress_per_op(self.shim, prog, work))

    def profile_py(self):
        """The python workload's instructions natively, with an idle second thread, unsampled and at
        the default mean (scripts/bench_fastpath.py --py)."""
        return self.profile("py", "fastpath-py", "py (native, idle thread, unsampled, default)",
                            lambda work: bench_fastpath.py_profile(self.shim, self.heapsnap, work))

    def state(self):
        """Everything the report is made from (saved as JSON; --from-json renders it again)."""
        return {"format": 1, "argv": self.args.argv, "heaptrack_as_gb": self.args.heaptrack_as_gb,
                "started": self.started.isoformat(), "finished": self.finished.isoformat(),
                "quick": self.quick, "rounds": self.rounds, "slow_rounds": self.slow_rounds,
                "machine": self.machine_info,
                "workloads": [{"name": wl.name, "title": wl.title, "tools": wl.tools, "check": wl.check,
                               "shown": self.shown_argv(wl)} for wl in self.workloads],
                "runs": self.results, "stress_profile": self.stress_profile, "py_profile": self.py_profile,
                "summary": {wl.name: {t: self.summary(wl.name, t) for t in wl.tools} for wl in self.workloads}}

    @classmethod
    def from_state(cls, st):
        b = cls.__new__(cls)
        b.args = argparse.Namespace(argv=st["argv"], heaptrack_as_gb=st["heaptrack_as_gb"])
        b.started = datetime.datetime.fromisoformat(st["started"])
        b.finished = datetime.datetime.fromisoformat(st["finished"])
        b.quick, b.rounds, b.slow_rounds = st["quick"], st["rounds"], st["slow_rounds"]
        b.machine_info = st["machine"]
        b.workloads = [argparse.Namespace(**w) for w in st["workloads"]]
        b.results = st["runs"]
        b.stress_profile = st.get("stress_profile")
        b.py_profile = st.get("py_profile")
        return b

    # --- figures -------------------------------------------------------------------------------

    def runs(self, wl, tool):
        return [r for r in self.results if r["workload"] == wl and r["tool"] == tool]

    def summary(self, wl, tool):
        rs = self.runs(wl, tool)
        ok = [r for r in rs if r["ok"]]
        s = {"rounds": len(rs), "ok": len(ok), "errors": sorted({r["error"] for r in rs if not r["ok"]}),
             "notes": sorted({r["note"] for r in rs if r.get("note")})}
        if not ok:
            return s
        med = statistics.median
        s["wall"] = med(r["wall"] for r in ok)
        s["wall_min"], s["wall_max"] = min(r["wall"] for r in ok), max(r["wall"] for r in ok)
        s["cpu"] = med(r["cpu"] for r in ok)
        s["rss_mb"] = med(r["rss_kb"] for r in ok) / 1024.0
        s["tree_rss_mb"] = med(r["tree_rss_kb"] for r in ok) / 1024.0
        caps = [r["capture_bytes"] for r in ok if r.get("capture_bytes") is not None]
        if caps:
            s["capture_mb"] = human_mb(med(caps))
        an = [r["analysis"] for r in ok if r.get("analysis") is not None]
        if an:
            s["analysis"] = med(an)
            s["analysis_rss_mb"] = med(r["analysis_rss_kb"] for r in ok if r.get("analysis") is not None) / 1024.0
        aerr = sorted({r["analysis_error"] for r in ok if r.get("analysis_error")})
        if aerr:
            s["analysis_errors"] = aerr
        if any("ns_per_pair" in r for r in ok):
            s["ns_per_pair"] = med(r["ns_per_pair"] for r in ok)
            s["pairs"] = ok[0]["pairs"]
        if tool != "native":
            nat = {r["round"]: r for r in self.runs(wl, "native") if r["ok"]}
            paired = [(r, nat[r["round"]]) for r in ok if r["round"] in nat]
            if paired:
                s["wall_ratio"] = med(r["wall"] / n["wall"] for r, n in paired)
                s["cpu_ratio"] = med(r["cpu"] / n["cpu"] for r, n in paired if n["cpu"] > 0)
                s["rss_ratio"] = med(r["rss_kb"] / n["rss_kb"] for r, n in paired)
                if "ns_per_pair" in s:
                    s["ns_delta"] = med(r["ns_per_pair"] - n["ns_per_pair"] for r, n in paired)
        return s

    def machine(self):
        def first(cmd):
            try:
                out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True).stdout
                return out.strip().splitlines()[0] if out.strip() else "?"
            except OSError:
                return "?"
        cpu = "?"
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
        mem = 0
        for line in open("/proc/meminfo"):
            if line.startswith("MemTotal"):
                mem = int(line.split()[1]) / (1024.0 * 1024.0)

        def deb(p):
            return first(["dpkg-query", "-W", "-f=${Version}", p])
        commit = first(["git", "-C", self.top, "rev-parse", "--short=12", "HEAD"])
        dirty = subprocess.run(["git", "-C", self.top, "status", "--porcelain"],
                               stdout=subprocess.PIPE, text=True).stdout.split("\n")
        dirty = sorted(l[3:] for l in dirty if len(l) > 3)
        return {
            "cpu": "%s, %d logical CPUs" % (cpu, os.cpu_count()),
            "memory": "%.1f GiB" % mem,
            "kernel": platform.release(),
            "os": "Debian %s" % open("/etc/debian_version").read().strip() if os.path.exists("/etc/debian_version") else platform.platform(),
            "load": "load average %.2f at the start, %.2f at the end (1-minute)" % (self.load_start[0], self.load_end[0]),
            "heapsnap": "%s%s" % (commit, (" with uncommitted changes in " + ", ".join(dirty)) if dirty else ""),
            "versions": "gcc %s; python3 %s; sqlite3 %s; heaptrack %s; gperftools %s; valgrind %s" % (
                deb("g++-12") if deb("g++-12") != "?" else first(["gcc", "-dumpfullversion"]),
                first([PYTHON, "--version"]).replace("Python ", ""),
                first(["sqlite3", "--version"]).split()[0], deb("heaptrack"), deb("libgoogle-perftools4"),
                deb("valgrind")),
        }

    def markdown(self):
        a = self.args
        cmd = "scripts/bench" + ("" if not a.argv else " " + " ".join(shlex.quote(x) for x in a.argv))
        m = self.machine_info
        L = []
        L.append("# Benchmarks")
        L.append("")
        L.append("Generated by `%s` on %s (%s, %d round%s, %.1f min); do not edit by hand: rerun it." % (
            cmd, self.started.strftime("%Y-%m-%d %H:%M UTC"), "quick sizes" if self.quick else "full sizes",
            self.rounds, "" if self.rounds == 1 else "s", (self.finished - self.started).total_seconds() / 60.0))
        L.append("How it measures: [scripts/bench_lib.py](scripts/bench_lib.py) (top of file). Issue 8 has the targets.")
        L.append("")
        loads = [float(x) for x in re.findall(r"load average ([0-9.]+) at the start, ([0-9.]+) at the end", m["load"])[0]] \
            if re.search(r"load average ([0-9.]+) at the start", m["load"]) else []
        cpus = int(re.search(r"(\d+) logical CPUs", m["cpu"]).group(1)) if re.search(r"(\d+) logical CPUs", m["cpu"]) else 0
        if loads and cpus and max(loads) > cpus:
            L.append("**The machine was busy with other work during this run** (load average %.1f to %.1f on %d CPUs): "
                     "wall-time ratios are noisy and partly measure each tool's share of the scheduler (a tool that "
                     "runs in several processes, as heaptrack does with heaptrack_interpret and zstd, gets a larger "
                     "share of an overloaded machine). The CPU-time ratios in parentheses are the steadier figure." % (
                         min(loads), max(loads), cpus))
            L.append("")
        L.append("## Machine")
        L.append("")
        for k in ("cpu", "memory", "os", "kernel", "versions", "heapsnap", "load"):
            L.append("- %s: %s" % (k, m[k]))
        L.append("")
        L.append("## Workloads")
        L.append("")
        L.append("$WORK is the bench's scratch directory: it holds the compiled malloc_micro, the "
                 "preprocessed gxx input, the SQL with its row count and a copy of the binaries under test.")
        L.append("")
        for wl in self.workloads:
            L.append("- **%s**: %s. `%s`" % (wl.name, wl.title, getattr(wl, "shown", None) or self.shown_argv(wl)))
        L.append("")
        L.append("## Summary")
        L.append("")
        L.append("Each cell: wall time × native (CPU time × native) / peak RSS of the traced process × native / "
                 "capture MB / analysis s to a top-allocators report. Medians of %d interleaved round%s "
                 "(gperftools and massif: the first %d); ratios are medians of per-round ratios. CPU time is "
                 "user+system of every process of the run (heaptrack's interpreter and compressor included)." % (
                     self.rounds, "" if self.rounds == 1 else "s", self.slow_rounds))
        L.append("")
        tools = [t for t in TOOLS if any(t in wl.tools for wl in self.workloads if wl.check != "micro")]
        L.append("| workload | native s / MB | " + " | ".join(TOOL_TITLE[t] for t in tools if t != "native") + " |")
        L.append("|---|---|" + "---|" * (len(tools) - 1))
        footnotes = []
        for wl in self.workloads:
            if wl.check == "micro":
                continue
            n = self.summary(wl.name, "native")
            row = ["**%s**" % wl.name, "%.2f s / %.0f MB" % (n["wall"], n["rss_mb"]) if "wall" in n else "failed"]
            for t in tools:
                if t == "native":
                    continue
                if t not in wl.tools:
                    row.append("—")
                    continue
                s = self.summary(wl.name, t)
                if s["ok"] == 0:
                    row.append("**fails**: " + "; ".join(s["errors"]))
                    continue
                cell = "%.2f× (%.2f×) / %.2f× / %s / %s" % (
                    s["wall_ratio"], s["cpu_ratio"], s["rss_ratio"],
                    ("%.2f" % s["capture_mb"]) if "capture_mb" in s else "?",
                    ("%.2f" % s["analysis"]) if "analysis" in s else "fails")
                if s["ok"] < s["rounds"]:
                    cell += " (%d of %d runs failed: %s)" % (s["rounds"] - s["ok"], s["rounds"], "; ".join(s["errors"]))
                if s["notes"]:
                    footnotes.append("%s / %s: %s" % (wl.name, TOOL_TITLE[t], "; ".join(s["notes"])))
                    cell += " *"
                row.append(cell)
            L.append("| " + " | ".join(row) + " |")
        L.append("")
        for f in footnotes:
            L.append("\\* " + f)
        if footnotes:
            L.append("")
        # Microbenchmark.
        micro = [wl for wl in self.workloads if wl.check == "micro"]
        if micro:
            wl = micro[0]
            L.append("## malloc/free microbenchmark (one thread, per-call cost)")
            L.append("")
            L.append("| tool | ns per malloc+free pair | more than native | pairs per run |")
            L.append("|---|---|---|---|")
            for t in wl.tools:
                s = self.summary(wl.name, t)
                if s["ok"] == 0:
                    L.append("| %s | **fails**: %s | | |" % (TOOL_TITLE[t], "; ".join(s["errors"])))
                    continue
                L.append("| %s | %.2f | %s | %s |" % (TOOL_TITLE[t], s["ns_per_pair"],
                                                     ("%+.2f ns" % s["ns_delta"]) if "ns_delta" in s else "",
                                                     "{:,}".format(s["pairs"])))
            L.append("")
        L.extend(self.targets())
        # Details.
        L.append("## Details")
        L.append("")
        L.append("wall and cpu: median (min–max) seconds; cpu is user+system of the whole process tree; "
                 "rss: the traced program's VmHWM; tree max: largest process of the run (e.g. heaptrack_interpret).")
        L.append("")
        for wl in self.workloads:
            L.append("### %s" % wl.name)
            L.append("")
            L.append("| tool | ok | wall s | wall × | cpu s | cpu × | rss MB | tree max MB | capture MB | analysis s | analysis MB |")
            L.append("|---|---|---|---|---|---|---|---|---|---|---|")
            for t in wl.tools:
                s = self.summary(wl.name, t)
                if s["ok"] == 0:
                    L.append("| %s | 0/%d | **fails**: %s | | | | | | | | |" % (TOOL_TITLE[t], s["rounds"], "; ".join(s["errors"])))
                    continue
                L.append("| %s | %d/%d | %.3f (%.3f–%.3f) | %s | %.2f | %s | %.1f | %.1f | %s | %s | %s |" % (
                    TOOL_TITLE[t], s["ok"], s["rounds"], s["wall"], s["wall_min"], s["wall_max"],
                    ("%.2f" % s["wall_ratio"]) if "wall_ratio" in s else "1",
                    s["cpu"], ("%.2f" % s["cpu_ratio"]) if "cpu_ratio" in s else "1",
                    s["rss_mb"], s["tree_rss_mb"],
                    ("%.3f" % s["capture_mb"]) if "capture_mb" in s else "",
                    ("%.2f" % s["analysis"]) if "analysis" in s else ("; ".join(s.get("analysis_errors", []))),
                    ("%.0f" % s["analysis_rss_mb"]) if "analysis_rss_mb" in s else ""))
            L.append("")
        L.append("## Method")
        L.append("")
        L.append("- Rounds are interleaved: each round runs every tool once on a workload (the order rotates by "
                 "one each round) before the next workload; one native warm-up run per workload comes first.")
        L.append("- Every process gets a clean environment (PATH, HOME, LC_ALL=C, the workload's own variables); "
                 "`python3` is /usr/bin/python3.")
        L.append("- heapsnap: `heapsnap record -q [--sample-bytes 1 | --snapshot-at-exit] -o X -- prog`; analysis "
                 "`heapsnap top-allocators X`, with its debug cache in the bench's scratch directory: the bench's "
                 "first heapsnap analysis inflates and keeps libc's compressed debug file (every workload's "
                 "captures name the same libc), every later one uses the copy, as a user's second and later "
                 "queries do (scripts/bench_replay measures both).")
        L.append("- heaptrack: `heaptrack -o X prog` under an address-space limit of %d GiB (setrlimit RLIMIT_AS, "
                 "inherited by heaptrack_interpret) and a timeout; analysis "
                 "`heaptrack_print --print-peaks=0 --print-temporary=0 --print-allocators=1 -f X.zst`." % self.args.heaptrack_as_gb)
        L.append("- gperftools: `LD_PRELOAD=%s HEAPPROFILE=X prog` (this also swaps glibc malloc for tcmalloc); "
                 "capture = every X.NNNN.heap; analysis `google-pprof --text --alloc_space prog <last dump>`." % TCMALLOC)
        L.append("- massif: `valgrind --tool=massif --massif-out-file=X prog` on the smaller workloads (not gxx); "
                 "analysis `ms_print X`.")
        L.append("- A failed run (non-zero exit, output different from native's, timeout, the tool's own crash) "
                 "counts as a failure and gives no figures.")
        L.append("- The machine may be shared: the load average above says how busy it was; cpu × in the "
                 "details is less sensitive to other load than wall ×.")
        L.append("")
        peak_runs = [r for r in self.results if r["tool"] == "hs-peak" and r.get("peak_bytes")]
        if peak_runs:
            L.append("## At-peak snapshots (issue 30)")
            L.append("")
            L.append("`heapsnap record --snapshot-at-peak` (5%): the kept snapshot's heap against the run's exact "
                     "maximum, and how many frozen children were forked to get it (one each time the heap, past 5% above the kept one, first falls by the fold room).")
            L.append("")
            L.append("| workload | round | peak | snapshot | of the peak | forked | wall × native |")
            L.append("|---|---|---|---|---|---|---|")
            for r in peak_runs:
                nat = [x["wall"] for x in self.results if x["workload"] == r["workload"] and x["tool"] == "native" and x["ok"]]
                ratio = ("%.2f" % (r["wall"] / statistics.median(nat))) if nat else "-"
                snap = r.get("peak_snapshot_bytes")
                L.append("| %s | %d | %.2f MB | %s | %s | %s | %s |" % (
                    r["workload"], r["round"], r["peak_bytes"] / 1e6, ("%.2f MB" % (snap / 1e6)) if snap else "none",
                    ("%.1f%%" % (100.0 * snap / r["peak_bytes"])) if snap else "-", r.get("peak_taken", "-"), ratio))
            L.append("")
        L.extend(self.memory_section())
        growth_runs = [r for r in self.results if r["tool"] == "hs-growth" and r["ok"]]
        if growth_runs:
            L.append("## Growth snapshots (issue 30)")
            L.append("")
            L.append("`heapsnap record --snapshot-on-growth 10%` (at most 10 kept, the default --max-snapshots, thinned evenly): how many "
                     "snapshots were taken and kept, and what they cost.")
            L.append("")
            L.append("| workload | round | taken | kept | capture | wall × native |")
            L.append("|---|---|---|---|---|---|")
            for r in growth_runs:
                nat = [x["wall"] for x in self.results if x["workload"] == r["workload"] and x["tool"] == "native" and x["ok"]]
                ratio = ("%.2f" % (r["wall"] / statistics.median(nat))) if nat else "-"
                L.append("| %s | %d | %s | %s | %.2f MB | %s |" % (
                    r["workload"], r["round"], r.get("growth_taken", "-"), r.get("growth_kept", "-"),
                    (r.get("capture_bytes") or 0) / 1e6, ratio))
            L.append("")
        return "\n".join(L)

    def memory_section(self):
        """The exit snapshots' RSS parts (issue 32): each run's sum against the kernel's VmRSS (the
        target: within 1%), and the parts that hold 1% of RSS or more."""
        runs = [r for r in self.results if r["tool"] == "hs-snap" and ("memory_rss" in r or "memory_error" in r)]
        if not runs:
            return []
        L = ["## RSS explained at exit (issue 32)", "",
             "`heapsnap memory --snapshot exit` on the `--snapshot-at-exit` runs: the parts' sum against the kernel's VmRSS "
             "(target: within 1%), then each part of 1% of RSS or more (MB).", "",
             "| workload | round | parts' sum | VmRSS | difference | within 1% | breakdown's cost | parts |",
             "|---|---|---|---|---|---|---|---|"]
        for r in runs:
            if "memory_error" in r:
                L.append("| %s | %d | - | - | - | **no: %s** | - | - |" % (r["workload"], r["round"], r["memory_error"]))
                continue
            total, vm = r["memory_sum"], r["memory_vm_rss"]
            diff = 100.0 * abs(total - vm) / vm if vm else float("inf")
            parts = sorted(((v, k) for k, v in r["memory_parts"].items() if total and v * 100 >= total), reverse=True)
            L.append("| %s | %d | %.2f MB | %.2f MB | %.2f%% | %s | %s | %s |" % (
                r["workload"], r["round"], total / 1e6, vm / 1e6, diff, "yes" if diff <= 1.0 else "**no**",
                ("%.0f ms" % (r["memory_cost_s"] * 1000)) if r.get("memory_cost_s") is not None else "-",
                ", ".join("%s %.1f" % (k, v / 1e6) for v, k in parts)))
        L.append("")
        return L

    def shown_argv(self, wl):
        out = []
        for x in wl.argv:
            x = x.replace("{OUT}", wl.out_file or "out")
            if x.startswith(self.work):
                x = "$WORK" + x[len(self.work):]
            elif x.startswith(self.top + "/"):
                x = os.path.relpath(x, self.top)
            out.append(x if x.startswith("$WORK") else shlex.quote(x))
        s = " ".join(out)
        if wl.stdin:
            s += " < " + ("$WORK" + wl.stdin[len(self.work):] if wl.stdin.startswith(self.work) else wl.stdin)
        for k, v in sorted(wl.env.items()):
            s = "%s=%s %s" % (k, v, s)
        return s

    def targets(self):
        L = ["## Targets of issue 8", ""]
        L.append("| target | workload | figure | verdict |")
        L.append("|---|---|---|---|")

        def verdict(ok):
            return "met" if ok else "**not met**"
        for wl in self.workloads:
            if wl.check == "micro":
                continue
            s = self.summary(wl.name, "hs")
            if "wall_ratio" in s:
                L.append("| default sampling ≤ 1.10× wall | %s | %.2f× (CPU %.2f×) | %s |" % (
                    wl.name, s["wall_ratio"], s["cpu_ratio"], verdict(s["wall_ratio"] <= 1.10)))
        for wl in self.workloads:
            if wl.check == "micro":
                continue
            a, h = self.summary(wl.name, "hs-all"), self.summary(wl.name, "heaptrack")
            if "wall_ratio" not in a:
                continue
            if "wall_ratio" not in h:
                L.append("| --sample-bytes 1 overhead ≤ ⅓ heaptrack's | %s | %.2f× vs heaptrack failing | heaptrack gives no figure |" % (wl.name, a["wall_ratio"]))
                continue
            oa, oh = a["wall_ratio"] - 1, h["wall_ratio"] - 1
            ca, ch = a["cpu_ratio"] - 1, h["cpu_ratio"] - 1
            L.append("| --sample-bytes 1 overhead ≤ ⅓ heaptrack's | %s | wall +%.2f vs +%.2f (%.0f%% of heaptrack's); "
                     "CPU +%.2f vs +%.2f (%.0f%%) | %s |" % (
                         wl.name, oa, oh, 100.0 * oa / oh if oh > 0 else float("inf"),
                         ca, ch, 100.0 * ca / ch if ch > 0 else float("inf"), verdict(oh > 0 and oa <= oh / 3)))
            if "capture_mb" in a and "capture_mb" in h:
                L.append("| --sample-bytes 1 capture ≤ heaptrack's .zst | %s | %.3f vs %.3f MB | %s |" % (
                    wl.name, a["capture_mb"], h["capture_mb"], verdict(a["capture_mb"] <= h["capture_mb"])))
            if "analysis" in a and "analysis" in h:
                L.append("| top-allocators ≥ 5× faster than heaptrack_print | %s | %.2f vs %.2f s (%.1f×) | %s |" % (
                    wl.name, a["analysis"], h["analysis"], h["analysis"] / a["analysis"], verdict(h["analysis"] >= 5 * a["analysis"])))
        for wl in self.workloads:
            if wl.check != "micro":
                continue
            s = self.summary(wl.name, "hs")
            if "ns_delta" in s:
                L.append("| non-sampled malloc+free ≤ +15 ns | micro | %+.2f ns | %s |" % (s["ns_delta"], verdict(s["ns_delta"] <= 15)))
        L.append("")
        L.extend(self.stress_profile_section())
        L.extend(self.py_profile_section())
        return L

    def py_profile_section(self):
        p = getattr(self, "py_profile", None)
        if not p:
            return []
        L = ["### The python workload under default sampling, by instructions", ""]
        if "error" in p:
            return L + ["The callgrind profile failed: %s" % p["error"], ""]
        ir, b = p["ir"], bench_fastpath.py_split(p)
        pct = lambda x: 100.0 * x / b["base"]
        L.append("One run of the py workload under callgrind, with a fixed hash seed and no address randomisation so "
                 "that the counts repeat (`scripts/bench --fastpath --py` prints the same). Callgrind runs threads one "
                 "at a time, so the writer thread's own instructions count here although they run on the other CPU:")
        L.append("")
        L.append("| run | instructions | more than native |")
        L.append("|---|---|---|")
        names = {"native": "native", "idle thread": "native with a thread that only waits (`tests/bench/idle_thread.c`)",
                 "unsampled": "heapsnap, sampling out of reach", "default": "heapsnap default sampling"}
        for m in ("native", "idle thread", "unsampled", "default"):
            d = ir[m] - b["base"]
            L.append("| %s | %.1f M | %s |" % (names[m], ir[m] / 1e6, "" if m == "native" else "+%.1f M (+%.2f%%)" % (d / 1e6, pct(d))))
        L.append("")
        L.append("Of the +%.2f%%: **%.2f%%** is what any second thread costs this program (once a process has created a "
                 "thread, glibc's malloc takes its locked paths and keeps them; the shim's writer thread is that "
                 "thread), **%.2f%%** is the fast paths (%.1f instructions per call over the %s allocation and free "
                 "calls the capture counted), and %.2f%% is the rest (the sampled path, the writer's compression, "
                 "start-up, and glibc's heap layout moving by a few tenths of a percent between runs). 1.10× leaves "
                 "10%% of the program's own instructions; the fast paths alone take %.0f%% of that, the thread "
                 "%.0f%%." % (
                     pct(b["thread"] + b["fast"] + b["rest"]), pct(b["thread"]), pct(b["fast"]), b["per_call"],
                     "{:,}".format(b["calls"]), pct(b["rest"]), 100 * b["fast"] / b["allowance"],
                     100 * b["thread"] / b["allowance"]))
        L.append("")
        return L

    def stress_profile_section(self):
        p = getattr(self, "stress_profile", None)
        if not p:
            return []
        L = ["### The stress under default sampling, by instructions", ""]
        s = self.summary("stress", "hs") if any(w.name == "stress" for w in self.workloads) else {}
        if "wall_ratio" in s:
            # 4 threads and the writer on 2 CPUs: the wall ratio swings from run to run (1.07x to
            # 1.36x in three full runs of one day); the instruction count does not.
            L.append("This run's wall-time ratio is %.2f× (CPU %.2f×), but the stress's wall time swings more between "
                     "runs than the other workloads' (4 threads and the writer thread on 2 CPUs): the instructions "
                     "below are the steady measure of what the shim adds to it." % (s["wall_ratio"], s["cpu_ratio"]))
            L.append("")
        if "error" in p:
            return L + ["The callgrind profile failed: %s" % p["error"], ""]
        base = p["native"]
        b = bench_fastpath.stress_budget(p)
        fast, sampled, allowance = b["fast"], b["sampled"], b["allowance"]
        L.append("Instructions per operation of `stress_threads 2 N` under callgrind (one operation is one malloc, "
                 "realloc or free call; (Ir(N=300,000) − Ir(N=100,000)) / 400,000 operations, so start-up and exit "
                 "cancel out; `scripts/bench --fastpath --stress` prints the same):")
        L.append("")
        L.append("| run | instructions per operation | more than native |")
        L.append("|---|---|---|")
        L.append("| native | %.1f | |" % base)
        L.append("| heapsnap, sampling out of reach (the fast paths alone) | %.1f | +%.1f |" % (p["unsampled"], fast))
        L.append("| heapsnap default sampling | %.1f | +%.1f |" % (p["default"], fast + sampled))
        L.append("")
        L.append("At the program's own instructions per second, 1.10× leaves %.1f instructions per operation. The fast "
                 "paths alone take %.1f (%.0f%% of that): for each call the thread's sampling countdown, the exact "
                 "totals (calls, bytes, the heap's running delta for the peak) and the block's shadow byte (its "
                 "requested size, whether it is sampled). The sampled path takes %.1f more, amortised (%.0f%%): at "
                 "the default mean of 64 KiB and blocks of 1 KiB on average, one allocation in 64 is unwound and "
                 "recorded, and so is its free. Natively an operation is %.0f instructions with "
                 "little of the program's own work around it, so by instructions neither part fits. The other "
                 "workloads' calls sit among more of the program's own work; the python workload, the nearest to "
                 "the line of those, is split the same way below." % (
                     allowance, fast, 100 * fast / allowance, sampled, 100 * sampled / allowance, base))
        L.append("")
        return L


def main():
    ap = argparse.ArgumentParser(description="heapsnap vs native and the peers, interleaved rounds (issue 8).")
    ap.add_argument("--quick", action="store_true", help="small inputs, %d round (a few minutes)" % QUICK_ROUNDS)
    ap.add_argument("--rounds", type=int, help="rounds (default %d, quick %d)" % (FULL_ROUNDS, QUICK_ROUNDS))
    ap.add_argument("--slow-rounds", type=int,
                    help="rounds that also run gperftools and massif (default %d, quick %d)" % (FULL_SLOW_ROUNDS, QUICK_ROUNDS))
    ap.add_argument("--workloads", help="comma-separated subset of py,gxx,sqlite,stress,micro")
    ap.add_argument("--tools", help="comma-separated subset of " + ",".join(TOOLS[1:]) + " (native always runs)")
    ap.add_argument("--out", help="markdown to write (default BENCHMARKS.md for a full run, "
                                  "<build>/bench/quick.md for --quick or a subset)")
    ap.add_argument("--json", help="raw results (default <build>/bench/results.json)")
    ap.add_argument("--workdir", help="where runs happen (default a fresh temporary directory, removed at the end)")
    ap.add_argument("--keep", action="store_true", help="keep every run's files (captures, outputs)")
    ap.add_argument("--no-analysis", action="store_true", help="skip the analysis timings")
    ap.add_argument("--heaptrack-as-gb", type=int, default=8, help="address-space limit for heaptrack runs (GiB)")
    ap.add_argument("--timeout-scale", type=float, default=1.0, help="multiply every timeout")
    ap.add_argument("--from-json", help="render the report again from a saved results JSON (no runs)")
    ap.add_argument("--top", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    ap.add_argument("--build", default=None)
    args = ap.parse_args()
    # The command line as the user typed it (for BENCHMARKS.md), without the wrapper's own options.
    shown = []
    skip = False
    for x in sys.argv[1:]:
        if skip:
            skip = False
            continue
        if x in ("--top", "--build"):
            skip = True
            continue
        if x.startswith("--top=") or x.startswith("--build="):
            continue
        shown.append(x)
    args.argv = shown
    if not args.build:
        args.build = os.path.join(args.top, "build")
    build = os.path.abspath(args.build)
    if args.from_json:
        st = json.load(open(args.from_json))
        b = Bench.from_state(st)
        md = b.markdown()
        out = args.out or os.path.join(build, "bench", "rendered.md")
        os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
        open(out, "w").write(md + "\n")
        print(md)
        log("bench: wrote %s" % out)
        return
    b = Bench(args)
    tmp_work = args.workdir is None
    try:
        b.run()
    finally:
        if tmp_work and not args.keep:
            shutil.rmtree(b.work, ignore_errors=True)
    md = b.markdown()
    subset = args.quick or args.workloads or args.tools or (args.rounds and args.rounds < FULL_ROUNDS)
    out = args.out or (os.path.join(b.build, "bench", "quick.md") if subset else os.path.join(b.top, "BENCHMARKS.md"))
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    open(out, "w").write(md + "\n")
    js = args.json or os.path.join(b.build, "bench", "quick.json" if subset else "results.json")
    os.makedirs(os.path.dirname(os.path.abspath(js)), exist_ok=True)
    json.dump(b.state(), open(js, "w"), indent=1, default=str)
    print(md)
    log("bench: wrote %s and %s" % (out, js))


if __name__ == "__main__":
    main()
