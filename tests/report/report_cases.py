#!/usr/bin/env python3
"""The HTML report end to end: a traced program's capture turned into a report, the page checked
for self-containment, its data cross-checked against the terminal queries, and the page rendered
in headless Chromium (Debian's chromium): every chart drew, no script error, nothing fetched, a
screenshot saved in the work directory.

usage: report_cases.py CASE --heapsnap BIN --program report_program --workdir DIR
exit 77 = skipped (no chromium for the cases that need a browser)
"""
import argparse
import html.parser
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)
    print("ok:", msg)


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600, **kw)


def hsnap(a, *args):
    r = run([a.heapsnap, *args])
    if r.returncode != 0:
        fail("heapsnap %s: exit %d: %s" % (" ".join(args), r.returncode, r.stderr))
    return r


def hsnap_json(a, *args):
    return json.loads(hsnap(a, *args).stdout)


def record(a, name, prog_args, extra):
    out = os.path.join(a.workdir, name + ".hsnap")
    for f in os.listdir(a.workdir):
        if f.startswith(name + ".hsnap"):
            os.unlink(os.path.join(a.workdir, f))
    r = run([a.heapsnap, "record", "-q", "-o", out, *extra, "--", *prog_args])
    check(r.returncode == 0, "%s: the program runs under the shim (%s)" % (name, r.stderr.strip()))
    return out


def report(a, capture, name, *extra):
    out = os.path.join(a.workdir, name + ".html")
    t0 = time.monotonic()
    r = run([a.heapsnap, "report", capture, "-o", out, *extra])
    dt = time.monotonic() - t0
    check(r.returncode == 0, "report %s written in %.2f s (%s)" % (name, dt, r.stderr.strip().splitlines()[:1]))
    with open(out, encoding="utf-8") as f:
        page = f.read()
    return out, page


DATA_RE = re.compile(r'<script type="application/json" id="heapsnap-data">(.*?)</script>', re.S)


def page_data(page):
    m = DATA_RE.search(page)
    check(m is not None, "the page embeds its data as application/json")
    return json.loads(m.group(1))


def check_self_contained(page):
    """Nothing in the page may be fetched: no external script, style, image, frame or font."""
    check(page.startswith("<!DOCTYPE html>"), "an HTML5 document")
    check("Content-Security-Policy" in page and "default-src 'none'" in page,
          "a content security policy forbids every fetch")
    code = DATA_RE.sub("", page)  # the data is JSON text with <, > and & escaped: not markup
    check(len(DATA_RE.findall(page)) == 1, "exactly one data element")
    bad = []
    for pat in [r"<script[^>]*\bsrc\s*=", r"<link\b", r"<img\b", r"<iframe\b", r"<object\b", r"<embed\b",
                r"@import", r"url\(\s*(?!['\"]?#)", r"\b(?:href|src|action|formaction|poster)\s*=\s*(?!['\"]?#)",
                r"\bfetch\s*\(", r"XMLHttpRequest", r"\bimport\s*\(", r"new\s+Worker", r"WebSocket", r"EventSource"]:
        for m in re.finditer(pat, code, re.I):
            bad.append(code[max(0, m.start() - 40):m.end() + 40])
    check(not bad, "no reference to anything outside the file %s" % bad[:3])


# --- the browser --------------------------------------------------------------------------------

def chromium_binary():
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        p = shutil.which(name)
        if p:
            return p
    return None


def need_chromium():
    b = chromium_binary()
    if not b:
        print("SKIP: no chromium (apt-get install chromium)")
        sys.exit(77)
    return b


def chromium(a, url, *mode, size=(1400, 3000)):
    profile = tempfile.mkdtemp(prefix="chromium-", dir=a.workdir)
    cmd = [need_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           "--disable-extensions", "--disable-default-apps", "--mute-audio", "--hide-scrollbars", "--disable-dev-shm-usage",
           "--user-data-dir=" + profile, "--window-size=%d,%d" % size, "--virtual-time-budget=10000", *mode, url]
    env = dict(os.environ, HOME=profile)
    t0 = time.monotonic()
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=240, env=env)
    dt = time.monotonic() - t0
    shutil.rmtree(profile, ignore_errors=True)
    if r.returncode != 0:
        fail("chromium exit %d: %s" % (r.returncode, r.stderr[-2000:]))
    return r.stdout, dt


class Dom(html.parser.HTMLParser):
    """Elements of a serialized DOM with the ids of their ancestors, and the text under each id."""
    VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}

    def __init__(self, text):
        super().__init__(convert_charrefs=True)
        self.stack, self.elements, self.text, self.own_text = [], [], {}, {}
        self.feed(text)

    def _add(self, tag, attrs, push):
        a = dict(attrs)
        ids = [x[1]["id"] for x in self.stack if x[1].get("id")]
        self.elements.append((tag, a, ids))
        if push and tag not in self.VOID:
            self.stack.append((tag, a))

    def handle_starttag(self, tag, attrs):
        self._add(tag, attrs, True)

    def handle_startendtag(self, tag, attrs):
        self._add(tag, attrs, False)

    def handle_endtag(self, tag):
        for i in range(len(self.stack) - 1, -1, -1):
            if self.stack[i][0] == tag:
                del self.stack[i:]
                return

    def handle_data(self, data):
        if self.stack:
            self.own_text.setdefault(id(self.stack[-1][1]), []).append(data)
        for _, a in self.stack:
            if a.get("id"):
                self.text[a["id"]] = self.text.get(a["id"], "") + data

    def find(self, within=None, tag=None, cls=None, **attrs):
        out = []
        for t, a, ids in self.elements:
            if within and within not in ids:
                continue
            if tag and t != tag:
                continue
            if cls and cls not in (a.get("class") or "").split():
                continue
            if any(a.get(k.replace("_", "-")) != v for k, v in attrs.items()):
                continue
            out.append((t, a))
        return out

    def text_of(self, element):
        """The text directly inside an element (options, cells): kept per element as it is parsed."""
        return self.own_text.get(id(element[1]), [])

    def by_id(self, id_):
        for t, a, _ in self.elements:
            if a.get("id") == id_:
                return t, a
        return None, None


def png_size(path):
    with open(path, "rb") as f:
        head = f.read(24)
    if head[:8] != b"\x89PNG\r\n\x1a\n":
        return None
    return struct.unpack(">II", head[16:24])


# The self-test's checks (selftest.js), by what they need: every page runs the first group; the
# others need a long table to scroll past, an RSS line, snapshots, two snapshots.
SELFTEST_ALWAYS = {"flame-metrics", "flame-zoom", "flame-keyboard", "flame-legend", "flame-search", "timeline-redraw",
                   "tables-sort", "nav-scroll", "no-overflow", "no-nan"}


def render(a, html_path, name, size=(1400, 3000), selftest_needs=()):
    """Loads the page, checks that it finished drawing without errors and that its self-test passes
    (with the checks in selftest_needs among those that ran); returns the DOM. A screenshot is
    saved in the work directory."""
    url = "file://" + os.path.abspath(html_path)
    dom_text, dt = chromium(a, url, "--dump-dom", size=size)
    dom = Dom(dom_text)
    _, body = dom.by_id("errors")
    bodies = [x for x in dom.elements if x[0] == "body"]
    check(bodies, "the page has a body")
    battrs = bodies[0][1]
    print("page %s: drawn in %s ms after navigation (chromium run %.2f s); steps %s" %
          (name, battrs.get("data-render-ms"), dt, battrs.get("data-timings")))
    errors = dom.text.get("errors", "")
    check(battrs.get("data-ready") == "1", "the page's script ran to the end")
    check(battrs.get("data-errors") == "0", "no script errors, console errors or blocked fetches (%s)" % errors.strip())
    # The page drives its own controls (metric switch, search, zoom, pickers, sorting).
    st_text, _ = chromium(a, url + "#selftest", "--dump-dom", size=size)
    st = [x for x in Dom(st_text).elements if x[0] == "body"][0][1]
    check(st.get("data-selftest") == "ok" and st.get("data-errors") == "0",
          "interactions and layout at %d px: %s, %s errors" % (size[0], st.get("data-selftest"), st.get("data-errors")))
    ran = set((st.get("data-selftest-ran") or "").split())
    missing = (SELFTEST_ALWAYS | set(selftest_needs)) - ran
    check(not missing, "the self-test's checks ran (%s; missing %s)" % (" ".join(sorted(ran)), sorted(missing)))
    png = os.path.join(a.workdir, "report-%s.png" % name)
    if os.path.exists(png):
        os.unlink(png)
    chromium(a, url, "--screenshot=" + png, size=size)
    check(png_size(png) == size, "screenshot %s is %dx%d" % (png, size[0], size[1]))
    print("screenshot:", png)
    return dom


def check_charts(dom, data):
    check(len(dom.find("timeline-chart", "svg")) == 1, "the heap chart drew")
    tag, heap = dom.by_id("heap-line")
    check(tag == "path" and heap.get("d", "").count("L") >= 1, "a heap line with points")
    tag, rss = dom.by_id("rss-line")
    check(tag == "path" and rss.get("d", "").startswith("M"), "an RSS line")
    check(len(dom.find("timeline-chart", "circle", cls="peak")) == (1 if data["totals"]["peak_heap_bytes"] else 0),
          "the peak is marked")
    check(len(dom.find("timeline-chart", "g", cls="snap-mark")) == len(data["timeline"]["snapshots"]),
          "one flag per snapshot on the time axis")
    check(len(dom.find("timeline-chart", "g", cls="marker-mark")) == len(data["timeline"]["markers"]),
          "one line per marker")
    groups = dom.find("flame-chart", "g", cls="n")
    rects = dom.find("flame-chart", "rect")
    check(len(groups) >= 3 and len(rects) == len(groups), "the flame graph drew %d frames" % len(rects))
    check(len(groups) <= len(data["flame"]["parent"]), "no more frames drawn than embedded")
    check(len(dom.find("flame-metrics", "input")) == 4, "bytes / calls / leaked / peak switch")
    check(dom.by_id("flame-search")[0] == "input", "a search box")
    check(len(dom.find("allocators-table", "tr")) >= 2, "top allocators table has rows")
    check(len(dom.find("allocators-table", "ol", cls="stack")) >= 1, "with symbolized stacks")
    # Issue 31.8 and 31.10: frames are focusable and say what they are; colours have a legend.
    frames = dom.find("flame-chart", "g", cls="n")
    check(all(g[1].get("role") == "button" and g[1].get("tabindex") in ("0", "-1") and g[1].get("aria-label") for g in frames)
          and sum(g[1].get("tabindex") == "0" for g in frames) == 1,
          "every frame is focusable (one in the tab order) with a role and an aria-label")
    kinds = {g[1].get("data-kind") for g in frames} - {"root"}
    legend = {x[1].get("data-kind") for x in dom.find("flame-legend", "span", cls="legend-item") if "hidden" not in x[1]}
    check(kinds and kinds <= legend, "the flame graph's legend names every kind of frame drawn (%s; legend %s)" % (kinds, legend))
    check(dom.by_id("flame-next")[0] == "button" and dom.by_id("flame-prev")[0] == "button" and
          dom.by_id("flame-search-error")[0] is not None, "next/previous match buttons and a place for a search error")
    if data["snapshots"]:
        check(len(dom.find("dom-chart", "g", cls="n")) >= 2, "the dominator icicle drew")
        check(dom.find("dom-legend", "span", cls="legend-item"), "the dominator icicle has a legend")
        check(len(dom.find("retainers-table", "tr")) >= 2, "top retainers table has rows")
        check(len(dom.find("snapshot-pick", "option")) == len(data["snapshots"]), "a snapshot picker")



# --- cases ---------------------------------------------------------------------------------------

def case_page(a):
    need_chromium()
    cap = record(a, "page", [a.program, "phases", "nosnap"], ["--sample-bytes", "1", "--snapshot-at-exit"])
    path, page = report(a, cap, "page")
    check_self_contained(page)
    d = page_data(page)
    # The data agrees with the terminal queries.
    s = hsnap_json(a, "summary", "--json", cap)
    check(d["totals"]["alloc_calls"] == s["alloc_calls"], "exact allocation count as summary says")
    check(d["totals"]["peak_heap_bytes"] == d["timeline"]["peak"]["bytes"] > 0, "the exact peak is on the heap line")
    check(max(d["timeline"]["heap"]) == d["totals"]["peak_heap_bytes"], "and nothing on the line is above it")
    folded = hsnap(a, "flamegraph", "--metric", "alloc-calls", cap).stdout
    calls = sum(int(line.rsplit(" ", 1)[1]) for line in folded.splitlines())
    root = {m: d["flame"]["values"][i][0] for i, m in enumerate(d["flame"]["metrics"])}
    check(root["alloc_calls"] == calls, "flame graph root = every sampled call (%d)" % calls)
    leaks = hsnap_json(a, "leaks", "--json", cap)
    check(d["leaks"]["bytes"] == round(leaks["bytes"]) and root["leaked_bytes"] == round(leaks["bytes"]),
          "leaked bytes as `leaks` counts them")
    top = hsnap_json(a, "top-allocators", "--json", "-n", "5", cap)
    check(d["top_allocators"]["rows"][0]["site"] == top["sites"][0]["site"], "top site as `top-allocators` ranks it")
    check([m["text"] for m in d["timeline"]["markers"]] == ["cache warm", "cache full", "half dropped"],
          "the program's markers are on the timeline")
    names = set(d["flame"]["names"])
    check({"make_entry", "cache_insert", "fill_pool", "main"} <= names, "frames are symbolized")
    check(len(d["snapshots"]) == 1, "one snapshot analysed")
    sn = d["snapshots"][0]
    tr = hsnap_json(a, "top-retainers", "--json", "--by", "site", cap)
    check(sn["tree"]["retained"][0] == tr["total_reachable_bytes"], "dominator tree root = reachable bytes")
    check(sn["retaining_sites"][0]["retained"] == tr["sites"][0]["retained_bytes"] and
          d["sites"][sn["retaining_sites"][0]["site"]]["label"] == tr["sites"][0]["site"],
          "top retaining site as `top-retainers --by site` says")
    check(d["sites"][sn["retainers"][0]["site"]]["label"].startswith("phases"),
          "the cache's bucket array (allocated in phases) retains most")
    # One row per structure (issue 29.5), the same rows as `top-retainers` lists (snapshot/top_rows.h).
    rows = sn["retainers"]
    cli = hsnap_json(a, "top-retainers", "--json", "-n", str(len(rows)), cap)["objects"]
    cli = [o for o in cli if o["kind"] in ("object", "root")]
    check([r.get("address") or r.get("root") for r in rows] ==
          [o.get("address") or o["root"]["label"] for o in cli],
          "the report's retainer rows are top-retainers' rows (%s / %s)" %
          ([r.get("address") or r.get("root") for r in rows][:6], [o.get("address") or o["root"]["label"] for o in cli][:6]))
    check(all(d["sites"][r["site"]]["label"] == o["site"] for r, o in zip(rows, cli) if r.get("address")),
          "and each row's site is the one top-retainers names (%s)" %
          [(d["sites"][r["site"]]["label"], o["site"]) for r, o in zip(rows, cli) if r.get("address")][:4])
    check(all(r["own"] <= r["retained"] for r in rows) and
          all(r["inside"] < i and rows[r["inside"]].get("site") != r.get("site") for i, r in enumerate(rows) if "inside" in r),
          "a row inside another is another structure (another site), listed after it")
    top_obj = sn["retainers"][0]
    cli_path = hsnap_json(a, "path", "--json", cap, top_obj["address"])
    hops = top_obj["path"]["hops"]
    root_obj = cli_path["root"]["object"]  # the root object: "static g_cache", "thread 123 (stack)"
    check(top_obj["path"]["root"].startswith(root_obj["kind"] + " " + root_obj["name"] if root_obj["kind"] in ("global", "static")
                                              else root_obj["label"]) and
          len(hops) + top_obj["path"]["more"] == len(cli_path["hops"]) and hops[-1]["address"] == top_obj["address"],
          "the top retainer's path from a root: %s, %d hops, as `heapsnap path` finds it" %
          (top_obj["path"]["root"], len(cli_path["hops"])))
    # Issue 31.9 and 31.10: each frame's file:line and module, and its kind, are in the data.
    F = d["flame"]
    def frame(name):
        i = next(i for i in range(len(F["parent"])) if F["names"][F["name"][i]] == name)
        nm = F["name"][i]
        return {"loc": F["locs"][F["loc"][i] - 1] if F["loc"][i] else "",
                "module": F["modules"][F["name_module"][nm] - 1] if F["name_module"][nm] else "",
                "kind": F["kinds"][F["name_kind"][nm]]}
    me = frame("make_entry")
    check(re.fullmatch(r"report_program\.c:\d+(,\d+)*", me["loc"]) and me["module"] == "report_program" and me["kind"] == "program",
          "make_entry: file:line, module and kind (%s)" % me)
    check(frame("main")["kind"] == "program" and frame("__libc_start_call_main")["kind"] == "library" and
          frame("__libc_start_call_main")["module"].startswith("libc.so"),
          "main is the program's, __libc_start_call_main the C library's (%s)" % frame("__libc_start_call_main"))
    check(all(s.get("kind") in (0, 1, 2, 3) for s in d["sites"]), "every snapshot site has a kind")
    dom = render(a, path, "page", selftest_needs=["sticky-header", "pickers", "snapshots", "timeline-rss"])
    check_charts(dom, d)
    # Issue 31.5: a trigger is said once ("exit", not "exit: exit").
    opts = [" ".join(dom.text_of(o)) for o in dom.find("snapshot-pick", "option")]
    check(len(opts) == 1 and opts[0].count("exit") == 1, "the exit snapshot says exit once: %s" % opts)
    check("make_entry" in dom.text.get("flame-chart", ""), "flame graph labels show function names")
    check("cache_insert" in dom.text.get("dom-chart", "") or "make_entry" in dom.text.get("dom-chart", ""),
          "dominator icicle labels show allocation sites")
    _, diff = dom.by_id("diff-view")
    check(diff is not None and "hidden" in diff, "no diff view with a single snapshot")
    check(len(dom.find("leaks-table", "tr")) >= 2, "leaks table has rows")
    # Retention a reader can act on (issue 29.6): findings first, named roots, types, unreachable.
    findings = dom.text.get("findings", "")
    check(all(k in findings for k in ("Largest leak", "Largest retainer", "At its peak", "Fastest growth", "RSS beyond the heap")),
          "the first screen has the five findings (%s)" % findings[:300])
    check("record with --snapshot-at-peak" in findings, "with no at-peak snapshot, the peak finding says how to get one")
    check(len(dom.find("findings", "a")) == 5, "each finding links to its evidence")
    sn = d["snapshots"][0]
    check("g_cache" in dom.text.get("roots-table", "") and sn["roots"] and "g_cache" in sn["roots"][0]["root"],
          "the roots table names the variable g_cache (%s)" % sn["roots"][:1])
    cli_roots = hsnap_json(a, "roots", "--json", cap)
    check(sn["roots"][0]["retained"] == cli_roots["roots"][0]["retained_bytes"], "and its retained bytes as `heapsnap roots` says")
    check(len(dom.find("types-table", "tr")) >= 1 or not sn["types"], "a types table (rows when a type is known)")
    check(dom.by_id("unreachable-table")[1] is not None, "an unreachable view")


def case_at_peak(a):
    """The report answers "what held the heap at its peak" from an at-peak snapshot (issue 30.2),
    analyses it even when --max-snapshots leaves room for one only, and says which snapshots asked
    for were not taken (issue 30.1)."""
    need_chromium()
    cap = record(a, "peak", [a.program, "phases", "nosnap"], ["--sample-bytes", "1", "--snapshot-at-peak", "--snapshot-at-exit"])
    listed = hsnap_json(a, "snapshots", "--json", cap)["snapshots"]
    peak = [x for x in listed if x["trigger"] == "peak" and x["complete"]]
    check(len(peak) == 1, "the capture holds one at-peak snapshot (%s)" % [(x["index"], x["trigger"]) for x in listed])
    path, page = report(a, cap, "peak", "--max-snapshots", "1")
    d = page_data(page)
    check([x["index"] for x in d["snapshots"]] == [peak[0]["index"]] and d["peak_snapshot"] == peak[0]["index"],
          "with room for one snapshot, the report analyses the at-peak one (%s)" % [x["index"] for x in d["snapshots"]])
    path, page = report(a, cap, "peak2")
    d = page_data(page)
    times = [x["time_s"] for x in d["snapshots"]]
    check(len(d["snapshots"]) == 2 and times == sorted(times) and d["snapshots"][-1]["trigger"] == "exit",
          "both analysed, in the order they were taken (the at-peak one was appended last): %s" %
          [(x["index"], x["trigger"], x["time_s"]) for x in d["snapshots"]])
    dom = render(a, path, "peak2", selftest_needs=["pickers", "snapshots", "diff-expand"])
    opts = dom.text.get("snapshot-pick", "")
    check("peak: the heap at" in opts and "peak: at peak" not in opts and "exit: exit" not in opts,
          "the at-peak and exit snapshots say their trigger once (%s)" % opts)
    findings = dom.text.get("findings", "")
    check("At its peak" in findings and "snapshot %d" % peak[0]["index"] in findings and "retains" in findings,
          "the peak finding names the at-peak snapshot and its top retainer (%s)" % findings[:400])
    # A snapshot asked for and not taken is in the report's notes.
    cap = record(a, "not_taken", [a.program, "phases", "nosnap"],
                 ["--snapshot-before-destructors", "--snapshot-at-exit", "--max-snapshots", "1"])
    _, page = report(a, cap, "not_taken")
    notes = page_data(page)["notes"]
    check(any("snapshot not taken (exit): --max-snapshots reached" in n for n in notes),
          "the report's notes say the exit snapshot was not taken, and why (%s)" % notes)


def case_snapshots(a):
    need_chromium()
    cap = record(a, "snaps", [a.program, "phases"], ["--sample-bytes", "1", "--snapshot-on-request", "--snapshot-at-exit"])
    snaps = [x for x in hsnap_json(a, "snapshots", "--json", cap)["snapshots"] if x["complete"]]
    check(len(snaps) == 3, "two snapshots requested through the client API and one at exit (%d)" % len(snaps))
    path, page = report(a, cap, "snaps")
    check_self_contained(page)
    d = page_data(page)
    S = d["snapshots"]
    check([x["label"] for x in S[:2]] == ["cache warm", "cache full"], "snapshot labels from the program")
    check([x["index"] for x in S] == [x["index"] for x in snaps], "every complete snapshot analysed")
    check(S[1]["bytes"] > S[0]["bytes"] > 0, "the cache grew between the first two")
    # The page's diff is computed from the per-site tables: they must agree with `heapsnap diff`.
    # A site is one row of the site table in every snapshot (its identity: function, line and
    # module), so the page matches the two sides by row; `heapsnap diff` keys by the site's
    # address, which may split one line reached from two addresses: its rows are summed by label.
    labels = [x["label"] for x in d["sites"]]
    check(len(labels) == len(set(labels)), "one site table row per site, shared by the snapshots")
    def by_label(sn):
        out = {}
        t = sn["sites"]
        for i, site in enumerate(t["site"]):
            key = d["sites"][site]["label"]
            out[key] = out.get(key, 0) + t["bytes"][i]
        return out
    before, after = by_label(S[0]), by_label(S[1])
    cli = hsnap_json(a, "diff", "--json", "-n", "1000", "%s:%d" % (cap, S[0]["index"]), "%s:%d" % (cap, S[1]["index"]))
    cli_change = {}
    for row in cli["sites"]:
        cli_change[row["site"]] = cli_change.get(row["site"], 0) + row["bytes_change"]
    for site, change in cli_change.items():
        got = after.get(site, 0) - before.get(site, 0)
        if got != change:
            fail("site %s: page diff %d, heapsnap diff %d" % (site, got, change))
    check(cli["sites"], "page diff = `heapsnap diff` for all %d sites" % len(cli["sites"]))
    # A path from a thread's stack says the function whose frame holds the word, as `heapsnap path`.
    framed = [(sn, r) for sn in S for r in sn["retainers"] if r.get("path") and r["path"].get("root_frame")]
    check(any(r["path"]["root_frame"]["label"].startswith("phases (report_program.c:") for _, r in framed),
          "the scratch block's path starts at a stack word in phases' frame (%s)" %
          [r["path"]["root_frame"]["label"] for _, r in framed][:4])
    for sn, r in framed[:2]:
        cp = hsnap_json(a, "path", "--json", "--snapshot", str(sn["index"]), cap, r["address"])
        check(r["path"]["root_frame"] == cp["root"].get("frame") and r["path"]["root_word"] == cp["root"]["address"],
              "the path to %s starts in the frame of %s at %s, as `heapsnap path` says" %
              (r["address"], r["path"]["root_frame"]["label"], r["path"]["root_word"]))
    for sn in S:
        tr = hsnap_json(a, "top-retainers", "--json", "--snapshot", str(sn["index"]), cap)
        if sn["tree"]["retained"][0] != tr["total_reachable_bytes"]:
            fail("snapshot %d: tree root %d, reachable %d" % (sn["index"], sn["tree"]["retained"][0], tr["total_reachable_bytes"]))
        t = sn["tree"]
        kids = [0] * len(t["parent"])
        for v in range(1, len(t["parent"])):
            kids[t["parent"][v]] += t["retained"][v]
        if any(kids[v] > t["retained"][v] for v in range(len(kids))):
            fail("snapshot %d: a group's children retain more than the group" % sn["index"])
    check(True, "dominator trees: roots = reachable bytes, children within their parents")
    # Layout (issue 31.1 to 31.4) and the keyboard, at a wide and a narrow window.
    needs = ["sticky-header", "pickers", "snapshots", "diff-expand", "timeline-rss", "path-frame"]
    render(a, path, "snaps-800", size=(800, 3000), selftest_needs=needs)
    dom = render(a, path, "snaps", selftest_needs=needs)
    check_charts(dom, d)
    check(all(x[1].get("tabindex") == "0" and x[1].get("aria-expanded") == "false" for x in dom.find("diff-table", "tr", cls="expandable"))
          and dom.find("diff-table", "tr", cls="expandable"), "diff rows are focusable and expandable")
    shown = {i for sn in S for i in sn["sites"]["site"][:d["budget"]["table_rows"]]} | {r["site"] for sn in S for r in sn["retaining_sites"]}
    check(all(d["sites"][i].get("stack", {}).get("frames") for i in shown),
          "the sites a snapshot's tables show carry the stack of one of their blocks, for their rows to expand to")
    _, diff = dom.by_id("diff-view")
    check(diff is not None and "hidden" not in diff, "a diff view with several snapshots")
    check(len(dom.find("diff-before", "option")) == 3 and len(dom.find("diff-after", "option")) == 3, "diff pickers")
    rows = dom.find("diff-table", "tr")
    check(len(rows) >= 3, "diff table has rows (%d)" % (len(rows) - 1))
    check("+" in dom.text.get("diff-summary", ""), "diff summary: %s" % dom.text.get("diff-summary", "").strip())


def case_timeline(a):
    """Issue 31.13: a short run's heap line has a point wherever the heap changed, not one per
    totals record (the shim writes one every 100 ms)."""
    need_chromium()
    cap = record(a, "ramp", [a.program, "ramp", "300"], ["--sample-bytes", "1"])
    path, page = report(a, cap, "ramp")
    d = page_data(page)
    t, b = d["timeline"], d["budget"]
    heap = t["heap"]
    print("heap line: %d points, %d totals records, %.0f ms run" % (len(t["t"]), b["timeline_totals"], 1000 * d["process"]["duration_s"]))
    # 300 allocations and 150 frees, a millisecond apart: the events' clock (1 to 4 ms a tick) sees
    # over a hundred moments, the totals records (one per 100 ms) a handful, however slow the run.
    check(len(t["t"]) >= 60 and len(set(heap)) >= 50 and len(t["t"]) >= 3 * b["timeline_totals"],
          "the heap line follows the climb: %d points, %d levels, %d totals records" % (len(t["t"]), len(set(heap)), b["timeline_totals"]))
    check(t["t"] == sorted(t["t"]) and max(heap) == d["totals"]["peak_heap_bytes"] and min(heap) >= 0,
          "in time order, within [0, the exact peak]")
    top = heap.index(max(heap))
    check(all(x <= y for x, y in zip(heap[:top], heap[1:top + 1])), "it climbs until the peak (no dip the program did not make)")
    check(heap[-1] < max(heap) * 0.6, "and falls after it (%d of %d)" % (heap[-1], max(heap)))
    # A sampled capture: the line still passes through the totals records' exact heap.
    cap = record(a, "ramp_sampled", [a.program, "ramp", "300"], ["--sample-bytes", "16384"])
    _, page = report(a, cap, "ramp_sampled")
    ds = page_data(page)
    check(len(ds["timeline"]["t"]) > ds["budget"]["timeline_totals"] + 2 and max(ds["timeline"]["heap"]) == ds["totals"]["peak_heap_bytes"],
          "sampled: more points than totals records (%d of %d), the exact peak on the line" %
          (len(ds["timeline"]["t"]), ds["budget"]["timeline_totals"]))
    render(a, path, "ramp", selftest_needs=["timeline-rss"])


def case_memory(a):
    """Issue 32: a snapshot's RSS breakdown on the page. memory_app fragment (--program here is
    memory_app) keeps 100,000 holes between live blocks: the page's parts add up to the RSS it
    shows, heapsnap's own is one part apart, the fragmentation diagnosis is among the notes with
    its numbers, the arenas table is there; the coarse RSS parts ride under the heap line."""
    need_chromium()
    cap = record(a, "memfrag", [a.program, "fragment"], ["--snapshot-at-exit"])
    path, page = report(a, cap, "memfrag")
    d = page_data(page)
    check(d["snapshots"], "the snapshot is analysed")
    m = d["snapshots"][-1].get("memory")
    check(m, "it carries the RSS breakdown")
    total = sum(p["rss_bytes"] for p in m["parts"])
    check(total == m["rss_bytes"] == m["parts_sum_bytes"], "the parts add up to the RSS: %d = %d" % (total, m["rss_bytes"]))
    mine = hsnap_json(a, "memory", "--json", cap)
    check([(p["kind"], p["rss_bytes"]) for p in m["parts"]] == [(p["kind"], p["rss_bytes"]) for p in mine["parts"]],
          "the same parts as heapsnap memory (one derivation)")
    own = [p for p in m["parts"] if p["own"]]
    check(len(own) == 1 and own[0]["kind"] == "heapsnap" and own[0]["rss_bytes"] > 0, "heapsnap's own apart: %s" % own)
    frag = [x for x in m["diagnoses"] if x["id"] == "fragmentation"]
    check(frag and frag[0]["bytes"] >= 100000 * 256, "fragmentation diagnosed with its bytes: %s" % frag)
    check(any("RSS:" in n and frag[0]["text"] in n for n in d["notes"]), "... and among the page's notes")
    check(m["arenas"] and any(x["main"] and x["free_chunks"] >= 99000 for x in m["arenas"]), "the main arena's holes in the table")
    rp = d["timeline"]["rss_parts"]
    check(rp and len(rp["t"]) >= 1 and all(h + o + x + f == r for h, o, x, f, r in
                                           zip(rp["heap"], rp["heapsnap"], rp["other_anon"], rp["file"], rp["rss"])),
          "the timeline's RSS parts add up to their RSS (%s)" % (rp and len(rp["t"])))
    dom = render(a, path, "memfrag", selftest_needs=["memory-bar", "timeline-rss-parts"])
    segs = dom.find(within="memory-bar", cls="mem-seg")
    check(len(segs) == len([p for p in m["parts"] if p["rss_bytes"] > 0]), "one bar segment per part (%d)" % len(segs))
    check(sum(int(s[1]["data-bytes"]) for s in segs) == m["rss_bytes"], "the drawn segments add up to the RSS shown")
    summary = " ".join(dom.text_of(dom.by_id("memory-summary")))
    check(str(m["rss_bytes"]) + " bytes" in summary, "the page shows the RSS in bytes (%s)" % summary[:120])
    # The first screen's findings: the biggest diagnosis, one click from the breakdown.
    findings = dom.text.get("findings", "")
    worst = max(m["diagnoses"], key=lambda x: x["bytes"])
    check("RSS beyond the heap" in findings and worst["text"] in findings,
          "the findings carry the biggest diagnosis, %s (%s)" % (worst["id"], findings[-400:]))


def case_budget(a):
    need_chromium()
    cap = record(a, "stacks", [a.program, "stacks", "6"], ["--sample-bytes", "1"])
    _, page_full = report(a, cap, "stacks-full", "--max-flame-nodes", "1000000")
    full = page_data(page_full)
    check(full["budget"]["flame_nodes"] == full["flame"]["full_nodes"], "a budget of 10^6 holds all %d nodes" %
          full["flame"]["full_nodes"])
    check(full["flame"]["full_nodes"] > 4 ** 6, "4^6 distinct stacks: more nodes than that")
    path, page = report(a, cap, "stacks", "--max-flame-nodes", "300")
    check_self_contained(page)
    d = page_data(page)
    F = d["flame"]
    n = len(F["parent"])
    check(n <= 300, "the budget holds: %d nodes of %d" % (n, F["full_nodes"]))
    check(F["other"], "the tail merged into [other] nodes")
    for i, m in enumerate(F["metrics"]):
        check(F["values"][i][0] == full["flame"]["values"][i][0], "root %s unchanged by the cut" % m)
    kids = [0] * n
    for v in range(1, n):
        check_parent = F["parent"][v] < v
        if not check_parent:
            fail("node %d comes before its parent" % v)
        kids[F["parent"][v]] += F["values"][1][v]
    check(all(kids[v] in (0, F["values"][1][v]) for v in range(n)), "children add up to their parent (calls)")
    check(len(page) < len(page_full), "a smaller page (%d vs %d bytes)" % (len(page), len(page_full)))
    dom = render(a, path, "budget")
    check_charts(dom, d)
    drawn = {int(x[1]["data-i"]) for x in dom.find("flame-chart", "g", cls="n")}
    check(drawn & set(F["other"]), "[other] nodes are drawn (%d of %d)" % (len(drawn & set(F["other"])), len(F["other"])))


def case_escape(a):
    need_chromium()
    cap = record(a, "escape", [a.program, "phases", "nosnap"], [])  # default sampling: estimates
    title = "</script><script>document.body.dataset.pwned='1'</script><!-- & \"quoted\" </title>"
    path, page = report(a, cap, "escape", "--title", title)
    check_self_contained(page)
    check(page.count("</script>") == 2, "the title cannot close a script element")
    d = page_data(page)
    check(d["title"] == title, "the title survives the JSON round trip")
    check(d["process"]["estimated"] and any("sampled estimates" in n for n in d["notes"]),
          "a sampled capture says its stack figures are estimates")
    dom = render(a, path, "escape", size=(1200, 900))
    body = [x for x in dom.elements if x[0] == "body"][0][1]
    check("data-pwned" not in body, "no injected script ran")
    check(dom.text.get("title", "") == title, "the heading shows the title as text")


def case_errors(a):
    r = run([a.heapsnap, "report", os.path.join(a.workdir, "missing.hsnap"), "-o", os.path.join(a.workdir, "x.html")])
    check(r.returncode == 1 and "missing.hsnap" in r.stderr, "a missing capture: exit 1 with its name")
    bad = os.path.join(a.workdir, "bad.hsnap")
    with open(bad, "wb") as f:
        f.write(b"not a capture at all" * 10)
    r = run([a.heapsnap, "report", bad])
    check(r.returncode == 1, "a file that is no capture: exit 1 (%s)" % r.stderr.strip())
    r = run([a.heapsnap, "report", "--max-flame-nodes", "1", bad])
    check(r.returncode == 2, "a budget below 2 nodes: usage error")
    r = run([a.heapsnap, "report", "--no-such-option", bad])
    check(r.returncode == 2, "an unknown option: usage error")
    r = run([a.heapsnap, "report", "--help"])
    check(r.returncode == 0 and "Examples" in r.stdout and "budget" in r.stdout, "--help explains and gives examples")
    cap = record(a, "default", [a.program, "stacks", "1"], ["--sample-bytes", "1"])
    html_path = cap[:-len(".hsnap")] + ".html"
    if os.path.exists(html_path):
        os.unlink(html_path)
    r = run([a.heapsnap, "report", "-q", cap])
    check(r.returncode == 0 and os.path.exists(html_path) and r.stderr == "", "default output: the capture's name with .html, quiet")
    r = run([a.heapsnap, "report", cap, "-o", "-"])
    check(r.returncode == 0 and r.stdout.startswith("<!DOCTYPE html>"), "-o - writes the page to stdout")
    r = run([a.heapsnap, "report", cap, "-o", cap])
    check(r.returncode == 2 and os.path.exists(cap), "refuses to overwrite the capture")


def stl_figures(a, cap, d, strict):
    """The report's sites for roots_app against the CLI's: the icicle's first level as
    `dominators`, the retaining sites and per-site tables as `top-retainers --by site`, each path's
    types and fields as `heapsnap path`. strict (every allocation's stack recorded): the sites are
    the program's frames, never libstdc++'s."""
    check(len(d["snapshots"]) == 1, "one snapshot analysed")
    sn = d["snapshots"][0]
    label = lambda i: d["sites"][i]["label"] if i >= 0 else "[other]"
    # The icicle: one group per program site.
    T = sn["tree"]
    other = set(T["other"])
    groups = [v for v in range(1, len(T["parent"])) if v not in other]
    names = [label(T["site"][v]) for v in groups]
    if strict:
        check(groups and not any("__new_allocator" in n or n.split(" (")[0].endswith("::allocate()") for n in names),
              "no icicle group is the library's allocate() (%s)" % sorted(set(names))[:8])
        check(any(re.fullmatch(r"fill_cache\(\) \(roots_app\.cc:\d+\)", n) for n in names) and
              any(re.fullmatch(r"add_sessions\(\) \(roots_app\.cc:\d+\)", n) for n in names),
              "the icicle's groups are the program's frames, fill_cache() and add_sessions() among them (%s)" % sorted(set(names))[:8])
    top = {}
    for v in groups:
        if T["parent"][v] == 0:
            check(label(T["site"][v]) not in top, "one top-level group per site (%s)" % label(T["site"][v]))
            top[label(T["site"][v])] = T["retained"][v]
    if strict:
        first = sorted(top, key=lambda k: -top[k])
        check(re.fullmatch(r"add_sessions\(\) \(roots_app\.cc:\d+\)", first[0]) and not any(k.startswith("std::") for k in first[:3]),
              "the biggest first-level group, g_sessions' map nodes, is add_sessions()'s line, not libstdc++'s tree insert (%s)" % first[:3])
    cli_dom = {g["site"]: g["retained_bytes"] for g in hsnap_json(a, "dominators", "--json", "-n", "200", "--depth", "1", cap)["tree"]
               if not g.get("unreachable")}
    check(top and all(cli_dom.get(k) == v for k, v in top.items()),
          "the icicle's first level is `dominators`' first level: %s" % [(k, v, cli_dom.get(k)) for k, v in top.items()][:6])
    # The retaining sites table, as `top-retainers --by site` counts each site.
    cli = {s["site"]: s for s in hsnap_json(a, "top-retainers", "--json", "--by", "site", "-n", "1000", cap)["sites"]}
    rows = [(label(r["site"]), r) for r in sn["retaining_sites"]]
    if strict:
        check(rows and all(not n.startswith("std::") for n, _ in rows[:3]) and
              any(re.fullmatch(r"fill_cache\(\) \(roots_app\.cc:\d+\)", n) for n, _ in rows),
              "the top retaining sites are the program's frames (%s)" % [n for n, _ in rows][:6])
    bad = [(n, r["retained"], r["shallow"], r["blocks"], cli.get(n)) for n, r in rows
           if n not in cli or (r["retained"], r["shallow"], r["blocks"]) !=
           (cli[n]["retained_bytes"], cli[n]["shallow_bytes"], cli[n]["blocks"])]
    check(not bad, "every retaining site's retained and shallow bytes and blocks as `top-retainers --by site` (%s)" % bad[:3])
    check(len({n for n, _ in rows}) == len(rows), "one row per site")
    # Every block by site (the diffs' tables): one entry per site, blocks and bytes as the CLI's
    # shallow figures, and no two snapshot-site rows with one label.
    S = sn["sites"]
    tab = {label(i): (c, b) for i, c, b in zip(S["site"], S["count"], S["bytes"])}
    check(len(tab) == len(S["site"]), "the per-site table has one entry per site")
    check(all(tab[n] == (cli[n]["blocks"], cli[n]["shallow_bytes"]) for n in tab if n in cli and cli[n]["retained_bytes"]),
          "its blocks and bytes per site as `top-retainers --by site` counts them")
    labels = [s["label"] for s in d["sites"]]
    check(len(labels) == len(set(labels)), "each site is one row of the site table (%d)" % len(labels))
    # Paths: each hop's type and the field that points on, as `heapsnap path` names them.
    paths = [r for r in sn["retainers"] if r.get("path") and r["path"]["hops"]]
    check(paths, "retainer rows with paths")
    fields = 0
    for r in paths[:6]:
        cp = hsnap_json(a, "path", "--json", cap, r["address"])
        hops = r["path"]["hops"]
        if r["path"]["more"] == 0:
            got = [(h.get("type"), h.get("next_in_field")) for h in hops]
            want = [(h.get("type"), h.get("next_in_field")) for h in cp["hops"]]
            check(got == want, "path to %s: types and fields as `heapsnap path` (%s)" % (r["address"], got))
        check(r["path"].get("root_frame", {}).get("label") == cp["root"].get("frame", {}).get("label"),
              "path to %s: the root's frame as `heapsnap path` (%s)" % (r["address"], r["path"].get("root_frame")))
        fields += sum(1 for h in hops if h.get("next_in_field"))
    check(fields >= 1, "a path hop names its field (%d)" % fields)
    return paths


def case_stl(a):
    """A C++ program with STL containers (tests/programs/roots_app.cc, -g -O1; --program is it):
    the icicle, the retaining sites table and the per-site tables group blocks by the program's
    own frame, as `top-retainers --by site` and `dominators` do, never by the library's insert or
    allocate(); a path names each hop's type and the field that points on (issue 29). With every
    stack recorded the sites are the program's frames; sampled, some blocks have only their call
    site, and the report still counts each site as the CLI does."""
    need_chromium()
    cap = record(a, "stl", [a.program], ["--snapshot-at-exit", "--sample-bytes", "1"])
    path, page = report(a, cap, "stl")
    d = page_data(page)
    paths = stl_figures(a, cap, d, True)
    needs = ["snapshots", "path-fields"]
    if any(r["path"].get("root_frame") for r in paths):
        needs.append("path-frame")
    dom = render(a, path, "stl", selftest_needs=needs)
    text = dom.text.get("retainers-table", "")
    check(re.search(r"field \+\d+ \(\w[^)]*\) →", text), "the page shows a hop's field (%s)" % text[:300])
    drawn = [g[1].get("aria-label", "") for g in dom.find("dom-chart", "g", cls="n")]
    check(any(x.startswith("fill_cache() (roots_app.cc:") for x in drawn) and not any("__new_allocator" in x for x in drawn),
          "the drawn icicle names program frames (%s)" % drawn[:4])
    sampled = record(a, "stl_sampled", [a.program], ["--snapshot-at-exit"])
    _, page = report(a, sampled, "stl_sampled")
    stl_figures(a, sampled, page_data(page), False)


CASES = {k[5:]: v for k, v in globals().items() if k.startswith("case_")}

if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("case", choices=sorted(CASES))
    ap.add_argument("--heapsnap", required=True)
    ap.add_argument("--program", required=True)
    ap.add_argument("--workdir", required=True)
    a = ap.parse_args()
    a.workdir = os.path.abspath(os.path.join(a.workdir, a.case))
    os.makedirs(a.workdir, exist_ok=True)
    CASES[a.case](a)
    print("PASS")
