// RSS over time, coarsely (issue 32): the shim's smaps_rollup reads (about one a second) as a
// stacked area under the heap line, on its time axis: heap, other anonymous, file-backed, and
// heapsnap's own on top, hatched, so that a user can subtract it. Parts add up to the RSS read.
var RSS_PARTS = [
  { key: 'heap', name: 'heap (live bytes)', colour: '#2f6fb0' },
  { key: 'other_anon', name: 'other anonymous (allocator slack, stacks, ...)', colour: '#3fa7a3' },
  { key: 'file', name: 'file-backed (code, mapped files, shared memory)', colour: '#a3a3a3' },
  { key: 'heapsnap', name: 'heapsnap\u2019s own (subtract it)', colour: '#444444', own: true }
];
function renderRssParts(W, tmax, ml, mr) {
  var host = $('rss-parts-chart'), P = D.timeline.rss_parts;
  host.textContent = '';
  if (!P || !P.t.length) return;
  var n = P.t.length, H = 150, mt = 10, mb = 26, ih = H - mt - mb, iw = W - ml - mr, top = 1;
  for (var i = 0; i < n; i++) top = Math.max(top, P.rss[i]);
  var X = function (s) { return ml + (s / tmax) * iw; };
  var Y = function (b) { return mt + ih - (b / top) * ih; };
  host.appendChild(el('h4', { text: 'RSS parts over time (one read a second: /proc/self/smaps_rollup)' }));
  var svg = sv('svg', { width: W, height: H, viewBox: '0 0 ' + W + ' ' + H, id: 'rss-parts-svg', role: 'img', 'aria-label': 'RSS parts over time' });
  var base = [];
  for (i = 0; i < n; i++) base.push(0);
  RSS_PARTS.forEach(function (part) {
    var upper = [], d = '';
    for (var k = 0; k < n; k++) upper.push(base[k] + P[part.key][k]);
    // Steps: a read holds until the next one.
    for (k = 0; k < n; k++) {
      var x0 = X(P.t[k]), x1 = X(k + 1 < n ? P.t[k + 1] : Math.min(tmax, P.t[k] + (n > 1 ? P.t[n - 1] - P.t[n - 2] : tmax / 50)));
      d += (k ? 'L' : 'M') + x0 + ',' + Y(upper[k]) + 'L' + x1 + ',' + Y(upper[k]);
    }
    for (k = n - 1; k >= 0; k--) {
      var xe = X(k + 1 < n ? P.t[k + 1] : Math.min(tmax, P.t[k] + (n > 1 ? P.t[n - 1] - P.t[n - 2] : tmax / 50)));
      d += 'L' + xe + ',' + Y(base[k]) + 'L' + X(P.t[k]) + ',' + Y(base[k]);
    }
    sv('path', { d: d + 'Z', fill: part.colour, 'class': 'rss-part' + (part.own ? ' own' : ''), 'data-part': part.key, opacity: part.own ? 0.6 : 0.85 }, svg);
    base = upper;
  });
  var axis = sv('g', { 'class': 'axis' }, svg);
  sv('text', { x: ml - 6, y: Y(top) + 4, 'text-anchor': 'end', text: fmtBytes(top) }, axis);
  sv('text', { x: ml - 6, y: Y(0) + 4, 'text-anchor': 'end', text: '0' }, axis);
  var overlay = sv('rect', { x: ml, y: mt, width: iw, height: ih, fill: 'transparent', id: 'rss-parts-overlay' }, svg);
  overlay.addEventListener('mousemove', function (ev) {
    var box = svg.getBoundingClientRect(), s = (ev.clientX - box.left - ml) / iw * tmax, k = 0;
    while (k + 1 < n && P.t[k + 1] <= s) k++;
    showTip(ev, ['at ' + fmtTime(P.t[k]) + ': RSS ' + fmtBytes(P.rss[k])].concat(RSS_PARTS.map(function (p) { return p.name + ' ' + fmtBytes(P[p.key][k]); })));
  });
  overlay.addEventListener('mouseleave', hideTip);
  host.appendChild(svg);
  var legend = el('div', { cls: 'legend-kinds', id: 'rss-parts-legend' });
  RSS_PARTS.forEach(function (p) {
    var sw = el('span', { cls: 'swatch' });
    sw.style.background = p.colour;
    legend.appendChild(el('span', { cls: 'legend-item' + (p.own ? ' own' : ''), 'data-part': p.key }, [sw, el('span', { text: p.name })]));
  });
  host.appendChild(legend);
}
