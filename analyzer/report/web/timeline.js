// The heap over time: the heap line (exact at the shim's Totals records, between them from the
// allocation events), RSS where a Totals record measured it, markers, snapshot flags, the peak.

// What the RSS line says at time s. RSS is measured only at Totals records (rss > 0); the line is
// drawn from the first measure to the last, straight across the points between them (points from
// the events, the exact peak). Only outside that stretch is RSS not known.
function rssAt(T, s) {
  var before = -1, after = -1;
  for (var i = 0; i < T.t.length; i++) {
    if (!(T.rss[i] > 0)) continue;
    if (T.t[i] <= s) before = i;
    else { after = i; break; }
  }
  if (before >= 0 && T.t[before] === s) return 'RSS ' + fmtBytes(T.rss[before]);
  if (before < 0 || after < 0) return 'RSS not known here';
  return 'RSS ' + fmtBytes(T.rss[before]) + ' (measured at ' + fmtTime(T.t[before]) + ', next ' + fmtBytes(T.rss[after]) + ' at ' + fmtTime(T.t[after]) + ')';
}

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
  var svg = sv('svg', { width: W, height: H, viewBox: '0 0 ' + W + ' ' + H, id: 'timeline-svg', role: 'img', 'aria-label': 'heap over time', 'data-tmax': tmax });
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
  // Lines: heap (with a light area under it) and RSS where measured (see rssAt).
  var d = '', area = '', r = '', pen = false;
  for (i = 0; i < n; i++) {
    var x = X(T.t[i]).toFixed(1);
    d += (i ? 'L' : 'M') + x + ',' + Y(Math.max(0, T.heap[i])).toFixed(1);
    if (T.rss[i] > 0) { r += (pen ? 'L' : 'M') + x + ',' + Y(T.rss[i]).toFixed(1); pen = true; }
  }
  area = d + 'L' + X(T.t[n - 1]).toFixed(1) + ',' + Y(0) + 'L' + X(T.t[0]).toFixed(1) + ',' + Y(0) + 'Z';
  sv('path', { 'class': 'heap-area', d: area }, svg);
  if (r) sv('path', { 'class': 'rss', id: 'rss-line', d: r, 'clip-path': 'url(#timeline-clip)' }, svg);
  sv('path', { 'class': 'heap', id: 'heap-line', d: d, 'clip-path': 'url(#timeline-clip)', 'data-points': n }, svg);
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
      showTip(ev, ['snapshot ' + s.index + ': ' + triggerText(s.trigger, s.label, false), 'at ' + fmtTime(s.t),
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
  [['heap', 'heap'], ['rss', 'RSS']].forEach(function (it) {
    sv('path', { 'class': it[0], d: 'M' + lx + ',' + (H - 8) + 'h22' }, lg);
    sv('text', { x: lx + 27, y: H - 4, text: it[1] }, lg);
    lx += 40 + it[1].length * 6.5;
  });
  // Hover: the values nearest the pointer.
  var hover = sv('line', { 'class': 'hover', x1: 0, x2: 0, y1: m.t, y2: m.t + ih, visibility: 'hidden' }, svg);
  var overlay = sv('rect', { x: m.l, y: m.t, width: iw, height: ih, fill: 'transparent', id: 'timeline-overlay' }, svg);
  // Markers and snapshot flags stay on top of the overlay.
  svg.querySelectorAll('.marker-mark, .snap-mark, circle.peak').forEach(function (e) { svg.appendChild(e); });
  overlay.addEventListener('mousemove', function (ev) {
    var box = svg.getBoundingClientRect(), s = (ev.clientX - box.left - m.l) / iw * tmax;
    var lo = 0, hi = n - 1;
    while (lo < hi) { var mid = (lo + hi) >> 1; if (T.t[mid] < s) lo = mid + 1; else hi = mid; }
    if (lo > 0 && Math.abs(T.t[lo - 1] - s) < Math.abs(T.t[lo] - s)) lo--;
    hover.setAttribute('x1', X(T.t[lo])); hover.setAttribute('x2', X(T.t[lo]));
    hover.setAttribute('visibility', 'visible');
    showTip(ev, ['at ' + fmtTime(T.t[lo]), 'heap ' + fmtBytes(T.heap[lo]), rssAt(T, T.t[lo])]);
  });
  overlay.addEventListener('mouseleave', function () { hover.setAttribute('visibility', 'hidden'); hideTip(); });
  host.appendChild(svg);
  renderRssParts(W, tmax, m.l, m.r);
}
