// Loads a `hostside html OLD NEW` comparison page in headless Chromium (see browser.js) and
// prints what it shows as one JSON object: each table's rows with the exact values the cells
// carry (data-value), the differential flame graph's frames with their change, and the order
// after clicking the "Δ total" column.
// Usage: node diff.js NPM_DIR PAGE.html
'use strict';
const [npmDir, pagePath] = process.argv.slice(2);
const {check} = require('./browser.js');

const readTable = (page, sel) => page.evaluate(s => {
  const t = document.querySelector(s);
  if (!t) return [];
  return [...t.querySelectorAll('tr')].slice(1).map(tr => {
    const o = {};
    for (const td of tr.children) {
      o[td.dataset.key] = td.dataset.value !== undefined ? Number(td.dataset.value) : td.textContent;
      if (td.style.background) o[td.dataset.key + '_colour'] = td.style.background;
    }
    return o;
  });
}, sel);

check(npmDir, pagePath, async (page, out) => {
  out.title = await page.title();
  out.sides = await page.$$eval('.meta[id^=side-]', es => es.map(e => e.textContent));
  out.functions = await readTable(page, '#cpu-diff');
  out.legend = await page.$$eval('#diff-legend', es => es.map(e => e.textContent).join(''));
  out.flame = await page.$$eval('#diff-flame .flame div', es => es.map(e => [e.dataset.name, Number(e.dataset.delta)]));
  out.heap_delta = await page.$$eval('#heap-delta span', es => es.map(e => [e.dataset.key, Number(e.dataset.value)]));
  out.heap_sites = await readTable(page, '#heap-diff');
  if (out.functions.length) {
    await page.click('#cpu-diff th[data-key=delta_total]');
    await page.waitForFunction(() => document.querySelector('#cpu-diff th[data-key=delta_total]').textContent.includes('▾'));
    out.by_delta_total = (await readTable(page, '#cpu-diff')).map(r => r.name);
  }
});
