// What the browser checks share: headless Chromium started through puppeteer-core (the
// DevTools protocol), and a page of hostside's opened from its file with every page error and
// every request that leaves the file noted, once it says it rendered (body.dataset.rendered).
'use strict';
const path = require('path');

// Starts Chromium (CHROMIUM, or Debian's /usr/bin/chromium) with the npm directory's
// puppeteer-core.
exports.launch = npmDir => require(path.join(npmDir, 'node_modules/puppeteer-core')).launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  headless: true,
  args: ['--no-sandbox'],
});

// Opens `pagePath`, runs `steps(page, out)` once it rendered, and prints `out` as one JSON
// object: {errors, requests, ...what the steps added}. A failure is an error in `out`.
exports.check = async (npmDir, pagePath, steps) => {
  const out = {errors: [], requests: []};
  const browser = await exports.launch(npmDir);
  try {
    const page = await browser.newPage();
    await page.setViewport({width: 1400, height: 1000});
    page.on('pageerror', e => out.errors.push(String(e)));
    // A self-contained page asks for nothing but itself.
    page.on('request', r => { if (!r.url().startsWith('file:')) out.requests.push(r.url()); });
    await page.goto('file://' + path.resolve(pagePath), {waitUntil: 'load', timeout: 30000});
    await page.waitForFunction(() => document.body.dataset.rendered, {timeout: 30000});
    await steps(page, out);
  } catch (e) {
    out.errors.push(String(e));
  } finally {
    await browser.close();
  }
  console.log(JSON.stringify(out));
};
