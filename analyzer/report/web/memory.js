// RSS explained at a snapshot (issue 32): the breakdown the analyzer read (memory_section.cc, which
// takes the parts from memory/memory_breakdown: nothing is re-derived here) as one stacked bar in
// MemoryKind order, heapsnap's own drawn last, hatched and labelled apart so that a user can
// subtract it; the arenas; and the diagnoses with their numbers.
var MEMORY_COLOURS = {
  heap_live: '#2f6fb0', heap_overhead: '#6c9bd2', heap_free: '#d9534f', heap_cached: '#f0a35e', heap_top: '#e8c547',
  heap_unwalked: '#b0b0b0', mmapped_chunks: '#5aa469', thread_stacks: '#8e6bbf', program_anonymous: '#3fa7a3',
  code: '#7f7f7f', module_data: '#a3a3a3', mapped_files: '#c2b59b', shared: '#b77fb5', heapsnap: '#444444', other: '#d0d0d0'
};
function renderMemory(s) {
  var m = s.memory, host = $('memory-body');
  $('memory-none').hidden = !!m;
  host.hidden = !m;
  if (!m) { $('memory-none').textContent = 'This snapshot has no RSS breakdown (a capture from before format 3.3, or the snapshot child failed first).'; return; }
  var rss = m.rss_bytes || 1, own = 0, sum = 0;
  var parts = m.parts.filter(function (p) { return p.rss_bytes > 0; });
  // The program's parts first, in their fixed order; heapsnap's own last, apart.
  parts.sort(function (a, b) { return (a.own ? 1 : 0) - (b.own ? 1 : 0); });
  var bar = $('memory-bar'), legend = $('memory-legend');
  bar.textContent = '';
  legend.textContent = '';
  parts.forEach(function (p) {
    sum += p.rss_bytes;
    if (p.own) own += p.rss_bytes;
    var line = p.name + ': ' + fmtBytes(p.rss_bytes) + ' (' + fmtPct(p.rss_bytes / rss) + ')' + (p.estimated ? ', estimated' : '');
    var seg = el('div', { cls: 'mem-seg' + (p.own ? ' own' : ''), 'data-kind': p.kind, 'data-bytes': String(p.rss_bytes) });
    seg.style.width = (100 * p.rss_bytes / rss) + '%';
    seg.style.background = MEMORY_COLOURS[p.kind] || '#999';
    seg.addEventListener('mousemove', function (ev) { showTip(ev, [line, p.about]); });
    seg.addEventListener('mouseleave', hideTip);
    bar.appendChild(seg);
    var sw = el('span', { cls: 'swatch' + (p.own ? ' own' : '') });
    sw.style.background = MEMORY_COLOURS[p.kind] || '#999';
    legend.appendChild(el('span', { cls: 'legend-item' + (p.own ? ' own' : ''), 'data-kind': p.kind }, [sw, el('span', { text: (p.own ? 'heapsnap\u2019s own (subtract it): ' : '') + line })]));
  });
  bar.setAttribute('data-sum', String(sum));
  bar.setAttribute('data-rss', String(m.rss_bytes));
  $('memory-summary').textContent = 'RSS ' + fmtBytes(m.rss_bytes) + ' (' + m.rss_bytes + ' bytes; the kernel\u2019s VmRSS ' + fmtBytes(m.vm_rss_bytes) +
    '), the parts below add up to it. heapsnap\u2019s own memory is ' + fmtBytes(own) + ': without heapsnap the program would have about ' +
    fmtBytes(m.rss_bytes - own) + '.' + (m.error ? ' Partial: ' + m.error : '');
  var ul = $('memory-diagnoses');
  ul.textContent = '';
  m.diagnoses.forEach(function (d) { ul.appendChild(el('li', { 'data-id': d.id, text: d.text })); });
  if (!m.diagnoses.length) ul.appendChild(el('li', { cls: 'none', text: 'Nothing to diagnose: no fragmentation, memory kept or stacks out of the ordinary.' }));
  table($('memory-arenas-table'), [
    num('size', 'size_bytes', fmtBytes),
    num('live', 'live_rss', fmtBytes),
    num('overhead', 'overhead_rss', fmtBytes),
    num('free', 'free_rss', fmtBytes),
    num('cached', 'cached_rss', fmtBytes),
    num('top', 'top_rss', fmtBytes),
    num('free chunks', 'free_chunks', fmtCount),
    num('malloc_trim', 'trimmable_bytes', fmtBytes),
    { label: 'arena', key: function (r) { return r.main ? 'main' : 'thread'; }, fmt: function (r) { return (r.main ? 'main' : 'thread') + ', ' + plural(r.heaps, 'heap') + (r.complete ? '' : ', walk incomplete'); } }
  ], m.arenas, { empty: 'No glibc arena found.' });
  $('memory-arenas-more').textContent = m.arenas_total > m.arenas.length ? (m.arenas_total - m.arenas.length) + ' smaller arenas not shown (heapsnap memory --json lists them).' : '';
}
