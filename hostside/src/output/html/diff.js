// crossprof's comparison page (hostside html OLD NEW): the data block holds both recordings'
// stacks and the rows `hostside diff --json` prints (see hostside/src/output/html/diff.rs);
// this script draws the function table, the differential flame graph and the heap sites.
// Every number cell carries its exact value in data-value. common.js (inlined before this
// script) reads the data and runs the page; window.crossprof exposes the state.
'use strict';
(function () {
  const {data: D, el: $, bytes, short} = crossprofPage;
  const S = {cpuSort: 'abs', heapSort: 'abs', shape: 'new', zoom: []};
  let render = () => {};
  const signed = (v, show) => (v > 0 ? '+' : '') + show(v);

  // Red where the new recording spends more, blue where less; stronger for bigger changes.
  function colour(delta, max) {
    // Shares are sums of fractions: a change below 1e-9 is rounding, not a change.
    if (Math.abs(delta) < 1e-9) delta = 0;
    const a = max > 0 ? Math.min(1, Math.abs(delta) / max) : 0;
    if (delta > 0) return `rgba(214,40,40,${(0.15 + 0.75 * a).toFixed(3)})`;
    if (delta < 0) return `rgba(40,90,214,${(0.15 + 0.75 * a).toFixed(3)})`;
    return '#e8e8e8';
  }

  // A table whose columns sort on click; numeric cells keep their value in data-value and
  // delta cells are coloured by sign.
  function table(id, columns, rows, key, setKey) {
    // 'abs': the order hostside diff gives (largest change first), as the rows came.
    const sorted = rows.slice().sort((a, b) => key === 'abs' ? a.order - b.order
      : typeof a[key] === 'string' ? a[key].localeCompare(b[key]) : b[key] - a[key]);
    const max = {};
    for (const c of columns) if (c.delta) max[c.key] = Math.max(0, ...rows.map(r => Math.abs(r[c.key])));
    const t = $('table', {id}, $('tr', {}, ...columns.map(c => $('th', {class: c.cls || '', 'data-key': c.key,
      onclick: () => { setKey(c.key === key && c.delta ? 'abs' : c.key); render(); }},
    c.title + (c.key === key ? ' ▾' : '') + (key === 'abs' && c.key === columns.find(x => x.delta).key ? ' (|Δ|)' : '')))));
    for (const r of sorted) {
      t.append($('tr', {}, ...columns.map(c => {
        const v = r[c.key];
        const attrs = {class: c.cls || '', 'data-key': c.key};
        if (typeof v === 'number') attrs['data-value'] = String(v);
        if (c.delta) attrs.style = `background:${colour(v, max[c.key])}`;
        return $('td', attrs, c.show ? c.show(v) : v);
      })));
    }
    return $('div', {class: 'scroll'}, t);
  }

  function cpuTable() {
    const pct = v => v.toFixed(2) + '%';
    const ms = v => v === null ? '-' : (v / 1e6).toFixed(1);
    const rows = D.functions.map((f, order) => ({order, name: f.function, module: short(f.module),
      old_samples: f.old_self_samples, new_samples: f.new_self_samples, old_ns: f.old_self_ns, new_ns: f.new_self_ns,
      old_self: f.old_self_pct, new_self: f.new_self_pct, delta_self: f.new_self_pct - f.old_self_pct,
      old_total: f.old_total_pct, new_total: f.new_total_pct, delta_total: f.new_total_pct - f.old_total_pct,
      p_value: f.p_value, significant: f.significant ? '*' : ''}));
    return table('cpu-diff', [
      {key: 'name', title: 'Function', cls: 'name'}, {key: 'module', title: 'Module', cls: 'name'},
      {key: 'old_samples', title: 'Old self samples'}, {key: 'new_samples', title: 'New self samples'},
      {key: 'old_ns', title: 'Old self ms', show: ms}, {key: 'new_ns', title: 'New self ms', show: ms},
      {key: 'significant', title: 'Beyond noise'},
      {key: 'p_value', title: 'p', show: v => v >= 0.001 ? v.toFixed(3) : v.toExponential(0)},
      {key: 'old_self', title: 'Old self', show: pct}, {key: 'new_self', title: 'New self', show: pct},
      {key: 'delta_self', title: 'Δ self', delta: true, show: v => signed(v, x => x.toFixed(2)) + ' pp'},
      {key: 'old_total', title: 'Old total', show: pct}, {key: 'new_total', title: 'New total', show: pct},
      {key: 'delta_total', title: 'Δ total', delta: true, show: v => signed(v, x => x.toFixed(2)) + ' pp'},
    ], rows, S.cpuSort, k => { S.cpuSort = k; });
  }

  // Both profiles merged into one tree of call paths (outermost first), each node with its
  // share of each side's samples.
  function mergedTree() {
    const root = {name: 'all', kids: new Map(), old: 0, new: 0};
    for (const side of ['old', 'new']) {
      const P = D[side], T = P.tables, n = Math.max(1, P.samples);
      T.stacks.forEach((st, i) => {
        const w = P.weights[i] / n;
        if (!w) return;
        root[side] += w;
        let node = root;
        for (const fr of st) {
          const name = T.func_name[T.frame_func[fr]];
          if (!node.kids.has(name)) node.kids.set(name, {name, kids: new Map(), old: 0, new: 0});
          node = node.kids.get(name);
          node[side] += w;
        }
      });
    }
    return root;
  }

  function diffFlame() {
    let root = mergedTree();
    for (const name of S.zoom) root = root.kids.get(name) || {name, kids: new Map(), old: 0, new: 0};
    const box = $('div', {class: 'flame'});
    const all = root[S.shape];
    let maxDelta = 0;
    const walk = n => { for (const k of n.kids.values()) { maxDelta = Math.max(maxDelta, Math.abs(k.new - k.old)); walk(k); } };
    walk(root);
    let depth = 0;
    const lay = (node, x, d, path) => {
      depth = Math.max(depth, d);
      let cx = x;
      for (const k of [...node.kids.values()].sort((a, b) => a.name.localeCompare(b.name))) {
        const width = all > 0 ? k[S.shape] / all : 0;
        if (width > 0.001) {
          const delta = 100 * (k.new - k.old), p = path.concat(k.name);
          box.append($('div', {title: `${k.name}: old ${(100 * k.old).toFixed(2)}%, new ${(100 * k.new).toFixed(2)}%, ` +
            `${signed(delta, v => v.toFixed(2))} pp`, 'data-name': k.name, 'data-delta': String(delta),
          style: `left:${100 * cx}%;width:${100 * width}%;bottom:${d * 18}px;background:${colour(k.new - k.old, maxDelta)}`,
          onclick: () => { S.zoom = S.zoom.concat(p); render(); }}, k.name));
          lay(k, cx, d + 1, p);
        }
        cx += width;
      }
    };
    lay(root, 0, 0, []);
    box.style.height = (depth + 1) * 18 + 'px';
    const shape = $('select', {id: 'shape'}, ...['new', 'old'].map(k => {
      const o = $('option', {value: k}, `widths from the ${k} recording`); if (k === S.shape) o.selected = true; return o; }));
    shape.addEventListener('change', () => { S.shape = shape.value; render(); });
    return $('div', {}, $('div', {}, shape, ' ', $('button', {onclick: () => { S.zoom = []; render(); }}, 'reset zoom'),
      S.zoom.length ? ' zoomed: ' + S.zoom.join(' → ') : '', ' red: more of the samples in the new recording, blue: fewer'), box);
  }

  function heapViews(app) {
    const H = D.heap, costs = [['allocations', String], ['temporary', String], ['peak_bytes', bytes], ['leaked_bytes', bytes]];
    app.append($('h2', {}, 'Heap'), $('div', {class: 'meta', id: 'heap-delta'}, ...costs.map(([k, show]) =>
      $('span', {'data-key': k, 'data-value': String(H.delta[k])}, `${k.replace('_', ' ')}: ${show(H.old[k])} → ${show(H.new[k])} (${signed(H.delta[k], show)})`))));
    const rows = H.sites.map((s, i) => {
      const r = {name: s.function, loc: s.file ? short(s.file) + (s.line ? ':' + s.line : '') : short(s.module), order: i};
      for (const [k] of costs) { r['old_' + k] = s.old[k]; r['new_' + k] = s.new[k]; r['delta_' + k] = s.delta[k]; }
      return r;
    });
    const cols = [{key: 'name', title: 'Site', cls: 'name'}, {key: 'loc', title: 'Location', cls: 'name'}];
    for (const [k, show] of costs) {
      const t = k.replace('_', ' ');
      cols.push({key: 'old_' + k, title: 'old ' + t, show}, {key: 'new_' + k, title: 'new ' + t, show},
        {key: 'delta_' + k, title: 'Δ ' + t, delta: true, show: v => signed(v, show)});
    }
    app.append($('div', {id: 'heap-sites'}, table('heap-diff', cols, rows, S.heapSort, k => { S.heapSort = k; })));
  }

  function side(label, P) {
    return $('div', {class: 'meta', id: 'side-' + label}, $('b', {}, label + ': '), $('span', {}, P.file),
      $('span', {}, P.command), $('span', {'data-value': String(P.samples)}, `${P.samples} samples`),
      $('span', {}, `${(P.duration_ns / 1e9).toFixed(3)} s`), ...(P.filter ? [$('span', {}, 'only ' + P.filter)] : []),
      ...P.warnings.map(w => $('div', {class: 'warn', 'data-kind': w.kind}, `${label}: ${w.kind} (${w.count}): ${w.message}`)));
  }

  function draw(app) {
    app.append($('h1', {}, D.title), side('old', D.old), side('new', D.new));
    if (D.old.samples > 0 || D.new.samples > 0) {
      app.append($('h2', {}, 'Functions: share of each recording\'s samples, biggest change first'),
        $('div', {id: 'functions'}, cpuTable()),
        $('p', {class: 'meta', id: 'diff-legend'}, `Beyond noise (*): ${D.functions.filter(f => f.significant).length} ` +
          `of ${D.functions.length} rows; ${D.statistic}.`));
      app.append($('h2', {}, 'Differential flame graph (click a frame to zoom)'), $('div', {id: 'diff-flame'}, diffFlame()));
    }
    if (D.heap) heapViews(app);
  }
  render = crossprofPage.run(S, draw);
})();
