// Heap snapshots: the picker, the dominator tree by site, the retainer, site, root, type and
// unreachable tables, and the diff between two snapshots.

function siteLabel(i) { return i < 0 ? '[other]' : (D.sites[i] ? D.sites[i].label : '?'); }
// A snapshot's trigger, with its label only where the label says more. The shim labels its own
// snapshots with the trigger's words ("exit", "heap threshold (crossed at ...)", "at peak (...)"),
// which shown beside the trigger would say it twice; a program's label ("cache warm") stays.
function triggerText(trigger, label) {
  function words(s) { return String(s || '').toLowerCase().replace(/[-_]/g, ' '); }
  var t = words(trigger), rest = String(label || '').trim(), low = words(rest);
  [t, 'at ' + t].forEach(function (p) {
    if (low === p) rest = '';
    else if (low.indexOf(p + ' ') === 0 || low.indexOf(p + '(') === 0) rest = rest.slice(p.length).trim();
  });
  if (/^\(.*\)$/.test(rest)) rest = rest.slice(1, -1);
  return rest ? trigger + ': ' + rest : trigger;
}
// One line per snapshot in the pickers: short enough to fit a narrow window (a long label is cut;
// the summary beside the picker has it whole).
function snapshotTitle(s) {
  var what = triggerText(s.trigger, s.label);
  if (what.length > 48) what = what.slice(0, 47) + '…';
  return 'S' + s.index + ' · ' + fmtTime(s.time_s) + ' · ' + what + ' · ' + fmtBytes(s.bytes) + ' in ' + plural(s.blocks, 'block');
}
// What a site row expands to (diff and retaining-site rows): its frame, module and stack.
function siteDetail(i) {
  var box = el('div', { cls: 'site-detail' });
  var s = D.sites[i];
  if (!s) {
    box.appendChild(el('div', { cls: 'sub', text: 'Sites beyond the ' + fmtCount(D.budget.max_sites) + '-site budget of a snapshot, summed.' }));
    return box;
  }
  box.appendChild(el('div', { cls: 'sub', text: s.label + ' · ' + (s.module || 'unknown module') + ' · call site ' + s.address }));
  if (s.stack && s.stack.frames.length) {
    box.appendChild(el('div', { cls: 'sub', text: 'Allocation stack of one of its blocks:' }));
    box.appendChild(stackList(s.stack));
  } else {
    box.appendChild(el('div', { cls: 'sub', text: 'No stack embedded for this site: the report keeps stacks for the sites a snapshot\'s tables show (size budget).' }));
  }
  return box;
}
// A top retainer: its shortest path from a root, then its allocation stack.
function retainerLabel(r) {
  return r.root ? r.root : (r.type ? r.type + ' ' : '') + r.address + '  ' + siteLabel(r.site);
}
// A path's lines, as `heapsnap path` words them: the root and, for a stack word, the function whose
// frame holds it; each hop's type, site and size, and the field of it that points on to the next.
function pathRootText(p) {
  return 'root: ' + p.root + (p.root_word ? ' at ' + p.root_word : '') + (p.root_frame ? ', in the frame of ' + p.root_frame.label : '');
}
function pathHopText(h) {
  var field = h.next_at_offset == null ? '' : ', field +' + h.next_at_offset + (h.next_in_field ? ' (' + h.next_in_field + ')' : '') + ' →';
  return h.address + ' ' + (h.type ? h.type + ' ' : '') + siteLabel(h.site) + ' (' + fmtBytes(h.size) + ')' + field;
}
function retainerCell(r) {
  var td = el('td', { cls: 'site' });
  if (r.root) { td.textContent = r.root; return td; }
  var box = el('details', null, [el('summary', { text: retainerLabel(r) })]);
  if (r.path) {
    box.appendChild(el('div', { cls: 'sub', text: 'Shortest path from a root:' }));
    var ol = el('ol', { cls: 'stack path' });
    ol.appendChild(el('li', { cls: 'path-root', text: pathRootText(r.path) }));
    r.path.hops.forEach(function (h, i) {
      if (r.path.more && i === r.path.more_at) ol.appendChild(el('li', { cls: 'more', text: '… ' + fmtCount(r.path.more) + ' more hops' }));
      ol.appendChild(el('li', { cls: 'path-hop', text: pathHopText(h) }));
    });
    box.appendChild(ol);
  }
  box.appendChild(el('div', { cls: 'sub', text: 'Allocation stack:' }));
  box.appendChild(stackList(r.stack));
  td.appendChild(box);
  return td;
}

var domIcicle = null;
function renderDominators(s) {
  var T = s.tree, n = T.parent.length, other = new Uint8Array(n);
  T.other.forEach(function (i) { other[i] = 1; });
  var kinds = (D.flame && D.flame.kinds) || [];
  function site(i) { return i > 0 && !other[i] ? D.sites[T.site[i]] : null; }
  function kindOf(i) { var st = site(i); return st && st.kind != null ? st.kind : 3; }
  var host = $('dom-chart');
  var fresh = host.cloneNode(false);  // drop the previous snapshot's listeners
  host.parentNode.replaceChild(fresh, host);
  var total = T.retained[0];
  function label(i) { return i === 0 ? 'all reachable memory' : other[i] ? '[other]' : siteLabel(T.site[i]); }
  function share(i) { return 'retained ' + fmtBytes(T.retained[i]) + ' (' + fmtPct(total ? T.retained[i] / total : 0) + ' of reachable)'; }
  domIcicle = new Icicle(fresh, $('dom-crumbs'), {
    n: n, parent: T.parent, name: 'dominator tree',
    label: label,
    kind: function (i) { return i === 0 ? 'root' : other[i] ? 'other' : kinds[kindOf(i)] || ''; },
    color: function (i) { return i === 0 ? ROOT_COLOUR : other[i] ? OTHER_COLOUR : kindColour(kindOf(i), siteLabel(T.site[i])); },
    aria: function (i) { var st = site(i); return label(i) + (st && st.module ? ', ' + st.module : '') + ': ' + share(i); },
    tip: function (i) {
      var lines = [i === 0 ? 'all reachable memory' : other[i] ? '[other]: smaller groups merged (size budget)' : siteLabel(T.site[i]),
        share(i), fmtCount(T.objects[i]) + ' objects, ' + fmtBytes(T.shallow[i]) + ' shallow'];
      var st = site(i);
      if (st) lines.push(st.module + ' · ' + st.address + (kinds[kindOf(i)] ? ' · ' + kinds[kindOf(i)] : ''));
      return lines;
    }
  });
  domIcicle.setValue(function (i) { return T.retained[i]; });
  domIcicle.render();
  var present = {};
  for (var i = 1; i < n; i++) if (!other[i]) present[kindOf(i)] = true;
  drawKindLegend($('dom-legend'), present, T.other.length > 0);
  $('dom-budget').textContent = fmtCount(n) + ' groups shown (size budget: ' + fmtCount(D.budget.tree_nodes_max) + ' per snapshot).';
}

function renderSnapshot() {
  var s = D.snapshots[state.snapshot];
  $('snapshot-summary').textContent = 'S' + s.index + ' at ' + fmtTime(s.time_s) + ', ' + triggerText(s.trigger, s.label) + '. ' +
    fmtBytes(s.reachable_bytes) + ' reachable in ' + plural(s.reachable_blocks, 'block') + '; ' +
    fmtBytes(s.bytes - s.reachable_bytes) + ' unreachable; ' + plural(s.edges, 'pointer') + '; pause ' + s.pause_ms.toFixed(1) + ' ms.';
  renderDominators(s);
  renderMemory(s);
  var total = s.reachable_bytes || 1;
  table($('retainers-table'), [
    num('retained', 'retained', fmtBytes),
    { label: '%', num: true, key: function (r) { return r.retained; }, fmt: function (r) { return fmtPct(r.retained / total); } },
    // (A root's row has no shallow size in the heap: a variable or a thread.)
    num('shallow', 'shallow', function (b) { return b === undefined ? '\u2014' : fmtBytes(b); }),
    num('blocks', 'retained_blocks', fmtCount),
    { label: 'object (click for its path from a root and its stack)', key: function (r) { return retainerLabel(r); }, cell: retainerCell },
    { label: 'held by', key: function (r) { return r.held_by; }, cls: 'wrap',
      fmt: function (r) { return r.held_by + (r.inside !== undefined ? '; inside\u00a0row\u00a0' + (r.inside + 1) : ''); } }
  ], s.retainers, { limit: D.budget.table_rows, empty: 'No reachable objects.' });
  table($('retaining-sites-table'), [
    num('retained', 'retained', fmtBytes),
    { label: '%', num: true, key: function (r) { return r.retained; }, fmt: function (r) { return fmtPct(r.retained / total); } },
    num('shallow', 'shallow', fmtBytes),
    num('blocks', 'blocks', fmtCount),
    { label: 'allocation site (click for its stack)', cls: 'site', key: function (r) { return siteLabel(r.site); }, fmt: function (r) { return siteLabel(r.site); } }
  ], s.retaining_sites, { limit: D.budget.table_rows, empty: 'No reachable objects.', expand: function (r) { return siteDetail(r.site); } });
  table($('roots-table'), [
    num('retained', 'retained', fmtBytes),
    { label: '%', num: true, key: function (r) { return r.retained; }, fmt: function (r) { return fmtPct(r.retained / total); } },
    num('blocks', 'blocks', fmtCount),
    { label: 'kind', key: function (r) { return r.kind; }, fmt: function (r) { return r.kind; } },
    { label: 'root', cls: 'wrap', key: function (r) { return r.root; }, fmt: function (r) { return r.root; } }
  ], s.roots || [], { limit: D.budget.table_rows, empty: 'No root holds a block on its own.' });
  $('types-summary').textContent = fmtBytes(s.typed_bytes || 0) + ' of ' + fmtBytes(s.bytes) + ' live (' +
    fmtPct(s.bytes ? (s.typed_bytes || 0) / s.bytes : 0) + ') have a type: from the vtable in the object, the allocation\'s frames, or the pointer variable that holds it.';
  table($('types-table'), [
    num('retained', 'retained', fmtBytes),
    num('objects', 'objects', fmtCount),
    num('shallow', 'shallow', fmtBytes),
    { label: 'from', key: function (r) { return r.how; }, fmt: function (r) { return r.how; } },
    { label: 'type', cls: 'wrap', key: function (r) { return r.type; }, fmt: function (r) { return r.type; } }
  ], s.types || [], { limit: D.budget.table_rows, empty: 'No block\'s type is known.' });
  $('unreachable-summary').textContent = (s.unreachable_bytes ? fmtBytes(s.unreachable_bytes) + ' in ' + plural(s.unreachable_blocks, 'block') +
    ' that no root reaches: leaked, whatever their size.' : 'Every block is reachable from a root.');
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

// The diff between two snapshots by site, from their per-site tables; a row expands to the site's stack.
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
    { label: 'allocation site (click for its stack)', cls: 'site', key: function (r) { return siteLabel(+r.site); }, fmt: function (r) { return siteLabel(+r.site); } }
  ], list, { limit: D.budget.table_rows, empty: 'No change by site between these snapshots.', expand: function (r) { return siteDetail(+r.site); } });
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
  function option(s, k) { return el('option', { value: String(k), text: snapshotTitle(s), title: triggerText(s.trigger, s.label) }); }
  S.forEach(function (s, k) { pick.appendChild(option(s, k)); });
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
      before.appendChild(option(s, k));
      after.appendChild(option(s, k));
    });
    before.value = '0';
    after.value = String(state.snapshot > 0 ? state.snapshot : S.length - 1);
    before.addEventListener('change', renderDiff);
    after.addEventListener('change', renderDiff);
    renderDiff();
  }
}
