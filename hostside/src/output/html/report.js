// crossprof's HTML report: every view is computed here from the data block hostside wrote
// into the page (see hostside/src/output/html/data.rs), so a time or thread selection
// re-filters all views without any server. common.js (inlined before this script) reads the
// data and runs the page; window.crossprof exposes the state for tests.
'use strict';
(function () {
  const {data: D, el: $, pct, bytes, secs, short} = crossprofPage;
  const S = {from: null, to: null, thread: null, func: null, sortKey: 'self', zoom: [], search: '',
    heapCost: 4, heapZoom: [], offZoom: []};
  let render = () => {};

  // Weight per stack under the current time and thread selection, from rows of (time slice,
  // stack, weight) in parallel arrays: the CPU samples or the off-CPU waits.
  function selectedWeights(T, slice, stack, weight) {
    const w = new Float64Array(T.stacks.length);
    const from = S.from === null ? -1 : S.from, to = S.to === null ? Infinity : S.to;
    for (let i = 0; i < slice.length; i++) {
      const sl = slice[i];
      if (sl < from || sl > to) continue;
      const st = stack[i];
      if (S.thread !== null && T.stack_thread[st] !== S.thread) continue;
      w[st] += weight[i];
    }
    return w;
  }
  const stackWeights = () => selectedWeights(D.cpu, D.sample_slice, D.sample_stack, D.sample_count);

  // Self and total per function; callers/callees (with the call's line) of the selected one.
  function functionRows(T, w) {
    const n = T.func_name.length, self = new Float64Array(n), total = new Float64Array(n);
    let sum = 0;
    const seen = new Int32Array(n).fill(-1);
    T.stacks.forEach((st, i) => {
      if (!w[i] || !st.length) return;
      sum += w[i];
      self[T.frame_func[st[st.length - 1]]] += w[i];
      for (const fr of st) {
        const f = T.frame_func[fr];
        if (seen[f] !== i) { seen[f] = i; total[f] += w[i]; }
      }
    });
    const rows = [];
    for (let f = 0; f < n; f++) if (total[f] > 0) rows.push({f, self: self[f], total: total[f]});
    return {rows, sum};
  }

  function neighbours(T, w, func) {
    const callers = new Map(), callees = new Map(), lines = new Map();
    T.stacks.forEach((st, i) => {
      if (!w[i]) return;
      st.forEach((fr, d) => {
        if (T.frame_func[fr] !== func) return;
        const key = T.frame_line[fr];
        lines.set(key, (lines.get(key) || 0) + w[i]);
        if (d > 0) {
          const c = st[d - 1], k = T.frame_func[c] + ':' + T.frame_line[c];
          callers.set(k, (callers.get(k) || 0) + w[i]);
        }
        if (d + 1 < st.length) {
          const c = st[d + 1], k = T.frame_func[c] + ':' + T.frame_line[c];
          callees.set(k, (callees.get(k) || 0) + w[i]);
        }
      });
    });
    return {callers, callees, lines};
  }

  function location(T, f, line) {
    const file = T.func_file[f];
    return file ? file.split('/').pop() + (line ? ':' + line : '') : T.func_module[f].split('/').pop();
  }

  function sortable(columns, rows, initial, onRow, selected) {
    let key = initial, table = $('table', {});
    const draw = () => {
      rows.sort((a, b) => (typeof a[key] === 'string' ? a[key].localeCompare(b[key]) : (b[key] ?? -1) - (a[key] ?? -1)));
      table.replaceChildren($('tr', {}, ...columns.map(c => $('th', {class: c.cls || '', 'data-key': c.key,
        onclick: () => { key = c.key; draw(); }}, c.title + (c.key === key ? ' ▾' : '')))));
      for (const r of rows) {
        const tr = $('tr', {class: selected && selected(r) ? 'sel' : '', onclick: () => onRow && onRow(r)},
          ...columns.map(c => $('td', Object.assign({class: c.cls || ''}, typeof r[c.key] === 'number' ? {'data-value': r[c.key]} : {}),
            c.show ? c.show(r) : r[c.key])));
        table.append(tr);
      }
    };
    draw();
    return $('div', {class: 'scroll'}, table);
  }

  // A tree of call paths: top-down (outermost first) or bottom-up (innermost first).
  function tree(T, w, bottomUp, sum) {
    const root = {kids: new Map(), self: 0, total: 0};
    T.stacks.forEach((st, i) => {
      if (!w[i] || !st.length) return;
      const path = bottomUp ? st.slice().reverse() : st;
      let node = root;
      path.forEach((fr, d) => {
        const f = T.frame_func[fr];
        if (!node.kids.has(f)) node.kids.set(f, {f, kids: new Map(), self: 0, total: 0});
        node = node.kids.get(f);
        node.total += w[i];
        // Self time belongs to the leaf: the last node top-down, the root bottom-up.
        if (d === (bottomUp ? 0 : path.length - 1)) node.self += w[i];
      });
    });
    const ul = kids => {
      const list = $('ul', {});
      const sorted = [...kids.values()].sort((a, b) => b[S.sortKey] - a[S.sortKey]);
      for (const k of sorted) {
        const li = $('li', {});
        const label = $('span', {onclick: () => {
          if (li.childElementCount > 1) li.lastChild.remove(); else if (k.kids.size) li.append(ul(k.kids));
        }}, $('span', {class: 'n'}, pct(k.total, sum)), $('span', {class: 'n'}, pct(k.self, sum)),
        (k.kids.size ? '▸ ' : '  ') + T.func_name[k.f]);
        li.append(label);
        // The heaviest path opens by itself.
        if (k === sorted[0] && k.total * 2 > sum && k.kids.size) li.append(ul(k.kids));
        list.append(li);
      }
      return list;
    };
    return $('div', {class: 'tree'}, $('div', {}, $('span', {class: 'n'}, 'total'), $('span', {class: 'n'}, 'self')),
      ul(root.kids));
  }

  // A flame graph of div boxes: click zooms into a frame, the search box marks matches.
  function flame(T, w, zoomPath, setZoom) {
    const root = {kids: new Map(), total: 0, name: 'all'};
    T.stacks.forEach((st, i) => {
      if (!w[i]) return;
      const names = st.map(fr => T.func_name[T.frame_func[fr]]);
      for (let d = 0; d < zoomPath.length; d++) if (names[d] !== zoomPath[d]) return;
      let node = root;
      root.total += w[i];
      for (const nm of names.slice(zoomPath.length)) {
        if (!node.kids.has(nm)) node.kids.set(nm, {name: nm, kids: new Map(), total: 0});
        node = node.kids.get(nm);
        node.total += w[i];
      }
    });
    const box = $('div', {class: 'flame'});
    let depth = 0, matched = 0;
    const term = S.search.toLowerCase();
    const lay = (node, x, d, path) => {
      depth = Math.max(depth, d);
      let cx = x;
      for (const k of [...node.kids.values()].sort((a, b) => a.name.localeCompare(b.name))) {
        const width = k.total / root.total;
        if (width > 0.001) {
          const hit = term && k.name.toLowerCase().includes(term);
          if (hit) matched += k.total;
          const p = path.concat(k.name);
          box.append($('div', {class: hit ? 'hit' : '', title: `${k.name} (${pct(k.total, root.total)})`,
            'data-name': k.name, style: `left:${100 * cx}%;width:${100 * width}%;bottom:${d * 18}px`,
            onclick: () => setZoom(zoomPath.concat(p))}, k.name));
          lay(k, cx, d + 1, p);
        }
        cx += width;
      }
    };
    lay(root, 0, 0, []);
    box.style.height = (depth + 1) * 18 + 'px';
    const search = $('input', {placeholder: 'search', value: S.search});
    search.addEventListener('change', () => { S.search = search.value; render(); });
    return $('div', {}, $('div', {}, search, ' ', term ? `matched ${pct(matched, root.total)} ` : '',
      $('button', {onclick: () => setZoom([])}, 'reset zoom'), zoomPath.length ? ' zoomed: ' + zoomPath.join(' → ') : ''), box);
  }

  function timeline() {
    const slices = Math.max(1, Math.ceil(D.duration_ns / D.slice_ns));
    const wrap = $('div', {id: 'timeline'});
    const brush = $('div', {id: 'brush'});
    const from = S.from === null ? 0 : S.from, to = S.to === null ? slices - 1 : S.to;
    const rows = D.threads.map((t, ti) => {
      const cv = $('canvas', {width: 1000, height: 20, 'data-thread': ti});
      const g = cv.getContext('2d'), x = i => i * 1000 / slices, dx = Math.max(1, 1000 / slices);
      const row = $('div', {class: 'trow', 'data-tid': t.tid});
      let note = '';
      if (t.activity.length) {
        // From context switches: running (green) from the bottom, waiting (red) above it,
        // each as its share of the slice; the row says both totals in the selection.
        let run = 0, wait = 0;
        for (const [i, r, w] of t.activity) {
          const hr = 20 * r / D.slice_ns, hw = 20 * w / D.slice_ns;
          g.fillStyle = '#2a9d8f'; g.fillRect(x(i), 20 - hr, dx, hr);
          g.fillStyle = '#e76f51'; g.fillRect(x(i), 20 - hr - hw, dx, hw);
          if (i >= from && i <= to) { run += r; wait += w; }
        }
        row.dataset.runningNs = String(run);
        row.dataset.waitingNs = String(wait);
        note = ` ${pct(run, run + wait)} ran`;
      } else {
        const counts = new Float64Array(slices);
        for (let i = 0; i < D.sample_slice.length; i++) {
          if (D.cpu.stack_thread[D.sample_stack[i]] === ti && D.sample_slice[i] < slices) counts[D.sample_slice[i]] += D.sample_count[i];
        }
        const max = Math.max(1, ...counts);
        g.fillStyle = '#2a9d8f';
        counts.forEach((c, i) => { if (c) { const h = 20 * c / max; g.fillRect(x(i), 20 - h, dx, h); } });
      }
      const label = $('div', {class: 'tlabel', title: 'click: only this thread',
        onclick: () => { S.thread = S.thread === ti ? null : ti; render(); }},
      (S.thread === ti ? '● ' : '') + `${t.name} (${t.tid})${note}`);
      row.append(label, cv);
      // Its worst wakeups (rec --off-cpu): a tick on the row, the mark says how late and
      // what ran instead.
      for (const m of t.worst || []) {
        g.fillStyle = '#222'; g.fillRect(x(m.slice), 0, Math.max(2, dx), 20);
        row.append($('span', {class: 'wmark', title: m.label, 'data-latency-ns': m.latency_ns,
          style: `left:calc(250px + (100% - 250px) * ${(m.slice + 0.5) / slices})`}, '▼'));
      }
      return row;
    });
    wrap.append(...rows, brush);
    let start = null;
    const sliceAt = ev => {
      const cv = wrap.querySelector('canvas'), r = cv.getBoundingClientRect();
      return Math.min(slices - 1, Math.max(0, Math.floor((ev.clientX - r.left) / r.width * slices)));
    };
    wrap.addEventListener('mousedown', ev => { if (ev.target.tagName === 'CANVAS') start = sliceAt(ev); });
    window.onmouseup = ev => {
      if (start === null) return;
      const end = sliceAt(ev);
      [S.from, S.to] = [Math.min(start, end), Math.max(start, end)];
      start = null;
      render();
    };
    if (S.from !== null) {
      requestAnimationFrame(() => {
        const cv = wrap.querySelector('canvas');
        if (!cv) return;
        const off = cv.offsetLeft, width = cv.offsetWidth;
        brush.style.display = 'block';
        brush.style.left = off + width * S.from / slices + 'px';
        brush.style.width = Math.max(2, width * (S.to - S.from + 1) / slices) + 'px';
      });
    }
    const sel = S.from === null ? 'all of the recording' : `${secs(S.from * D.slice_ns)} – ${secs((S.to + 1) * D.slice_ns)}`;
    // The selection's board times (ns, end exclusive), for tests and scripts.
    return $('div', {}, $('div', {id: 'selection', 'data-from-ns': S.from === null ? '' : D.start_ns + S.from * D.slice_ns,
      'data-to-ns': S.from === null ? '' : D.start_ns + (S.to + 1) * D.slice_ns}, 'Selection: ' + sel + ' ',
    $('button', {onclick: () => { S.from = S.to = null; S.thread = null; render(); }}, 'reset')), wrap);
  }

  function cpuViews(app) {
    const T = D.cpu, w = stackWeights(), {rows, sum} = functionRows(T, w);
    app.append($('h2', {}, `Functions (${sum} samples selected)`));
    const table = rows.map(r => ({f: r.f, name: T.func_name[r.f], self: r.self, total: r.total,
      loc: location(T, r.f, T.func_line[r.f])}));
    app.append($('div', {id: 'functions'}, sortable([
      {key: 'self', title: 'Self', show: r => r.self},
      {key: 'selfp', title: 'Self %', show: r => pct(r.self, sum)},
      {key: 'total', title: 'Total', show: r => r.total},
      {key: 'totalp', title: 'Total %', show: r => pct(r.total, sum)},
      {key: 'name', title: 'Function', cls: 'name'},
      {key: 'loc', title: 'Location', cls: 'name'},
    ], table.map(r => Object.assign(r, {selfp: r.self, totalp: r.total})), 'self',
    r => { S.func = r.f; render(); }, r => r.f === S.func)));
    if (S.func !== null && S.func < T.func_name.length) {
      const nb = neighbours(T, w, S.func);
      const list = (m, title) => sortable([
        {key: 'n', title: 'Samples'}, {key: 'p', title: '%', show: r => pct(r.n, sum)},
        {key: 'name', title, cls: 'name'}, {key: 'loc', title: 'at', cls: 'name'}],
      [...m].map(([k, n]) => { const [f, line] = k.split(':').map(Number);
        return {n, p: n, name: T.func_name[f], loc: location(T, f, line), f}; }), 'n', r => { S.func = r.f; render(); });
      app.append($('h2', {}, `${T.func_name[S.func]}: callers and callees`), $('div', {class: 'cols', id: 'callers'},
        $('div', {}, $('b', {}, 'Called from'), list(nb.callers, 'Caller')),
        $('div', {}, $('b', {}, 'Calls'), list(nb.callees, 'Callee')),
        $('div', {}, $('b', {}, 'Own lines'), sortable([{key: 'n', title: 'Samples'}, {key: 'loc', title: 'Line', cls: 'name'}],
          [...nb.lines].map(([line, n]) => ({n, loc: location(T, S.func, line)})), 'n'))));
    }
    const sortSel = $('select', {}, ...['total', 'self'].map(k => { const o = $('option', {value: k}, 'sort by ' + k); if (k === S.sortKey) o.selected = true; return o; }));
    sortSel.addEventListener('change', () => { S.sortKey = sortSel.value; render(); });
    app.append($('h2', {}, 'Call trees'), sortSel, $('div', {class: 'cols'},
      $('div', {id: 'top-down'}, $('b', {}, 'Top-down'), tree(T, w, false, sum)),
      $('div', {id: 'bottom-up'}, $('b', {}, 'Bottom-up'), tree(T, w, true, sum))));
    app.append($('h2', {}, 'Flame graph (click a frame to zoom)'),
      $('div', {id: 'flame'}, flame(T, w, S.zoom, z => { S.zoom = z; render(); })));
  }

  // Heap costs per stack and in total (allocations, temporary, bytes allocated, bytes at the
  // peak, leaked bytes). Under a timeline selection (time range, thread), from the allocation
  // cells: the allocations made in it (by the thread), those of them freed in it that
  // heaptrack counts temporary, their bytes, and the bytes still live at its end; the bytes
  // at the peak of a selection, and the temporary allocations of one thread, are not known
  // here (null: hostside html --from/--to/--tid computes them).
  function heapCosts(H) {
    if (S.from === null && S.thread === null) return {costs: H.costs, totals: H.totals};
    const from = S.from === null ? 0 : S.from, to = S.to === null ? Infinity : S.to;
    const costs = H.costs.map(() => [0, 0, 0, null, 0]), totals = [0, 0, 0, null, 0];
    for (let i = 0; i < H.cell_stack.length; i++) {
      const a = H.cell_alloc[i];
      if (a < from || a > to || (S.thread !== null && H.cell_thread[i] !== S.thread)) continue;
      const st = H.cell_stack[i], f = H.cell_free[i], freed = f !== null && f <= to;
      // Which allocations are temporary depends on the other threads' too: not known for one.
      const add = [H.cell_count[i], freed && S.thread === null ? H.cell_temporary[i] : 0, H.cell_bytes[i], 0,
        freed || H.suppressed[st] ? 0 : H.cell_bytes[i]];
      for (const k of [0, 1, 2, 4]) { costs[st][k] += add[k]; totals[k] += add[k]; }
    }
    if (S.thread !== null) { costs.forEach(c => { c[1] = null; }); totals[1] = null; }
    return {costs, totals};
  }

  function heapViews(app) {
    const H = D.heap, T = H.tables, {costs, totals} = heapCosts(H);
    const names = ['allocations', 'temporary', 'bytes allocated', 'bytes at peak', 'leaked bytes'];
    const show = (v, k) => (v === null ? '—' : k >= 2 ? bytes(v) : v);
    app.append($('h2', {}, S.from === null && S.thread === null ? 'Heap'
      : 'Heap: allocations made in the selection, leaked = still live at its end'),
      $('div', {class: 'meta', id: 'heap-totals'},
        ...names.map((n, i) => $('span', {'data-value': totals[i] === null ? '' : totals[i]}, `${n}: ${show(totals[i], i)}`))));
    // Heap over time: the highest live bytes of each heap slice, on the timeline's time axis
    // (a --from/--to window's series covers the window only), the selection shaded.
    const W = 1000, Hh = 120, span = Math.max(1, D.duration_ns, H.live_start_ns + H.live_max.length * H.live_slice_ns);
    const max = Math.max(1, ...H.live_max), x = ns => (W * ns / span).toFixed(2), y = v => (Hh - Hh * v / max).toFixed(2);
    const pts = [`${x(H.live_start_ns)},${Hh}`];
    H.live_max.forEach((v, i) => {
      const a = H.live_start_ns + i * H.live_slice_ns;
      pts.push(`${x(a)},${y(v)}`, `${x(a + H.live_slice_ns)},${y(v)}`);
    });
    const svg = document.createElementNS('http://www.w3.org/2000/svg', 'svg');
    svg.setAttribute('viewBox', `0 0 ${W} ${Hh}`); svg.setAttribute('width', '100%'); svg.setAttribute('height', Hh);
    svg.setAttribute('preserveAspectRatio', 'none');
    svg.id = 'heap-chart';
    // What the chart shows, for tests and scripts: its span (ns after the recording's start),
    // its highest point and the live bytes at its end.
    const ends = H.live.filter(v => v !== null);
    Object.assign(svg.dataset, {startNs: H.live_start_ns, endNs: H.live_start_ns + H.live_max.length * H.live_slice_ns,
      maxBytes: Math.max(0, ...H.live_max), lastBytes: ends.length ? ends[ends.length - 1] : 0, points: H.live_max.length});
    const shade = S.from === null ? '' : `<rect x="${x(S.from * D.slice_ns)}" y="0" width="${x((S.to - S.from + 1) * D.slice_ns)}" height="${Hh}" fill="rgba(60,120,220,.2)"/>`;
    svg.innerHTML = `${shade}<polyline fill="none" stroke="#e76f51" stroke-width="2" vector-effect="non-scaling-stroke" points="${pts.join(' ')}"/>`;
    app.append($('div', {}, `Live heap over time (peak ${bytes(H.peak_bytes)}, ${secs(H.live_slice_ns)} per step)`), svg);
    // Sites: the innermost frame of each stack.
    const sites = new Map();
    T.stacks.forEach((st, i) => {
      if (!st.length) return;
      const fr = st[st.length - 1], key = T.frame_func[fr] + ':' + T.frame_line[fr];
      const s = sites.get(key) || {f: T.frame_func[fr], line: T.frame_line[fr], c: [0, 0, 0, 0, 0]};
      costs[i].forEach((v, k) => { s.c[k] = v === null || s.c[k] === null ? null : s.c[k] + v; });
      sites.set(key, s);
    });
    app.append($('div', {id: 'heap-sites'}, sortable([
      ...names.map((n, k) => ({key: 'c' + k, title: n, show: r => show(r['c' + k], k)})),
      {key: 'name', title: 'Site', cls: 'name'}, {key: 'loc', title: 'Location', cls: 'name'}],
    [...sites.values()].filter(s => (S.from === null && S.thread === null) || s.c[0] > 0).map(s => Object.assign({name: T.func_name[s.f], loc: location(T, s.f, s.line)},
      ...s.c.map((v, k) => ({['c' + k]: v})))), 'c0')));
    const costSel = $('select', {}, ...names.map((n, k) => { const o = $('option', {value: k}, n); if (k === S.heapCost) o.selected = true; return o; }));
    costSel.addEventListener('change', () => { S.heapCost = Number(costSel.value); S.heapZoom = []; render(); });
    const w = costs.map(c => c[S.heapCost] || 0);
    app.append($('h2', {}, 'Heap flame graph'), costSel,
      $('div', {id: 'heap-flame'}, flame(T, w, S.heapZoom, z => { S.heapZoom = z; render(); })));
  }

  // Memory beyond malloc: the program's own anonymous mappings by stack (the report's
  // heap.mmap.sites), and RSS by kind of mapping at rec's smaps ticks (heap.rss_split), stacked
  // on the timeline's time axis: heap, stacks, anonymous, file-backed from the bottom up.
  function beyondViews(app) {
    const H = D.heap;
    if (H.mmap.length) {
      app.append($('h2', {}, 'Memory beyond malloc: the program\'s own anonymous mappings'));
      app.append($('div', {id: 'heap-mmap'}, sortable([
        {key: 'mappings', title: 'Mappings', show: r => r.mappings},
        {key: 'bytes', title: 'Mapped', show: r => bytes(r.bytes)},
        {key: 'peak_bytes', title: 'Peak', show: r => bytes(r.peak_bytes)},
        {key: 'leaked_bytes', title: 'Still mapped at the end', show: r => bytes(r.leaked_bytes)},
        {key: 'life', title: 'Lifetime (mean)', show: r => (r.unmapped ? secs(r.life) : 'never unmapped')},
        {key: 'name', title: 'Function', cls: 'name'}, {key: 'loc', title: 'Location', cls: 'name'}],
      H.mmap.map(m => ({mappings: m.mappings, bytes: m.bytes, peak_bytes: m.peak_bytes, leaked_bytes: m.leaked_bytes,
        unmapped: m.unmapped, life: m.lifetime_mean_ns, name: m.function,
        loc: m.file ? `${short(m.file)}:${m.line}` : short(m.module)})), 'bytes')));
    }
    if (!H.rss_split.length) return;
    // One point per tick, the processes' values summed.
    const ticks = new Map();
    for (const p of H.rss_split) {
      const t = ticks.get(p.time_ns) || [0, 0, 0, 0];
      [p.heap_bytes, p.stack_bytes, p.anonymous_bytes, p.file_bytes].forEach((v, k) => { t[k] += v; });
      ticks.set(p.time_ns, t);
    }
    const pts = [...ticks.entries()].sort((a, b) => a[0] - b[0]);
    const W = 1000, Hh = 120, span = Math.max(1, D.duration_ns, pts[pts.length - 1][0]);
    const max = Math.max(1, ...pts.map(([, v]) => v[0] + v[1] + v[2] + v[3]));
    const x = ns => (W * ns / span).toFixed(2), y = v => (Hh - Hh * v / max).toFixed(2);
    const kinds = [['heap', '#e76f51'], ['stacks', '#2a9d8f'], ['anonymous', '#264653'], ['file-backed', '#e9c46a']];
    let lines = '';
    kinds.forEach(([, color], k) => {
      const sum = v => v.slice(0, k + 1).reduce((a, b) => a + b, 0);
      lines += `<polyline fill="none" stroke="${color}" stroke-width="2" vector-effect="non-scaling-stroke" points="${pts.map(([t, v]) => `${x(t)},${y(sum(v))}`).join(' ')}"/>`;
    });
    const svg = document.createElementNS('http://www.w3.org/2000/svg', 'svg');
    svg.setAttribute('viewBox', `0 0 ${W} ${Hh}`); svg.setAttribute('width', '100%'); svg.setAttribute('height', Hh);
    svg.setAttribute('preserveAspectRatio', 'none');
    svg.id = 'rss-split-chart';
    // For tests and scripts: the ticks drawn and the highest of each kind.
    Object.assign(svg.dataset, {points: pts.length, maxRssBytes: max,
      maxAnonymousBytes: Math.max(...pts.map(([, v]) => v[2])), maxHeapBytes: Math.max(...pts.map(([, v]) => v[0]))});
    svg.innerHTML = lines;
    app.append($('div', {id: 'rss-split-legend'}, `RSS by kind of mapping (highest ${bytes(max)}; from the bottom: `,
      ...kinds.map(([name, color]) => $('span', {style: `color:${color}`}, ` ${name} `)), ')'), svg);
  }

  // Where threads waited (rec --off-cpu): nanoseconds per function and a flame graph, of the
  // waits inside the timeline's selection (cut at its edges) and of the selected thread.
  function offCpuViews(app) {
    const O = D.off_cpu, T = O.tables, w = selectedWeights(T, O.wait_slice, O.wait_stack, O.wait_ns);
    const {rows, sum} = functionRows(T, w);
    const ms = ns => (ns / 1e6).toFixed(2) + ' ms';
    app.append($('h2', {}, `Off-CPU: ${ms(sum)} waited (${O.stacks} stacks)`));
    app.append($('div', {id: 'offcpu-functions'}, sortable([
      {key: 'self', title: 'Self ns', show: r => r.self},
      {key: 'selfp', title: 'Self %', show: r => pct(r.self, sum)},
      {key: 'total', title: 'Total ns', show: r => r.total},
      {key: 'totalp', title: 'Total %', show: r => pct(r.total, sum)},
      {key: 'name', title: 'Function', cls: 'name'},
      {key: 'loc', title: 'Location', cls: 'name'},
    ], rows.map(r => ({name: T.func_name[r.f], self: r.self, total: r.total, selfp: r.self, totalp: r.total,
      loc: location(T, r.f, T.func_line[r.f])})), 'total')));
    app.append($('div', {id: 'offcpu-flame'}, flame(T, w, S.offZoom, z => { S.offZoom = z; render(); })));
  }

  function draw(app) {
    app.append($('h1', {}, D.title), $('div', {class: 'meta', id: 'summary'},
      $('span', {}, `${D.arch}`), $('span', {}, `event ${D.event || 'cpu-clock'}`),
      $('span', {}, `${secs(D.duration_ns)}`), $('span', {}, `${D.samples} samples`),
      $('span', {}, `${D.threads.length} threads`),
      ...(D.filter ? [$('span', {id: 'filter'}, `only ${D.filter} (hostside html --from/--to/--pid/--tid)`)] : [])));
    const warns = $('div', {id: 'warnings'}, ...D.warnings.map(x => $('div', {class: 'warn', 'data-kind': x.kind}, `${x.kind} (${x.count}): ${x.message}`)));
    app.append(warns);
    if (D.samples > 0 || D.off_cpu) {
      const switches = D.threads.some(t => t.activity.length);
      app.append($('h2', {}, 'Timeline (drag to select a time range; click a thread to keep only it)' +
        (switches ? ': green running, red waiting (off-CPU), from context switches' : ': CPU samples') +
        (D.threads.some(t => (t.worst || []).length) ? '; ▼ worst wakeups (hover: how late, what ran instead)' : '')), timeline());
    }
    if (D.samples > 0) cpuViews(app);
    if (D.heap) { heapViews(app); beyondViews(app); }
    if (D.off_cpu) offCpuViews(app);
  }
  render = crossprofPage.run(S, draw);
})();
