// The operator dial: live levels, a chart, events and the operators'
// controls over the controller's API at /v1/ (see doc.go). Plain script,
// no build step; uPlot is the only library. Text from the API is always
// set with textContent, never parsed as HTML.
'use strict';
(() => {
  // A service's page of a daemon of several is at …/services/{name}/ and
  // its API under it; the one service's, or the list of several, at /.
  const BASE = (location.pathname.match(/^(.*\/services\/[a-z0-9][a-z0-9._-]{0,62})\//) || [])[1] || '';
  const ROOT = `${BASE.replace(/\/services\/[^/]+$/, '')}/`;
  const API = `${BASE}/v1/`;
  const KEEP = 15 * 60; // seconds of chart data kept
  const MAX_POINTS = 9100; // 15 minutes at the shortest tick (100 ms)
  const MAX_EVENTS = 100;
  const POLL_MS = 2000;
  const TOKEN_KEY = 'brownout-operator-token';
  const THEME_KEY = 'brownout-dial-theme';

  const $ = (id) => document.getElementById(id);
  const el = (tag, cls, text) => {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text != null) e.textContent = text;
    return e;
  };
  const num = (v) => (typeof v === 'number' && isFinite(v) ? v : null);
  const clamp01 = (f) => Math.min(1, Math.max(0, f || 0));
  const pct = (v) => (v == null ? '–' : `${Math.round(v * 1000) / 10}%`);
  const fmtDur = (s) => {
    if (s == null) return '–';
    if (s < 0.01) return `${Math.round(s * 1e4) / 10} ms`;
    if (s < 1) return `${Math.round(s * 1000)} ms`;
    return `${s.toFixed(2)} s`;
  };
  const fmtRate = (v) => (v == null ? '–' : `${v < 10 ? v.toFixed(1) : Math.round(v)}/s`);
  const fmtP = (v) => (v == null ? '–' : v.toFixed(2));
  const hhmmss = (d) => d.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit', second: '2-digit', hour12: false });
  const clock = (sec, withSeconds) => {
    const d = new Date(sec * 1000);
    const p2 = (n) => String(n).padStart(2, '0');
    return `${p2(d.getHours())}:${p2(d.getMinutes())}${withSeconds ? `:${p2(d.getSeconds())}` : ''}`;
  };
  const store = (kind) => {
    try { return window[kind]; } catch (_) { return null; } // storage may be off
  };

  // S is the page's whole state.
  const S = {
    state: null, boot: 0, gen: -1, evAfter: 0, evCount: 0,
    es: null, streamOpen: false, lost: false, everLive: false, restarted: false, reconnecting: false, backoff: 1000,
    retryTimer: 0, pollTimer: 0, evTimer: 0, evBusy: false, evAgain: false,
    stopped: false, streamToken: '', wantToken: false,
    features: [], dials: new Map(), law: null,
    d: null, charts: [], drawQueued: false, window: 900, targets: { lat: null, soj: null },
    updates: 0, connKind: 'connecting', writing: false,
    overview: false, services: null, svcNames: '', svcViews: new Map(),
  };

  function newData() {
    return { t: [], p99: [], soj: [], pressure: [], shed: [], shedRate: [], goodput: [], throughput: [], levels: new Map() };
  }
  S.d = newData();

  // ---- connection status ----------------------------------------------

  function conn(text, kind) {
    const c = $('conn');
    if (c.textContent !== text) c.textContent = text;
    c.dataset.kind = kind;
    S.connKind = kind;
  }

  // ---- the chart's data -------------------------------------------------

  function addPoint(p) {
    const t = Date.parse(p.t) / 1000;
    const d = S.d;
    if (!isFinite(t) || (d.t.length && t <= d.t[d.t.length - 1])) return; // known already
    const n = d.t.length;
    d.t.push(t);
    d.p99.push(num(p.latency_p99 ?? (p.readings || {})['latency.p99']));
    d.soj.push(num(p.sojourn_p99 ?? (p.readings || {})['sojourn.p99']));
    d.pressure.push(num(p.pressure));
    d.shed.push(num(p.shed));
    d.shedRate.push(num(p.shed_rate));
    d.goodput.push(num(p.goodput));
    d.throughput.push(num(p.throughput));
    const lv = p.levels || {};
    for (const name of S.features) {
      let a = d.levels.get(name);
      if (!a) d.levels.set(name, (a = new Array(n).fill(null)));
      a.push(num(lv[name]));
    }
    trim();
    queueDraw();
  }

  // trim drops points older than KEEP, in batches (splice is O(n)).
  function trim() {
    const d = S.d;
    const last = d.t[d.t.length - 1];
    let i = 0;
    while (i < d.t.length && d.t[i] < last - KEEP) i++;
    if (d.t.length - i > MAX_POINTS) i = d.t.length - MAX_POINTS;
    if (i < 64 && d.t.length <= MAX_POINTS) return;
    for (const k of ['t', 'p99', 'soj', 'pressure', 'shed', 'shedRate', 'goodput', 'throughput']) d[k].splice(0, i);
    for (const a of d.levels.values()) a.splice(0, i);
  }

  // last is the chart's newest point, as drawn (for the test and the
  // text line under the chart).
  function last() {
    const d = S.d;
    const i = d.t.length - 1;
    if (i < 0) return null;
    const levels = {};
    for (const [name, a] of d.levels) levels[name] = a[i];
    return {
      t: d.t[i], latency_p99: d.p99[i], sojourn_p99: d.soj[i], pressure: d.pressure[i], shed: d.shed[i],
      shed_rate: d.shedRate[i], goodput: d.goodput[i], throughput: d.throughput[i], levels,
    };
  }

  // ---- charts (uPlot) ---------------------------------------------------

  const cssVar = (name) => getComputedStyle(document.documentElement).getPropertyValue(name).trim();

  function hline(u, scale, v, color) {
    if (v == null || !isFinite(v)) return;
    const y = Math.round(u.valToPos(v, scale, true));
    const { left, top, width, height } = u.bbox;
    if (y < top || y > top + height) return;
    const c = u.ctx;
    const r = devicePixelRatio || 1;
    c.save();
    c.strokeStyle = color;
    c.lineWidth = 1.5 * r;
    c.setLineDash([6 * r, 4 * r]);
    c.beginPath();
    c.moveTo(left, y);
    c.lineTo(left + width, y);
    c.stroke();
    c.restore();
  }

  function bandFill(u, lo, hi, color) {
    if (lo == null || hi == null) return;
    const { left, top, width, height } = u.bbox;
    const y1 = Math.max(top, u.valToPos(hi, 'p', true));
    const y2 = Math.min(top + height, u.valToPos(lo, 'p', true));
    if (y2 <= y1) return;
    const c = u.ctx;
    c.save();
    c.globalAlpha = 0.45;
    c.fillStyle = color;
    c.fillRect(left, y1, width, y2 - y1);
    c.restore();
  }

  function chartSize(host) {
    const w = Math.max(220, host.clientWidth);
    return { width: w, height: window.innerWidth < 600 ? 150 : 190 };
  }

  function buildCharts() {
    for (const c of S.charts) c.u.destroy();
    S.charts = [];
    if (typeof uPlot !== 'function') return; // the library failed to load: dials still work
    const text = cssVar('--text');
    const grid = cssVar('--grid');
    const col = (i) => cssVar(`--c${(i % 8) + 1}`);
    const axis = (o) => Object.assign({ stroke: text, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid, width: 1 } }, o);
    const x = axis({ space: 64, values: (u, ts, ai, space, incr) => ts.map((v) => clock(v, incr < 60)) });
    const mk = (id, opts, data) => {
      const host = $(id);
      host.textContent = '';
      const u = new uPlot(Object.assign(chartSize(host), { legend: { live: true }, cursor: { drag: { x: false, y: false } } }, opts), data(), host);
      S.charts.push({ u, host, data });
    };
    const T = { label: 'time', value: (u, v) => (v == null ? '–' : clock(v, true)) };
    const d = S.d;
    mk('chart-lat', {
      scales: { x: { time: true }, s: { range: (u, lo, hi) => [0, Math.max(hi || 0, (S.targets.lat || 0) * 1.2, (S.targets.soj || 0) * 1.2, 0.01)] } },
      series: [T, { label: 'p99', stroke: col(0), width: 2, scale: 's', value: (u, v) => fmtDur(v) },
        { label: 'sojourn p99', stroke: col(1), width: 2, scale: 's', value: (u, v) => fmtDur(v) }],
      axes: [x, axis({ scale: 's', size: 62, values: (u, ts) => ts.map(fmtDur) })],
      hooks: { draw: [(u) => { hline(u, 's', S.targets.lat, col(0)); hline(u, 's', S.targets.soj, col(1)); }] },
    }, () => [d.t, d.p99, d.soj]);
    const names = S.features.slice();
    mk('chart-lvl', {
      scales: { x: { time: true }, p: { range: (u, lo, hi) => [0, Math.max(2, hi || 0)] }, lvl: { range: [0, 1] } },
      series: [T,
        { label: 'pressure', stroke: col(0), width: 2, scale: 'p', value: (u, v) => fmtP(v) },
        { label: 'shed level', stroke: col(6), width: 2, dash: [4, 3], scale: 'p', value: (u, v) => fmtP(v) },
        ...names.map((n, i) => ({ label: n, stroke: col(i + 2), width: 1.5, scale: 'lvl', value: (u, v) => pct(v) }))],
      axes: [x, axis({ scale: 'p', size: 44 }), axis({ scale: 'lvl', side: 1, size: 48, grid: { show: false }, values: (u, ts) => ts.map((v) => `${Math.round(v * 100)}%`) })],
      hooks: { draw: [(u) => { const l = S.law; if (l) { bandFill(u, l.low, l.high, cssVar('--band')); hline(u, 'p', 1, text); } }] },
    }, () => [d.t, d.pressure, d.shed, ...names.map((n) => d.levels.get(n) || new Array(d.t.length).fill(null))]);
    mk('chart-rate', {
      scales: { x: { time: true }, r: { range: (u, lo, hi) => [0, Math.max(1, (hi || 0) * 1.1)] } },
      series: [T,
        { label: 'throughput', stroke: col(6), width: 2, scale: 'r', value: (u, v) => fmtRate(v) },
        { label: 'goodput', stroke: col(2), width: 2, scale: 'r', value: (u, v) => fmtRate(v) },
        { label: 'shed rate', stroke: col(1), width: 2, scale: 'r', value: (u, v) => fmtRate(v) }],
      axes: [x, axis({ scale: 'r', size: 52, values: (u, ts) => ts.map((v) => `${v}`) })],
    }, () => [d.t, d.throughput, d.goodput, d.shedRate]);
    queueDraw();
  }

  function queueDraw() {
    if (S.drawQueued) return;
    S.drawQueued = true;
    requestAnimationFrame(draw);
  }

  function draw() {
    S.drawQueued = false;
    const d = S.d;
    if (!d.t.length) return;
    const max = d.t[d.t.length - 1];
    // the window, or less while the data is younger (at least a minute)
    const min = Math.min(max - 60, Math.max(d.t[0], max - S.window));
    for (const c of S.charts) {
      c.u.batch(() => {
        c.u.setData(c.data(), false);
        c.u.setScale('x', { min, max });
      });
    }
    const p = last();
    $('now-line').textContent = `Latest: p99 ${fmtDur(p.latency_p99)}${S.targets.lat ? ` (target ${fmtDur(S.targets.lat)})` : ''}` +
      ` · sojourn ${fmtDur(p.sojourn_p99)}${S.targets.soj ? ` (target ${fmtDur(S.targets.soj)})` : ''}` +
      ` · pressure ${fmtP(p.pressure)} · throughput ${fmtRate(p.throughput)} · goodput ${fmtRate(p.goodput)} · shed ${fmtRate(p.shed_rate)}`;
  }

  // ---- dials ------------------------------------------------------------

  const NS = 'http://www.w3.org/2000/svg';
  const OUTER = 'M10 55 A45 45 0 0 1 100 55';
  const INNER = 'M25 55 A30 30 0 0 1 85 55';
  function svg(tag, attrs, parent) {
    const e = document.createElementNS(NS, tag);
    for (const k in attrs) e.setAttribute(k, attrs[k]);
    if (parent) parent.appendChild(e);
    return e;
  }

  // gauge draws a level on an outer arc and, on an inner one, the
  // pressure against the law's band.
  function gauge(host) {
    const s = svg('svg', { viewBox: '0 0 110 60', 'aria-hidden': 'true', focusable: 'false' });
    const arc = (d, cls, w) => svg('path', { d, pathLength: 100, class: cls, fill: 'none', 'stroke-width': w, 'stroke-dasharray': '0 100' }, s);
    arc(OUTER, 'track', 9).setAttribute('stroke-dasharray', '100 0');
    const lvl = arc(OUTER, 'lvl', 9);
    arc(INNER, 'track', 4).setAttribute('stroke-dasharray', '100 0');
    const band = arc(INNER, 'band', 4);
    host.appendChild(s);
    const marks = new Map();
    const mark = (key, f, cls, r1, r2) => {
      let m = marks.get(key);
      if (!m) marks.set(key, (m = svg('line', { class: cls, 'stroke-width': 2 }, s)));
      if (f == null) { m.setAttribute('visibility', 'hidden'); return; }
      const th = Math.PI * (1 - clamp01(f));
      m.setAttribute('visibility', 'visible');
      m.setAttribute('x1', (55 + r1 * Math.cos(th)).toFixed(2));
      m.setAttribute('y1', (55 - r1 * Math.sin(th)).toFixed(2));
      m.setAttribute('x2', (55 + r2 * Math.cos(th)).toFixed(2));
      m.setAttribute('y2', (55 - r2 * Math.sin(th)).toFixed(2));
    };
    return {
      level(f) { lvl.setAttribute('stroke-dasharray', `${(clamp01(f) * 100).toFixed(2)} 100`); },
      outer(key, f, cls) { mark(key, f, cls, 39, 51); },
      // pressure p on the inner ring, scaled to pmax, with the band
      pressure(p, law, pmax) {
        if (law) {
          const a = clamp01(law.low / pmax), b = clamp01(law.high / pmax);
          band.setAttribute('stroke-dasharray', `${((b - a) * 100).toFixed(2)} 100`);
          band.setAttribute('stroke-dashoffset', `${(-a * 100).toFixed(2)}`);
        }
        mark('p', p == null ? null : p / pmax, 'tick', 22, 35);
      },
    };
  }

  const pmax = () => Math.max(2, S.law ? S.law.cascade_at + 0.5 : 2);

  function bandWords(p, law) {
    if (!law) return '';
    const where = p == null ? 'no reading' : p >= law.high ? 'over: dims' : p < law.low ? 'under: may brighten' : 'inside: holds';
    return `Pressure ${fmtP(p)}, band ${fmtP(law.low)}–${fmtP(law.high)} (inner ring): ${where}`;
  }

  function shedWords(s) {
    if (!(s > 0)) return 'the cascade refuses nothing';
    if (s <= 1) return `${pct(s)} of sheddable requests refused`;
    return `all sheddable and ${pct(s - 1)} of default requests refused`;
  }

  let dialSeq = 0;
  function makeDial(name) {
    const id = `f${++dialSeq}`;
    const a = el('article', 'dial');
    a.dataset.feature = name;
    a.setAttribute('aria-labelledby', `${id}-h`);
    const h = el('header');
    const h3 = el('h3', null, name);
    h3.id = `${id}-h`;
    const mode = el('span', 'badge', '–');
    h.append(h3, mode);
    const meter = el('div', 'gauge');
    meter.setAttribute('role', 'meter');
    meter.setAttribute('aria-labelledby', `${id}-h`);
    meter.setAttribute('aria-valuemin', '0');
    meter.setAttribute('aria-valuemax', '100');
    meter.setAttribute('aria-valuenow', '100');
    meter.dataset.feature = name;
    const g = gauge(meter);
    const big = el('p', 'big', '–');
    const law = el('p', 'small', '');
    const band = el('p', 'small', '');
    const note = el('p', 'note', '');
    note.hidden = true;
    const seg = el('p', 'small', '');
    seg.hidden = true;
    a.append(h, meter, big, law, band, note, seg);
    return { a, mode, meter, g, big, law, band, note, seg };
  }

  function renderDial(v, f, st) {
    const lvl = num(f.level) ?? 0;
    const now = Math.round(lvl * 1000) / 10;
    v.meter.setAttribute('aria-valuenow', String(now));
    v.meter.setAttribute('aria-valuetext', `${pct(lvl)}, ${f.mode}`);
    v.g.level(lvl);
    v.g.outer('floor', f.floor > 0 ? f.floor : null, 'floor');
    v.g.outer('computed', Math.abs((f.computed ?? lvl) - lvl) > 0.005 ? f.computed : null, 'computed');
    v.g.pressure(num(st.pressure), S.law, pmax());
    v.big.textContent = pct(lvl);
    v.mode.textContent = f.mode;
    v.mode.dataset.mode = f.mode;
    const cost = f.cost ? ` · costs ${f.cost.value.toFixed(2)} ± ${f.cost.se.toFixed(2)} of an all-off request${f.cost.in_use ? '' : ' (not yet precise enough to use)'}` : '';
    v.law.textContent = `Law says ${pct(f.computed)} · floor ${pct(f.floor)} · without the daemon: ${f.default ? 'on' : 'off'}${cost}`;
    v.band.textContent = bandWords(num(st.pressure), S.law);
    let note = '';
    if (f.override) {
      note = `Override ${pct(f.override.level)} until ${hhmmss(new Date(f.override.until))}: ${f.override.reason}`;
    } else if (f.cap) {
      note = `Capped at ${pct(f.cap.max)} until ${hhmmss(new Date(f.cap.until))}: ${f.cap.reason}`;
    } else if (f.mode === 'shadow') {
      note = `Shadow: the law would set ${pct(f.computed)}, apps get ${pct(lvl)}`;
    }
    v.note.textContent = note; // operators' text: never HTML
    v.note.hidden = !note;
    const segs = f.segments ? Object.entries(f.segments).map(([k, x]) => `${k} ${pct(x)}`).join(' · ') : '';
    v.seg.textContent = segs ? `Segments: ${segs}` : '';
    v.seg.hidden = !segs;
  }

  let pressureGauge, shedGauge;

  // clusterNote says which replica this is and who leads, when the daemon
  // runs as replicas (brownoutd serve --store): a change of leader shows
  // here and in the events.
  function clusterNote(c) {
    if (!c) return '';
    let s = ` · replica ${c.replica}: ${c.role}`;
    if (c.role !== 'leader' && c.leader) s += `, leader ${c.leader}`;
    s += ` (term ${c.term})`;
    if (c.store !== 'ok') s += ' · store unreachable: levels held, writes refused';
    if (c.config_mismatch && c.config_mismatch.length) s += ` · configuration differs on ${c.config_mismatch.join(', ')}`;
    return s;
  }

  // modelWords says what the law knows of the service (/v1/state's
  // model): its capacity, the load and the all-off request's work.
  function modelWords(m) {
    if (!m || !m.capacity) return '';
    const c = m.capacity;
    const units = { 's/s': 's of service a second', 'all-off/s': 'all-off requests a second', s: 's of service', 'all-off': 'all-off requests' };
    const amount = (x) => `${fmtN(x)} ${units[c.unit] || c.unit}`;
    let s;
    switch (m.mode) {
      case 'cold':
        s = 'Capacity not yet known: full brightness until an overload measures it';
        break;
      case 'feedback-only':
        s = c.value > 0
          ? `No load measured: feedback only, a request may take ${amount(c.value)}${c.source ? ` (${c.source})` : ''}`
          : 'No load measured: feedback only, the work a request may take not yet known (an overload of two periods sets it)';
        break;
      default:
        s = `Capacity ${amount(c.value)}${c.source ? ` (${c.source})` : ''}`;
        if (c.step) s += ` · next correction at most ${fmtN(c.step)}`;
        if (c.saturated) s += ` · saturated at ${fmtN(c.saturated)}`;
        if (m.mode === 'no-gate') s += ' · no gate to measure it: the pressure corrects it';
    }
    if (m.load) s += ` · load ${fmtN(m.load.value)}/s ± ${fmtN(m.load.se)}`;
    if (m.all_off) s += ` · an all-off request ${fmtN(m.all_off.value * 1000)} ms ± ${fmtN(m.all_off.se * 1000)}`;
    if (m.unconfigured) {
      const more = m.unconfigured.count > 1 ? ` and ${m.unconfigured.count - 1} more` : '';
      s += ` · tallies for ${m.unconfigured.feature}${more}, not a configured feature: nothing learned of them`;
    }
    return s;
  }

  function fmtN(x) {
    return x == null ? '–' : Number(x.toPrecision(3)).toString();
  }

  function renderState(st) {
    $('main').dataset.generation = String(st.generation);
    const mode = $('mode');
    mode.textContent = st.mode;
    mode.dataset.mode = st.mode;
    $('action').textContent = `action: ${st.action}${st.cause ? ` · cause ${st.cause}` : ''}`;
    $('flags').textContent = `${st.frozen ? ' · frozen by an operator' : ''}${st.shadow ? ' · shadow mode' : ''}${clusterNote(st.cluster)}`;
    $('reason').textContent = st.reason || 'No reason given.';
    $('model').textContent = modelWords(st.model);

    const p = num(st.pressure);
    const pm = pmax();
    pressureGauge.level(p == null ? 0 : p / pm);
    pressureGauge.pressure(p, S.law, pm);
    pressureGauge.outer('target', 1 / pm, 'tick');
    pressureGauge.outer('cascade', S.law && S.law.max_shed > 0 ? S.law.cascade_at / pm : null, 'floor');
    const pe = $('pressure');
    pe.setAttribute('aria-valuemax', String(Math.round(pm * 100)));
    pe.setAttribute('aria-valuenow', String(p == null ? 0 : Math.min(Math.round(p * 100), Math.round(pm * 100))));
    pe.setAttribute('aria-valuetext', p == null ? 'no reading' : `${fmtP(p)} (1 is at target)`);
    $('pressure-v').textContent = fmtP(p);
    $('band').textContent = bandWords(p, S.law);

    const ms = S.law && S.law.max_shed > 0 ? S.law.max_shed : 2;
    shedGauge.level(st.shed / ms);
    const se = $('shed');
    se.setAttribute('aria-valuemax', String(Math.round(ms * 100)));
    se.setAttribute('aria-valuenow', String(Math.round(st.shed * 100)));
    se.setAttribute('aria-valuetext', shedWords(st.shed));
    $('shed-v').textContent = fmtP(st.shed);
    $('shed-w').textContent = shedWords(st.shed);

    for (const f of st.features) renderDial(S.dials.get(f.name), f, st);

    const sh = $('shadow');
    sh.setAttribute('aria-pressed', String(!!st.shadow));
    sh.textContent = st.shadow ? 'Shadow mode: on' : 'Shadow mode: off';
    $('freeze').disabled = false;
    $('unfreeze').disabled = false;
  }

  function setFeatures(st) {
    const names = st.features.map((f) => f.name);
    if (names.join('\u0000') === S.features.join('\u0000')) return false;
    S.features = names;
    const box = $('dials');
    for (const [name, v] of S.dials) if (!names.includes(name)) { v.a.remove(); S.dials.delete(name); }
    for (const name of names) {
      let v = S.dials.get(name);
      if (!v) S.dials.set(name, (v = makeDial(name)));
      box.appendChild(v.a); // in the state's (shed) order
    }
    const sel = $('ovr-feature');
    const keep = sel.value;
    sel.textContent = '';
    for (const name of names) sel.appendChild(new Option(name, name, false, name === keep));
    for (const name of [...S.d.levels.keys()]) if (!names.includes(name)) S.d.levels.delete(name);
    return true;
  }

  // ---- a daemon of several services: the list -------------------------

  // onServices shows the root's list of several services (GET /v1/state
  // without a service): each one's mode, reason, pressure and levels,
  // with a link to its own dial. Updated in place, every POLL_MS.
  function onServices(m) {
    S.updates++;
    S.services = m.services;
    if (!S.overview) {
      S.overview = true;
      document.body.dataset.view = 'services';
      $('services').hidden = false;
      document.title = 'services — brownout dial';
    }
    const ul = $('svc-list');
    const names = m.services.map((s) => `${s.name}\u0000${(s.state.features || []).map((f) => f.name).join('\u0000')}`).join('\u0001');
    if (names !== S.svcNames) {
      S.svcNames = names;
      S.svcViews = new Map();
      ul.textContent = '';
      for (const s of m.services) {
        const li = el('li');
        li.dataset.service = s.name;
        const h = el('h3');
        const a = el('a', null, s.name);
        a.href = `${ROOT.slice(0, -1)}${s.base}/`;
        const mode = el('span', 'badge', '–');
        h.append(a, mode);
        const reason = el('p', 'reason', '');
        const line = el('p', 'small', '');
        const fl = el('ul');
        const bars = new Map();
        for (const f of s.state.features || []) {
          const fi = el('li');
          const label = el('span', null, f.name);
          label.id = `s${S.svcViews.size}-${bars.size}`;
          const bar = el('div', 'bar');
          bar.setAttribute('role', 'meter');
          bar.setAttribute('aria-valuemin', '0');
          bar.setAttribute('aria-valuemax', '100');
          bar.setAttribute('aria-labelledby', label.id);
          bar.dataset.service = s.name;
          bar.dataset.feature = f.name;
          const fill = el('span');
          bar.append(fill);
          const v = el('span', null, '–');
          fi.append(label, bar, v);
          fl.append(fi);
          bars.set(f.name, { bar, fill, v });
        }
        li.append(h, reason, line, fl);
        ul.append(li);
        S.svcViews.set(s.name, { mode, reason, line, bars });
      }
    }
    for (const s of m.services) {
      const v = S.svcViews.get(s.name);
      const st = s.state;
      v.mode.textContent = st.mode;
      v.mode.dataset.mode = st.mode;
      v.reason.textContent = st.reason || 'No reason given.';
      v.line.textContent = `Pressure ${fmtP(num(st.pressure))} · shed ${fmtP(st.shed)} · tick lag p99 ${fmtDur(num((st.tick || {}).lag_p99_seconds))}` +
        `${st.frozen ? ' · frozen' : ''}${st.shadow ? ' · shadow' : ''}`;
      for (const f of st.features || []) {
        const b = v.bars.get(f.name);
        if (!b) continue;
        const lvl = clamp01(num(f.level));
        b.bar.setAttribute('aria-valuenow', String(Math.round(lvl * 1000) / 10));
        b.bar.setAttribute('aria-valuetext', `${pct(lvl)}, ${f.mode}`);
        b.fill.style.width = `${(lvl * 100).toFixed(1)}%`; // CSSOM: allowed by the CSP
        b.v.textContent = pct(lvl);
      }
    }
  }

  async function pollServices() {
    if (S.stopped) return;
    try {
      const m = await getJSON('state');
      if (!S.stopped) onState(m);
      conn(`Live: the services' states every ${POLL_MS / 1000} s.`, 'live');
    } catch (e) {
      conn(e.detail ? `Disconnected: ${e.detail}` : 'Disconnected: the daemon does not answer; retrying…', 'down');
    }
  }

  // ---- state, ticks and events ------------------------------------------

  function onState(st) {
    if (st && Array.isArray(st.services) && !st.features) { onServices(st); return; }
    if (!st || !Array.isArray(st.features)) return;
    if (st.service && $('svc-nav').hidden) {
      $('svc-nav').hidden = false;
      $('svc-nav').querySelector('a').href = ROOT;
      $('svc-name').textContent = st.service; // a name the daemon checked; text only all the same
      if (!new URLSearchParams(location.search).get('label')) document.title = `${st.service} — brownout dial`;
    }
    S.updates++;
    const restarted = S.boot !== 0 && st.boot !== S.boot;
    const changed = restarted || st.generation !== S.gen;
    S.state = st;
    S.boot = st.boot;
    S.gen = st.generation;
    S.law = st.law || null;
    const t = {};
    for (const r of st.signals || []) t[r.signal] = r.target;
    S.targets = { lat: t['latency.p99'] ?? null, soj: t['sojourn.p99'] ?? null };
    if (setFeatures(st)) buildCharts();
    renderState(st);
    if (restarted) {
      S.evAfter = 0; // a new boot numbers its events from 1
      loadHistory();
      if (S.streamOpen) conn('Reconnected: the daemon restarted; live again.', 'live');
      else S.restarted = true; // said when the stream opens
    }
    if (changed) loadEvents();
  }

  function onTick(p) {
    if (!p || !p.t) return;
    S.updates++;
    addPoint(p);
  }

  function addEvents(list) {
    const ol = $('events');
    for (const e of list) {
      if (e.seq <= S.evAfter) continue;
      S.evAfter = e.seq;
      const li = el('li');
      li.dataset.kind = e.kind;
      const when = new Date(e.time);
      const tm = el('time', null, hhmmss(when));
      tm.dateTime = e.time;
      const what = el('span', 'what', e.what);
      li.append(tm, el('span', 'badge', e.kind), what);
      if (e.who) what.append(` — by ${e.who}`);
      if (e.reason) li.append(el('span', 'why', e.reason)); // operators' text: never HTML
      ol.prepend(li);
      S.evCount++;
    }
    while (ol.children.length > MAX_EVENTS) ol.lastElementChild.remove();
    $('no-events').hidden = ol.children.length > 0;
  }

  async function getJSON(path) {
    const r = await fetch(API + path, { cache: 'no-store' });
    if (!r.ok) {
      const e = new Error(`${path}: ${r.status}`);
      try { e.detail = (await r.json()).detail; } catch (_) { /* not a problem body */ }
      throw e;
    }
    return r.json();
  }

  // loadEvents fetches new events; one request at a time, one more if
  // asked meanwhile.
  async function loadEvents() {
    if (S.stopped) return;
    if (S.evBusy) { S.evAgain = true; return; }
    S.evBusy = true;
    try {
      const m = await getJSON(`events?after=${S.evAfter}`);
      addEvents(m.events || []);
    } catch (_) { /* the next state or poll tries again */ }
    S.evBusy = false;
    if (S.evAgain) { S.evAgain = false; loadEvents(); }
  }

  async function loadHistory() {
    const d = S.d;
    const since = d.t.length ? String(Math.floor(d.t[d.t.length - 1] * 1000)) : '15m';
    try {
      const m = await getJSON(`history?since=${since}`);
      if (S.stopped) return;
      for (const p of m.points || []) addPoint(p);
    } catch (_) { /* shown by the connection line */ }
  }

  async function loadState() {
    const st = await getJSON('state');
    if (!S.stopped) onState(st);
  }

  // ---- the stream, and polling when it is not there --------------------

  function connect() {
    if (S.stopped) return;
    clearTimeout(S.retryTimer);
    const url = API + 'stream' + (S.streamToken ? `?token=${encodeURIComponent(S.streamToken)}` : '');
    const es = new EventSource(url);
    S.es = es;
    es.addEventListener('open', () => {
      if (S.es !== es) return;
      S.streamOpen = true;
      S.backoff = 1000;
      stopPolling();
      if (S.lost) {
        conn(S.restarted ? 'Reconnected: the daemon restarted; live again.' : 'Reconnected; live again.', 'live');
        loadHistory();
        loadEvents();
      } else {
        conn('Live.', 'live');
      }
      S.lost = false;
      S.restarted = false;
      S.everLive = true;
    });
    es.addEventListener('state', (e) => { if (S.es === es) onState(parse(e.data)); });
    es.addEventListener('tick', (e) => { if (S.es === es) onTick(parse(e.data)); });
    // the stream's last event: the daemon stops, or no longer serves this service (a reload)
    es.addEventListener('shutdown', (e) => {
      if (S.es !== es) return;
      const d = parse(e.data);
      lost((d && typeof d.reason === 'string' && d.reason) || 'the daemon is stopping');
    });
    // the stream's token expired or was revoked: a new stream token, at once
    es.addEventListener('reauth', () => {
      if (S.es !== es) return;
      es.close();
      S.es = null;
      S.streamOpen = false;
      S.streamToken = '';
      S.wantToken = true;
      reconnect();
    });
    es.addEventListener('error', () => {
      if (S.es !== es) return;
      S.streamOpen = false;
      lost('');
      if (es.readyState === EventSource.CLOSED) {
        // refused (401 without a stream token, 404 on an older daemon):
        // retry with backoff, asking for a stream token first
        es.close();
        S.es = null;
        S.wantToken = true;
        S.retryTimer = setTimeout(reconnect, S.backoff);
        S.backoff = Math.min(S.backoff * 2, 15000);
      }
    });
  }

  async function reconnect() {
    if (S.stopped || S.reconnecting) return;
    S.reconnecting = true;
    if (S.wantToken) {
      try {
        const tok = store('sessionStorage')?.getItem(TOKEN_KEY);
        const r = await fetch(API + 'stream/token', { method: 'POST', headers: tok ? { Authorization: `Bearer ${tok}` } : {} });
        if (r.ok) S.streamToken = (await r.json()).token || '';
      } catch (_) { /* down: the stream's retry says so */ }
    }
    S.reconnecting = false;
    connect();
  }

  function parse(s) {
    try { return JSON.parse(s); } catch (_) { return null; }
  }

  function lost(why) {
    S.lost = S.lost || S.everLive;
    // once: the polls say more (what the API answers) while it lasts
    if (S.everLive && S.connKind !== 'down') conn(`Disconnected${why ? ` (${why})` : ''}; reconnecting…`, 'down');
    startPolling();
  }

  function startPolling() {
    if (S.pollTimer || S.stopped) return;
    S.pollTimer = setInterval(poll, POLL_MS);
  }

  function stopPolling() {
    clearInterval(S.pollTimer);
    S.pollTimer = 0;
  }

  async function poll() {
    if (S.streamOpen || S.stopped) { stopPolling(); return; }
    try {
      await loadState();
      await loadHistory();
      if (!S.streamOpen) {
        conn(S.lost || S.everLive ? 'Reconnected by polling /v1/state; the stream is not back yet.' : 'Live by polling /v1/state (the stream is not available).', 'polling');
        if (!S.es) { // the API answers again: try the stream now, not after the backoff
          clearTimeout(S.retryTimer);
          reconnect();
        }
      }
    } catch (e) {
      if (!S.streamOpen) conn(e.detail ? `${S.everLive ? 'Disconnected' : 'Waiting'}: ${e.detail}` : 'Disconnected: the daemon does not answer; retrying…', 'down');
    }
  }

  // ---- writes -----------------------------------------------------------

  function say(text) {
    $('err').textContent = '';
    $('msg').textContent = text;
  }

  function fail(text) {
    $('msg').textContent = '';
    $('err').textContent = text;
  }

  function askToken(why) {
    return new Promise((resolve) => {
      const dlg = $('tok');
      const input = $('tok-input');
      $('tok-why').textContent = why;
      input.value = '';
      dlg.returnValue = '';
      dlg.addEventListener('close', () => {
        const v = input.value.trim();
        input.value = '';
        resolve(dlg.returnValue === 'ok' && v ? v : null);
      }, { once: true });
      dlg.showModal();
    });
  }

  function tokenShown() {
    $('forget').hidden = !store('sessionStorage')?.getItem(TOKEN_KEY);
  }

  // write sends one operator write: without a token first unless the tab
  // has one; on 401 it says so and asks for the token once.
  async function write(method, path, body, what) {
    if (S.writing) return false;
    S.writing = true;
    try {
      const ss = store('sessionStorage');
      let tok = ss?.getItem(TOKEN_KEY) || '';
      for (let attempt = 0; attempt < 3; attempt++) {
        let r;
        try {
          const headers = { 'Content-Type': 'application/json' };
          if (tok) headers.Authorization = `Bearer ${tok}`;
          r = await fetch(API + path, { method, headers, body: JSON.stringify(body) });
        } catch (_) {
          fail(`${what}: the daemon does not answer. Nothing changed.`);
          return false;
        }
        if (r.ok) {
          say(`Done: ${what}.`);
          loadState().catch(() => {});
          loadEvents();
          return true;
        }
        let detail = `${r.status} ${r.statusText}`;
        try { detail = (await r.json()).detail || detail; } catch (_) { /* not JSON */ }
        if (r.status !== 401) {
          fail(`${what}: refused: ${detail}. Nothing changed.`);
          return false;
        }
        ss?.removeItem(TOKEN_KEY);
        tokenShown();
        fail(`${what}: refused: ${detail}. Nothing changed.`);
        tok = await askToken(tok ? 'The token was refused. Enter another operator token.' : 'This write needs an operator token.');
        if (!tok) return false;
        ss?.setItem(TOKEN_KEY, tok);
        tokenShown();
        S.streamToken = ''; // the stream may take the operator token's stream token now
      }
      return false;
    } finally {
      S.writing = false;
    }
  }

  function reason() { return $('ovr-reason').value.trim(); }

  function wire() {
    const lv = $('ovr-level');
    const showLevel = () => {
      $('ovr-out').textContent = `${lv.value}%`;
      lv.setAttribute('aria-valuetext', `${lv.value}%`);
    };
    lv.addEventListener('input', showLevel);
    showLevel();
    $('ovr').addEventListener('submit', (e) => {
      e.preventDefault();
      const name = $('ovr-feature').value;
      if (!name) { fail('No feature to override yet.'); return; }
      const ttl = $('ovr-ttl');
      write('PUT', `features/${encodeURIComponent(name)}/override`, { level: Number(lv.value) / 100, ttl: ttl.value, reason: reason() },
        `override ${name} at ${lv.value}% for ${ttl.selectedOptions[0].textContent}`);
    });
    $('release').addEventListener('click', () => {
      const name = $('ovr-feature').value;
      if (name) write('DELETE', `features/${encodeURIComponent(name)}/override`, {}, `release the override of ${name}`);
    });
    $('freeze').addEventListener('click', () => write('POST', 'freeze', { reason: reason() }, 'freeze every level'));
    $('unfreeze').addEventListener('click', () => write('POST', 'unfreeze', { reason: reason() }, 'unfreeze'));
    $('shadow').addEventListener('click', () => {
      const on = !(S.state && S.state.shadow);
      write('PUT', 'shadow', { on, reason: reason() }, `shadow mode ${on ? 'on' : 'off'}`);
    });
    $('forget').addEventListener('click', () => {
      store('sessionStorage')?.removeItem(TOKEN_KEY);
      tokenShown();
      say('The token is forgotten in this tab.');
    });
    $('win').addEventListener('change', (e) => {
      S.window = Number(e.target.value);
      $('win-label').textContent = e.target.selectedOptions[0].textContent;
      queueDraw();
    });
    $('theme').addEventListener('click', () => {
      const order = ['auto', 'light', 'dark'];
      setTheme(order[(order.indexOf(theme()) + 1) % order.length]);
    });
    let rt = 0;
    new ResizeObserver(() => {
      cancelAnimationFrame(rt);
      rt = requestAnimationFrame(() => { for (const c of S.charts) c.u.setSize(chartSize(c.host)); });
    }).observe(document.querySelector('.charts'));
  }

  // ---- theme ------------------------------------------------------------

  function theme() { return document.documentElement.dataset.theme || 'auto'; }

  function setTheme(t) {
    if (t === 'light' || t === 'dark') document.documentElement.dataset.theme = t;
    else delete document.documentElement.dataset.theme;
    try { store('localStorage')?.setItem(THEME_KEY, theme()); } catch (_) { /* private mode */ }
    $('theme').textContent = `Theme: ${theme()}`;
    buildCharts(); // canvas colours come from the variables
  }

  // ---- start ------------------------------------------------------------

  function stop() {
    S.stopped = true;
    if (S.es) S.es.close();
    S.es = null;
    S.streamOpen = false;
    clearTimeout(S.retryTimer);
    stopPolling();
    conn('Stopped (test hook): no live updates.', 'stopped');
  }

  async function start() {
    pressureGauge = gauge($('pressure'));
    shedGauge = gauge($('shed'));
    wire();
    tokenShown();
    let t = 'auto';
    try { t = store('localStorage')?.getItem(THEME_KEY) || 'auto'; } catch (_) { /* private mode */ }
    setTheme(t);
    const label = new URLSearchParams(location.search).get('label');
    if (label) {
      $('label').textContent = label; // from the URL: text only
      $('label').hidden = false;
      document.title = `${label} — brownout dial`;
    }
    try {
      await loadState();
    } catch (e) {
      conn(e.detail ? `Waiting: ${e.detail}` : 'The daemon does not answer yet; retrying…', 'down');
    }
    if (S.overview) { // a daemon of several services: the list, polled
      conn(`Live: the services' states every ${POLL_MS / 1000} s.`, 'live');
      S.pollTimer = setInterval(pollServices, POLL_MS);
      return;
    }
    loadHistory();
    loadEvents();
    connect();
  }

  // The test's window into the page (and a console's): the chart's data,
  // and a way to feed updates without the network.
  window.__dial = {
    last,
    points: () => S.d.t.length,
    events: () => $('events').children.length,
    state: () => S.state,
    services: () => S.services || null,
    conn: () => S.connKind,
    updates: () => S.updates,
    inject(kind, v) {
      if (kind === 'state') onState(v);
      else if (kind === 'tick') onTick(v);
      else if (kind === 'events') addEvents(v);
    },
    stop,
    setTheme,
  };

  start();
})();
