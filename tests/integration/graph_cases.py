#!/usr/bin/env python3
"""Integration tests of the graph engine through the CLI:
  networkx    every idom of `export --format graph-json` equals networkx's immediate_dominators,
              on synthetic captures (random, heap-like, lists) and on a traced program's snapshot
  retainers   a traced program whose top retainer and its retained bytes are known exactly
  decoders    the raw block/edge decoder (on one thread and on lanes) loads the same snapshots as
              libprotobuf's, on captures of traced programs (every snapshot trigger they use) and
              synthetic ones

usage: graph_cases.py CASE --heapsnap BIN --synth BIN --programs DIR --workdir DIR --decode-check BIN (77 = skip)
"""
import json
import os
import subprocess
import sys

import casekit
from casekit import fail, check

def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        fail("%s: %s" % (" ".join(cmd), r.stderr))
    return r


def compare_with_networkx(a, path, label):
    import networkx as nx
    g = json.loads(run([a.heapsnap, "export", "--format", "graph-json", path]).stdout)
    G = nx.DiGraph()
    G.add_node("root")
    for n in g["nodes"]:
        G.add_node(n["id"])
    for f, t in g["edges"]:
        G.add_edge(f, t)
    for r in g["roots"]:
        G.add_edge("root", r)
    idom = nx.immediate_dominators(G, "root")
    mismatches = 0
    for n in g["nodes"]:
        want = idom.get(n["id"])
        want = None if want is None else (-1 if want == "root" else want)
        if n["idom"] != want:
            mismatches += 1
            if mismatches < 5:
                print("  node %d: heapsnap %s networkx %s" % (n["id"], n["idom"], want))
    check(mismatches == 0, "%s: all %d idoms equal networkx's" % (label, len(g["nodes"])))
    # Retained sizes: a node retains itself and everything it dominates.
    size = {n["id"]: n["size"] for n in g["nodes"]}
    retained = dict(size)
    order = list(nx.topological_sort(nx.DiGraph([(v, k) for k, v in idom.items() if k != "root" and v != "root"])))
    for n in order:
        pass
    tree = {}
    for k, v in idom.items():
        if k != "root" and v != "root":
            tree.setdefault(v, []).append(k)
    def total(n):
        s, stack = 0, [n]
        while stack:
            x = stack.pop()
            s += size[x]
            stack += tree.get(x, [])
        return s
    bad = sum(1 for n in g["nodes"] if n["idom"] is not None and n["retained"] != total(n["id"]))
    check(bad == 0, "%s: every retained size equals the dominated subtree's bytes" % label)


def case_networkx(a):
    try:
        import networkx  # noqa: F401
    except ImportError:
        print("SKIP: python3-networkx not installed")
        sys.exit(77)
    for kind, n in (("random", 2000), ("heap", 3000), ("list", 500), ("dlist", 500), ("tree", 1000)):
        for seed in (1, 2):
            path = os.path.join(a.workdir, "%s-%d.hsnap" % (kind, seed))
            run([a.synth, str(n), kind, path, str(seed)])
            compare_with_networkx(a, path, "%s n=%d seed=%d" % (kind, n, seed))
    path = os.path.join(a.workdir, "traced.hsnap")
    if os.path.exists(path):
        os.unlink(path)
    run([a.heapsnap, "record", "-q", "-o", path, "--snapshot-at-exit", "--", os.path.join(a.programs, "snapshot_patterns")])
    compare_with_networkx(a, path, "traced snapshot_patterns")


def case_retainers(a):
    path = os.path.join(a.workdir, "retainers.hsnap")
    if os.path.exists(path):
        os.unlink(path)
    r = run([a.heapsnap, "record", "-q", "-o", path, "--snapshot-at-exit", "--",
             os.path.join(a.programs, "snapshot_patterns")])
    parent = int([l for l in r.stdout.splitlines() if l.startswith("parent")][0].split()[1], 16)
    j = json.loads(run([a.heapsnap, "top-retainers", "--json", "-n", "3", path]).stdout)
    top = j["objects"][0]
    check(int(top["address"], 16) == parent, "top retainer is the 200-byte parent block")
    check(top["retained_bytes"] == 500 and top["shallow_bytes"] == 200 and top["retained_blocks"] == 2,
          "it retains exactly 500 bytes in 2 blocks (itself and its 300-byte child)")
    check(top["held_by"].startswith("global"), "held by a global (%s)" % top["held_by"])
    s = json.loads(run([a.heapsnap, "top-retainers", "--by", "site", "--json", path]).stdout)
    check(s["sites"][0]["retained_bytes"] >= 500, "by site: the biggest site retains at least the parent's 500 bytes")
    # Past the parent's 200 bytes: another block (its child, if glibc put it next) or none at all.
    q = subprocess.run([a.heapsnap, "path", "--json", path, hex(parent + 250)], capture_output=True, text=True, timeout=120)
    if q.returncode == 0:
        p = json.loads(q.stdout)
        check(not p["reachable"] or p["hops"][-1]["address"] != hex(parent), "an address past the parent's 200 bytes is not the parent")
    else:
        check("no live block contains" in q.stderr, "an address past the parent's 200 bytes is in no block (%s)" % q.stderr.strip())
    head = int([l for l in r.stdout.splitlines() if l.startswith("list_head")][0].split()[1], 16)
    p = json.loads(run([a.heapsnap, "path", "--json", path, hex(head)]).stdout)
    check(p["reachable"] and p["root"]["kind"] == "global" and len(p["hops"]) == 1, "the list head is one hop from a global")
    su = json.loads(run([a.heapsnap, "suspects", "--json", path]).stdout)
    check(any(int(x["address"], 16) == parent for x in su["suspects"]), "the parent (39% of the heap) is a leak suspect")
    d = json.loads(run([a.heapsnap, "dominators", "--json", path]).stdout)
    check(d["tree"][0]["retained_bytes"] == 500, "dominators: the heaviest group retains 500 bytes")


def case_decoders(a):
    paths = []
    runs = [("patterns", ["--snapshot-at-exit", "--snapshot-before-destructors"], "snapshot_patterns", []),
            ("edges", ["--snapshot-at-exit"], "snapshot_edges", ["merged"]),
            ("pool", ["--snapshot-at-exit"], "snapshot_edges", ["static_pool"]),
            ("types", ["--snapshot-at-exit", "--sample-bytes", "1"], "types_app_o2", [])]
    for name, opts, prog, args in runs:
        path = os.path.join(a.workdir, "decoders-%s.hsnap" % name)
        if os.path.exists(path):
            os.unlink(path)
        run([a.heapsnap, "record", "-q", "-o", path] + opts + ["--", os.path.join(a.programs, prog)] + args)
        paths.append(path)
    for kind, n in (("heap", 300000), ("dlist", 20000)):
        path = os.path.join(a.workdir, "decoders-%s.hsnap" % kind)
        run([a.synth, str(n), kind, path])
        paths.append(path)
    r = subprocess.run([a.decode_check] + paths, capture_output=True, text=True, timeout=600)
    print(r.stdout + r.stderr)
    check(r.returncode == 0, "every snapshot of %d captures loads the same through each decoder" % len(paths))
    for p in paths:
        check((p + ": snapshot 0: decoders agree (loaded)") in r.stdout, "%s: snapshot 0 loads" % os.path.basename(p))


if __name__ == "__main__":
    casekit.main(globals(), ["--heapsnap", "--synth", "--programs", "--decode-check"])
