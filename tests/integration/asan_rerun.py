#!/usr/bin/env python3
"""scripts/test's second pass: integration tests again, with the ASan+UBSan analyzer reading what
the release shim records.

Not every integration test: most of them are about the shim (real programs' suites, 16-thread
stress, programs that misbehave, allocators and runtimes), and what they make the analyzer do,
the chosen ones make it do too. Rerunning all of them cost about 380 s of the ~20 minutes
scripts/test may take, for little more than the chosen ones find. The chosen ones are:
  - untrusted input: cut and damaged captures through every query (damaged-*), bad arguments,
    exit codes and messages (term-exit_codes, term-stderr, record-*);
  - every command and its main options at least once: the retention answers (graph-*, roots-*,
    snapshot-*), sites and types (sites-*), the replay queries (capture-*), the exports and the
    report (export-*, report-*), captures of other allocators (compat-*), the RSS breakdown
    (memory-*).
The sanitized analyzer is run through a wrapper that logs each command line, and the pass fails
when a command of the analyzer's (its manual pages, heapsnap-COMMAND.1) was not run at all, so
that a test taken out of the set, or a new command, cannot leave a command unsanitized without a
word.

usage: asan_rerun.py RELEASE_BUILD ASAN_BUILD RESULTS_FILE
Appends "asan-integration:NAME OK|FAIL|SKIP" lines to RESULTS_FILE; exit status 1 on a failure.
"""
import concurrent.futures
import fnmatch
import glob
import json
import os
import stat
import subprocess
import sys
import time

CHOSEN = [
    # untrusted input and the messages a user meets
    "damaged-*", "term-exit_codes", "term-stderr", "record-output_probe", "record-untraceable",
    "record-no_capture",
    # the graph, retention, roots, types
    "graph-*", "roots-*", "snapshot-types", "snapshot-diff_runs", "snapshot-incomplete_chosen",
    "snapshot-memcheck", "snapshot-exact_heap", "snapshot-big_array", "snapshot-at_peak",
    "snapshot-on_growth", "snapshot-registers", "snapshot-client_requests", "pool-dotnet",
    # allocation sites, the replay queries
    "sites-O2_default", "sites-O0_every", "sites-hide_frames", "sites-all_frames",
    "sites-stacks_text", "sites-diff", "capture-leak", "capture-peak", "capture-cxx",
    "capture-frames", "capture-realloc", "capture-threads", "capture-killed",
    # exports and the report
    "export-*", "report-*",
    # other allocators' heaps through the snapshot queries
    "compat-memcheck", "compat-alloc_jemalloc_linked", "compat-alloc_mimalloc_linked",
    # the RSS breakdown
    "memory-*",
]


def chosen(name):
    return any(fnmatch.fnmatchcase(name, p) for p in CHOSEN)


def main():
    rel, asan, results = (os.path.abspath(p) for p in sys.argv[1:4])
    real = os.path.join(asan, "analyzer", "heapsnap")
    # Tests that must fail (known shim bugs, meson's should_fail) are not rerun: they are about
    # the shim.
    must_fail = set()
    try:
        for line in open(os.path.join(rel, "meson-logs", "testlog.json")):
            r = json.loads(line)
            if r.get("result") in ("EXPECTEDFAIL", "UNEXPECTEDPASS"):
                must_fail.add(str(r.get("name")).split(" / ")[-1])
    except OSError:
        pass
    every = [t for t in json.loads(subprocess.check_output(["meson", "introspect", rel, "--tests"]))
             if "heapsnap:integration" in t["suite"] and "--heapsnap" in t["cmd"] and t["name"] not in must_fail]
    tests = [t for t in every if chosen(t["name"])]
    print("(%d of %d integration tests that run the analyzer: the chosen ones, see %s)"
          % (len(tests), len(every), os.path.relpath(__file__)))
    for p in CHOSEN:
        if not any(fnmatch.fnmatchcase(t["name"], p) for t in every):
            print("asan-rerun: %s names no test (renamed or gone?)" % p)
            return 1

    # The wrapper: one line per analyzer command line, then the sanitized analyzer itself (exec:
    # its exit status, signals and /proc/self/exe are its own).
    logdir = os.path.join(asan, "asan-rerun-commands")
    os.makedirs(logdir, exist_ok=True)
    for f in glob.glob(os.path.join(logdir, "*")):
        os.unlink(f)
    wrapper = os.path.join(asan, "heapsnap-logged")
    with open(wrapper, "w") as w:
        # (Tests that clear the environment log to a file of their own.)
        w.write('#!/bin/sh\nprintf "%%s\\n" "$*" >> "${HEAPSNAP_ASAN_COMMAND_LOG:-%s}"\nexec %s "$@"\n'
                % (os.path.join(logdir, "environment-cleared"), real))
    os.chmod(wrapper, os.stat(wrapper).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)

    def run(t):
        cmd = list(t["cmd"])
        cmd[cmd.index("--heapsnap") + 1] = wrapper
        if "--workdir" in cmd:
            cmd[cmd.index("--workdir") + 1] = os.path.join(asan, "integration-work", t["name"])
        env = dict(os.environ)
        env.update(t.get("env") or {})
        env["HEAPSNAP_PRELOAD"] = os.path.join(rel, "preload", "libheapsnap_preload.so")
        env["HEAPSNAP_ASAN_COMMAND_LOG"] = os.path.join(logdir, t["name"])
        # Tests that run `heapsnap record` with LD_PRELOAD libraries of their own start the
        # sanitized analyzer with them too; they do not interpose malloc, so ASan's link-order
        # check can go.
        env["ASAN_OPTIONS"] = env.get("ASAN_OPTIONS", "") + ":verify_asan_link_order=0"
        t0 = time.time()
        try:
            p = subprocess.run(cmd, cwd=t.get("workdir") or rel, env=env, capture_output=True,
                               timeout=t.get("timeout") or 600)
            rc, out = p.returncode, (p.stdout + p.stderr).decode(errors="replace")
        except subprocess.TimeoutExpired as e:
            rc, out = "timeout", ((e.stdout or b"") + (e.stderr or b"")).decode(errors="replace")
        return t["name"], rc, out, time.time() - t0

    bad = 0
    # The slowest first (the damaged captures), so that two workers end together.
    tests.sort(key=lambda t: not t["name"].startswith("damaged-"))
    with concurrent.futures.ThreadPoolExecutor(2) as pool, open(results, "a") as res:
        for i, (name, rc, out, secs) in enumerate(pool.map(run, tests), 1):
            status = "OK" if rc == 0 else "SKIP" if rc == 77 else "FAIL"
            print("%2d/%d asan:integration / %-28s %-5s %6.2fs" % (i, len(tests), name, status, secs), flush=True)
            if status == "FAIL":
                bad += 1
                print("--- %s (exit %s), last lines:\n%s\n---" % (name, rc, "\n".join(out.splitlines()[-40:])))
            res.write("asan-integration:%s %s\n" % (name, status))

        # Every command of the analyzer ran sanitized at least once.
        commands = sorted(os.path.basename(m)[len("heapsnap-"):-2]
                          for m in glob.glob(os.path.join(rel, "analyzer", "heapsnap-*.1")))
        ran = set()
        for f in glob.glob(os.path.join(logdir, "*")):
            for line in open(f, errors="replace"):
                words = line.split()
                i = 0
                while i < len(words) and words[i].startswith("-"):  # the options before a command
                    i += 2 if words[i] == "--color" else 1
                if i < len(words):
                    ran.add(words[i])
        missing = [c for c in commands if c not in ran]
        if not commands:
            print("asan-rerun: no manual pages in %s/analyzer: cannot tell the commands" % rel)
        if missing or not commands:
            print("asan-rerun: commands the chosen tests never ran sanitized: %s (add a test that runs "
                  "them to CHOSEN in %s)" % (", ".join(missing) or "?", os.path.relpath(__file__)))
            bad += 1
        res.write("asan-integration:every-command %s\n" % ("FAIL" if missing or not commands else "OK"))
        print("(every command of the analyzer ran sanitized: %s)" % ("no" if missing else ", ".join(commands)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
