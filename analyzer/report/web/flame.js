// The allocation flame graph: metric switch, search (text or /regex/, with the matches counted,
// stepped through and their share of the metric), frames coloured by kind with a legend, and a
// tooltip with each frame's figures, file:line and module.

var METRICS = [
  { key: 'alloc_bytes', label: 'allocated bytes', fmt: fmtBytes },
  { key: 'alloc_calls', label: 'allocation calls', fmt: fmtCount },
  { key: 'leaked_bytes', label: 'leaked bytes', fmt: fmtBytes },
  { key: 'peak_bytes', label: 'live at peak', fmt: fmtBytes }
];
// The search box's text as a pattern: null when empty; {error} when a /regex/ does not compile.
function searchPattern(q) {
  q = q.trim();
  if (!q) return null;
  var m = /^\/(.+)\/([a-z]*)$/.exec(q);
  if (m) {
    try { return { re: new RegExp(m[1], m[2].indexOf('i') >= 0 ? 'i' : '') }; } catch (e) { return { error: 'not a regular expression: ' + e.message.replace(/^Invalid regular expression: /, '') }; }
  }
  return { re: new RegExp(q.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'), 'i') };
}

function renderFlame() {
  var F = D.flame, n = F.parent.length;
  var other = new Uint8Array(n);
  F.other.forEach(function (i) { other[i] = 1; });
  var metric = 0;
  var labels = new Array(n);
  for (var i = 0; i < n; i++) labels[i] = F.names[F.name[i]];
  var kindNames = F.kinds || [];
  function kindOf(i) { return i === 0 || other[i] ? -1 : (F.name_kind ? F.name_kind[F.name[i]] : 3); }
  function where(i) {  // "file.c:12 · module", or ""
    var loc = F.loc && F.loc[i] ? F.locs[F.loc[i] - 1] : '';
    var mod = F.name_module && F.name_module[F.name[i]] ? F.modules[F.name_module[F.name[i]] - 1] : '';
    return [loc, mod].filter(Boolean).join(' · ');
  }
  function share(i) {
    var v = F.values[metric], M = METRICS[metric];
    return M.label + ' ' + M.fmt(v[i]) + ' (' + fmtPct(v[0] ? v[i] / v[0] : 0) + ' of all' + (i ? ', ' + fmtPct(v[F.parent[i]] ? v[i] / v[F.parent[i]] : 0) + ' of its caller' : '') + ')';
  }
  var ic = new Icicle($('flame-chart'), $('flame-crumbs'), {
    n: n, parent: F.parent, name: 'flame graph',
    label: function (i) { return labels[i]; },
    kind: function (i) { var k = kindOf(i); return i === 0 ? 'root' : other[i] ? 'other' : kindNames[k] || ''; },
    color: function (i) { return i === 0 ? ROOT_COLOUR : other[i] ? OTHER_COLOUR : kindColour(kindOf(i), labels[i]); },
    aria: function (i) { var w = where(i); return labels[i] + (w ? ', ' + w : '') + ': ' + share(i); },
    tip: function (i) {
      var v = F.values[metric], M = METRICS[metric], self = v[i];
      ic.kids[i].forEach(function (k) { self -= v[k]; });
      var lines = [labels[i]], w = where(i), k = kindOf(i);
      if (w || k >= 0) lines.push((w ? w + ' · ' : '') + (k >= 0 ? kindNames[k] : ''));
      lines.push(share(i));
      if (!other[i]) lines.push('self (allocated here): ' + M.fmt(Math.max(0, self)));
      else lines.push('smaller frames merged here to stay within the size budget');
      var vals = METRICS.map(function (mm, k) { return k === metric ? null : mm.label + ' ' + mm.fmt(F.values[k][i]); }).filter(Boolean);
      lines.push(vals.join(' · '));
      return lines;
    },
    onKey: function (ev, i) {
      if (ev.key !== 'n' && ev.key !== 'N' && ev.key !== 'p') return false;
      if (!matches.length) return false;
      step(ev.key === 'n' ? 1 : -1);
      return true;
    }
  });
  // The legend: the kinds the frames have (computed once: it does not change with the metric).
  var present = {};
  var anyOther = F.other.length > 0;
  for (i = 1; i < n; i++) if (!other[i]) present[kindOf(i)] = true;
  drawKindLegend($('flame-legend'), present, anyOther, [['var(--match)', 'search match', 'frames the search box matches', 'match']]);
  $('flame-legend').querySelector('[data-kind="match"]').hidden = true;

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

  // --- search ------------------------------------------------------------------------------------
  // An invalid /regex/ shows its error beside the box and highlights nothing (no stale result
  // from the text before); the count, the share and the next/previous buttons go with it.
  var search = $('flame-search'), info = $('flame-match'), err = $('flame-search-error');
  var prev = $('flame-prev'), next = $('flame-next');
  var matches = [], current = -1, summary = '';
  function doSearch() {
    var p = searchPattern(search.value);
    err.textContent = p && p.error ? p.error : '';
    err.hidden = !(p && p.error);
    search.setAttribute('aria-invalid', p && p.error ? 'true' : 'false');
    var total = ic.setMatch(p && p.re ? p.re : null);
    matches = ic.matchList();
    current = -1;
    var v = F.values[metric];
    summary = !(p && p.re) ? '' : !matches.length ? 'no match' :
      plural(matches.length, 'match', 'matches') + ' (' + fmtPct(v[0] ? total / v[0] : 0) + ' of ' + METRICS[metric].label + ', ' + METRICS[metric].fmt(total) + ')';
    info.textContent = summary;
    prev.disabled = next.disabled = matches.length === 0;
    $('flame-legend').querySelector('[data-kind="match"]').hidden = !(p && p.re);
  }
  // The next (dir 1) or previous (-1) match gets the keyboard's focus, zoomed to where it is drawn.
  function step(dir) {
    if (!matches.length) return;
    current = current < 0 ? (dir > 0 ? 0 : matches.length - 1) : (current + dir + matches.length) % matches.length;
    ic.reveal(matches[current]);
    info.textContent = 'match ' + (current + 1) + ' of ' + summary;
  }
  var timer = 0, pending = false;
  function now() { clearTimeout(timer); pending = false; doSearch(); ic.render(); }
  search.addEventListener('input', function () {
    clearTimeout(timer);
    pending = true;
    timer = setTimeout(now, 120);  // a big graph redraws once typing pauses
  });
  search.addEventListener('keydown', function (ev) {
    if (ev.key !== 'Enter') return;
    ev.preventDefault();
    if (pending) now();
    step(ev.shiftKey ? -1 : 1);
  });
  prev.addEventListener('click', function () { if (pending) now(); step(-1); });
  next.addEventListener('click', function () { if (pending) now(); step(1); });
  $('flame-reset').addEventListener('click', function () { ic.zoom(0); });
  document.addEventListener('keydown', function (ev) {
    if (ev.key === 'Escape' && !ev.defaultPrevented && ic.focus !== 0) ic.zoom(F.parent[ic.focus]);
  });
  var b = D.budget;
  $('flame-budget').textContent = fmtCount(n) + ' of ' + fmtCount(F.full_nodes) + ' frames shown (size budget: ' + fmtCount(b.flame_nodes_max) +
    ' nodes; the smallest merge into [other], so totals still add up). ' + (D.process.estimated ? 'Figures are sampled estimates.' : 'Every allocation was recorded.');
  apply();
  state.redraw.push(function () { ic.render(); });
  state.flame = ic;
  state.flameSearchNow = now;
}
