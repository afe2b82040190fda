#!/usr/bin/env python3
"""Stale words (issue 29, must-have 4) on tests/programs/stale_app.cc, whose truth it prints; what
the conservative scan makes of each kind, asserted exactly as measured, so that a fix shows:

- spare_capacity: g_vec (std::vector<Node *>, resized from 1,000 to 10) keeps 990 stale pointers
  past end() to the nodes g_list (std::list<Node *>) owns. The snapshot child notes the vector's
  header (begin, finish, end_of_storage: SnapshotRoots vector_*) and the analyzer drops the edges
  from the buffer's words at or past its size (snapshot/spare_capacity.h): g_vec retains its
  truth (its buffer and 10 nodes) and g_list its truth (its list nodes and the 990 nodes). Before,
  the stale words made the nodes shared, and g_list retained only its list nodes (47,520 bytes
  short). `top-retainers --stats` says how many edges were dropped: the 990.
- dead_stack: words below a thread's stack pointer (past the 128-byte red zone) are no roots: the
  512 blocks whose only pointers sit in a returned function's frame are unreachable, exactly, and
  the main thread's stack retains nothing; the 512 blocks also in g_kept are g_kept's.
- reused: a freed block is no block, its words are not scanned: the 100 orphans it pointed to are
  unreachable, exactly. A freed block handed out again unwritten keeps its stale words, which are
  edges: each target whose pointer survived reuse is retained by g_reused.

usage: stale_cases.py CASE --heapsnap BIN --programs DIR --workdir DIR
"""
import json
import os
import subprocess

import casekit
from casekit import fail, check


kVec = 1000  # stale_app's g_vec held this many nodes before it was resized


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600)


def record(a, name, args=()):
    out = os.path.join(a.workdir, name + ".hsnap")
    for f in os.listdir(a.workdir):
        if f.startswith(name + ".hsnap"):
            os.unlink(os.path.join(a.workdir, f))
    r = run([a.heapsnap, "record", "-q", "--snapshot-at-exit", "-o", out, "--",
             os.path.join(a.programs, "stale_app"), *args])
    check(r.returncode == 0 and os.path.exists(out), "%s: recorded (%s)" % (name, r.stderr[-300:]))
    truth = {k: int(v) for k, v in (l.split() for l in r.stdout.splitlines())}
    return out, truth


def hj(a, *args):
    r = run([a.heapsnap, *args])
    if r.returncode != 0:
        fail("heapsnap %s: exit %d: %s" % (" ".join(args), r.returncode, r.stderr[-500:]))
    return json.loads(r.stdout)


def retained(roots, name):
    """A global's retained bytes: one root object, even for a global that straddles two mappings
    (g_kept: the file-backed end of .bss and the anonymous rest)."""
    rows = [r for r in roots if r["name"].split("[")[0] == name]
    check(len(rows) == 1, "root %s found, one object (%s)" % (name, [(r["name"], r["retained_bytes"]) for r in rows]))
    return rows[0]["retained_bytes"]


def case_spare_capacity(a):
    path, t = record(a, "spare")
    roots = hj(a, "roots", "--json", path)["roots"]
    vec, lst = retained(roots, "g_vec"), retained(roots, "g_list")
    print("g_vec retains %d (truth %d); g_list retains %d (truth %d)" % (vec, t["vec_truth"], lst, t["list_truth"]))
    check(vec == t["vec_truth"], "g_vec retains its buffer and %d nodes: %d (%d)" % (t["vec_nodes"], t["vec_truth"], vec))
    check(lst == t["list_truth"],
          "g_list retains its %d list nodes and the nodes they hold: %d; the stale words past the vector's end "
          "are no edges (%d)" % (t["list_nodes"], t["list_truth"], lst))
    r = run([a.heapsnap, "top-retainers", "--stats", "-n", "3", path])
    dropped = [l for l in r.stderr.splitlines() if l.startswith("stale edges:")]
    print(dropped)
    stale = kVec - t["vec_nodes"]
    check(r.returncode == 0 and len(dropped) == 1 and dropped[0].startswith("stale edges: %d dropped" % stale),
          "top-retainers --stats: the %d stale edges dropped (%s)" % (stale, dropped))


def case_dead_stack(a):
    for mode in ((), ("shallow",)):
        what = mode[0] if mode else "deep"
        path, t = record(a, "dead_" + what, mode)
        u = hj(a, "unreachable", "--json", path)
        lost = [x for x in u["by_site"] if (x.get("site") or "").startswith("fill_dead()")]
        check(len(lost) == 1 and lost[0]["definite_bytes"] == t["lost"] and lost[0]["definite_blocks"] == 512,
              "%s: the %d bytes known only to a dead frame are unreachable (%s)" % (what, t["lost"], lost))
        roots = hj(a, "roots", "--json", path)["roots"]
        main = [r for r in roots if r["kind"] == "thread" and r["name"].startswith("main thread")]
        check(sum(r["retained_bytes"] for r in main) == 0, "%s: the main thread's stack retains nothing (%s)"
              % (what, [(r["name"], r["retained_bytes"]) for r in main]))
        check(retained(roots, "g_kept") == t["kept"], "%s: g_kept retains its %d bytes alone" % (what, t["kept"]))


def case_reused(a):
    path, t = record(a, "reused")
    u = hj(a, "unreachable", "--json", path)
    orphans = [x for x in u["by_site"] if (x.get("site") or "").startswith("freed_for_good()")]
    check(len(orphans) == 1 and orphans[0]["definite_bytes"] == t["orphans"],
          "the orphans of freed blocks are unreachable: %d (%s)" % (t["orphans"], orphans))
    roots = hj(a, "roots", "--json", path)["roots"]
    stale_targets = t["reused_stale"] * (t["target"] // 100)
    got = retained(roots, "g_reused")
    print("g_reused retains %d: its %d bytes and %d stale targets" % (got, t["reused"], t["reused_stale"]))
    check(got == t["reused"] + stale_targets,
          "g_reused retains its blocks and the %d targets whose pointers survived reuse (%d)" % (t["reused_stale"], got))
    check(u["unreachable_bytes"] == t["lost"] + t["orphans"] + (t["target"] - stale_targets),
          "unreachable: the dead frame's, the orphans, and targets whose pointer reuse overwrote (%d)" % u["unreachable_bytes"])


if __name__ == "__main__":
    casekit.main(globals(), ["--heapsnap", "--programs"])
