// The top allocation sites and the leaks not freed at exit: two tables, each row's stack a click away.

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
