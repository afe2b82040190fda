// heapsnap report: draws the page from the JSON in #heapsnap-data. Plain ES2017, no libraries,
// nothing fetched. The page's script is these files, concatenated in the order
// analyzer/report/meson.build lists them into one function (report.html): they share one scope,
// and each file has one concern. This one: errors, formatting, DOM helpers, the tooltip, the
// page's layout variables, and the state the others share.
//
// When everything is drawn, <body> gets data-ready="1", data-errors=N (script errors,
// console.error calls and blocked fetches seen so far) and data-render-ms; the browser test
// reads them back.
//
// DATA SCHEMA (written by analyzer/report/report_data.cc; sizes in bytes, times in seconds):
//   title, file, generator, schema
//   process  {command, executable, pid, hostname, duration_s, sample_bytes, estimated, threads,
//             modules, stacks, ended, truncated}
//   totals   {alloc_calls, free_calls, bytes_allocated, peak_heap_bytes, peak_time_s,
//             leaked_blocks, leaked_bytes, rss_bytes, realloc_calls, dropped_events}
//   timeline {t[], heap[], rss[] (0 = unknown), peak {t, bytes} (t: the events' time when every allocation
//             was recorded, else the shim's), end_s,
//             markers [{t, tid, text}], snapshots [{index, t, trigger, label}]}
//   flame    {metrics[4], names[], parent[], name[], values[4][], other[] (node ids), full_nodes,
//             kinds[] (program, library, allocator, unknown), name_kind[] (per name),
//             modules[], name_module[] (per name: 0 none, else 1 + index),
//             locs[], loc[] (per node: 0 none, else 1 + index: "file.c:12")}
//            node 0 is the root; parents come before children; values are inclusive.
//   top_allocators {sites_total, rows [{site, module, alloc_bytes, alloc_calls, peak_bytes,
//             leaked_bytes, leaked_blocks, reallocs, realloc_moves, stacks, stack {frames[], more}}]}
//   leaks    {stacks_total, blocks, bytes, rows [{bytes, blocks, site, stack}]}
//   sites    [{label, module, address, kind (as flame.kinds), stack {frames[], more} (one of its blocks'
//              allocation stack; only for the sites a snapshot's tables show)}]   (shared by the snapshot sections)
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
//   notes [], budget {...}, snapshots_enabled, peak_snapshot

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
function plural(n, one, many) { return fmtCount(n) + ' ' + (n === 1 ? one : (many || one + 's')); }
function basename(p) { return String(p || '').replace(/^.*\//, ''); }

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
// Enter and Space activate what is not a native button (table rows, icicle frames).
function isActivation(ev) { return ev.key === 'Enter' || ev.key === ' ' || ev.key === 'Spacebar'; }

// --- the tooltip: one for the page; lines[0] is the title. Text only (names come from binaries).
var tip = null;
function placeTip(lines, x, y, avoid) {
  if (!tip) tip = $('tooltip');
  tip.textContent = '';
  lines.forEach(function (l, i) { tip.appendChild(el('div', { cls: i === 0 ? 't' : '', text: l })); });
  tip.hidden = false;
  var w = tip.offsetWidth, h = tip.offsetHeight;
  if (x + w > window.innerWidth - 8) x = Math.max(8, window.innerWidth - w - 8);
  // Below the point, else above what it belongs to (avoid: that box's top).
  if (y + h > window.innerHeight - 8) y = Math.max(8, (avoid != null ? avoid : y) - h - 14);
  tip.style.left = x + 'px';
  tip.style.top = y + 'px';
}
// At the pointer.
function showTip(ev, lines) { placeTip(lines, ev.clientX + 14, ev.clientY + 14, ev.clientY); }
// Under an element that has the keyboard's focus: the same text a pointer would show.
function showTipFor(elem, lines) {
  var r = elem.getBoundingClientRect();
  placeTip(lines, Math.max(8, r.left), r.bottom + 6, r.top);
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

// --- layout: the sticky page header's height, which the sticky table headers sit under and
// which headings scrolled to (nav links, focus) keep clear of. It wraps to two or three lines on
// narrow windows, so it is measured, not assumed.
function trackHeaderHeight() {
  var header = document.querySelector('header.top');
  function update() {
    document.documentElement.style.setProperty('--header-h', header.getBoundingClientRect().height + 'px');
  }
  update();
  if (window.ResizeObserver) new ResizeObserver(update).observe(header);
  window.addEventListener('resize', update);
  return update;
}

// --- state ---------------------------------------------------------------------------------------
var D = null;
var state = { snapshot: 0, redraw: [] };
