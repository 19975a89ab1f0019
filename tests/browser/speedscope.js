// Checks a speedscope file with speedscope itself: validates it against the JSON schema the
// npm package ships (dist/release/file-format-schema.json), then opens it in headless Chromium
// from the package's own static build (served over HTTP: the app fetches the file, and
// Chromium's fetch() cannot read file: URLs) and reads the sandwich view, the DOM table of
// every function with its total and self weight. Chromium starts as browser.js starts it.
// Usage: node speedscope.js NPM_DIR PROFILE.json   Prints one JSON object.
'use strict';
const [npmDir, profilePath] = process.argv.slice(2);
const fs = require('fs'), http = require('http'), path = require('path');
const Ajv = require(path.join(npmDir, 'node_modules/ajv'));
const {launch} = require('./browser.js');
const release = path.join(npmDir, 'node_modules/speedscope/dist/release');

const schema = JSON.parse(fs.readFileSync(path.join(release, 'file-format-schema.json'), 'utf8'));
const data = JSON.parse(fs.readFileSync(profilePath, 'utf8'));
const ajv = new Ajv({strict: false, allErrors: true});
const valid = ajv.validate(schema, data);
const result = {valid, schemaErrors: ajv.errors || [], pageErrors: [], title: '', rows: []};

const server = http.createServer((req, res) => {
  const p = decodeURIComponent(req.url.split('?')[0]);
  const file = p === '/profile.json' ? profilePath
    : path.join(release, path.normalize(p === '/' ? 'index.html' : p));
  fs.readFile(file, (err, body) => {
    if (err) { res.writeHead(404); res.end(); } else { res.end(body); }
  });
});

server.listen(0, '127.0.0.1', async () => {
  const base = `http://127.0.0.1:${server.address().port}`;
  const browser = await launch(npmDir);
  try {
    const page = await browser.newPage();
    page.on('pageerror', e => result.pageErrors.push(String(e)));
    await page.goto(`${base}/index.html#profileURL=${base}/profile.json`, {timeout: 30000});
    // speedscope names the tab after the profile once it has imported it.
    await page.waitForFunction(() => document.title.endsWith(' - speedscope'), {timeout: 30000});
    result.title = await page.title();
    await page.evaluate(() => {
      for (const d of document.querySelectorAll('div')) {
        if (d.textContent === '🥪Sandwich') d.click();
      }
    });
    // The table renders after its header: wait for rows below it.
    await page.waitForFunction(() => {
      const t = document.body.innerText;
      const i = t.indexOf('Symbol Name');
      return i >= 0 && t.slice(i).split('\n').filter(l => l.trim()).length > 3;
    }, {timeout: 10000});
    const text = await page.evaluate(() => document.body.innerText);
    const lines = text.split('\n').map(l => l.trim()).filter(l => l.length > 0);
    const start = lines.findIndex(l => l.replace(/\s+/g, ' ') === 'Total Self Symbol Name');
    for (let i = start + 1; start >= 0 && i + 2 < lines.length; i += 3) {
      result.rows.push({total: lines[i], self: lines[i + 1], name: lines[i + 2]});
    }
  } catch (e) {
    result.pageErrors.push(String(e));
  } finally {
    await browser.close();
    server.close();
  }
  console.log(JSON.stringify(result));
});
