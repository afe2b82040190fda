// heapsnap report: draws the page from the JSON in #heapsnap-data. Plain ES2017, no libraries,
// nothing fetched. When everything is drawn, <body> gets data-ready="1", data-errors=N (script
// errors, console.error calls and blocked fetches seen so far) and data-render-ms; the browser
// test reads them back.
//
// DATA SCHEMA (written by analyzer/report/report_data.cc; sizes in bytes, times in seconds):
//   title, file, generator, schema
//   process  {command, executable, pid, hostname, duration_s, sample_bytes, estimated, threads,
//             modules, stacks, ended, truncated}
//   totals   {alloc_calls, free_calls, bytes_allocated, peak_heap_bytes, peak_time_s,
//             leaked_blocks, leaked_bytes, rss_bytes, realloc_calls, dropped_events}
//   timeline {t[], heap[], rss[] (0 = unknown), peak {t, bytes}, end_s,
//             markers [{t, tid, text}], snapshots [{index, t, trigger, label}]}
//   flame    {metrics[4], names[], parent[], name[], values[4][], other[] (node ids), full_nodes}
//            node 0 is the root; parents come before children; values are inclusive.
//   top_allocators {sites_total, rows [{site, module, alloc_bytes, alloc_calls, peak_bytes,
//             leaked_bytes, leaked_blocks, reallocs, realloc_moves, stacks, stack {frames[], more}}]}
//   leaks    {stacks_total, blocks, bytes, rows [{bytes, blocks, site, stack}]}
//   sites    [{label, module, address}]   (shared by the snapshot sections)
//   snapshots [{index, time_s, trigger, label, blocks, bytes, edges, reachable_bytes,
//             reachable_blocks, pause_ms,
//             tree {parent[], site[] (-1: root or other), retained[], objects[], shallow[], other[]},
//             retainers [{address, site, type, type_from, shallow, retained, retained_blocks, held_by, stack,
//                         path {root, hops [{address, site, size}], more, more_at}}
//                        | {root, root_kind, retained, retained_blocks, held_by}],   (a root object)
//                       each with own (retained less the rows inside it) and inside (the index of the
//                       row it is listed inside, absent at the top): one row per structure
//             roots [{root, kind, retained, blocks}],
//             types [{type, how, objects, shallow, retained}], typed_bytes,
//             unreachable [{address, site, bytes, blocks, cycle, type, stack}], unreachable_bytes,
//             unreachable_blocks,
//             retaining_sites [{site, retained, shallow, blocks}],
//             sites {site[], count[], bytes[], sites_total, other_count, other_bytes}}]
//   notes [], budget {...}, snapshots_enabled
(function () {
  'use strict';

  // --- errors: everything that goes wrong is counted and shown ----------------------------------
  var errors = [];
  function recordError(msg) {
    errors.push(String(msg));
    var box = document.getElementById('errors');
    if (box) {
      box.hidden = false;
      box.textContent = 'Problems while drawing this report:\n' + errors.join('\n');
    }
    if (document.body && document.body.dataset.ready) document.body.dataset.errors = String(errors.length);
  }
  window.addEventListener('error', function (e) {
    recordError('error: ' + (e.message || e.type) + (e.lineno ? ' (line ' + e.lineno + ')' : ''));
  });
  window.addEventListener('unhandledrejection', function (e) { recordError('unhandled rejection: ' + e.reason); });
  document.addEventListener('securitypolicyviolation', function (e) {
    recordError('blocked by the content security policy: ' + e.violatedDirective + ' ' + e.blockedURI);
  });
  var consoleError = console.error;
  console.error = function () {
    recordError('console.error: ' + Array.prototype.join.call(arguments, ' '));
    return consoleError.apply(console, arguments);
  };

  // --- formatting --------------------------------------------------------------------------------
  var UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  function fmtBytes(b) {
    var v = Math.abs(b), u = 0;
    while (v >= 1024 && u < 4) { v /= 1024; u++; }
    var s = u === 0 ? String(Math.round(v)) : v.toFixed(v >= 100 ? 1 : 2);
    return (b < 0 ? '-' : '') + s + ' ' + UNITS[u];
  }
  function fmtSigned(b) { return (b > 0 ? '+' : '') + fmtBytes(b); }
  function fmtCount(n) {
    var s = String(Math.round(Math.abs(n)));
    return (n < 0 ? '-' : '') + s.replace(/\B(?=(\d{3})+(?!\d))/g, ',');
  }
  function fmtSignedCount(n) { return (n > 0 ? '+' : '') + fmtCount(n); }
  function fmtTime(s) {
    if (s >= 60) return Math.floor(s / 60) + ' min ' + (s % 60).toFixed(0) + ' s';
    if (s >= 1) return s.toFixed(2) + ' s';
    return (s * 1000).toFixed(s < 0.01 ? 1 : 0) + ' ms';
  }
  function fmtPct(x) {
    if (!isFinite(x)) return '';
    return (x * 100).toFixed(x >= 0.1 ? 1 : 2) + '%';
  }

  // --- DOM helpers -------------------------------------------------------------------------------
  var SVGNS = 'http://www.w3.org/2000/svg';
  function $(id) { return document.getElementById(id); }
  function el(tag, attrs, kids) {
    var e = document.createElement(tag);
    if (attrs) for (var k in attrs) {
      if (k === 'text') e.textContent = attrs[k];
      else if (k === 'cls') e.className = attrs[k];
      else e.setAttribute(k, attrs[k]);
    }
    if (kids) kids.forEach(function (c) { if (c != null) e.appendChild(typeof c === 'string' ? document.createTextNode(c) : c); });
    return e;
  }
  function sv(tag, attrs, parent) {
    var e = document.createElementNS(SVGNS, tag);
    if (attrs) for (var k in attrs) {
      if (k === 'text') e.textContent = attrs[k];
      else e.setAttribute(k, attrs[k]);
    }
    if (parent) parent.appendChild(e);
    return e;
  }
  function esc(s) {
    return String(s).replace(/[&<>"]/g, function (c) { return { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' }[c]; });
  }
  function hash(s) {
    var h = 2166136261;
    for (var i = 0; i < s.length; i++) { h ^= s.charCodeAt(i); h = Math.imul(h, 16777619); }
    return h >>> 0;
  }

  // One tooltip for the page; lines[0] is the title. Text only (names come from binaries).
  var tip = null;
  function showTip(ev, lines) {
    if (!tip) tip = $('tooltip');
    tip.textContent = '';
    lines.forEach(function (l, i) { tip.appendChild(el('div', { cls: i === 0 ? 't' : '', text: l })); });
    tip.hidden = false;
    var x = ev.clientX + 14, y = ev.clientY + 14;
    var w = tip.offsetWidth, h = tip.offsetHeight;
    if (x + w > window.innerWidth - 8) x = Math.max(8, ev.clientX - w - 14);
    if (y + h > window.innerHeight - 8) y = Math.max(8, ev.clientY - h - 14);
    tip.style.left = x + 'px';
    tip.style.top = y + 'px';
  }
  function hideTip() { if (tip) tip.hidden = true; }

  // "Nice" axis ticks: steps of 1, 2 or 5 times a power of `base` (10, or 1024 for bytes).
  function ticks(max, count, bytes) {
    if (!(max > 0)) return { step: 1, list: [0] };
    var unit = 1;
    if (bytes) while (max / unit >= 1024 && unit < Math.pow(1024, 4)) unit *= 1024;
    var raw = max / unit / count, p = Math.pow(10, Math.floor(Math.log10(raw))), f = raw / p;
    var step = (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * p * unit;
    var list = [];
    for (var v = 0; v <= max * 1.0001; v += step) list.push(v);
    return { step: step, list: list };
  }

  // --- state -----------------------------------------------------------------------------------
  var D = null;
  var state = { snapshot: 0, redraw: [] };

  // --- overview ----------------------------------------------------------------------------------
  function renderOverview() {
    var p = D.process, t = D.totals;
    $('title').textContent = D.title;
    var cards = [
      ['Duration', fmtTime(p.duration_s), (p.threads || 0) + ' thread' + (p.threads === 1 ? '' : 's') + ', pid ' + p.pid],
      ['Allocations', fmtCount(t.alloc_calls), fmtCount(t.realloc_calls) + ' reallocs'],
      ['Bytes allocated', fmtBytes(t.bytes_allocated), 'in total'],
      ['Peak heap', fmtBytes(t.peak_heap_bytes), 'at ' + fmtTime(t.peak_time_s)],
      ['Not freed at exit', fmtBytes(t.leaked_bytes), fmtCount(t.leaked_blocks) + ' blocks' + (p.ended ? '' : ' (no end record)')],
      ['RSS at end', fmtBytes(t.rss_bytes), ''],
      ['Sampling', p.sample_bytes <= 1 ? 'every allocation' : 'every ~' + fmtBytes(p.sample_bytes), fmtCount(p.stacks) + ' distinct stacks'],
      ['Snapshots', String(D.timeline.snapshots.length), D.snapshots.length ? D.snapshots.length + ' analysed below' :
        D.timeline.snapshots.length ? 'none complete' : 'none recorded']
    ];
    var host = $('cards');
    cards.forEach(function (c) {
      host.appendChild(el('div', { cls: 'card' }, [el('div', { cls: 'k', text: c[0] }), el('div', { cls: 'v', text: c[1] }), el('div', { cls: 's', text: c[2] })]));
    });
    var notes = $('notes');
    notes.appendChild(el('li', { text: 'Command: ' + p.command + (p.hostname ? ' on ' + p.hostname : '') }));
    notes.appendChild(el('li', { text: 'Capture: ' + D.file + ' (' + D.generator + ')' }));
    (D.notes || []).forEach(function (n) { notes.appendChild(el('li', { text: n })); });
    var b = D.budget;
    $('about').textContent = 'Size budget of this report: flame graph at most ' + fmtCount(b.flame_nodes_max) +
      ' nodes (' + fmtCount(b.flame_nodes) + ' of ' + fmtCount(b.flame_nodes_full) + ' used), dominator trees at most ' +
      fmtCount(b.tree_nodes_max) + ' nodes per snapshot, ' + b.table_rows + ' rows per table, ' + b.stack_frames +
      ' frames per stack, heap line ' + fmtCount(b.timeline_points) + ' points (from ' + fmtCount(b.timeline_points_full) +
      ' recorded), at most ' + b.max_snapshots + ' snapshots. Generated by ' + D.generator + '.';
  }

  // --- heap over time ------------------------------------------------------------------------------
  function renderTimeline() {
    var host = $('timeline-chart');
    host.textContent = '';
    var T = D.timeline, n = T.t.length;
    if (!n) {
      host.appendChild(el('p', { cls: 'note', text: 'The capture holds no totals over time.' }));
      return;
    }
    var W = Math.max(560, host.clientWidth || 900), H = 300;
    var m = { l: 74, r: 24, t: 30, b: 46 };
    var iw = W - m.l - m.r, ih = H - m.t - m.b;
    var tmax = Math.max(T.end_s || 0, T.t[n - 1], T.peak.t, 1e-3);
    var heapMax = T.peak.bytes, rssMax = 0;
    for (var i = 0; i < n; i++) { heapMax = Math.max(heapMax, T.heap[i]); rssMax = Math.max(rssMax, T.rss[i]); }
    // RSS can dwarf the heap (the tracer's and the runtime's own memory): then the axis fits the
    // heap and the RSS line runs off the top, unless the reader asks for both.
    if (state.fitHeap == null) state.fitHeap = rssMax > 4 * heapMax;
    var ymax = state.fitHeap ? heapMax : Math.max(heapMax, rssMax);
    if (!(ymax > 0)) ymax = 1;
    var controls = el('div', { cls: 'controls' });
    var fit = el('input', { type: 'checkbox', id: 'timeline-fit' });
    fit.checked = state.fitHeap;
    fit.addEventListener('change', function () { state.fitHeap = fit.checked; renderTimeline(); });
    controls.appendChild(el('label', null, [fit, ' scale to the heap line' + (rssMax > heapMax ? ' (RSS peaks at ' + fmtBytes(rssMax) + ')' : '')]));
    host.appendChild(controls);
    var yt = ticks(ymax * 1.05, 5, true), xt = ticks(tmax, Math.max(4, Math.floor(iw / 110)), false);
    ymax = yt.list[yt.list.length - 1] < ymax ? yt.list[yt.list.length - 1] + yt.step : yt.list[yt.list.length - 1];
    var X = function (s) { return m.l + (s / tmax) * iw; };
    var Y = function (b) { return m.t + ih - (b / ymax) * ih; };
    var svg = sv('svg', { width: W, height: H, viewBox: '0 0 ' + W + ' ' + H, id: 'timeline-svg', role: 'img', 'aria-label': 'heap over time' });
    var clip = sv('clipPath', { id: 'timeline-clip' }, sv('defs', null, svg));
    sv('rect', { x: m.l, y: m.t - 1, width: iw + 1, height: ih + 1 }, clip);
    var grid = sv('g', { 'class': 'grid' }, svg), axis = sv('g', { 'class': 'axis' }, svg);
    yt.list.forEach(function (v) {
      sv('line', { x1: m.l, x2: m.l + iw, y1: Y(v), y2: Y(v) }, grid);
      sv('text', { x: m.l - 6, y: Y(v) + 4, 'text-anchor': 'end', text: fmtBytes(v) }, axis);
    });
    xt.list.forEach(function (v) {
      if (v > tmax) return;
      sv('line', { x1: X(v), x2: X(v), y1: m.t + ih, y2: m.t + ih + 4 }, axis);
      sv('text', { x: X(v), y: m.t + ih + 16, 'text-anchor': 'middle', text: fmtTime(v) }, axis);
    });
    sv('line', { x1: m.l, x2: m.l + iw, y1: m.t + ih, y2: m.t + ih }, axis);
    sv('line', { x1: m.l, x2: m.l, y1: m.t, y2: m.t + ih }, axis);
    // Lines: heap (with a light area under it) and RSS where known.
    var d = '', area = '', r = '', pen = false;
    for (i = 0; i < n; i++) {
      var x = X(T.t[i]).toFixed(1);
      d += (i ? 'L' : 'M') + x + ',' + Y(Math.max(0, T.heap[i])).toFixed(1);
      if (T.rss[i] > 0) { r += (pen ? 'L' : 'M') + x + ',' + Y(T.rss[i]).toFixed(1); pen = true; }
    }
    area = d + 'L' + X(T.t[n - 1]).toFixed(1) + ',' + Y(0) + 'L' + X(T.t[0]).toFixed(1) + ',' + Y(0) + 'Z';
    sv('path', { 'class': 'heap-area', d: area }, svg);
    if (r) sv('path', { 'class': 'rss', id: 'rss-line', d: r, 'clip-path': 'url(#timeline-clip)' }, svg);
    sv('path', { 'class': 'heap', id: 'heap-line', d: d, 'clip-path': 'url(#timeline-clip)' }, svg);
    // Markers.
    (T.markers || []).forEach(function (mk, k) {
      var g = sv('g', { 'class': 'marker-mark' }, svg);
      sv('line', { 'class': 'marker', x1: X(mk.t), x2: X(mk.t), y1: m.t - 6, y2: m.t + ih }, g);
      if (T.markers.length <= 40) {
        var right = X(mk.t) > m.l + iw * 0.85;
        sv('text', { 'class': 'marker', x: X(mk.t) + (right ? -3 : 3), y: m.t - 8 + (k % 2) * 10, 'text-anchor': right ? 'end' : 'start',
          text: mk.text.length > 24 ? mk.text.slice(0, 23) + '…' : mk.text }, g);
      }
      g.addEventListener('mousemove', function (ev) { showTip(ev, ['marker: ' + mk.text, 'at ' + fmtTime(mk.t) + ', thread ' + mk.tid]); });
      g.addEventListener('mouseleave', hideTip);
    });
    // Snapshots: flags on the time axis, clickable.
    var analysed = {};
    D.snapshots.forEach(function (s, k) { analysed[s.index] = k; });
    (T.snapshots || []).forEach(function (s) {
      var x = X(s.t), y = m.t + ih;
      sv('line', { 'class': 'snap', x1: x, x2: x, y1: m.t, y2: y }, svg);
      var g = sv('g', { 'class': 'snap-mark' + (analysed[s.index] === state.snapshot ? ' on' : ''), 'data-snapshot': s.index }, svg);
      sv('path', { d: 'M' + x + ',' + (y + 2) + 'l-6,10h12z' }, g);
      sv('text', { x: x, y: y + 26, 'text-anchor': 'middle', text: 'S' + s.index }, g);
      g.addEventListener('mousemove', function (ev) {
        showTip(ev, ['snapshot ' + s.index + (s.label ? ': ' + s.label : ''), 'at ' + fmtTime(s.t) + ', trigger: ' + s.trigger,
          analysed[s.index] != null ? 'click to show it below' : 'not analysed in this report']);
      });
      g.addEventListener('mouseleave', hideTip);
      g.addEventListener('click', function () {
        if (analysed[s.index] == null) return;
        selectSnapshot(analysed[s.index]);
        $('snapshots').scrollIntoView({ behavior: 'smooth' });
      });
    });
    // The peak.
    if (T.peak.bytes > 0) {
      var px = X(T.peak.t), py = Y(T.peak.bytes);
      sv('circle', { 'class': 'peak', cx: px, cy: py, r: 5 }, svg);
      var label = 'peak ' + fmtBytes(T.peak.bytes) + ' at ' + fmtTime(T.peak.t);
      var right = px > m.l + iw * 0.7;
      sv('text', { 'class': 'peak', x: px + (right ? -9 : 9), y: Math.max(m.t + 10, py - 8), 'text-anchor': right ? 'end' : 'start', text: label }, svg);
    }
    // Legend.
    var lg = sv('g', { 'class': 'legend' }, svg), lx = m.l + 8;
    [['heap', 'heap (exact)'], ['rss', 'RSS']].forEach(function (it) {
      sv('path', { 'class': it[0], d: 'M' + lx + ',' + (H - 8) + 'h22' }, lg);
      sv('text', { x: lx + 27, y: H - 4, text: it[1] }, lg);
      lx += 40 + it[1].length * 6.5;
    });
    // Hover: the values nearest the pointer.
    var hover = sv('line', { 'class': 'hover', x1: 0, x2: 0, y1: m.t, y2: m.t + ih, visibility: 'hidden' }, svg);
    var overlay = sv('rect', { x: m.l, y: m.t, width: iw, height: ih, fill: 'transparent' }, svg);
    // Markers and snapshot flags stay on top of the overlay.
    svg.querySelectorAll('.marker-mark, .snap-mark, circle.peak').forEach(function (e) { svg.appendChild(e); });
    overlay.addEventListener('mousemove', function (ev) {
      var box = svg.getBoundingClientRect(), s = (ev.clientX - box.left - m.l) / iw * tmax;
      var lo = 0, hi = n - 1;
      while (lo < hi) { var mid = (lo + hi) >> 1; if (T.t[mid] < s) lo = mid + 1; else hi = mid; }
      if (lo > 0 && Math.abs(T.t[lo - 1] - s) < Math.abs(T.t[lo] - s)) lo--;
      hover.setAttribute('x1', X(T.t[lo])); hover.setAttribute('x2', X(T.t[lo]));
      hover.setAttribute('visibility', 'visible');
      showTip(ev, ['at ' + fmtTime(T.t[lo]), 'heap ' + fmtBytes(T.heap[lo]), T.rss[lo] > 0 ? 'RSS ' + fmtBytes(T.rss[lo]) : 'RSS not known here']);
    });
    overlay.addEventListener('mouseleave', function () { hover.setAttribute('visibility', 'hidden'); hideTip(); });
    host.appendChild(svg);
  }

  // --- icicle: the flame graph and the dominator tree share it -------------------------------------
  // cfg: n, parent[], label(i), color(i), tip(i) -> lines, isOther(i); value(i) set by setValue.
  function Icicle(host, crumbs, cfg) {
    this.host = host; this.crumbs = crumbs; this.cfg = cfg;
    this.focus = 0; this.matched = null; this.rowH = 18;
    var kids = new Array(cfg.n);
    for (var i = 0; i < cfg.n; i++) kids[i] = [];
    for (i = 1; i < cfg.n; i++) kids[cfg.parent[i]].push(i);
    this.kids = kids;
    var self = this;
    host.addEventListener('click', function (ev) {
      var g = ev.target.closest('g[data-i]');
      if (g) self.zoom(+g.getAttribute('data-i'));
    });
    host.addEventListener('mousemove', function (ev) {
      var g = ev.target.closest('g[data-i]');
      if (g) showTip(ev, self.cfg.tip(+g.getAttribute('data-i'))); else hideTip();
    });
    host.addEventListener('mouseleave', hideTip);
  }
  Icicle.prototype.setValue = function (fn) {
    this.value = fn;
    this.kids.forEach(function (k) { if (k.length > 1) k.sort(function (a, b) { return fn(b) - fn(a); }); });
  };
  Icicle.prototype.zoom = function (i) { this.focus = i; this.render(); };
  Icicle.prototype.setMatch = function (re) {
    if (!re) { this.matched = null; return null; }
    var n = this.cfg.n, m = new Uint8Array(n), total = 0, value = this.value, parent = this.cfg.parent;
    var under = new Uint8Array(n);  // some ancestor matched: do not count twice
    for (var i = 0; i < n; i++) {
      if (i > 0 && (under[parent[i]] || m[parent[i]])) under[i] = 1;
      if (re.test(this.cfg.label(i))) {
        m[i] = 1;
        if (!under[i]) total += value(i);
      }
    }
    this.matched = m;
    return total;
  };
  Icicle.prototype.render = function () {
    var cfg = this.cfg, value = this.value, kids = this.kids, rowH = this.rowH;
    var W = Math.max(400, this.host.clientWidth || 900);
    var anc = [];
    for (var a = this.focus; a !== 0; a = cfg.parent[a]) anc.unshift(cfg.parent[a]);
    var parts = [], maxDepth = anc.length, drawn = 0;
    var self = this;
    function box(i, x, w, depth, cls) {
      var y = depth * rowH, fill = cfg.color(i);
      var c = 'n' + (cls ? ' ' + cls : '') + (self.matched ? (self.matched[i] ? ' match' : '') : '');
      var s = '<g class="' + c + '" data-i="' + i + '"><rect x="' + x.toFixed(2) + '" y="' + y + '" width="' + Math.max(0.5, w - 0.5).toFixed(2) +
        '" height="' + (rowH - 1) + '" fill="' + fill + '"/>';
      var chars = Math.floor((w - 8) / 6.6);
      if (chars >= 3) {
        var t = cfg.label(i);
        if (t.length > chars) t = t.slice(0, chars - 1) + '…';
        s += '<text x="' + (x + 4).toFixed(2) + '" y="' + (y + rowH - 5) + '">' + esc(t) + '</text>';
      }
      parts.push(s + '</g>');
      drawn++;
    }
    anc.forEach(function (i, d) { box(i, 0, W, d, 'anc'); });
    var total = value(this.focus);
    if (total > 0) {
      var stack = [[this.focus, 0, W, anc.length]];
      while (stack.length) {
        var top = stack.pop(), i = top[0], x = top[1], w = top[2], depth = top[3];
        box(i, x, w, depth, '');
        if (depth > maxDepth) maxDepth = depth;
        var v = value(i), k = kids[i], cx = x;
        if (!(v > 0)) continue;
        var scale = w / v;
        for (var j = 0; j < k.length; j++) {
          var kw = value(k[j]) * scale;
          if (kw < 0.6) break;  // sorted: the rest are narrower still
          stack.push([k[j], cx, kw, depth + 1]);
          cx += kw;
        }
      }
    }
    var H = (maxDepth + 1) * rowH + 2;
    this.host.innerHTML = '<svg xmlns="' + SVGNS + '" class="icicle-svg" width="' + W + '" height="' + H + '" viewBox="0 0 ' + W + ' ' + H + '">' +
      parts.join('') + '</svg>';
    this.drawn = drawn;
    if (this.crumbs) {
      var cr = this.crumbs;
      cr.textContent = '';
      if (this.focus !== 0) {
        anc.concat([this.focus]).forEach(function (i, d) {
          if (d) cr.appendChild(document.createTextNode(' › '));
          var link = el('a', { text: d === 0 ? 'all' : cfg.label(i).slice(0, 60) });
          link.addEventListener('click', function () { self.zoom(i); });
          cr.appendChild(link);
        });
      }
    }
  };

  // --- flame graph -----------------------------------------------------------------------------------
  var METRICS = [
    { key: 'alloc_bytes', label: 'allocated bytes', fmt: fmtBytes },
    { key: 'alloc_calls', label: 'allocation calls', fmt: fmtCount },
    { key: 'leaked_bytes', label: 'leaked bytes', fmt: fmtBytes },
    { key: 'peak_bytes', label: 'live at peak', fmt: fmtBytes }
  ];
  function flameColor(name) {
    if (name === '[other]') return '#ced4da';
    var h = hash(name);
    return 'hsl(' + (h % 50) + ',' + (70 + (h >> 8) % 20) + '%,' + (58 + (h >> 16) % 16) + '%)';
  }
  function searchRegex(q) {
    q = q.trim();
    if (!q) return null;
    var m = /^\/(.+)\/([a-z]*)$/.exec(q);
    if (m) { try { return new RegExp(m[1], m[2].indexOf('i') >= 0 ? 'i' : ''); } catch (e) { return null; } }
    return new RegExp(q.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'), 'i');
  }
  function renderFlame() {
    var F = D.flame, n = F.parent.length;
    var other = new Uint8Array(n);
    F.other.forEach(function (i) { other[i] = 1; });
    var metric = 0;
    var labels = new Array(n);
    for (var i = 0; i < n; i++) labels[i] = F.names[F.name[i]];
    var ic = new Icicle($('flame-chart'), $('flame-crumbs'), {
      n: n, parent: F.parent,
      label: function (i) { return labels[i]; },
      color: function (i) { return i === 0 ? '#adb5bd' : other[i] ? '#ced4da' : flameColor(labels[i]); },
      tip: function (i) {
        var v = F.values[metric], M = METRICS[metric], self = v[i];
        ic.kids[i].forEach(function (k) { self -= v[k]; });
        var lines = [labels[i], M.label + ': ' + M.fmt(v[i]) + ' (' + fmtPct(v[i] / v[0]) + ' of all' +
          (i ? ', ' + fmtPct(v[i] / v[F.parent[i]]) + ' of its caller' : '') + ')'];
        if (!other[i]) lines.push('self (allocated here): ' + M.fmt(Math.max(0, self)));
        else lines.push('smaller frames merged here to stay within the size budget');
        var vals = METRICS.map(function (mm, k) { return k === metric ? null : mm.label + ' ' + mm.fmt(F.values[k][i]); }).filter(Boolean);
        lines.push(vals.join(' · '));
        return lines;
      }
    });
    var host = $('flame-metrics');
    var note = el('p', { cls: 'note', hidden: 'hidden' });
    $('flame-chart').parentNode.insertBefore(note, $('flame-chart'));
    function apply() {
      var v = F.values[metric];
      ic.setValue(function (i) { return v[i]; });
      host.querySelectorAll('label').forEach(function (l, k) { l.className = k === metric ? 'on' : ''; });
      if (!(v[0] > 0)) {
        note.hidden = false;
        note.textContent = metric === 2 ? 'Nothing leaked: every sampled block was freed by the end.' : 'No ' + METRICS[metric].label + ' in the sampled stacks.';
      } else note.hidden = true;
      doSearch();
      ic.render();
    }
    METRICS.forEach(function (M, k) {
      var input = el('input', { type: 'radio', name: 'flame-metric', value: M.key });
      if (k === metric) input.checked = true;
      var lab = el('label', { 'data-metric': M.key }, [input, M.label]);
      input.addEventListener('change', function () { metric = k; apply(); });
      host.appendChild(lab);
    });
    var search = $('flame-search'), info = $('flame-match');
    function doSearch() {
      var re = searchRegex(search.value);
      var total = ic.setMatch(re);
      var v = F.values[metric];
      info.textContent = re ? 'matched: ' + METRICS[metric].fmt(total) + ' (' + fmtPct(v[0] ? total / v[0] : 0) + ')' : '';
    }
    var timer = 0;
    search.addEventListener('input', function () {
      clearTimeout(timer);
      timer = setTimeout(function () { doSearch(); ic.render(); }, 120);
    });
    $('flame-reset').addEventListener('click', function () { ic.zoom(0); });
    document.addEventListener('keydown', function (ev) {
      if (ev.key === 'Escape' && ic.focus !== 0) ic.zoom(F.parent[ic.focus]);
    });
    var b = D.budget;
    $('flame-budget').textContent = fmtCount(n) + ' of ' + fmtCount(F.full_nodes) + ' frames shown (size budget: ' + fmtCount(b.flame_nodes_max) +
      ' nodes; the smallest merge into [other], so totals still add up). ' + (D.process.estimated ? 'Figures are sampled estimates.' : 'Every allocation was recorded.');
    apply();
    state.redraw.push(function () { ic.render(); });
    state.flame = ic;
  }

  // --- tables ---------------------------------------------------------------------------------------
  function stackCell(site, stack) {
    var td = el('td', { cls: 'site' });
    if (!stack || !stack.frames.length) { td.textContent = site; return td; }
    var ol = el('ol', { cls: 'stack' });
    stack.frames.forEach(function (f) { ol.appendChild(el('li', { text: f })); });
    if (stack.more) ol.appendChild(el('li', { cls: 'more', text: '… ' + stack.more + ' more frames' }));
    td.appendChild(el('details', null, [el('summary', { text: site }), ol]));
    return td;
  }
  // A top retainer: its shortest path from a root, then its allocation stack.
  function retainerLabel(r) {
    return r.root ? r.root : (r.type ? r.type + ' ' : '') + r.address + '  ' + siteLabel(r.site);
  }
  function retainerCell(r) {
    var td = el('td', { cls: 'site' });
    if (r.root) { td.textContent = r.root; return td; }
    var box = el('details', null, [el('summary', { text: retainerLabel(r) })]);
    if (r.path) {
      box.appendChild(el('div', { cls: 'sub', text: 'Shortest path from a root:' }));
      var ol = el('ol', { cls: 'stack path' });
      ol.appendChild(el('li', { text: 'root: ' + r.path.root }));
      r.path.hops.forEach(function (h, i) {
        if (r.path.more && i === r.path.more_at) ol.appendChild(el('li', { cls: 'more', text: '… ' + fmtCount(r.path.more) + ' more hops' }));
        ol.appendChild(el('li', { text: h.address + ' ' + siteLabel(h.site) + ' (' + fmtBytes(h.size) + ')' }));
      });
      box.appendChild(ol);
    }
    box.appendChild(el('div', { cls: 'sub', text: 'Allocation stack:' }));
    box.appendChild(stackList(r.stack));
    td.appendChild(box);
    return td;
  }
  // A stack {frames[], more} as an ordered list.
  function stackList(stack) {
    var st = el('ol', { cls: 'stack' });
    stack.frames.forEach(function (f) { st.appendChild(el('li', { text: f })); });
    if (stack.more) st.appendChild(el('li', { cls: 'more', text: '… ' + stack.more + ' more frames' }));
    return st;
  }
  // cols: [{label, key (sort value), fmt(row), num, cell(row) -> td}]
  function table(host, cols, rows, opts) {
    opts = opts || {};
    var sortCol = opts.sort == null ? 0 : opts.sort, limit = opts.limit || rows.length;
    function draw() {
      host.textContent = '';
      if (!rows.length) { host.appendChild(el('p', { cls: 'note', text: opts.empty || 'Nothing to show.' })); return; }
      var c = cols[sortCol];
      var sorted = rows.slice();
      if (c.key) sorted.sort(function (a, b) { var x = c.key(a), y = c.key(b); return typeof x === 'string' ? x.localeCompare(y) : y - x; });
      var t = el('table', { cls: 'data' }), hr = el('tr');
      cols.forEach(function (col, k) {
        var th = el('th', { cls: (col.num ? 'num' : '') + (k === sortCol ? ' sorted' : ''), text: col.label });
        if (col.key) th.addEventListener('click', function () { sortCol = k; draw(); });
        hr.appendChild(th);
      });
      t.appendChild(el('thead', null, [hr]));
      var tb = el('tbody');
      sorted.slice(0, limit).forEach(function (r) {
        var tr = el('tr');
        cols.forEach(function (col) {
          if (col.cell) tr.appendChild(col.cell(r));
          else {
            var td = el('td', { cls: col.num ? 'num' : '', text: col.fmt(r) });
            if (col.signed) { var v = col.value(r); if (v > 0) td.className += ' pos'; else if (v < 0) td.className += ' neg'; }
            tr.appendChild(td);
          }
        });
        tb.appendChild(tr);
      });
      t.appendChild(tb);
      host.appendChild(t);
      if (sorted.length > limit) host.appendChild(el('p', { cls: 'budget', text: 'Top ' + limit + ' of ' + sorted.length + ' rows.' }));
    }
    draw();
  }
  function num(label, key, fmt, extra) {
    var c = { label: label, num: true, key: function (r) { return r[key]; }, value: function (r) { return r[key]; }, fmt: function (r) { return fmt(r[key]); } };
    for (var k in extra || {}) c[k] = extra[k];
    return c;
  }

  function renderAllocators() {
    var A = D.top_allocators, est = D.process.estimated ? '~' : '';
    table($('allocators-table'), [
      num('allocated', 'alloc_bytes', function (v) { return est + fmtBytes(v); }),
      num('calls', 'alloc_calls', function (v) { return est + fmtCount(v); }),
      num('at peak', 'peak_bytes', function (v) { return est + fmtBytes(v); }),
      num('leaked', 'leaked_bytes', function (v) { return est + fmtBytes(v); }),
      { label: 'site (click for its heaviest stack)', key: function (r) { return r.site; }, cell: function (r) { return stackCell(r.site, r.stack); } }
    ], A.rows, { limit: D.budget.table_rows, empty: 'No sampled allocations.' });
  }

  function renderLeaks() {
    var L = D.leaks, t = D.totals, est = D.process.estimated;
    $('leaks-summary').textContent = 'Exact: ' + fmtBytes(t.leaked_bytes) + ' in ' + fmtCount(t.leaked_blocks) + ' blocks not freed' +
      (D.process.ended ? ' at exit' : ' as of the last flush (the capture has no end)') + '. ' +
      (est ? 'Stacks below are sampled estimates (~' + fmtBytes(L.bytes) + ' in ' + fmtCount(L.stacks_total) + ' stacks); record with --sample-bytes 1 for every leak.'
        : fmtCount(L.stacks_total) + ' stacks hold them.');
    table($('leaks-table'), [
      num('bytes', 'bytes', fmtBytes),
      num('blocks', 'blocks', fmtCount),
      { label: 'allocated at (click for the stack)', key: function (r) { return r.site; }, cell: function (r) { return stackCell(r.site, r.stack); } }
    ], L.rows, { limit: D.budget.table_rows, empty: 'No leaks: every sampled block was freed.' });
  }

  // --- snapshots ----------------------------------------------------------------------------------
  function siteLabel(i) { return i < 0 ? '[other]' : (D.sites[i] ? D.sites[i].label : '?'); }
  function snapshotTitle(s) {
    return 'S' + s.index + ' at ' + fmtTime(s.time_s) + ' (' + s.trigger + (s.label ? ': ' + s.label : '') + ') — ' +
      fmtBytes(s.bytes) + ' in ' + fmtCount(s.blocks) + ' blocks';
  }
  var domIcicle = null;
  function renderSnapshot() {
    var s = D.snapshots[state.snapshot];
    $('snapshot-summary').textContent = fmtBytes(s.reachable_bytes) + ' reachable in ' + fmtCount(s.reachable_blocks) + ' blocks; ' +
      fmtBytes(s.bytes - s.reachable_bytes) + ' unreachable; ' + fmtCount(s.edges) + ' pointers; pause ' + s.pause_ms.toFixed(1) + ' ms';
    var T = s.tree, n = T.parent.length, other = new Uint8Array(n);
    T.other.forEach(function (i) { other[i] = 1; });
    var host = $('dom-chart');
    var fresh = host.cloneNode(false);  // drop the previous snapshot's listeners
    host.parentNode.replaceChild(fresh, host);
    domIcicle = new Icicle(fresh, $('dom-crumbs'), {
      n: n, parent: T.parent,
      label: function (i) { return i === 0 ? 'all reachable memory' : other[i] ? '[other]' : siteLabel(T.site[i]); },
      color: function (i) {
        if (i === 0) return '#adb5bd';
        if (other[i]) return '#ced4da';
        var h = hash(siteLabel(T.site[i]));
        return 'hsl(' + (170 + h % 70) + ',' + (45 + (h >> 8) % 25) + '%,' + (62 + (h >> 16) % 14) + '%)';
      },
      tip: function (i) {
        var total = T.retained[0];
        var lines = [i === 0 ? 'all reachable memory' : other[i] ? '[other]: smaller groups merged (size budget)' : siteLabel(T.site[i]),
          'retained ' + fmtBytes(T.retained[i]) + ' (' + fmtPct(total ? T.retained[i] / total : 0) + ' of reachable)',
          fmtCount(T.objects[i]) + ' objects, ' + fmtBytes(T.shallow[i]) + ' shallow'];
        if (i > 0 && !other[i] && D.sites[T.site[i]]) lines.push(D.sites[T.site[i]].module + ' ' + D.sites[T.site[i]].address);
        return lines;
      }
    });
    domIcicle.setValue(function (i) { return T.retained[i]; });
    domIcicle.render();
    $('dom-budget').textContent = fmtCount(n) + ' groups shown (size budget: ' + fmtCount(D.budget.tree_nodes_max) + ' per snapshot).';
    var total = s.reachable_bytes || 1;
    table($('retainers-table'), [
      num('retained', 'retained', fmtBytes),
      { label: '%', num: true, key: function (r) { return r.retained; }, fmt: function (r) { return fmtPct(r.retained / total); } },
      num('shallow', 'shallow', fmtBytes),
      num('blocks', 'retained_blocks', fmtCount),
      { label: 'object (click for its path from a root and its stack)', key: function (r) { return retainerLabel(r); }, cell: retainerCell },
      { label: 'held by', key: function (r) { return r.held_by; },
        fmt: function (r) { return r.held_by + (r.inside !== undefined ? '; inside row ' + (r.inside + 1) : ''); } }
    ], s.retainers, { limit: D.budget.table_rows, empty: 'No reachable objects.' });
    table($('retaining-sites-table'), [
      num('retained', 'retained', fmtBytes),
      { label: '%', num: true, key: function (r) { return r.retained; }, fmt: function (r) { return fmtPct(r.retained / total); } },
      num('shallow', 'shallow', fmtBytes),
      num('blocks', 'blocks', fmtCount),
      { label: 'allocation site', key: function (r) { return siteLabel(r.site); }, fmt: function (r) { return siteLabel(r.site); } }
    ], s.retaining_sites, { limit: D.budget.table_rows, empty: 'No reachable objects.' });
    table($('roots-table'), [
      num('retained', 'retained', fmtBytes),
      { label: '%', num: true, key: function (r) { return r.retained; }, fmt: function (r) { return fmtPct(r.retained / total); } },
      num('blocks', 'blocks', fmtCount),
      { label: 'kind', key: function (r) { return r.kind; }, fmt: function (r) { return r.kind; } },
      { label: 'root', key: function (r) { return r.root; }, fmt: function (r) { return r.root; } }
    ], s.roots || [], { limit: D.budget.table_rows, empty: 'No root holds a block on its own.' });
    $('types-summary').textContent = fmtBytes(s.typed_bytes || 0) + ' of ' + fmtBytes(s.bytes) + ' live (' +
      fmtPct(s.bytes ? (s.typed_bytes || 0) / s.bytes : 0) + ') have a type: from the vtable in the object, the allocation\'s frames, or the pointer variable that holds it.';
    table($('types-table'), [
      num('retained', 'retained', fmtBytes),
      num('objects', 'objects', fmtCount),
      num('shallow', 'shallow', fmtBytes),
      { label: 'from', key: function (r) { return r.how; }, fmt: function (r) { return r.how; } },
      { label: 'type', key: function (r) { return r.type; }, fmt: function (r) { return r.type; } }
    ], s.types || [], { limit: D.budget.table_rows, empty: 'No block\'s type is known.' });
    $('unreachable-summary').textContent = (s.unreachable_bytes ? fmtBytes(s.unreachable_bytes) + ' in ' + fmtCount(s.unreachable_blocks) +
      ' blocks that no root reaches: leaked, whatever their size.' : 'Every block is reachable from a root.');
    table($('unreachable-table'), [
      num('bytes', 'bytes', fmtBytes),
      num('blocks', 'blocks', fmtCount),
      { label: 'what', key: function (r) { return r.cycle ? 'cycle' : 'tree'; }, fmt: function (r) { return r.cycle ? 'cycle' : r.blocks > 1 ? 'structure' : 'block'; } },
      { label: 'leader (click for its stack)', key: function (r) { return (r.type || '') + siteLabel(r.site); }, cell: function (r) {
        var td = el('td', { cls: 'site' });
        var box = el('details', null, [el('summary', { text: (r.type ? r.type + ' ' : '') + r.address + '  ' + siteLabel(r.site) })]);
        box.appendChild(stackList(r.stack));
        td.appendChild(box);
        return td;
      } }
    ], s.unreachable || [], { limit: D.budget.table_rows, empty: 'Nothing unreachable.' });
    document.querySelectorAll('.snap-mark').forEach(function (g) {
      g.classList.toggle('on', +g.getAttribute('data-snapshot') === s.index);
    });
  }
  function selectSnapshot(k) {
    state.snapshot = k;
    $('snapshot-pick').value = String(k);
    renderSnapshot();
  }
  function renderDiff() {
    var a = D.snapshots[+$('diff-before').value], b = D.snapshots[+$('diff-after').value];
    var rows = {}, key;
    function add(s, which) {
      var t = s.sites;
      for (var i = 0; i < t.site.length; i++) {
        key = t.site[i];
        var r = rows[key] || (rows[key] = { site: key, count_a: 0, count_b: 0, bytes_a: 0, bytes_b: 0 });
        r['count_' + which] += t.count[i];
        r['bytes_' + which] += t.bytes[i];
      }
      if (t.other_count) {
        var o = rows[-1] || (rows[-1] = { site: -1, count_a: 0, count_b: 0, bytes_a: 0, bytes_b: 0 });
        o['count_' + which] += t.other_count;
        o['bytes_' + which] += t.other_bytes;
      }
    }
    add(a, 'a');
    add(b, 'b');
    var list = [], db = 0, dc = 0;
    for (key in rows) {
      var r = rows[key];
      r.bytes = r.bytes_b - r.bytes_a;
      r.count = r.count_b - r.count_a;
      db += r.bytes;
      dc += r.count;
      if (r.bytes || r.count) list.push(r);
    }
    $('diff-summary').textContent = 'S' + a.index + ' → S' + b.index + ': ' + fmtSigned(db) + ' in ' + fmtSignedCount(dc) + ' blocks' +
      (a.sites.other_count || b.sites.other_count ? ' (sites beyond the ' + D.budget.max_sites + '-site budget are summed as [other])' : '');
    table($('diff-table'), [
      num('bytes change', 'bytes', fmtSigned, { signed: true, key: function (r) { return Math.abs(r.bytes); } }),
      num('blocks change', 'count', fmtSignedCount, { signed: true, key: function (r) { return Math.abs(r.count); } }),
      num('bytes before', 'bytes_a', fmtBytes),
      num('bytes after', 'bytes_b', fmtBytes),
      { label: 'allocation site', key: function (r) { return siteLabel(+r.site); }, fmt: function (r) { return siteLabel(+r.site); } }
    ], list, { limit: D.budget.table_rows, empty: 'No change by site between these snapshots.' });
  }
  // --- findings: the first screen's four answers, each one click from its evidence -------------
  function renderFindings() {
    var host = $('findings'), S = D.snapshots, last = S.length ? S[S.length - 1] : null;
    function finding(title, text, href, onclick) {
      var a = el('a', { href: href, text: text });
      if (onclick) a.addEventListener('click', onclick);
      host.appendChild(el('li', null, [el('strong', { text: title + ': ' }), a]));
    }
    // Largest leak: the biggest unreachable structure of the last snapshot, else the heaviest
    // stack not freed at exit.
    var lost = last && last.unreachable && last.unreachable.length ? last.unreachable[0] : null;
    if (lost) {
      finding('Largest leak', fmtBytes(lost.bytes) + ' in ' + (lost.cycle ? 'a cycle of ' : '') + fmtCount(lost.blocks) + ' unreachable block' +
        (lost.blocks === 1 ? '' : 's') + (lost.type ? ' (' + lost.type + ')' : '') + ' from ' + siteLabel(lost.site), '#unreachable-heading',
        function () { selectSnapshot(S.length - 1); });
    } else if (D.leaks.rows.length) {
      var l = D.leaks.rows[0];
      finding('Largest leak', fmtBytes(l.bytes) + ' in ' + fmtCount(l.blocks) + ' blocks not freed at exit, from ' + l.site, '#leaks');
    } else {
      finding('Largest leak', 'none: every block was freed', '#leaks');
    }
    // Largest retainer: the last snapshot's biggest row.
    var top = last && last.retainers.length ? last.retainers[0] : null;
    if (top) {
      finding('Largest retainer', (top.root ? top.root : retainerLabel(top) + ', held by ' + top.held_by) + ' retains ' + fmtBytes(top.retained) +
        ' (' + fmtPct(last.reachable_bytes ? top.retained / last.reachable_bytes : 0) + ' of the reachable heap)', '#snapshots',
        function () { selectSnapshot(S.length - 1); });
    } else {
      finding('Largest retainer', 'no heap snapshot: record with --snapshot-at-exit', '#snapshots');
    }
    // At its peak: the at-peak snapshot's biggest retainer (record with --snapshot-at-peak).
    var pk = -1;
    for (var i = 0; i < S.length; i++) if (S[i].index === D.peak_snapshot) pk = i;
    if (pk >= 0 && S[pk].retainers.length) {
      var p = S[pk], pt = p.retainers[0];
      finding('At its peak', fmtBytes(p.bytes) + ' live in snapshot ' + p.index + ' (' + fmtTime(p.time_s) + '); ' +
        (pt.root ? pt.root : retainerLabel(pt) + ', held by ' + pt.held_by) + ' retains ' + fmtBytes(pt.retained), '#snapshots',
        function () { selectSnapshot(pk); });
    } else {
      finding('At its peak', fmtBytes(D.timeline.peak.bytes) + ' at ' + fmtTime(D.timeline.peak.t) +
        '; what held it, object by object: record with --snapshot-at-peak', '#timeline');
    }
    // Fastest growth: the site whose live bytes grew most from the first snapshot to the last.
    if (S.length > 1) {
      var grow = {}, first = S[0], k, best = null;
      for (k = 0; k < last.sites.site.length; k++) grow[last.sites.site[k]] = last.sites.bytes[k];
      for (k = 0; k < first.sites.site.length; k++) grow[first.sites.site[k]] = (grow[first.sites.site[k]] || 0) - first.sites.bytes[k];
      for (k in grow) if (best === null || grow[k] > grow[best]) best = k;
      finding('Fastest growth', best !== null && grow[best] > 0 ? siteLabel(+best) + ': +' + fmtBytes(grow[best]) + ' live from snapshot ' +
        first.index + ' to ' + last.index : 'nothing grew between the first and the last snapshot', '#diff-view');
    } else {
      finding('Fastest growth', 'needs two snapshots (record with --snapshot-every N or --snapshot-on-signal)', '#timeline');
    }
  }

  function renderSnapshots() {
    var S = D.snapshots;
    if (!S.length) {
      var none = $('snapshot-none');
      none.hidden = false;
      none.textContent = D.timeline.snapshots.length
        ? 'The capture\'s snapshots are incomplete, so there is no dominator tree to show (see the notes above).'
        : 'This capture has no heap snapshot, so there is no dominator tree or retainer table. Record with --snapshot-at-exit, ' +
          '--snapshot-every N, --snapshot-heap-above SIZE or --snapshot-on-signal to see what keeps memory alive.';
      return;
    }
    $('snapshot-body').hidden = false;
    var pick = $('snapshot-pick');
    S.forEach(function (s, k) { pick.appendChild(el('option', { value: String(k), text: snapshotTitle(s) })); });
    // The biggest snapshot first: usually the one worth looking at.
    state.snapshot = 0;
    S.forEach(function (s, k) { if (s.bytes > S[state.snapshot].bytes) state.snapshot = k; });
    pick.value = String(state.snapshot);
    pick.addEventListener('change', function () { selectSnapshot(+pick.value); });
    renderSnapshot();
    state.redraw.push(function () { if (domIcicle) domIcicle.render(); });
    if (S.length > 1) {
      $('diff-view').hidden = false;
      var before = $('diff-before'), after = $('diff-after');
      S.forEach(function (s, k) {
        before.appendChild(el('option', { value: String(k), text: snapshotTitle(s) }));
        after.appendChild(el('option', { value: String(k), text: snapshotTitle(s) }));
      });
      before.value = '0';
      after.value = String(state.snapshot > 0 ? state.snapshot : S.length - 1);
      before.addEventListener('change', renderDiff);
      after.addEventListener('change', renderDiff);
      renderDiff();
    }
  }

  // --- self-test: opened as report.html#selftest, the page drives its own controls the way a reader
  // would (metric switch, search, zoom in and out, snapshot picker, diff pickers, sorting) and
  // puts the outcome in <body data-selftest>. The browser test uses it; it changes nothing else.
  function selftest(done) {
    var problems = [], steps = [];
    function expect(cond, what) { if (!cond) problems.push(what); }
    function count(id, sel) { return document.querySelectorAll('#' + id + ' ' + sel).length; }
    function click(e) { e.dispatchEvent(new MouseEvent('click', { bubbles: true, cancelable: true, view: window })); }
    function change(e, v) { e.value = v; e.dispatchEvent(new Event('change', { bubbles: true })); }
    steps.push(function () {
      document.querySelectorAll('#flame-metrics input').forEach(function (input, k) {
        click(input);
        var empty = !(D.flame.values[k][0] > 0);
        expect(empty || count('flame-chart', 'g.n') > 1, 'flame graph drew for metric ' + input.value);
      });
      click(document.querySelector('#flame-metrics input'));
      var first = document.querySelector('#flame-chart g.n:not(.anc)[data-i]:not([data-i="0"])');
      expect(first, 'a frame to zoom into');
      if (first) {
        click(first);
        expect($('flame-crumbs').textContent.length > 0, 'zoom shows the path to the frame');
        expect(count('flame-chart', 'g.anc') >= 1, 'zoom keeps the ancestors, faded');
        click($('flame-reset'));
        expect($('flame-crumbs').textContent === '', 'reset zoom');
      }
      var search = $('flame-search');
      search.value = D.flame.names[D.flame.name[Math.min(2, D.flame.parent.length - 1)]];
      search.dispatchEvent(new Event('input', { bubbles: true }));
    });
    steps.push(function () {
      expect(count('flame-chart', 'g.match') >= 1, 'search highlights frames');
      expect(/matched/.test($('flame-match').textContent), 'search reports the matched share');
      $('flame-search').value = '';
      $('flame-search').dispatchEvent(new Event('input', { bubbles: true }));
      var fit = $('timeline-fit');
      if (fit) { click(fit); click(fit); }
      expect(count('timeline-chart', 'svg') === 1, 'the heap chart redraws');
      document.querySelectorAll('table.data th').forEach(function (th) { click(th); });
      expect(count('allocators-table', 'tr') >= 1, 'tables sort');
      if (D.snapshots.length) {
        var pick = $('snapshot-pick');
        for (var k = 0; k < D.snapshots.length; k++) {
          change(pick, String(k));
          expect(count('dom-chart', 'g.n') >= 1, 'dominator tree drew for snapshot ' + D.snapshots[k].index);
        }
        var node = document.querySelector('#dom-chart g.n[data-i]:not([data-i="0"])');
        if (node) { click(node); click(document.querySelector('#dom-chart g.n[data-i="0"]')); }
        if (D.snapshots.length > 1) {
          change($('diff-before'), String(D.snapshots.length - 1));
          change($('diff-after'), '0');
          expect(/S\d+ → S\d+/.test($('diff-summary').textContent), 'diff recomputed');
        }
      }
    });
    var i = 0;
    (function next() {
      if (i < steps.length) {
        try { steps[i++](); } catch (e) { problems.push('threw: ' + e); }
        setTimeout(next, 300);  // the search box waits for typing to pause
        return;
      }
      done(problems);
    })();
  }

  // --- main -------------------------------------------------------------------------------------------
  var timings = {};
  function step(name, fn) {
    var t0 = performance.now();
    try { fn(); } catch (e) { recordError(name + ': ' + (e && e.stack ? e.stack.split('\n').slice(0, 3).join(' | ') : e)); }
    timings[name] = Math.round(performance.now() - t0);
  }
  function main() {
    var t0 = performance.now();
    try {
      D = JSON.parse($('heapsnap-data').textContent);
      timings.parse = Math.round(performance.now() - t0);
    } catch (e) {
      recordError('the report data does not parse: ' + e);
      document.body.dataset.ready = '1';
      document.body.dataset.errors = String(errors.length);
      return;
    }
    step('overview', renderOverview);
    step('snapshots', renderSnapshots);  // before the timeline, which marks the chosen snapshot
    step('findings', renderFindings);
    step('timeline', renderTimeline);
    step('flame graph', renderFlame);
    step('top allocators', renderAllocators);
    step('leaks', renderLeaks);
    state.redraw.unshift(renderTimeline);
    var resizeTimer = 0, lastWidth = window.innerWidth;
    window.addEventListener('resize', function () {
      if (window.innerWidth === lastWidth) return;
      lastWidth = window.innerWidth;
      clearTimeout(resizeTimer);
      resizeTimer = setTimeout(function () { state.redraw.forEach(function (f) { step('redraw', f); }); }, 150);
    });
    document.body.dataset.renderMs = String(Math.round(performance.now()));
    document.body.dataset.timings = JSON.stringify(timings);
    document.body.dataset.errors = String(errors.length);
    document.body.dataset.ready = '1';
    if (location.hash === '#selftest') {
      selftest(function (problems) {
        document.body.dataset.errors = String(errors.length);
        document.body.dataset.selftest = problems.length ? 'fail: ' + problems.join('; ') : 'ok';
      });
    }
  }
  main();
})();
