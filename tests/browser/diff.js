// Loads a `hostside html OLD NEW` comparison page in headless Chromium (puppeteer-core over
// the DevTools protocol) and prints what it shows as one JSON object: each table's rows with
// the exact values the cells carry (data-value), the differential flame graph's frames with
// their change, and the order after clicking the "Δ total" column.
// Usage: node diff.js NPM_DIR PAGE.html
'use strict';
const [npmDir, pagePath] = process.argv.slice(2);
const path = require('path');
const puppeteer = require(path.join(npmDir, 'node_modules/puppeteer-core'));

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

(async () => {
  const out = {errors: [], requests: []};
  const browser = await puppeteer.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    headless: true,
    args: ['--no-sandbox'],
  });
  try {
    const page = await browser.newPage();
    await page.setViewport({width: 1400, height: 1000});
    page.on('pageerror', e => out.errors.push(String(e)));
    page.on('request', r => { if (!r.url().startsWith('file:')) out.requests.push(r.url()); });
    await page.goto('file://' + path.resolve(pagePath), {waitUntil: 'load', timeout: 30000});
    await page.waitForFunction(() => document.body.dataset.rendered, {timeout: 30000});
    out.title = await page.title();
    out.sides = await page.$$eval('.meta[id^=side-]', es => es.map(e => e.textContent));
    out.functions = await readTable(page, '#cpu-diff');
    out.flame = await page.$$eval('#diff-flame .flame div', es => es.map(e => [e.dataset.name, Number(e.dataset.delta)]));
    out.heap_delta = await page.$$eval('#heap-delta span', es => es.map(e => [e.dataset.key, Number(e.dataset.value)]));
    out.heap_sites = await readTable(page, '#heap-diff');
    if (out.functions.length) {
      await page.click('#cpu-diff th[data-key=delta_total]');
      await page.waitForFunction(() => document.querySelector('#cpu-diff th[data-key=delta_total]').textContent.includes('▾'));
      out.by_delta_total = (await readTable(page, '#cpu-diff')).map(r => r.name);
    }
  } catch (e) {
    out.errors.push(String(e));
  } finally {
    await browser.close();
  }
  console.log(JSON.stringify(out));
})();
