#!/usr/bin/env python3
"""Allocation sites are the program's own frames (issue 29.1): on idiomatic C++ (containers,
make_shared, make_unique, a C-style xmalloc wrapper; tests/programs/sites_app.cc built -g at -O0,
-O1 and -O2), the site of every allocation is the function of the program that made it (fill_cache,
add_sessions, ...), with its file:line, not std::__new_allocator<...>::allocate; in
top-allocators, leaks and top-retainers --by site (--json), with every allocation recorded and at
the default sampling. --hide-frames / HEAPSNAP_HIDE_FRAMES make a wrapper's caller the site;
--all-frames shows the innermost frames as recorded; stacks cut to --frames show the program's
frames first.

usage: sites_cases.py CASE --heapsnap BIN --programs DIR --source DIR --workdir DIR
"""
import json
import os
import re
import subprocess

import casekit
from casekit import fail, check

APP = "sites_app.cc"
# The functions that fill the program's containers, and the wrapper that copy_buffers calls.
FILLERS = ["fill_cache", "add_sessions", "record_history", "collect_names", "make_widgets", "leak_records"]


def run(cmd, env=None):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, **env) if env else None)


def ranges(a):
    """{function: (first line, last line)} from the SITE/END comments of the program's source."""
    out, start = {}, {}
    with open(os.path.join(a.source, APP)) as f:
        for n, line in enumerate(f, 1):
            m = re.search(r"// SITE (\w+)", line)
            if m:
                start[m.group(1)] = n
            m = re.search(r"// END (\w+)", line)
            if m:
                out[m.group(1)] = (start[m.group(1)], n)
    check(set(FILLERS) | {"xmalloc", "copy_buffers", "main"} <= set(out), "the program's functions: %s" % sorted(out))
    return out


def record(a, name, opt, extra, args=()):
    out = os.path.join(a.workdir, name + ".hsnap")
    for f in os.listdir(a.workdir):
        if f.startswith(name + ".hsnap"):
            os.unlink(os.path.join(a.workdir, f))
    prog = os.path.join(a.programs, "sites_app_O" + opt)
    r = run([a.heapsnap, "record", "-q", "-o", out, *extra, "--", prog, *args])
    check(r.returncode == 0 and os.path.exists(out), "%s: recorded (%s)" % (name, r.stderr[-300:]))
    return out


def hsnap(a, *args, env=None):
    r = run([a.heapsnap, *args], env=env)
    if r.returncode != 0:
        fail("heapsnap %s: exit %d: %s" % (" ".join(args), r.returncode, r.stderr[-500:]))
    return r.stdout


def hsnap_json(a, *args, env=None):
    return json.loads(hsnap(a, *args, env=env))


def in_app(site):
    return os.path.basename(site.get("file") or "") == APP


def function_of(site, funcs):
    """The program's function a site names (by its name and its line), or None."""
    fn = site.get("function") or ""
    name = re.match(r"[A-Za-z_]\w*", fn)
    if not name or name.group(0) not in funcs or not in_app(site):
        return None
    lo, hi = funcs[name.group(0)]
    return name.group(0) if lo <= site["line"] <= hi else None


def check_sites(what, sites, funcs, want, stacks_key=None):
    """Every site that a frame of the program could name is one: the program's function, the line
    inside it; the functions in `want` are all there; no label is the library's long form."""
    names = set()
    for s in sites:
        label = s["site"]
        program_frame = in_app(s)
        if stacks_key:
            program_frame = program_frame or any(os.path.basename(f["file"]) == APP
                                                 for st in s.get(stacks_key, []) for f in st["frames"])
        if program_frame:
            fn = function_of(s, funcs)
            check(fn is not None, "%s: site %s is a function of %s, its line inside it (innermost: %s)"
                  % (what, label[:200], APP, s.get("site_innermost", "?")[:160]))
            names.add(fn)
        check(len(label) <= 160 and "std::__cxx11" not in label and "std::allocator<" not in label,
              "%s: a readable label (%d chars): %s" % (what, len(label), label[:200]))
        check("site_innermost" in s, "%s: the innermost frame is kept (site_innermost) for %s" % (what, label))
    missing = set(want) - names
    check(not missing, "%s: sites of %s (missing %s; sites %s)" % (what, sorted(want), sorted(missing),
                                                                     [s["site"] for s in sites]))
    return names


def levels_case(a, opt, every):
    funcs = ranges(a)
    name = "O%s_%s" % (opt, "every" if every else "default")
    cap = record(a, name, opt, (["--sample-bytes", "1"] if every else []) + ["--snapshot-at-exit"])
    # top-allocators: sampled stacks, whole (every allocation, or the default sampling).
    top = hsnap_json(a, "top-allocators", "--json", "-n", "200", "--stacks", "3", cap)
    want = set(FILLERS) | {"xmalloc"}
    names = check_sites("%s top-allocators" % name, top["sites"], funcs, want, stacks_key="stacks")
    chosen = [s for s in top["sites"] if s["site_innermost"].startswith("std::")]
    check(len(chosen) >= 5 and all(in_app(s) for s in chosen),
          "%s: %d sites whose innermost frame is the C++ library's are the program's frames" % (name, len(chosen)))
    # leaks: the program ends through _exit, its containers are left; leak_records' vectors were lost.
    leaks = hsnap_json(a, "leaks", "--json", "-n", "200", cap)
    check(leaks["leaks"], "%s: leaks listed" % name)
    check_sites("%s leaks" % name, leaks["leaks"], funcs, want, stacks_key=None)
    for e in leaks["leaks"]:
        if any(os.path.basename(f["file"]) == APP for f in e["frames"]):
            check(in_app(e), "%s leaks: a stack with the program's frames has its site there (%s)" % (name, e["site"]))
    # top-retainers --by site: a sampled block's site comes from its stack; another's from its
    # call site's inline chain alone (the C++ library's only when nothing inlined reaches the
    # program: out-of-line library code, as at -O0).
    tr = hsnap_json(a, "top-retainers", "--by", "site", "--json", "-n", "200", cap)
    sites = [s for s in tr["sites"] if s["retained_bytes"] > 0]
    from_stack = [s for s in sites if s.get("site_from") == "stack"]
    for s in from_stack:
        check(function_of(s, funcs) is not None, "%s top-retainers: %s from a stack is the program's (innermost %s)"
              % (name, s["site"], s["site_innermost"][:120]))
    retained = {function_of(s, funcs) for s in sites} - {None}
    if every:
        check(len(from_stack) == len(sites), "%s top-retainers: every block has its stack" % name)
        want_retained = {"fill_cache", "add_sessions", "record_history", "collect_names", "make_widgets",
                         "copy_buffers", "xmalloc", "leak_records"}
    elif opt != "0":
        # Inlined into the program's functions, the library's code leaves them on the call site's
        # inline chain.
        want_retained = {"fill_cache", "add_sessions", "record_history", "collect_names", "make_widgets", "xmalloc"}
    else:
        want_retained = {"xmalloc"}  # its own call to malloc; the rest are out-of-line std:: code
    missing = want_retained - retained
    check(not missing, "%s top-retainers --by site: the program's functions %s (missing %s; sites %s)"
          % (name, sorted(want_retained), sorted(missing), [(s["site"], s.get("site_from")) for s in sites]))
    labels = [s["site"] for s in sites if in_app(s)]
    check(len(labels) == len(set(labels)), "%s top-retainers: one row per site of the program (%s)" % (name, labels))


def case_O0_every(a):
    levels_case(a, "0", True)


def case_O0_default(a):
    levels_case(a, "0", False)


def case_O1_every(a):
    levels_case(a, "1", True)


def case_O1_default(a):
    levels_case(a, "1", False)


def case_O2_every(a):
    levels_case(a, "2", True)


def case_O2_default(a):
    levels_case(a, "2", False)


def case_hide_frames(a):
    funcs = ranges(a)
    for opt in ("0", "2"):
        cap = record(a, "hide_O" + opt, opt, ["--sample-bytes", "1", "--snapshot-at-exit"])
        plain = hsnap_json(a, "top-allocators", "--json", "-n", "200", cap)
        check(any(function_of(s, funcs) == "xmalloc" for s in plain["sites"]),
              "O%s: xmalloc, the program's own, is a site without --hide-frames" % opt)
        env_runs = [((), {"HEAPSNAP_HIDE_FRAMES": "no_such_wrapper;^xmalloc$"}),
                    (("--hide-frames", "no_such_wrapper", "--hide-frames", "xmalloc"), None)]
        for extra, env in env_runs:
            how = "HEAPSNAP_HIDE_FRAMES" if env else "--hide-frames"
            top = hsnap_json(a, "top-allocators", "--json", "-n", "200", *extra, cap, env=env)
            names = {function_of(s, funcs) for s in top["sites"]}
            check("xmalloc" not in names and "copy_buffers" in names,
                  "O%s %s: copy_buffers, xmalloc's caller, is the site (%s)" % (opt, how, sorted(n for n in names if n)))
            row = next(s for s in top["sites"] if function_of(s, funcs) == "copy_buffers")
            check(row["alloc_calls"] >= 3000 and row["site_innermost"].startswith("xmalloc"),
                  "O%s %s: its 3000 buffers, whose innermost frame is xmalloc (%s)" % (opt, how, row["site_innermost"]))
            leaks = hsnap_json(a, "leaks", "--json", "-n", "200", *extra, cap, env=env)
            check(any(function_of(e, funcs) == "copy_buffers" for e in leaks["leaks"]) and
                  not any(function_of(e, funcs) == "xmalloc" for e in leaks["leaks"]),
                  "O%s %s: leaks name copy_buffers" % (opt, how))
            tr = hsnap_json(a, "top-retainers", "--by", "site", "--json", "-n", "200", *extra, cap, env=env)
            rnames = {function_of(s, funcs) for s in tr["sites"]}
            check("xmalloc" not in rnames and "copy_buffers" in rnames,
                  "O%s %s: top-retainers --by site names copy_buffers" % (opt, how))
    for bad in (["--hide-frames", "(unclosed"], []):
        env = {"HEAPSNAP_HIDE_FRAMES": "[z-a]"} if not bad else None
        r = run([a.heapsnap, "top-allocators", *bad, cap], env=env)
        check(r.returncode == 2 and "regular expression" in r.stderr,
              "a bad pattern is a usage error (exit %d: %s)" % (r.returncode, r.stderr.strip()))


def case_all_frames(a):
    funcs = ranges(a)
    cap = record(a, "all_frames", "1", ["--sample-bytes", "1", "--snapshot-at-exit"])
    top = hsnap_json(a, "top-allocators", "--json", "-n", "200", "--all-frames", cap)
    lib = [s for s in top["sites"] if s["site"].startswith("std::") or "new_allocator" in s["site"]]
    check(len(lib) >= 3, "--all-frames: the innermost frames, the C++ library's among them (%d)" % len(lib))
    check(all(s["site"] == s["site_innermost"] for s in top["sites"]),
          "--all-frames: every site is its innermost frame, as recorded")
    check(any("std::__cxx11" in s["site"] or "std::allocator<" in s["site"] for s in top["sites"]),
          "--all-frames: names as demangled, unchanged")
    tr = hsnap_json(a, "top-retainers", "--by", "site", "--json", "--all-frames", cap)
    check(all(s["site"] == s["site_innermost"] for s in tr["sites"]), "--all-frames: top-retainers too")
    out = hsnap(a, "top-allocators", "--all-frames", "-n", "3", cap)
    check("library frames" not in out, "--all-frames: stacks are whole")


def case_stacks_text(a):
    funcs = ranges(a)
    cap = record(a, "text", "1", ["--sample-bytes", "1", "--snapshot-at-exit"])
    out = hsnap(a, "top-allocators", "-n", "6", cap)
    print(out)
    rows = [l for l in out.splitlines() if re.match(r"\s+\S+ \S+\s+[\d,]+\s", l) and "sites_app.cc" in l]
    check(len(rows) >= 5, "the table's sites are the program's functions (%d rows)" % len(rows))
    check(re.search(r"\.\.\. \d+ library frames", out) is not None,
          "a stack cut to --frames summarises the library's frames")
    lines = out.splitlines()
    for i, l in enumerate(lines):
        if "library frames" in l and i + 1 < len(lines) and lines[i + 1].strip().startswith("at "):
            check("sites_app.cc" in lines[i + 1], "after the summary, the program's frame: %s" % lines[i + 1].strip())
            break
    else:
        fail("no program frame right after a library summary:\n" + out)
    check("std::__cxx11" not in out and max(len(l) for l in lines) < 200, "readable: no line of the long forms")
    whole = hsnap(a, "top-allocators", "-n", "3", "--frames", "64", cap)
    check("library frames" not in whole and "std::vector<int>::" in whole,
          "uncut stacks show every frame, readable (std::vector<int>::...)")
    leaks = hsnap(a, "leaks", "-n", "3", cap)
    check(re.search(r"blocks from \w+(\(int\))? \(sites_app\.cc:\d+\):", leaks) is not None,
          "leaks name each stack's site:\n" + leaks[:600])
    dom = hsnap(a, "dominators", "--depth", "2", cap)
    check("sites_app.cc" in dom and "new_allocator" not in dom, "dominators group by the program's sites:\n" + dom[:800])


def case_diff(a):
    funcs = ranges(a)
    # Two runs of one program at the default sampling: the same heap, no change, whichever blocks
    # were sampled.
    one = record(a, "diff_one", "1", ["--snapshot-at-exit"])
    two = record(a, "diff_two", "1", ["--snapshot-at-exit"])
    d = hsnap_json(a, "diff", "--json", one + ":0", two + ":0")
    check(d["bytes_change"] == 0 and d["sites"] == [], "two sampled runs, the same heap: no site changed (%s)"
          % [(s["site"], s["bytes_change"]) for s in d["sites"]][:10])
    # Twice the data: every filler grew, named as the program's functions.
    small = record(a, "diff_small", "1", ["--sample-bytes", "1", "--snapshot-at-exit"], ["1"])
    big = record(a, "diff_big", "1", ["--sample-bytes", "1", "--snapshot-at-exit"], ["2"])
    d = hsnap_json(a, "diff", "--json", "-n", "100", small + ":0", big + ":0")
    grew = {function_of(s, {k: v for k, v in funcs.items()}) or s["site"] for s in d["sites"] if s["bytes_change"] > 0}
    labels = [s["site"] for s in d["sites"]]
    check({"fill_cache", "add_sessions", "record_history", "collect_names", "make_widgets"} <= grew,
          "diff: the sites that grew are the program's functions (%s)" % labels)
    check(all("new_allocator" not in l for l in labels), "diff: no library site (%s)" % labels)


if __name__ == "__main__":
    casekit.main(globals(), ["--heapsnap", "--programs", "--source"])
