// Loads a `hostside html` report in headless Chromium (see browser.js), reads the rendered DOM
// and drives the interactions the issue names: select a function (its callers and callees
// appear), then drag a time range on the timeline (every view is re-filtered). Prints one JSON
// object with what the page showed at each step.
// Usage: node report.js NPM_DIR REPORT.html [SCREENSHOT.png]
// CROSSPROF_DRAG=FROM,TO: drag between these fractions of the timeline's width (0.2,0.6).
// CROSSPROF_THREAD=TID: first click that thread's label on the timeline (only that thread).
'use strict';
const [npmDir, reportPath, screenshot] = process.argv.slice(2);
const {check} = require('./browser.js');

const readTable = (page, sel) => page.evaluate(s => {
  const t = document.querySelector(s + ' table');
  if (!t) return [];
  const heads = [...t.querySelectorAll('th')].map(th => th.dataset.key);
  return [...t.querySelectorAll('tr')].slice(1).map(tr => {
    const o = {};
    [...tr.children].forEach((td, i) => {
      o[heads[i]] = td.textContent;
      // The exact number behind a formatted cell ("2.00 MB").
      if (td.dataset.value) o[heads[i] + '_n'] = Number(td.dataset.value);
    });
    return o;
  });
}, sel);

// Each timeline row with context switches: thread id, ns running and waiting in the selection.
const readActivity = page => page.$$eval('#timeline .trow', es => es.filter(e => e.dataset.runningNs !== undefined)
  .map(e => ({tid: Number(e.dataset.tid), running: Number(e.dataset.runningNs), waiting: Number(e.dataset.waitingNs)})));

check(npmDir, reportPath, async (page, out) => {
  out.first_render_ms = await page.evaluate(() =>
    Number(document.body.dataset.rendered) - performance.timeOrigin);
  out.title = await page.title();
  out.start_ns = await page.evaluate(() => window.crossprof.data.start_ns);
  out.summary = await page.$eval('#summary', e => e.textContent);
  out.warnings = await page.$$eval('#warnings .warn', es => es.map(e => e.dataset.kind));
  out.functions = await readTable(page, '#functions');
  out.heap_totals = await page.$eval('#heap-totals', e => e.textContent).catch(() => null);
  out.heap_sites = await readTable(page, '#heap-sites');
  out.heap_mmap = await readTable(page, '#heap-mmap');
  out.rss_split_chart = await page.$eval('#rss-split-chart', e => Object.fromEntries(Object.entries(e.dataset)
    .map(([k, v]) => [k, Number(v)]))).catch(() => null);
  out.heap_chart = await page.$eval('#heap-chart', e => Object.fromEntries(Object.entries(e.dataset)
    .map(([k, v]) => [k, Number(v)]))).catch(() => null);
  out.offcpu_functions = await readTable(page, '#offcpu-functions');
  out.activity = await readActivity(page);
  // The worst-wakeup marks of each timeline row.
  out.wakeup_marks = await page.$$eval('#timeline .wmark', es => es.map(e => ({
    tid: Number(e.closest('.trow').dataset.tid), latency_ns: Number(e.dataset.latencyNs), label: e.title})));
  out.flame_names = await page.$$eval('#flame .flame div', es => [...new Set(es.map(e => e.dataset.name))]);
  out.top_down = await page.$eval('#top-down', e => e.innerText).catch(() => '');
  out.threads = await page.evaluate(() => window.crossprof.data.threads.map(t => ({pid: t.pid, tid: t.tid, name: t.name})));
  const heapTotals = () => page.$$eval('#heap-totals span', es => es.map(e => e.dataset.value === '' ? null : Number(e.dataset.value)))
    .catch(() => null);
  if (process.env.CROSSPROF_THREAD) {
    await page.click(`#timeline .trow[data-tid="${process.env.CROSSPROF_THREAD}"] .tlabel`);
    await page.waitForFunction(() => window.crossprof.state.thread !== null);
    out.heap_totals_thread = await heapTotals();
    out.heap_sites_thread = await readTable(page, '#heap-sites');
    return;
  }

  if (out.functions.length) {
    // Select the hottest function by clicking its row.
    await page.click('#functions tr:nth-child(2)');
    await page.waitForSelector('#callers');
    out.selected = out.functions[0].name;
    out.callers = await page.evaluate(() => {
      const t = document.querySelector('#callers table');
      return [...t.querySelectorAll('tr')].slice(1).map(tr => [...tr.children].map(td => td.textContent));
    });
  }
  if (await page.$('#timeline canvas')) {
    // Drag on the first thread's timeline, from 20% to 60% of its width unless told.
    const [a, b] = (process.env.CROSSPROF_DRAG || '0.2,0.6').split(',').map(Number);
    const box = await (await page.$('#timeline canvas')).boundingBox();
    const y = box.y + box.height / 2;
    await page.mouse.move(box.x + box.width * a, y);
    await page.mouse.down();
    await page.mouse.move(box.x + box.width * b, y, {steps: 5});
    await page.mouse.up();
    await page.waitForFunction(() => document.querySelector('#selection').dataset.fromNs !== '');
    out.range_ns = await page.$eval('#selection', e => [Number(e.dataset.fromNs), Number(e.dataset.toNs)]);
    out.functions_in_range = await readTable(page, '#functions');
    out.offcpu_functions_in_range = await readTable(page, '#offcpu-functions');
    out.activity_in_range = await readActivity(page);
    out.heap_totals_in_range = await heapTotals();
    out.heap_sites_in_range = await readTable(page, '#heap-sites');
  }
  if (screenshot) await page.screenshot({path: screenshot, fullPage: false});
});
