// The coordinator's dashboard: polls /api/status every second, keeps the last ten minutes in the
// page and draws them with uPlot; the policy form posts to /api/policy. With a token (the page
// was opened as /?token=...) every request carries it as a bearer token.
'use strict';
const token = new URLSearchParams(location.search).get('token');
const KEEP = 600;  // samples (seconds) kept per series
const COLORS = ['#1565c0', '#ef6c00', '#2e7d32', '#6a1b9a', '#00838f', '#ad1457', '#4e342e', '#9e9d24'];
const $ = (id) => document.getElementById(id);

function api(path, options = {}) {
  const headers = Object.assign({}, options.headers || {});
  if (token) headers['Authorization'] = 'Bearer ' + token;
  return fetch(path, Object.assign({}, options, {headers, cache: 'no-store'}));
}

function fmt(v, digits = 0) {
  return v == null || !isFinite(v) ? '–' : v.toLocaleString('en-US', {maximumFractionDigits: digits, minimumFractionDigits: digits});
}
const mb = (bytes) => (bytes || 0) / 1e6;

// Time series: t (s since the coordinator started) and one array per named series.
const hist = {t: [], series: {}};
let workerNames = [];
let switches = [];
let predicted = null, predictedFor = null;
let charts = {};

function push(name, value) {
  (hist.series[name] = hist.series[name] || []).push(value == null ? null : value);
}

function trim() {
  if (hist.t.length <= KEEP) return;
  const drop = hist.t.length - KEEP;
  hist.t.splice(0, drop);
  for (const k in hist.series) hist.series[k].splice(0, drop);
}

// Draws each policy switch as a dashed vertical line labelled with the new policy.
function switchMarks(u) {
  const ctx = u.ctx;
  ctx.save();
  ctx.strokeStyle = '#c62828';
  ctx.fillStyle = '#c62828';
  ctx.setLineDash([5, 4]);
  ctx.font = `${11 * devicePixelRatio}px system-ui`;
  for (const s of switches) {
    const t = s.effective_s != null ? s.effective_s : s.requested_s;
    if (t < u.scales.x.min || t > u.scales.x.max) continue;
    const x = Math.round(u.valToPos(t, 'x', true));
    ctx.beginPath();
    ctx.moveTo(x, u.bbox.top);
    ctx.lineTo(x, u.bbox.top + u.bbox.height);
    ctx.stroke();
    ctx.fillText(`→ ${s.policy.policy} @ step ${s.step}`, x + 4, u.bbox.top + 12 * devicePixelRatio);
  }
  ctx.restore();
}

function makeChart(el, yLabel, lines) {
  const width = Math.max(400, el.clientWidth || el.parentElement.clientWidth - 20);
  const opts = {
    width, height: 220,
    scales: {x: {time: false}},
    axes: [{label: 's since start'}, {label: yLabel, size: 70}],
    series: [{label: 't'}].concat(lines.map((l) => Object.assign({width: 1.5, spanGaps: true}, l))),
    hooks: {draw: [switchMarks]},
    legend: {live: false},
  };
  return new uPlot(opts, [[]].concat(lines.map(() => [])), el);
}

function buildCharts() {
  if (typeof uPlot === 'undefined') {
    $('no-charts').hidden = false;
    return;
  }
  for (const k in charts) charts[k].chart.destroy();
  charts = {};
  const per = (suffix, dash) => workerNames.map((w, i) => ({label: `${w}${suffix}`, stroke: COLORS[i % COLORS.length], dash}));
  charts.ips = {chart: makeChart($('chart-ips'), 'images/s', [
    {label: 'total', stroke: '#1d2330', width: 2.5},
    {label: 'predicted', stroke: '#c62828', width: 2, dash: [8, 5]},
  ].concat(per('', undefined))), keys: ['total', 'predicted'].concat(workerNames.map((w) => 'ips:' + w))};
  charts.link = {chart: makeChart($('chart-link'), 'MB/s', per(' up', undefined).concat(per(' down', [4, 3]))),
                 keys: workerNames.map((w) => 'up:' + w).concat(workerNames.map((w) => 'down:' + w))};
  charts.loss = {chart: makeChart($('chart-loss'), 'loss', per('', undefined)), keys: workerNames.map((w) => 'loss:' + w)};
}

function redraw() {
  for (const k in charts) {
    const c = charts[k];
    c.chart.setData([hist.t].concat(c.keys.map((key) => hist.series[key] || hist.t.map(() => null))));
  }
}

// A page opened in the middle of a run starts with the coordinator's last ten minutes.
async function seedHistory() {
  try {
    const r = await api('api/history');
    if (!r.ok) return;
    const h = await r.json();
    for (const x of h.samples) {
      hist.t.push(x.t_s);
      push('total', x.images_per_sec);
      push('predicted', null);
      for (const w of workerNames) {
        const v = x.workers[w];
        push('ips:' + w, v ? v.images_per_sec : null);
        push('up:' + w, v ? mb(v.bytes_up_per_sec) : null);
        push('down:' + w, v ? mb(v.bytes_down_per_sec) : null);
        push('loss:' + w, v ? v.loss : null);
      }
    }
  } catch (e) {
    // No history: the charts start now.
  }
}

async function refreshPrediction(status) {
  const key = JSON.stringify(status.policy) + status.workers.length;
  if (key === predictedFor) return;
  predictedFor = key;
  try {
    const r = await api('api/prediction');
    const j = await r.json();
    if (r.ok) {
      predicted = j.images_per_sec;
      $('prediction-note').textContent = `predicted for ${status.policy.describe}, ${j.config.workers} workers`;
    } else {
      predicted = null;
      $('prediction-note').textContent = j.error;
      // Busy with another configuration's prediction: asked again at the next refresh.
      if (r.headers.get('Retry-After')) predictedFor = null;
    }
  } catch (e) {
    predictedFor = null;
  }
  $('predicted').textContent = fmt(predicted);
}

function renderTables(s) {
  const byName = {};
  for (const w of s.workers) byName[w.name] = w;
  const rows = s.nodes.map((n) => {
    const w = byName[n.name] || {};
    const state = n.alive ? (w.done ? 'done' : 'alive') : 'dead';
    // The address goes in the name's tooltip: a column of endpoints would crowd the table.
    return `<tr><td title="${n.address || ''}">${n.name}</td><td class="${n.alive ? '' : 'dead'}">${state}</td>` +
           `<td>${fmt(n.heartbeat_age_s, 1)} s</td><td>${w.step ?? ''}</td><td>${w.images_per_sec != null ? fmt(w.images_per_sec) : ''}</td>` +
           `<td>${w.loss === null ? 'nan' : w.loss != null ? fmt(w.loss, 3) : ''}</td><td>${w.policy || ''}</td></tr>`;
  });
  $('nodes').tBodies[0].innerHTML = rows.join('');
  $('switches').innerHTML = s.policy_switches
    .map((x) => `<li>${x.describe} from step ${x.step} (at ${fmt(x.effective_s ?? x.requested_s, 1)} s)</li>`).join('');
}

function fillPolicyForm(s) {
  const sel = $('policy-select');
  if (sel.options.length === 0) {
    for (const p of s.policies) sel.add(new Option(p, p));
    sel.value = s.policy.policy;
  }
}

async function poll() {
  let s;
  try {
    const r = await api('api/status');
    if (r.status === 401) throw new Error('401: open this page as /?token=YOUR_TOKEN');
    s = await r.json();
    $('conn').textContent = s.finished ? 'run ended' : s.started ? 'live' : 'waiting for nodes';
    $('conn').className = 'pill ok';
  } catch (e) {
    $('conn').textContent = 'no answer: ' + e.message;
    $('conn').className = 'pill bad';
    return;
  }
  const names = s.workers.map((w) => w.name);
  if (names.join() !== workerNames.join()) {
    const first = workerNames.length === 0;
    workerNames = names;
    if (first && s.started) await seedHistory();
    buildCharts();
  }
  switches = s.policy_switches;
  fillPolicyForm(s);
  await refreshPrediction(s);
  $('run').textContent = `${s.model}, ${s.workers.length} worker(s), ${s.servers.length} server(s), mode ${s.mode}, batch ${s.batch}`;
  $('total-ips').textContent = fmt(s.totals.images_per_sec);
  $('total-sps').textContent = fmt(s.totals.steps_per_sec, 1);
  $('total-link').textContent = `${fmt(mb(s.totals.bytes_up_per_sec), 1)} / ${fmt(mb(s.totals.bytes_down_per_sec), 1)} MB/s`;
  $('step').textContent = `${s.step} / ${s.steps}`;
  $('policy-now').textContent = s.policy.describe + (s.switch_pending ? ' (switching…)' : '');
  renderTables(s);
  if (!s.started || (hist.t.length && s.t_s <= hist.t[hist.t.length - 1])) return;
  hist.t.push(s.t_s);
  push('total', s.totals.images_per_sec);
  push('predicted', predicted);
  for (const w of s.workers) {
    const live = w.alive && !w.done;
    push('ips:' + w.name, live ? w.images_per_sec : null);
    push('up:' + w.name, live ? mb(w.bytes_up_per_sec) : null);
    push('down:' + w.name, live ? mb(w.bytes_down_per_sec) : null);
    push('loss:' + w.name, w.loss);
  }
  trim();
  redraw();
}

$('policy-form').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  const body = {policy: $('policy-select').value};
  // Only the settings the chosen policy uses (the coordinator refuses the others): a slice for
  // p3 and prophet, a partition for bytescheduler, a credit for those three.
  const sliced = body.policy === 'p3' || body.policy === 'prophet';
  const credited = sliced || body.policy === 'bytescheduler';
  if (sliced && $('slice-params').value) body.slice_params = Number($('slice-params').value);
  if (body.policy === 'bytescheduler' && $('partition-params').value) body.partition_params = Number($('partition-params').value);
  if (credited && $('credit').value.trim()) body.credit = $('credit').value.trim();
  const out = $('switch-result');
  out.className = 'note';
  out.textContent = `switching to ${body.policy}…`;
  $('apply').disabled = true;
  try {
    const r = await api('api/policy', {method: 'POST', headers: {'Content-Type': 'application/json'}, body: JSON.stringify(body)});
    const j = await r.json();
    if (r.ok) {
      out.textContent = `${j.describe} took effect at step ${j.step}`;
    } else {
      out.className = 'note error';
      out.textContent = `refused (${r.status}): ${j.error}`;
    }
  } catch (e) {
    out.className = 'note error';
    out.textContent = 'no answer: ' + e.message;
  }
  $('apply').disabled = false;
});

window.addEventListener('resize', () => {
  for (const k in charts) charts[k].chart.setSize({width: $('chart-ips').clientWidth, height: 220});
});
// One poll at a time: a slow answer must not let samples arrive out of order (x must ascend).
let polling = false;
async function tick() {
  if (polling) return;
  polling = true;
  try {
    await poll();
  } finally {
    polling = false;
  }
}
tick();
setInterval(tick, 1000);
