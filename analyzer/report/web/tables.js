// Sortable tables, and the stack cells and expandable rows they hold.

// A stack {frames[], more} as an ordered list.
function stackList(stack) {
  var st = el('ol', { cls: 'stack' });
  stack.frames.forEach(function (f) { st.appendChild(el('li', { text: f })); });
  if (stack.more) st.appendChild(el('li', { cls: 'more', text: '… ' + stack.more + ' more frames' }));
  return st;
}
// A site, with its stack a click (or Enter) away (<details> does both natively).
function stackCell(site, stack) {
  var td = el('td', { cls: 'site' });
  if (!stack || !stack.frames.length) { td.textContent = site; return td; }
  td.appendChild(el('details', null, [el('summary', { text: site }), stackList(stack)]));
  return td;
}

// cols: [{label, key (sort value), fmt(row), num, signed, value(row), cls, cell(row) -> td}]
// opts: sort (column), limit, empty (text when no rows), expand(row) -> the node a row expands to:
// then a row is focusable and a click, Enter or Space on it opens a row under it with that node.
function table(host, cols, rows, opts) {
  opts = opts || {};
  var sortCol = opts.sort == null ? 0 : opts.sort, limit = opts.limit || rows.length;
  function toggle(tr, r) {
    var open = tr.getAttribute('aria-expanded') === 'true';
    tr.setAttribute('aria-expanded', open ? 'false' : 'true');
    if (open) { if (tr.nextSibling && tr.nextSibling.classList.contains('detail')) tr.parentNode.removeChild(tr.nextSibling); return; }
    var td = el('td', { colspan: String(cols.length) }, [opts.expand(r)]);
    tr.parentNode.insertBefore(el('tr', { cls: 'detail' }, [td]), tr.nextSibling);
  }
  function draw() {
    host.textContent = '';
    if (!rows.length) { host.appendChild(el('p', { cls: 'note', text: opts.empty || 'Nothing to show.' })); return; }
    var c = cols[sortCol];
    var sorted = rows.slice();
    if (c.key) sorted.sort(function (a, b) { var x = c.key(a), y = c.key(b); return typeof x === 'string' ? x.localeCompare(y) : y - x; });
    var t = el('table', { cls: 'data' }), hr = el('tr');
    cols.forEach(function (col, k) {
      var th = el('th', { cls: (col.num ? 'num' : '') + (k === sortCol ? ' sorted' : ''), text: col.label, scope: 'col' });
      if (col.key) {
        th.tabIndex = 0;
        th.setAttribute('aria-sort', k === sortCol ? (col.num ? 'descending' : 'ascending') : 'none');
        th.addEventListener('click', function () { sortCol = k; draw(); });
        th.addEventListener('keydown', function (ev) { if (isActivation(ev)) { ev.preventDefault(); sortCol = k; draw(); } });
      }
      hr.appendChild(th);
    });
    t.appendChild(el('thead', null, [hr]));
    var tb = el('tbody');
    sorted.slice(0, limit).forEach(function (r) {
      var tr = el('tr');
      cols.forEach(function (col) {
        if (col.cell) tr.appendChild(col.cell(r));
        else {
          var td = el('td', { cls: (col.num ? 'num' : '') + (col.cls ? ' ' + col.cls : ''), text: col.fmt(r) });
          if (col.signed) { var v = col.value(r); if (v > 0) td.className += ' pos'; else if (v < 0) td.className += ' neg'; }
          tr.appendChild(td);
        }
      });
      if (opts.expand) {
        tr.className = 'expandable';
        tr.tabIndex = 0;
        tr.setAttribute('aria-expanded', 'false');
        tr.addEventListener('click', function (ev) { if (!ev.target.closest('a, button, summary, input, select')) toggle(tr, r); });
        tr.addEventListener('keydown', function (ev) { if (ev.target === tr && isActivation(ev)) { ev.preventDefault(); toggle(tr, r); } });
      }
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
