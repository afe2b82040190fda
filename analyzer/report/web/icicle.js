// The icicle chart the flame graph and the dominator tree share: drawing within the node budget,
// zoom, crumbs, and the keyboard (each frame is focusable; Enter or Space zooms, the arrows move
// to the parent, the biggest child and the frames beside it; the tooltip shows on focus). Colours
// say what kind of code a frame is, with a legend.

// Colour families by kind (flame.kinds: program, library, allocator, unknown); within a family a
// frame's name picks the shade, so that neighbours differ. The search match colour (--match,
// magenta) is in none of them.
var KIND_COLOURS = [
  { name: 'program', hue: [8, 42], sat: [72, 88], light: [58, 70], base: 'hsl(24,82%,62%)' },
  { name: 'library', hue: [196, 226], sat: [48, 64], light: [64, 76], base: 'hsl(210,56%,68%)' },
  { name: 'allocator', hue: [92, 132], sat: [38, 54], light: [56, 68], base: 'hsl(112,46%,60%)' },
  { name: 'unknown', hue: [210, 210], sat: [6, 10], light: [66, 74], base: 'hsl(210,8%,70%)' }
];
var OTHER_COLOUR = '#dde1e5', ROOT_COLOUR = '#adb5bd';
var KIND_HELP = {
  program: 'the program\'s own code',
  library: 'libraries and the C/C++ run time',
  allocator: 'allocation functions (operator new, malloc, an allocator\'s allocate)',
  unknown: 'no symbol'
};
function kindColour(kind, name) {
  var c = KIND_COLOURS[kind] || KIND_COLOURS[3], h = hash(name);
  function pick(r, bits) { return r[0] + (bits % (r[1] - r[0] + 1)); }
  return 'hsl(' + pick(c.hue, h) + ',' + pick(c.sat, h >>> 8) + '%,' + pick(c.light, h >>> 16) + '%)';
}
// The legend above a chart: the kinds its frames have, and [other] when some were merged.
function drawKindLegend(host, kindsPresent, hasOther, extra) {
  host.textContent = '';
  function item(colour, label, help, kind) {
    var it = el('span', { cls: 'legend-item', title: help || '' }, [el('span', { cls: 'swatch' }), label]);
    it.firstChild.style.background = colour;
    if (kind != null) it.setAttribute('data-kind', kind);
    host.appendChild(it);
  }
  KIND_COLOURS.forEach(function (c, k) { if (kindsPresent[k]) item(c.base, c.name, KIND_HELP[c.name], c.name); });
  if (hasOther) item(OTHER_COLOUR, '[other]: smaller frames merged', 'the size budget merges the smallest children of a frame', 'other');
  (extra || []).forEach(function (x) { item(x[0], x[1], x[2], x[3]); });
}

// cfg: n, parent[], label(i), color(i), kind(i) (a name of KIND_COLOURS, or ''), tip(i) -> lines,
// aria(i) -> the frame's name and figures for a screen reader, name (of the chart),
// onKey(ev, i) -> true when it handled a key the chart does not; value(i) is set by setValue.
function Icicle(host, crumbs, cfg) {
  this.host = host; this.crumbs = crumbs; this.cfg = cfg;
  this.focus = 0;    // the zoomed frame
  this.cursor = 0;   // the frame that has, or last had, the keyboard's focus
  this.matched = null; this.rowH = 18;
  var kids = new Array(cfg.n);
  for (var i = 0; i < cfg.n; i++) kids[i] = [];
  for (i = 1; i < cfg.n; i++) kids[cfg.parent[i]].push(i);
  this.kids = kids;
  var self = this;
  function frameOf(ev) { var g = ev.target.closest && ev.target.closest('g[data-i]'); return g ? +g.getAttribute('data-i') : -1; }
  host.addEventListener('click', function (ev) {
    var i = frameOf(ev);
    if (i >= 0) self.zoom(i);
  });
  host.addEventListener('mousemove', function (ev) {
    var i = frameOf(ev);
    if (i >= 0) showTip(ev, self.cfg.tip(i)); else hideTip();
  });
  host.addEventListener('mouseleave', hideTip);
  host.addEventListener('focusin', function (ev) {
    if (frameOf(ev) >= 0) self.focused(ev.target.closest('g[data-i]'));
  });
  host.addEventListener('focusout', hideTip);
  host.addEventListener('keydown', function (ev) {
    var i = frameOf(ev);
    if (i >= 0 && self.key(ev, i)) { ev.preventDefault(); ev.stopPropagation(); }
  });
}
Icicle.prototype.setValue = function (fn) {
  this.value = fn;
  this.kids.forEach(function (k) { if (k.length > 1) k.sort(function (a, b) { return fn(b) - fn(a); }); });
};
Icicle.prototype.zoom = function (i) { this.focus = i; this.cursor = i; this.render(); };
Icicle.prototype.frame = function (i) { return this.host.querySelector('g[data-i="' + i + '"]'); };
// One frame is in the page's tab order (roving tabindex): Tab enters the chart once, the arrows
// move inside it.
Icicle.prototype.tabStop = function (g) {
  var old = this.host.querySelector('g[tabindex="0"]');
  if (old && old !== g) old.setAttribute('tabindex', '-1');
  if (g) g.setAttribute('tabindex', '0');
};
// A frame got the focus: it is the tab stop now, and its tooltip shows under it.
Icicle.prototype.focused = function (g) {
  this.cursor = +g.getAttribute('data-i');
  this.tabStop(g);
  showTipFor(g, this.cfg.tip(this.cursor));
};
// Moves the keyboard's focus to frame i; false when it is not drawn (too narrow, or outside the
// zoom). (focused() is called here too: a page without the window's focus gets no focus events.)
Icicle.prototype.focusFrame = function (i) {
  var g = this.frame(i);
  if (!g) return false;
  g.focus();
  this.focused(g);
  return true;
};
// Makes frame i drawn (zooming out to its parent, or onto it when still too narrow), then focuses it.
Icicle.prototype.reveal = function (i) {
  if (!this.pos[i]) { this.focus = i ? this.cfg.parent[i] : 0; this.render(); }
  if (!this.pos[i]) { this.focus = i; this.render(); }
  return this.focusFrame(i);
};
Icicle.prototype.key = function (ev, i) {
  var parent = this.cfg.parent, p = this.pos[i];
  if (isActivation(ev)) { this.zoom(i); this.focusFrame(i); return true; }
  if (ev.key === 'Escape') {
    if (this.focus === 0) return false;
    var up = parent[this.focus];
    this.zoom(up);
    this.focusFrame(up);
    return true;
  }
  if (ev.key === 'ArrowUp') return i !== 0 && this.focusFrame(parent[i]);
  if (ev.key === 'ArrowDown') {
    var row = p ? this.rows[p.depth + 1] || [] : [];
    for (var k = 0; k < row.length; k++) if (parent[row[k]] === i) return this.focusFrame(row[k]);
    return true;  // a leaf: stay
  }
  if (ev.key === 'ArrowLeft' || ev.key === 'ArrowRight') {
    // The frame beside it in its row: its sibling, or the nearest frame of a neighbouring caller.
    var same = p ? this.rows[p.depth] : [], at = same.indexOf(i) + (ev.key === 'ArrowLeft' ? -1 : 1);
    if (at >= 0 && at < same.length) this.focusFrame(same[at]);
    return true;
  }
  if (ev.key === 'Home') return this.focusFrame(this.focus);
  return this.cfg.onKey ? this.cfg.onKey(ev, i) : false;
};
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
// The matched frames with a value, in the order they are drawn: depth first, biggest child first
// (left to right).
Icicle.prototype.matchList = function () {
  var out = [], kids = this.kids, value = this.value, m = this.matched;
  if (!m) return out;
  var stack = [0];
  while (stack.length) {
    var i = stack.pop();
    if (!(value(i) > 0)) continue;
    if (m[i]) out.push(i);
    for (var k = kids[i].length - 1; k >= 0; k--) stack.push(kids[i][k]);
  }
  return out;
};
Icicle.prototype.render = function () {
  var cfg = this.cfg, value = this.value, kids = this.kids, rowH = this.rowH;
  var hadFocus = this.host.contains(document.activeElement);
  var W = Math.max(320, this.host.clientWidth || 900);
  var anc = [];
  for (var a = this.focus; a !== 0; a = cfg.parent[a]) anc.unshift(cfg.parent[a]);
  var parts = [], maxDepth = anc.length, drawn = 0, pos = {}, rows = [];
  var self = this;
  function box(i, x, w, depth, cls) {
    var y = depth * rowH, fill = cfg.color(i), kind = cfg.kind(i);
    var c = 'n' + (cls ? ' ' + cls : '') + (self.matched ? (self.matched[i] ? ' match' : '') : '');
    var s = '<g class="' + c + '" data-i="' + i + '"' + (kind ? ' data-kind="' + kind + '"' : '') +
      ' tabindex="-1" role="button" aria-label="' + esc(cfg.aria(i)) + '"><rect x="' + x.toFixed(2) + '" y="' + y +
      '" width="' + Math.max(0.5, w - 0.5).toFixed(2) + '" height="' + (rowH - 1) + '" fill="' + fill + '"/>';
    var chars = Math.floor((w - 8) / 6.6);
    if (chars >= 3) {
      var t = cfg.label(i);
      if (t.length > chars) t = t.slice(0, chars - 1) + '…';
      s += '<text x="' + (x + 4).toFixed(2) + '" y="' + (y + rowH - 5) + '">' + esc(t) + '</text>';
    }
    parts.push(s + '</g>');
    pos[i] = { x: x, w: w, depth: depth };
    (rows[depth] || (rows[depth] = [])).push(i);
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
  rows.forEach(function (r) { r.sort(function (a, b) { return pos[a].x - pos[b].x; }); });
  this.pos = pos; this.rows = rows;
  var H = (maxDepth + 1) * rowH + 2;
  this.host.innerHTML = '<svg xmlns="' + SVGNS + '" class="icicle-svg" width="' + W + '" height="' + H + '" viewBox="0 0 ' + W + ' ' + H +
    '" role="group" aria-label="' + esc(cfg.name + ': Tab to a frame; arrow keys move between callers, callees and neighbours; Enter zooms; Escape zooms out') + '">' +
    parts.join('') + '</svg>';
  this.drawn = drawn;
  if (!pos[this.cursor]) this.cursor = this.focus;
  this.tabStop(this.frame(this.cursor));
  if (hadFocus) this.focusFrame(this.cursor);
  if (this.crumbs) {
    var cr = this.crumbs;
    cr.textContent = '';
    if (this.focus !== 0) {
      anc.concat([this.focus]).forEach(function (i, d) {
        if (d) cr.appendChild(document.createTextNode(' › '));
        var link = el('button', { type: 'button', cls: 'crumb', text: d === 0 ? 'all' : cfg.label(i).slice(0, 60) });
        link.addEventListener('click', function () { self.zoom(i); });
        cr.appendChild(link);
      });
    }
  }
};
