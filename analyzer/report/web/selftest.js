// The self-test: opened as report.html#selftest, the page drives its own controls the way a reader
// would (mouse and keyboard) and checks its layout at the window's width, then puts the outcome in
// <body data-selftest> ("ok" or "fail: ...") and the names of the checks that could run in
// data-selftest-ran (a check needs something to act on: a table long enough to scroll past, two
// snapshots...). The browser test reads both, at 1400 and 800 px. Nothing here waits for time
// to pass: every control it uses acts at once.

function selftest(done) {
  var problems = [], ran = [];
  function expect(cond, what) { if (!cond) problems.push(what); return !!cond; }
  function count(id, sel) { return document.querySelectorAll('#' + id + ' ' + sel).length; }
  function click(e) { e.dispatchEvent(new MouseEvent('click', { bubbles: true, cancelable: true, view: window })); }
  function change(e, v) { e.value = v; e.dispatchEvent(new Event('change', { bubbles: true })); }
  function key(e, k, shift) { e.dispatchEvent(new KeyboardEvent('keydown', { key: k, shiftKey: !!shift, bubbles: true, cancelable: true })); }
  function type(e, text) { e.value = text; e.dispatchEvent(new Event('input', { bubbles: true })); }
  function header() { return document.querySelector('header.top').getBoundingClientRect(); }
  function pageBox(e) { var r = e.getBoundingClientRect(); return { x: r.left + window.scrollX, y: r.top + window.scrollY }; }
  function check(name, fn) {
    try { if (fn() !== false) ran.push(name); } catch (e) { problems.push(name + ' threw: ' + e); }
  }
  var F = D.flame, ic = state.flame;
  function frameData(g) { return +g.getAttribute('data-i'); }
  function tipText() { var t = $('tooltip'); return t.hidden ? '' : t.textContent; }

  check('flame-metrics', function () {
    document.querySelectorAll('#flame-metrics input').forEach(function (input, k) {
      click(input);
      var empty = !(F.values[k][0] > 0);
      expect(empty || count('flame-chart', 'g.n') > 1, 'flame graph drew for metric ' + input.value);
    });
    click(document.querySelector('#flame-metrics input'));
  });
  check('flame-zoom', function () {
    var first = document.querySelector('#flame-chart g.n:not(.anc)[data-i]:not([data-i="0"])');
    if (!expect(first, 'a frame to zoom into')) return;
    click(first);
    expect($('flame-crumbs').textContent.length > 0, 'zoom shows the path to the frame');
    expect(count('flame-chart', 'g.anc') >= 1, 'zoom keeps the ancestors, faded');
    click($('flame-reset'));
    expect($('flame-crumbs').textContent === '', 'reset zoom');
  });

  // Issue 31.8 and 31.9: frames are reached and zoomed with the keyboard; the tooltip follows the
  // focus and names the frame's file:line and module.
  check('flame-keyboard', function () {
    var frames = document.querySelectorAll('#flame-chart g.n');
    var labelled = Array.prototype.every.call(frames, function (g) {
      var i = frameData(g);
      return g.getAttribute('role') === 'button' && g.hasAttribute('tabindex') && (g.getAttribute('aria-label') || '').indexOf(ic.cfg.label(i)) === 0;
    });
    expect(labelled, 'every frame is focusable, with a role and its name in aria-label');
    expect(count('flame-chart', 'g[tabindex="0"]') === 1, 'one frame is in the tab order (the arrows move inside)');
    var root = document.querySelector('#flame-chart g[data-i="0"]');
    root.focus();
    // Chromium sends no focus events to a page whose window does not have the focus (headless, at
    // times): the focus handler gets the event the browser would send.
    if (!document.hasFocus()) root.dispatchEvent(new FocusEvent('focusin', { bubbles: true }));
    expect(document.activeElement === root, 'a frame takes the focus');
    expect(tipText().indexOf('all') === 0, 'the tooltip shows on focus');
    key(root, 'ArrowDown');
    var child = document.activeElement, ci = child && child.getAttribute ? child.getAttribute('data-i') : null;
    if (!expect(ci !== null && F.parent[+ci] === 0, 'ArrowDown moves to a callee')) return;
    expect(tipText().indexOf(ic.cfg.label(+ci)) === 0, 'the tooltip follows the focus');
    key(child, 'ArrowUp');
    expect(document.activeElement === document.querySelector('#flame-chart g[data-i="0"]'), 'ArrowUp moves back to the caller');
    key(document.activeElement, 'ArrowDown');
    var a = document.activeElement;
    key(a, 'ArrowRight');
    var b = document.activeElement;
    if (ic.rows[1].length > 1) {
      expect(b !== a && b.getAttribute('data-i') && ic.pos[frameData(b)].depth === 1, 'ArrowRight moves to the frame beside it');
      key(b, 'ArrowLeft');
      expect(document.activeElement.getAttribute('data-i') === a.getAttribute('data-i'), 'ArrowLeft moves back');
    }
    var target = frameData(document.activeElement);
    key(document.activeElement, 'Enter');
    expect(ic.focus === target && $('flame-crumbs').textContent.length > 0, 'Enter zooms into the focused frame');
    expect(document.activeElement && document.activeElement.getAttribute && +document.activeElement.getAttribute('data-i') === target,
      'the zoomed frame keeps the focus');
    key(document.activeElement, ' ');
    key(document.activeElement, 'Escape');
    expect(ic.focus === 0 && $('flame-crumbs').textContent === '', 'Escape zooms out');
    // Where the data has them, the tooltip has file:line and module.
    for (var i = 1; i < F.parent.length; i++) {
      if (!(F.loc && F.loc[i]) || !ic.frame(i)) continue;
      ic.focusFrame(i);
      var loc = F.locs[F.loc[i] - 1], mod = F.name_module[F.name[i]] ? F.modules[F.name_module[F.name[i]] - 1] : '';
      expect(tipText().indexOf(loc) > 0 && tipText().indexOf(mod) > 0, 'the tooltip of ' + ic.cfg.label(i) + ' has ' + loc + ' and ' + mod);
      expect(ic.frame(i).getAttribute('aria-label').indexOf(loc) > 0, 'and so has its aria-label');
      break;
    }
    document.activeElement.blur();
  });

  // Issue 31.10: colours by kind, with a legend of exactly the kinds drawn.
  check('flame-legend', function () {
    var drawn = {}, legend = {};
    document.querySelectorAll('#flame-chart g.n').forEach(function (g) { drawn[g.getAttribute('data-kind')] = true; });
    document.querySelectorAll('#flame-legend .legend-item').forEach(function (it) { if (!it.hidden) legend[it.getAttribute('data-kind')] = true; });
    delete drawn.root;
    Object.keys(drawn).forEach(function (k) { expect(legend[k], 'the legend has the kind ' + k + ' a frame is drawn with'); });
    expect(Object.keys(legend).length >= 1, 'a legend');
  });

  // Issue 31.6, 31.7 and 31.11: the search counts its matches and steps through them; an invalid
  // /regex/ says so beside the box; nothing in the controls' row moves meanwhile.
  check('flame-search', function () {
    var search = $('flame-search'), reset = $('flame-reset'), at0 = pageBox(reset);
    var name = F.names[F.name[Math.min(2, F.parent.length - 1)]];
    type(search, name);
    click($('flame-next'));
    expect(count('flame-chart', 'g.match') >= 1, 'search highlights frames');
    var info = $('flame-match').textContent;
    expect(/^match 1 of \d+ match(es)? \(.*% of /.test(info), 'search says how many frames match and their share: ' + info);
    var focused = document.activeElement;
    expect(focused && focused.classList && focused.classList.contains('match'), 'next moves the focus to a match');
    var n = +/of (\d+) match/.exec(info)[1];
    search.focus();
    key(search, 'Enter');
    expect(document.activeElement.classList.contains('match') && (n === 1 || document.activeElement !== focused), 'Enter in the box moves to the next match');
    search.focus();
    key(search, 'Enter', true);
    expect(document.activeElement === ic.frame(frameData(focused)), 'Shift+Enter moves back');
    key(document.activeElement, 'n');
    expect(n === 1 || $('flame-match').textContent.indexOf('match 2 of') === 0, 'n on a frame goes to the next match');
    click($('flame-prev'));
    expect($('flame-match').textContent.indexOf('match 1 of') === 0, 'previous goes back');
    var at1 = pageBox(reset);
    type(search, '/(/');
    key(search, 'Enter');
    var err = $('flame-search-error');
    expect(!err.hidden && /regular expression/.test(err.textContent), 'an invalid /regex/ shows an error beside the box');
    expect(search.getAttribute('aria-invalid') === 'true', 'and marks the box invalid');
    expect(count('flame-chart', 'g.match') === 0 && $('flame-match').textContent === '', 'an invalid /regex/ highlights nothing');
    var at2 = pageBox(reset);
    expect(at0.x === at1.x && at0.y === at1.y && at1.x === at2.x && at1.y === at2.y,
      'Reset zoom stays put while the match text and the error come and go (' + [at0.x, at0.y, at1.x, at1.y, at2.x, at2.y].join(',') + ')');
    type(search, '');
    key(search, 'Enter');
    expect(err.hidden && count('flame-chart', 'g.match') === 0, 'an empty search clears');
    search.blur();
  });

  // Issue 31.14: the RSS line is drawn from its first measure to its last; the tooltip says
  // "not known" only outside that stretch.
  check('timeline-rss', function () {
    var T = D.timeline, svg = $('timeline-svg'), overlay = $('timeline-overlay');
    if (!svg || !overlay) return false;
    var known = [];
    T.rss.forEach(function (r, i) { if (r > 0) known.push(i); });
    if (known.length < 2) return false;
    var box = overlay.getBoundingClientRect(), tmax = +svg.getAttribute('data-tmax'), bad = [];
    for (var i = known[0]; i <= known[known.length - 1]; i++) {
      var x = box.left + T.t[i] / tmax * box.width;
      overlay.dispatchEvent(new MouseEvent('mousemove', { clientX: x, clientY: box.top + box.height / 2, bubbles: true }));
      var text = tipText();
      if (text.indexOf('at ' + fmtTime(T.t[i])) !== 0) continue;  // another point nearer at this pixel
      if (/not known/.test(text)) bad.push(fmtTime(T.t[i]));
    }
    overlay.dispatchEvent(new MouseEvent('mouseleave'));
    expect(!bad.length, 'no "RSS not known" on the drawn RSS line (at ' + bad.slice(0, 5).join(', ') + ')');
  });
  // Issue 32: the snapshot's RSS bar is the breakdown's parts, adding up to the RSS the page says,
  // heapsnap's own last and labelled apart, and every diagnosis listed.
  check('memory-bar', function () {
    var m = D.snapshots.length && D.snapshots[state.snapshot].memory;
    if (!m) return false;
    var segs = document.querySelectorAll('#memory-bar .mem-seg'), sum = 0;
    segs.forEach(function (g) { sum += +g.getAttribute('data-bytes'); });
    expect(segs.length > 1 && sum === m.rss_bytes && +$('memory-bar').getAttribute('data-rss') === m.rss_bytes,
      'the bar\'s parts add up to the RSS (' + sum + ' of ' + m.rss_bytes + ')');
    expect($('memory-summary').textContent.indexOf(String(m.rss_bytes) + ' bytes') >= 0, 'the summary says the RSS in bytes');
    var own = document.querySelectorAll('#memory-bar .mem-seg.own');
    expect(own.length === 1 && segs[segs.length - 1] === own[0], 'heapsnap\'s own is one segment, the last');
    expect(/subtract/.test(($('memory-legend').querySelector('.own') || {}).textContent || ''), 'and labelled for subtracting');
    expect(count('memory-diagnoses', 'li[data-id]') === m.diagnoses.length, 'every diagnosis listed');
    expect(count('memory-arenas-table', 'tbody tr') >= Math.min(1, m.arenas.length), 'the arenas table has rows');
  });
  // Issue 32: the RSS parts under the heap line, one area per part, heapsnap's own apart; the
  // tooltip's parts add up to the RSS it says.
  check('timeline-rss-parts', function () {
    var P = D.timeline.rss_parts;
    if (!P || !P.t.length) return false;
    expect(count('rss-parts-chart', '#rss-parts-svg path.rss-part') === 4 && count('rss-parts-chart', 'path.rss-part.own') === 1,
      'four part areas, heapsnap\'s own one of them');
    var ok = true;
    for (var i = 0; i < P.t.length; i++) ok = ok && P.heap[i] + P.other_anon[i] + P.file[i] + P.heapsnap[i] === P.rss[i];
    expect(ok, 'every read\'s parts add up to its RSS');
    expect(/subtract/.test(($('rss-parts-legend').querySelector('.own') || {}).textContent || ''), 'heapsnap\'s own labelled for subtracting');
  });
  check('timeline-redraw', function () {
    var fit = $('timeline-fit');
    if (fit) { click(fit); click(fit); }
    expect(count('timeline-chart', 'svg') === 1, 'the heap chart redraws');
  });
  check('tables-sort', function () {
    document.querySelectorAll('table.data th').forEach(function (th) { click(th); });
    expect(count('allocators-table', 'tr') >= 1, 'tables sort');
  });

  // Issue 31.1 and 31.2: sticky table headers sit right under the page header (no gap, not under
  // it, at any width); headings scrolled to keep clear of it.
  check('sticky-header', function () {
    var any = false;
    ['allocators-table', 'retainers-table', 'diff-table'].forEach(function (id) {
      var t = document.querySelector('#' + id + ' table');
      if (!t || t.rows.length < 6 || t.offsetParent === null) return;
      var th = t.querySelector('th'), hb = header().bottom;
      window.scrollTo(0, window.scrollY + t.getBoundingClientRect().top - hb + 3 * th.offsetHeight);
      if (Math.abs(t.getBoundingClientRect().top - (hb - 3 * th.offsetHeight)) > 1) return;  // the page is too short to scroll there
      any = true;
      var r = th.getBoundingClientRect();
      expect(Math.abs(r.top - hb) <= 0.5, id + ': the sticky table header sits right under the page header (' + (r.top - hb).toFixed(1) + ' px)');
      var under = document.elementFromPoint(r.left + 4, hb + 1);
      expect(under && under.closest('thead') && under.closest('table') === t, id + ': no row shows between the page header and the table header');
    });
    window.scrollTo(0, 0);
    return any;
  });
  check('nav-scroll', function () {
    var any = false;
    document.querySelectorAll('#nav a').forEach(function (a) {
      var target = document.querySelector(a.getAttribute('href'));
      if (!target || target.offsetParent === null) return;
      target.scrollIntoView();
      var h = target.querySelector('h2') || target, top = h.getBoundingClientRect().top;
      expect(top >= header().bottom - 0.5, a.textContent + ': its heading is not under the page header (' + (top - header().bottom).toFixed(1) + ' px)');
      any = true;
    });
    window.scrollTo(0, 0);
    return any;
  });

  // Issue 31.3: nothing scrolls the page sideways, details opened or not.
  function overflowing() {
    var w = document.documentElement.clientWidth, out = [];
    document.querySelectorAll('body *').forEach(function (e) {
      if (out.length >= 4 || e.closest('.scroll-x, #tooltip')) return;
      var r = e.getBoundingClientRect();
      if (r.width && r.right > w + 0.5) out.push(e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') + (e.className && e.className.baseVal == null ? '.' + e.className : '') + ' ' + Math.round(r.right));
    });
    return document.documentElement.scrollWidth > w ? ['page ' + document.documentElement.scrollWidth + ' > ' + w].concat(out) : out;
  }
  check('no-overflow', function () {
    var o = overflowing();
    expect(!o.length, 'nothing wider than the window: ' + o.join(', '));
    var details = document.querySelectorAll('details');
    details.forEach(function (d) { d.open = true; });
    document.querySelectorAll('tr.expandable').forEach(function (tr) { click(tr.cells[tr.cells.length - 1]); });
    o = overflowing();
    expect(!o.length, 'nothing wider than the window with every stack open: ' + o.join(', '));
    details.forEach(function (d) { d.open = false; });
    document.querySelectorAll('tr.expandable[aria-expanded="true"]').forEach(function (tr) { click(tr.cells[tr.cells.length - 1]); });
  });

  // Issue 31.4 and 31.5: pickers show their longest option whole; a trigger is said once.
  check('pickers', function () {
    var selects = document.querySelectorAll('#snapshots select');
    if (!D.snapshots.length) return false;
    var canvas = document.createElement('canvas').getContext('2d');
    selects.forEach(function (s) {
      if (s.offsetParent === null) return;
      var cs = getComputedStyle(s), widest = 0;
      canvas.font = cs.fontStyle + ' ' + cs.fontWeight + ' ' + cs.fontSize + ' ' + cs.fontFamily;
      Array.prototype.forEach.call(s.options, function (o) { widest = Math.max(widest, canvas.measureText(o.text).width); });
      var room = s.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight) - 16;  // the arrow
      expect(room >= widest, '#' + s.id + ' shows its longest option whole (' + Math.round(widest) + ' px of text, ' + Math.round(room) + ' px of room)');
    });
    D.snapshots.forEach(function (s) {
      var words = triggerText(s.trigger, s.label).toLowerCase().replace(/[-_]/g, ' ');
      var t = s.trigger.toLowerCase().replace(/[-_]/g, ' ');
      expect(words.split(t).length <= 2, 'snapshot ' + s.index + ' says its trigger once: ' + triggerText(s.trigger, s.label));
    });
  });

  check('snapshots', function () {
    if (!D.snapshots.length) return false;
    var pick = $('snapshot-pick');
    for (var k = 0; k < D.snapshots.length; k++) {
      change(pick, String(k));
      expect(count('dom-chart', 'g.n') >= 1, 'dominator tree drew for snapshot ' + D.snapshots[k].index);
    }
    var node = document.querySelector('#dom-chart g.n[data-i]:not([data-i="0"])');
    if (node) {
      click(node);
      expect($('dom-crumbs').textContent.length > 0, 'the dominator tree zooms');
      node = document.querySelector('#dom-chart g.n[data-i="0"]');
      node.focus();
      key(node, 'Enter');
      expect($('dom-crumbs').textContent === '' && document.activeElement.getAttribute('data-i') === '0', 'and zooms out from the keyboard');
      document.activeElement.blur();
    }
    expect(count('dom-legend', '.legend-item') >= 1, 'the dominator tree has a legend');
  });

  // Issue 31.12: a diff row (and a retaining-site row) expands to its site's stack, by click or key.
  check('diff-expand', function () {
    if (D.snapshots.length < 2) return false;
    change($('diff-before'), String(D.snapshots.length - 1));
    change($('diff-after'), '0');
    expect(/S\d+ → S\d+/.test($('diff-summary').textContent), 'diff recomputed');
    var tr = document.querySelector('#diff-table tr.expandable');
    if (!expect(tr, 'diff rows can expand')) return;
    click(tr.cells[0]);
    var detail = tr.nextSibling;
    expect(tr.getAttribute('aria-expanded') === 'true' && detail && detail.classList.contains('detail') &&
      detail.querySelectorAll('ol.stack li').length >= 1, 'a click on a diff row shows its stack');
    click(tr.cells[0]);
    expect(!(tr.nextSibling && tr.nextSibling.classList.contains('detail')), 'a second click folds it');
    tr.focus();
    key(tr, 'Enter');
    expect(tr.nextSibling && tr.nextSibling.classList.contains('detail'), 'Enter on a focused diff row expands it');
    key(tr, ' ');
    expect(tr.getAttribute('aria-expanded') === 'false', 'Space folds it');
    var rs = document.querySelector('#retaining-sites-table tr.expandable');
    if (rs) { click(rs.cells[0]); expect(rs.nextSibling.querySelectorAll('ol.stack li').length >= 1, 'a retaining-site row shows its stack'); click(rs.cells[0]); }
  });

  // Issue 29: a path's hops name their type and the field that points on, and a stack root the
  // function whose frame holds the word, readable (shown whole, inside the window) when opened.
  function pathLine(cls, want) {
    var hit = null;
    document.querySelectorAll('#retainers-table li.' + cls).forEach(function (li) {
      if (!hit && li.textContent.indexOf(want) >= 0) hit = li;
    });
    if (!expect(hit, 'a path line says ' + want)) return;
    var box = hit.closest('details');
    box.open = true;
    var r = hit.getBoundingClientRect();
    expect(r.height > 0 && r.left >= 0 && r.right <= document.documentElement.clientWidth + 0.5, 'the path line "' + want + '" shows inside the window');
    box.open = false;
  }
  // The first snapshot with a path that has `what` (shown, its table drawn), and that thing.
  function showPathWith(what) {
    for (var k = 0; k < D.snapshots.length; k++) {
      var rows = D.snapshots[k].retainers || [];
      for (var i = 0; i < rows.length; i++) {
        var found = rows[i].path && what(rows[i].path);
        if (found) {
          if ($('snapshot-pick').value !== String(k)) change($('snapshot-pick'), String(k));
          return found;
        }
      }
    }
    return null;
  }
  check('path-fields', function () {
    var hop = showPathWith(function (p) { return p.hops.filter(function (h) { return h.next_in_field; })[0]; });
    if (!hop) return false;
    pathLine('path-hop', (hop.type ? hop.type + ' ' : '') + siteLabel(hop.site) + ' (' + fmtBytes(hop.size) + '), field +' +
      hop.next_at_offset + ' (' + hop.next_in_field + ') →');
  });
  check('path-frame', function () {
    var f = showPathWith(function (p) { return p.root_frame; });
    if (!f) return false;
    pathLine('path-root', 'in the frame of ' + f.label);
  });
  // No number on the page that could not be computed: a row without a field its column shows
  // (a root's row has no shallow size) once printed "NaN B".
  check('no-nan', function () {
    var bad = [];
    document.querySelectorAll('td.num').forEach(function (td) {
      if (/NaN|undefined|Infinity/.test(td.textContent)) bad.push(td.textContent);
    });
    if (/\bNaN\b/.test(document.body.innerText)) bad.push('NaN in the text');
    expect(bad.length === 0, 'numbers that could not be computed: ' + bad.slice(0, 5).join(', '));
  });

  done(problems, ran);
}
