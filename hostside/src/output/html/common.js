// What both of crossprof's pages (hostside html FILE and hostside html OLD NEW) start with:
// the data block hostside wrote into the page, an element builder, number formats, and run(),
// which draws the page into #app, exposes its state as window.crossprof for tests and scripts,
// and marks the body rendered (body.dataset.rendered: the time the first render finished).
// hostside inlines this file before each page's own script (see mod.rs).
'use strict';
const crossprofPage = (() => {
  const data = JSON.parse(document.getElementById('crossprof-data').textContent);
  // el('div', {id: 'x', onclick: f}, 'text', child): attributes, listeners and children.
  const el = (tag, attrs, ...kids) => {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k.startsWith('on')) e.addEventListener(k.slice(2), v); else e.setAttribute(k, v);
    }
    for (const k of kids) e.append(k instanceof Node ? k : String(k));
    return e;
  };
  const bytes = n => Math.abs(n) >= 1e9 ? (n / 1e9).toFixed(2) + ' GB' : Math.abs(n) >= 1e6 ? (n / 1e6).toFixed(2) + ' MB'
    : Math.abs(n) >= 1e3 ? (n / 1e3).toFixed(2) + ' kB' : n + ' B';
  const pct = (a, b) => (b > 0 ? (100 * a / b).toFixed(1) : '0.0') + '%';
  const secs = ns => (ns / 1e9).toFixed(3) + ' s';
  const short = p => (p || '').split('/').pop();
  // Draws the page with draw(app) now and on every render() call; returns render.
  function run(state, draw) {
    const render = () => {
      const app = document.getElementById('app');
      app.replaceChildren();
      draw(app);
      document.body.dataset.rendered = String(Date.now());
    };
    window.crossprof = {state, data, render};
    render();
    return render;
  }
  return {data, el, bytes, pct, secs, short, run};
})();
