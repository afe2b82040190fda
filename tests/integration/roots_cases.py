#!/usr/bin/env python3
"""Roots a C++ developer can read (issue 29.3-29.5): on tests/programs/roots_app.cc, which prints
the heap bytes each of its structures holds (from libstdc++'s own node types), the exit snapshot
answers with the variables that hold them, each structure once, and the leaked cycle among the
biggest answers:

- named: `roots` names g_sessions (a static std::map whose header is in .bss) and g_cache (a
  global Cache *) with their declared types and lines, and each retains exactly the bytes the
  program counted; the list a thread holds in a local is that thread's (stack and registers
  together), not "several roots"; top-retainers and path agree.
- stripped: without symbols the same memory is held by the module's data, named by module and
  offset, with the same total.
- one_answer: suspects names g_sessions once, not its nodes and sessions again as groups;
  dominators has no row twice under one parent.
- cycle: the two make_shared objects that point at each other are a cycle in top-retainers,
  dominators and suspects, with their bytes.
- types: the allocation frames give the type of at least 90% of the live bytes, with the node,
  buffer and class names a person writes.
- unsampled_sites: at the default sampling, a block without its stack whose call site is all the
  C++ library's (the out-of-line map insert, string grow, hashtable insert) is labelled with that
  library function and "site not known: not sampled", never a program frame taken from other
  blocks' sampled stacks: no program line is credited with more blocks than the program made
  there.
- before_destructors_tick: a writer tick forced into the before-destructors snapshot's append of
  its child's file (test hook) leaves one complete snapshot and a capture read without error.
- by_type: the same types in top-retainers and dominators (--by type), top-allocators --by type,
  the leaked cycle's type in unreachable, and the Cache that `Cache *g_cache` points to typed from
  the variable.

usage: roots_cases.py CASE --heapsnap BIN --programs DIR --workdir DIR
"""
import json
import re
import os
import subprocess

import casekit
from casekit import fail, check


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600)


def record(a, prog, name, extra=()):
    out = os.path.join(a.workdir, name + ".hsnap")
    for f in os.listdir(a.workdir):
        if f.startswith(name + ".hsnap"):
            os.unlink(os.path.join(a.workdir, f))
    r = run([a.heapsnap, "record", "-q", "--snapshot-at-exit", "-o", out, *extra, "--",
             os.path.join(a.programs, prog)])
    check(r.returncode == 0 and os.path.exists(out), "%s: recorded (%s)" % (name, r.stderr[-300:]))
    truth = {}
    for line in r.stdout.splitlines():
        k, v = line.split()
        truth[k] = int(v)
    check({"g_cache", "g_sessions", "list", "cycle"} <= set(truth), "%s: the program's own counts (%s)" % (name, truth))
    return out, truth


def hj(a, *args):
    r = run([a.heapsnap, *args])
    if r.returncode != 0:
        fail("heapsnap %s: exit %d: %s" % (" ".join(args), r.returncode, r.stderr[-500:]))
    return json.loads(r.stdout)


def case_named(a):
    path, truth = record(a, "roots_app", "named")
    d = hj(a, "roots", "--json", path)
    by = {r["name"]: r for r in d["roots"]}
    s, c = by.get("g_sessions"), by.get("g_cache")
    check(s is not None and s["kind"] == "static" and s["type"] == "std::map<int, std::unique_ptr<Session>>"
          and s["line"] > 0, "g_sessions: a static std::map<int, std::unique_ptr<Session>> with its line (%s)" % s)
    check(s["retained_bytes"] == truth["g_sessions"],
          "g_sessions retains what the program counts: %d (%d)" % (truth["g_sessions"], s["retained_bytes"]))
    check(c is not None and c["kind"] == "global" and c["type"] == "Cache *",
          "g_cache: a global Cache * (%s)" % c)
    check(c["retained_bytes"] == truth["g_cache"],
          "g_cache retains what the program counts: %d (%d)" % (truth["g_cache"], c["retained_bytes"]))
    threads = [r for r in d["roots"] if r["kind"] == "thread" and "stack" in r["name"]]
    holder = [r for r in threads if r["retained_bytes"] >= truth["list"]]
    check(len(holder) == 1 and not holder[0]["name"].startswith("main thread"),
          "the list is its thread's alone: %s" % [(r["name"], r["retained_bytes"]) for r in threads])
    check(holder[0].get("thread_name") == "list-keeper" and '"list-keeper"' in holder[0]["label"],
          "the thread is named as the program named it (%s)" % holder[0]["label"])
    # Its frames, stepped by the snapshot from its registers (issue 29: the function whose frame
    # holds a stack root): list_thread is among them, under the system call it waits in.
    frames = holder[0].get("frames", [])
    check(any(f.startswith("list_thread(") for f in frames[1:]),
          "the thread's frames name list_thread below its innermost frame (%s)" % frames)
    text = run([a.heapsnap, "roots", path]).stdout
    check(re.search(r"\n +in .* <- list_thread\(void\*\) \(roots_app\.cc:\d+\)", text) is not None,
          "roots prints where the thread was (%s)" % text)
    mains = [r for r in threads if r["name"].startswith("main thread")]
    check(len(mains) == 1 and mains[0].get("thread_name", "").startswith("roots_app"),
          "the main thread by the program's name (%s)" % [r["label"] for r in mains])
    check(d["roots"][0]["name"] == "g_sessions", "the biggest root first (%s)" % d["roots"][0]["name"])
    t = hj(a, "top-retainers", "--json", path)
    top = t["objects"][0]
    check(top["kind"] == "root" and top["root"]["name"] == "g_sessions" and top["retained_bytes"] == truth["g_sessions"],
          "top-retainers: g_sessions first, as one row (%s)" % top.get("label"))
    share = sum(o["share"] for o in t["objects"] if "inside_row" not in o)
    check(share <= 1.0 + 1e-9, "top-retainers: rows not inside another sum to at most 100%% (%.3f)" % share)
    # Paths name the field of each hop (issue 29): the program's classes from DWARF, libstdc++'s
    # node links and values, the bucket index.
    blocks = hj(a, "snapshots", "--dump", "0", path)["block_list"]
    buf = next(b["address"] for b in blocks if b["size"] == 1000)  # a Session's std::vector<char>
    hops = hj(a, "path", "--json", path, buf)["hops"]
    fields = [(h.get("type"), h.get("next_in_field")) for h in hops]
    check(len(hops) >= 3 and fields[-2] == ("Session", "buffer") and
          fields[-3] == ("std::map<int, std::unique_ptr<Session>> node", "value") and
          all(f in ("parent", "left", "right") for _, f in fields[:-3]),
          "path to a session's buffer: map nodes by their links, the node's value, the Session's buffer (%s)" % fields)
    vec = next(b["address"] for b in blocks if b["size"] == 204)  # a cache entry's std::vector<int>
    hops = hj(a, "path", "--json", path, vec)["hops"]
    fields = [(h.get("type"), h.get("next_in_field")) for h in hops]
    check(fields[0] == ("Cache", "entries") and fields[-2][1] == "value" and
          any((f or "").startswith("bucket [") for _, f in fields),
          "path to a cache entry's vector: Cache.entries, a bucket, the node's value (%s)" % fields)
    text = run([a.heapsnap, "path", path, buf]).stdout
    check("Session add_sessions() (roots_app.cc:70), field +40 (buffer) ->" in text,
          "the text names the type and the field (%s)" % text)
    # The path from a map node: held by g_sessions.
    dump = hj(a, "top-retainers", "--json", "--by", "site", path)
    sites = [g for g in dump.get("groups", dump.get("sites", [])) if "add_sessions" in json.dumps(g)]
    check(sites, "top-retainers --by site: add_sessions is a site")


def case_stripped(a):
    path, truth = record(a, "roots_app_stripped", "stripped")
    d = hj(a, "roots", "--json", path)
    data = [r for r in d["roots"] if r["kind"] == "data" and r["module"] == "roots_app_stripped"]
    check(len(data) == 1, "one data object for the stripped program's words (%s)" % [r["name"] for r in d["roots"]])
    want = truth["g_sessions"] + truth["g_cache"]
    check(data[0]["retained_bytes"] == want,
          "it retains both structures: %d (%d)" % (want, data[0]["retained_bytes"]))
    check("no symbol" in data[0]["label"] and "roots_app_stripped+0x" in data[0]["label"],
          "named by module and offset, and says it has no symbol (%s)" % data[0]["label"])
    # Frames without a name are said once, with the module and how to get its symbols (issue 31).
    t = hj(a, "top-retainers", "--json", "-n", "5", path)
    check(any("roots_app_stripped (" in n and "--debug-dir" in n for n in t["notes"]),
          "top-retainers notes the stripped module and how to get its symbols (%s)" % t["notes"])
    text = run([a.heapsnap, "top-retainers", "-n", "5", path]).stdout
    check("note: frames without a function name, shown as module+offset: roots_app_stripped" in text,
          "and says it in text too")


def case_one_answer(a):
    path, truth = record(a, "roots_app", "one_answer")
    s = hj(a, "suspects", "--json", path)
    names = [x["label"] for x in s["suspects"]]
    check(len(s["suspects"]) == 1 and s["suspects"][0]["kind"] == "root" and
          s["suspects"][0]["root"]["name"] == "g_sessions", "one suspect: g_sessions (%s)" % names)
    check(s["groups"] == [], "no group suspect repeats what g_sessions holds (%s)" % [g.get("site") for g in s["groups"]])
    text = run([a.heapsnap, "suspects", path]).stdout
    check(text.count("suspect ") == 1 and "held by itself" not in text, "the text says it once:\n" + text)
    d = hj(a, "dominators", "--json", path)

    def walk(nodes, parent):
        seen = set()
        for n in nodes:
            key = n.get("site", n.get("label"))
            check(key not in seen, "dominators: %s appears once under %s" % (key, parent))
            seen.add(key)
            walk(n.get("children", []), key)
    walk(d["tree"], "the top")


def case_cycle(a):
    path, truth = record(a, "roots_app", "cycle")
    t = hj(a, "top-retainers", "--json", path)
    check(t["unreachable_bytes"] == truth["cycle"], "top-retainers: %d unreachable bytes (%d)" % (truth["cycle"], t["unreachable_bytes"]))
    u = t["unreachable"]
    check(len(u) == 1 and u[0]["cycle"] and u[0]["retained_bytes"] == truth["cycle"] and "leak_cycle" in u[0]["site"],
          "top-retainers: one cycle of %d bytes from leak_cycle (%s)" % (truth["cycle"], u))
    s = hj(a, "suspects", "--json", path)
    check(len(s["unreachable"]) == 1 and s["unreachable"][0]["retained_bytes"] == truth["cycle"],
          "suspects: the cycle (%s)" % s["unreachable"])
    d = hj(a, "dominators", "--json", path)
    check(d["unreachable_bytes"] == truth["cycle"] and "leak_cycle" in json.dumps(d["tree"]),
          "dominators: the cycle's bytes and its site (%d)" % d["unreachable_bytes"])
    text = run([a.heapsnap, "dominators", path]).stdout
    check(any("leak_cycle" in l and "unreachable" in l for l in text.splitlines()), "dominators text marks it:\n" + text)


def case_types(a):
    path, truth = record(a, "roots_app", "types")
    t = hj(a, "types", "--json", "-n", "100", path)
    check(t["typed_bytes"] >= 0.9 * t["bytes"], "types: %d of %d live bytes typed (at least 90%%)" % (t["typed_bytes"], t["bytes"]))
    got = {x["type"]: x for x in t["types"]}
    want = {
        "std::map<int, std::unique_ptr<Session>> node": truth["sessions"],
        "std::list<Item> node": truth["list"] // 216 if truth["list"] % 216 == 0 else None,
        "std::unordered_map<std::string, std::vector<int>> node": 300,
        "std::vector<int> buffer": 300,
        "std::unordered_map<std::string, std::vector<int>> buckets": 1,
    }
    for name, count in want.items():
        check(name in got, "types: %s (%s)" % (name, sorted(got)))
        if count is not None:
            check(got[name]["count"] == count, "types: %d of %s (%d)" % (count, name, got[name]["count"]))
    node = got["std::map<int, std::unique_ptr<Session>> node"]
    check(node["shallow_bytes"] == truth["sessions"] * truth["session_node"],
          "the map's nodes: %d bytes each" % truth["session_node"])
    check(node["retained_bytes"] == truth["g_sessions"], "the map's nodes retain the whole map (%d)" % node["retained_bytes"])


def case_unsampled_sites(a):
    # The figures of two runs (the sampled blocks differ) must each hold.
    for run_no in range(2):
        path, truth = record(a, "roots_app", "unsampled_%d" % run_no)
        n = truth["sessions"]
        t = hj(a, "top-retainers", "--json", "--by", "site", "-n", "200", path)
        sites = t["sites"]
        # add_sessions makes n of each: the Session (line 70), its user string (72), its buffer
        # (73), the map node (74); fill_cache 300 vectors (59) and Cache (56). 300 cache keys grow
        # through the same out-of-line std::string::_M_mutate as the 2,000 user strings.
        made = {("add_sessions", 70): n, ("add_sessions", 72): n, ("add_sessions", 73): n,
                ("add_sessions", 74): n, ("fill_cache", 56): 1, ("fill_cache", 59): 300}
        got = {}
        for s in sites:
            fn = (s.get("function") or "").split("(")[0]
            if os.path.basename(s.get("file") or "") == "roots_app.cc":
                got[(fn, s["line"])] = got.get((fn, s["line"]), 0) + s["blocks"]
        for k, v in got.items():
            if k in made:
                check(v <= made[k], "run %d: %s:%d credited with %d blocks, at most the %d it made"
                      % (run_no, k[0], k[1], v, made[k]))
        unknown = [s for s in sites if s["site_known"] is False]
        for s in unknown:
            check(s["site_from"] == "call_site" and "[site not known: not sampled]" in s["site"] and
                  os.path.basename(s.get("file") or "") != "roots_app.cc",
                  "run %d: an unsampled library call site is labelled so (%s)" % (run_no, s["site"]))
        check(all(s["site_from"] in ("stack", "call_site") for s in sites), "run %d: no site taken from other blocks' stacks" % run_no)
        # The map's nodes: every one is either add_sessions:74 (its stack sampled) or the
        # library's insert, not known; together exactly n.
        inserts = [s for s in unknown if "_M_emplace_hint_unique" in s["site"]]
        check(len(inserts) == 1 and inserts[0]["blocks"] + got.get(("add_sessions", 74), 0) == n,
              "run %d: the %d map nodes: %d sampled at add_sessions:74, %d not known (%s)"
              % (run_no, n, got.get(("add_sessions", 74), 0), inserts[0]["blocks"] if inserts else -1, [s["site"] for s in unknown]))
        grow = [s for s in unknown if "_M_mutate" in s["site"]]
        check(len(grow) == 1 and all(c["site"].startswith(("add_sessions()", "fill_cache()")) for c in grow[0]["sampled_callers"]),
              "run %d: the strings grown out of line: one unknown site, its sampled callers a hint (%s)"
              % (run_no, grow[0]["sampled_callers"] if grow else None))
        text = run([a.heapsnap, "dominators", "--depth", "1", path]).stdout
        check(all("[site not known: not sampled]" in l for l in text.splitlines() if "_M_emplace_hint_unique" in l),
              "dominators says the insert's site is not known")


def case_by_type(a):
    path, truth = record(a, "roots_app", "by_type", ["--sample-bytes", "1"])
    node = "std::map<int, std::unique_ptr<Session>> node"
    t = hj(a, "top-retainers", "--json", "--by", "type", path)
    got = {x["type"]: x for x in t["types"]}
    check(node in got and got[node]["retained_bytes"] == truth["g_sessions"],
          "top-retainers --by type: the map's nodes retain the map (%s)" % got.get(node))
    check(got.get("Cache", {}).get("how") == "variable" and got["Cache"]["retained_bytes"] == truth["g_cache"],
          "the block g_cache points to is a Cache, from the variable's type, retaining the cache (%s)" % got.get("Cache"))
    o = hj(a, "top-retainers", "--json", path)
    cache_rows = [x for x in o["objects"] if x.get("type") == "Cache"]
    check(len(cache_rows) == 1 and cache_rows[0]["type_from"] == "variable", "top-retainers: the Cache row is typed")
    d = hj(a, "dominators", "--json", "--by", "type", path)
    first = {x["group"].split(" from ")[0]: x for x in d["tree"]}
    check(node in first and first[node]["objects"] == truth["sessions"] and first[node]["retained_bytes"] == truth["g_sessions"],
          "dominators --by type: one group of %d map nodes (%s)" % (truth["sessions"], sorted(first)))
    kids = {x["group"].split(" from ")[0] for x in first[node].get("children", [])}
    check("Session" in kids, "... holding the Sessions (%s)" % sorted(kids))
    ta = hj(a, "top-allocators", "--json", "--by", "type", path)
    rows = {x["type"]: x for x in ta["sites"]}
    check(node in rows and rows[node]["alloc_calls"] == truth["sessions"],
          "top-allocators --by type: %d map nodes allocated (%s)" % (truth["sessions"], rows.get(node, {}).get("alloc_calls")))
    u = hj(a, "unreachable", "--json", path)
    check([x["type"] for x in u["by_site"]] == ["Peer (make_shared)"], "unreachable: the cycle is of Peer (make_shared) (%s)" % u["by_site"])
    lk = {x["type"]: x for x in hj(a, "leaks", "--json", "--by", "type", "-n", "100", path)["leaks"]}
    check(node in lk and lk[node]["blocks"] == truth["sessions"] and lk[node]["bytes"] == truth["sessions"] * truth["session_node"],
          "leaks --by type: the map's nodes in one row (%s)" % lk.get(node))
    pk = {x["type"] for x in hj(a, "peak", "--json", "--by", "type", "-n", "100", path)["live_at_peak"]}
    check({node, "Peer (make_shared)", "std::list<Item> node"} <= pk, "peak --by type: the same types (%s)" % sorted(pk))
    # A second run of the same program: its heap is the same, type by type.
    again, _ = record(a, "roots_app", "by_type_again", ["--sample-bytes", "1"])
    dt = hj(a, "diff", "--json", "--by", "type", path, again)
    check(dt["types"] == [] and dt["bytes_change"] == 0, "diff --by type between two runs: no type changed (%s)" % dt["types"][:3])
    dt = hj(a, "diff", "--json", "--by", "type", again, path)
    check(dt["by"] == "type", "diff --by type says so")


def case_before_destructors(a):
    """--snapshot-before-destructors (issue 30.3): when main returns, or when the program calls
    exit(), before static destructors: the static std::map is whole there, and gone in the exit
    snapshot after them."""
    for how, args, label in (("returns", [], "main returned"), ("exit", ["exit"], "exit called")):
        out = os.path.join(a.workdir, "dtor-%s.hsnap" % how)
        if os.path.exists(out):
            os.unlink(out)
        r = run([a.heapsnap, "record", "-q", "-f", "--snapshot-before-destructors", "--snapshot-at-exit", "-o", out, "--",
                 os.path.join(a.programs, "dtor_app"), *args])
        check(r.returncode == 0, "%s: recorded (%s)" % (how, r.stderr[-300:]))
        table = int(r.stdout.split()[1])
        snaps = hj(a, "snapshots", "--json", out)["snapshots"]
        check([(x["trigger"], x["label"], x["complete"]) for x in snaps] ==
              [("before-destructors", label, True), ("exit", "exit", True)],
              "%s: a snapshot before destructors, labelled '%s', then the exit one (%s)" % (how, label, snaps))
        before = {x["name"]: x for x in hj(a, "roots", "--json", "--snapshot", str(snaps[0]["index"]), out)["roots"]}
        check(before.get("g_table", {}).get("retained_bytes") == table,
              "%s: before destructors, g_table holds its %d bytes (%s)" % (how, table, before.get("g_table")))
        check("g_labels" in before and not any("[abi:" in n for n in before),
              "%s: a global whose symbol has an ABI tag is named as written, g_labels (%s)" % (how, sorted(before)))
        # A template of the program's own on the path: its field named from its instance's layout.
        blocks = hj(a, "snapshots", "--dump", str(snaps[0]["index"]), out)["block_list"]
        payload = [b["address"] for b in blocks if b["size"] == 77]
        check(len(payload) == 1, "%s: the Payload block (%s)" % (how, payload))
        hops = hj(a, "path", "--json", "--snapshot", str(snaps[0]["index"]), out, payload[0])["hops"]
        fields = [(h.get("type"), h.get("next_in_field")) for h in hops]
        check(("Wrapper<Payload>", "inner") in fields,
              "%s: the path through the program's template names its field: Wrapper<Payload>.inner (%s)" % (how, fields))
        after = hj(a, "roots", "--json", "--snapshot", str(snaps[1]["index"]), out)
        check(after["total_bytes"] < table, "%s: after them, the heap no longer holds the table (%d)" % (how, after["total_bytes"]))


def case_before_destructors_tick(a):
    """The before-destructors snapshot is taken on the program's thread while the writer thread
    runs on: a writer tick while that thread appends the child's file (forced by the test hook
    HEAPSNAP_TEST_TICK_IN_SNAPSHOT_APPEND, which waits there for two whole ticks when the writer
    can tick) reaped the reaped child again, appended its file a second time or after a failure
    record of its own ("snapshot child failed (status 0)"), and wrote into the capture beside
    it. Held off (writer_hold), the writer's tick waits: one complete snapshot, read cleanly."""
    env = dict(os.environ, HEAPSNAP_TEST_TICK_IN_SNAPSHOT_APPEND="1")
    for how, args, label in (("returns", [], "main returned"), ("exit", ["exit"], "exit called")):
        out = os.path.join(a.workdir, "dtor-tick-%s.hsnap" % how)
        if os.path.exists(out):
            os.unlink(out)
        r = subprocess.run([a.heapsnap, "record", "-q", "-f", "--snapshot-before-destructors", "-o", out, "--",
                            os.path.join(a.programs, "dtor_app"), *args], capture_output=True, text=True,
                           timeout=600, env=env)
        check(r.returncode == 0, "%s: recorded (%s)" % (how, r.stderr[-300:]))
        s = subprocess.run([a.heapsnap, "summary", out], capture_output=True, text=True, timeout=600)
        said = (s.stdout + s.stderr).lower()
        check(s.returncode == 0 and not any(w in said for w in ("problem", "error", "incomplete", "failed")),
              "%s: summary reads the capture without a problem (rc %d: %s %s)" % (how, s.returncode, s.stdout[-600:],
                                                                                   s.stderr[-600:]))
        snaps = hj(a, "snapshots", "--json", out)["snapshots"]
        check([(x["trigger"], x["label"], x["complete"]) for x in snaps] == [("before-destructors", label, True)],
              "%s: one complete snapshot before destructors (%s)" % (how, snaps))
        table = int(r.stdout.split()[1])
        before = {x["name"]: x for x in hj(a, "roots", "--json", "--snapshot", str(snaps[0]["index"]), out)["roots"]}
        check(before.get("g_table", {}).get("retained_bytes") == table,
              "%s: g_table holds its %d bytes (%s)" % (how, table, before.get("g_table")))


if __name__ == "__main__":
    casekit.main(globals(), ["--heapsnap", "--programs"])
