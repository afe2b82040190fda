// main: parses the data, draws each part (one failing part is recorded, the others still draw),
// redraws the charts when the window's width changes, and runs the self-test when asked.

var timings = {};
function step(name, fn) {
  var t0 = performance.now();
  try { fn(); } catch (e) { recordError(name + ': ' + (e && e.stack ? e.stack.split('\n').slice(0, 3).join(' | ') : e)); }
  timings[name] = Math.round(performance.now() - t0);
}
function main() {
  var t0 = performance.now();
  var measureHeader = trackHeaderHeight();
  try {
    D = JSON.parse($('heapsnap-data').textContent);
    timings.parse = Math.round(performance.now() - t0);
  } catch (e) {
    recordError('the report data does not parse: ' + e);
    document.body.dataset.ready = '1';
    document.body.dataset.errors = String(errors.length);
    return;
  }
  step('overview', renderOverview);
  step('snapshots', renderSnapshots);  // before the timeline, which marks the chosen snapshot
  step('findings', renderFindings);
  step('timeline', renderTimeline);
  step('flame graph', renderFlame);
  step('top allocators', renderAllocators);
  step('leaks', renderLeaks);
  state.redraw.unshift(renderTimeline);
  var resizeTimer = 0, lastWidth = window.innerWidth;
  window.addEventListener('resize', function () {
    if (window.innerWidth === lastWidth) return;
    lastWidth = window.innerWidth;
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(function () { state.redraw.forEach(function (f) { step('redraw', f); }); }, 150);
  });
  measureHeader();  // now that the title is in it (the observer would tell only after this script)
  document.body.dataset.renderMs = String(Math.round(performance.now()));
  document.body.dataset.timings = JSON.stringify(timings);
  document.body.dataset.errors = String(errors.length);
  document.body.dataset.ready = '1';
  if (location.hash === '#selftest') {
    selftest(function (problems, ran) {
      document.body.dataset.errors = String(errors.length);
      document.body.dataset.selftestRan = ran.join(' ');
      document.body.dataset.selftest = problems.length ? 'fail: ' + problems.join('; ') : 'ok';
    });
  }
}
main();
