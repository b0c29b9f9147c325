// @ts-check
// "What long context costs", its second half: the KV cache of a model preset during
// generation, by dtype and context (a log slider, 256 to 1M tokens): the formula, the
// weights, where the cache overtakes them, a budget's longest context, a table, a log-log
// chart, and on request the cache measured on the server (decoded into a real KV cache).
// Every number is POST api/kv's (the presets GET api/models'), so it equals `attnlab kv`;
// positions on the chart are drawing, every label an API number.

import { api, busy, coalesced, messageOf } from './api.js';
import { $, byId, setAttr, setFlag, setHtml, setOptions, setText, setValue } from './dom.js';
import { formatBytes, formatCount, formatCountBytes, formatNumber } from './format.js';
import { html } from './html.js';
import { getState, update } from './state.js';

/**
 * @typedef {import('./types.js').State} State
 * @typedef {import('./types.js').KvState} KvState
 * @typedef {import('./types.js').KvReply} KvReply
 * @typedef {import('./types.js').KvMeasured} KvMeasured
 */

// context slider: k = 0..24 -> 256, 384, 512, 768, ... 1,048,576 (powers of two and 1.5×)
/** @param {number} k */
export const sliderToContext = (k) => (k % 2 === 0 ? 2 ** (8 + k / 2) : 3 * 2 ** (7 + (k - 1) / 2));
/** @param {number} c */
const contextToSlider = (c) => {
  let best = 0;
  for (let k = 0; k <= 24; k++) if (Math.abs(Math.log(sliderToContext(k) / c)) < Math.abs(Math.log(sliderToContext(best) / c))) best = k;
  return best;
};

/** The contexts asked for: the table's, the chart's 1K to 1M, the selected one. @param {KvState} kv */
function kvContexts(kv) {
  const set = new Set(kv.tableContexts);
  for (let e = 10; e <= 20; e++) set.add(2 ** e);
  set.add(kv.context);
  return [...set].sort((a, b) => a - b);
}

/** @param {KvState} kv */
function kvBody(kv) {
  /** @type {{model: string, dtype: string, context: number[], budget?: string | number}} */
  const body = { model: kv.model, dtype: kv.dtype, context: kvContexts(kv) };
  const budget = kv.budget.trim();
  if (budget) body.budget = /^\d+$/.test(budget) ? Number(budget) : budget;
  return body;
}

/** Which model and dtype a measurement is of. @param {KvState} kv */
const measureKey = (kv) => JSON.stringify([kv.model, kv.dtype]);

/** The measurement of the selected model and dtype, if any. @param {KvState} kv */
const measuredNow = (kv) => (kv.measured && kv.measured.key === measureKey(kv) ? kv.measured.reply.measured || null : null);

// ---- asking ------------------------------------------------------------------------------------

// The body last asked about; requests go one at a time (coalesced, api.js).
const job = {
  /** @type {string | null} */
  requested: null,
};

async function askKv() {
  const body = kvBody(getState().kv);
  try {
    /** @type {KvReply} */
    const reply = await api('api/kv', body, { exact: true });
    if (!requests.superseded()) update({ kv: { ...getState().kv, reply }, costError: null });
  } catch (e) {
    if (!requests.superseded()) update({ costError: messageOf(e) });
  }
}
const requests = coalesced(askKv);


/**
 * After every state change: ask again when the body changed (once the page has had a trace).
 * @param {State} s
 */
export function syncKv(s) {
  if (!s.apiTrace) return;
  const key = JSON.stringify(kvBody(s.kv));
  if (key === job.requested) return;
  job.requested = key;
  requests.run();
}

/** The server's presets (GET api/models), as `attnlab kv` knows them. */
export function loadModels() {
  return busy(async () => {
    try {
      const { models } = await api('api/models');
      update({ kv: { ...getState().kv, models } });
    } catch (e) {
      update({ costError: `The model presets could not be loaded: ${messageOf(e)}` });
    }
  });
}

/** Decodes the selected model into a real KV cache on the server, up to the selected context. */
async function measure() {
  const kv = getState().kv;
  if (kv.measuring) return;
  const key = measureKey(kv);
  const body = { model: kv.model, dtype: kv.dtype, context: [kv.context], measure: true };
  update({ kv: { ...kv, measuring: true, measureStatus: `decoding ${kv.model} to ${formatCount(kv.context)} tokens on the server…` } });
  await busy(async () => {
    try {
      /** @type {KvReply} */
      const reply = await api('api/kv', body, { exact: true });
      const m = /** @type {KvMeasured} */ (reply.measured);
      update({
        kv: {
          ...getState().kv, measuring: false, measured: { key, reply }, measurePoints: m.points.length,
          measureStatus: `measured ${m.points.length} context lengths in ${m.layers} layer${m.layers === 1 ? '' : 's'}`,
        },
      });
    } catch (e) {
      update({ kv: { ...getState().kv, measuring: false, measureStatus: messageOf(e) } });
    }
  });
}

// ---- showing -------------------------------------------------------------------------------------

/**
 * The lines over the chart: the model, the formula, the weights, the crossover, the budget.
 * @param {KvReply} r
 */
function kvText(r) {
  const m = r.model;
  const b = r.budget;
  return html`<p><b>${m.name}</b>${m.source ? html` (${m.source})` : ''}: ${formatCount(m.layers)} layers, ${formatCount(m.heads)} query heads sharing \
${formatCount(m.kv_heads)} KV heads, d<sub>head</sub> ${formatCount(m.head_dim)}; KV cache in ${r.dtype}</p>\
<p class="formula" data-testid="kv-formula" data-value="${r.bytes_per_token}">KV cache = 2 × L × H<sub>kv</sub> × d<sub>head</sub> × context × bytes = \
2 × ${m.layers} × ${m.kv_heads} × ${m.head_dim} × context × ${r.dtype_bytes} = <b>${formatCount(r.bytes_per_token)} bytes (${formatBytes(r.bytes_per_token)})</b> per token</p>\
${r.weight_bytes !== null && m.parameters !== null ? html`<p class="formula" data-testid="kv-weights" data-value="${r.weight_bytes}">weights: \
${formatCount(m.parameters)} parameters × ${r.dtype_bytes} bytes (${r.dtype}) = <b>${formatCount(r.weight_bytes)} bytes (${formatBytes(r.weight_bytes)})</b></p>` : ''}\
${r.crossover_context !== null ? html`<p data-testid="kv-crossover" data-value="${r.crossover_context}">The cache outgrows the weights from \
<b>${formatCount(r.crossover_context)}</b> tokens on.</p>` : ''}\
${m.note ? html`<p class="hint">${m.note}</p>` : ''}\
${!b ? '' : b.weights_fit
    ? html`<p data-testid="kv-budget-line" data-value="${b.max_context}">Budget ${formatBytes(b.budget_bytes)}: the weights take ${formatBytes(r.weight_bytes ?? 0)}, \
leaving ${formatBytes(b.left_for_cache)} for the cache: the longest context that fits is <b>${formatCount(b.max_context)}</b> tokens.</p>`
    : html`<p data-testid="kv-budget-line" data-value="0">Budget ${formatBytes(b.budget_bytes)}: the weights alone (${formatBytes(r.weight_bytes ?? 0)}) do not fit.</p>`}`;
}

/**
 * The table: the operation's default contexts (GET api/defaults: kv.context, as the command
 * and Python use them) and the selected one.
 * @param {KvReply} r
 * @param {number} selected
 * @param {number[]} tableContexts
 */
function kvTable(r, selected, tableContexts) {
  const shown = new Set(tableContexts.concat([selected]));
  const rows = r.rows.filter((row) => shown.has(Number(row.context))).map((row) => {
    const ctx = Number(row.context);
    return html`<tr data-testid="kv-row-${ctx}" data-cache="${row.cache_bytes}"${ctx === selected ? html` class="selected"` : ''}>\
<th scope="row">${formatCount(row.context)}</th><td class="num">${formatCountBytes(row.cache_bytes)}</td>\
<td class="num">${row.cache_over_weights === null ? '—' : formatNumber(row.cache_over_weights, 2)}</td>\
<td class="num">${r.weight_bytes === null ? '—' : formatBytes(row.total_bytes)}</td>\
<td>${row.cache_exceeds_weights ? 'the cache is larger than the weights' : ''}</td></tr>`;
  });
  return html`<table class="data-table kv-rows"><thead><tr><th scope="col">context</th><th scope="col">KV cache</th>\
<th scope="col">cache ÷ weights</th><th scope="col">cache + weights</th><th scope="col"></th></tr></thead><tbody>${rows}</tbody></table>`;
}

const CHART = { W: 720, H: 300, L: 78, R: 16, T: 16, B: 40 }; // size and margins, in SVG units

/**
 * The chart's scales: log2 of the contexts across, log2 of the bytes up, over every point
 * shown (the formula's, the weights', the measured ones).
 * @param {KvReply} r
 * @param {KvMeasured | null} meas
 */
function chartScales(r, meas) {
  const { W, H, L, R, T, B } = CHART;
  const ys = r.rows.map((row) => Number(row.cache_bytes));
  if (r.weight_bytes !== null) ys.push(Number(r.weight_bytes));
  if (meas) for (const p of meas.points) ys.push(Number(p.formula_bytes), Number(p.allocator_bytes), Math.max(1, Number(p.rss_bytes)));
  const xs = r.rows.map((row) => Number(row.context)).concat(meas ? meas.points.map((p) => Number(p.context)) : []);
  const x0 = Math.log2(Math.min(...xs)) - 0.25, x1 = Math.log2(Math.max(...xs)) + 0.25;
  const y0 = Math.floor(Math.log2(Math.min(...ys))) - 0.5, y1 = Math.ceil(Math.log2(Math.max(...ys))) + 0.5;
  return {
    x0, x1, y0, y1,
    /** @param {number} x  a context */
    px: (x) => L + ((Math.log2(x) - x0) / Math.max(1e-9, x1 - x0)) * (W - L - R),
    /** @param {number} y  bytes */
    py: (y) => T + (1 - (Math.log2(Math.max(1, y)) - y0) / Math.max(1e-9, y1 - y0)) * (H - T - B),
    /** @param {number} x  a context in the chart's range */
    inRange: (x) => x >= 2 ** x0 && x <= 2 ** x1,
  };
}

/**
 * The grid (x at powers of ten, y at powers of two, every other one when crowded), the
 * frame and the axis titles.
 * @param {ReturnType<typeof chartScales>} S
 */
function chartAxes(S) {
  const { W, H, L, R, T, B } = CHART;
  const out = [];
  for (let e = Math.ceil(Math.log10(2 ** S.x0) - 1e-9); 10 ** e <= 2 ** S.x1 * (1 + 1e-9); e++) {
    const x = S.px(10 ** e);
    const label = e >= 6 ? `${10 ** (e - 6)}M` : e >= 3 ? `${10 ** (e - 3)}k` : String(10 ** e);
    out.push(html`<line class="grid" x1="${x}" x2="${x}" y1="${T}" y2="${H - B}"/><text class="tick" x="${x}" y="${H - B + 14}" text-anchor="middle">${label}</text>`);
  }
  const stepY = S.y1 - S.y0 > 16 ? 4 : S.y1 - S.y0 > 8 ? 2 : 1;
  for (let e = Math.ceil(S.y0); e <= Math.floor(S.y1); e++) {
    if (e % stepY !== 0) continue;
    const y = S.py(2 ** e);
    out.push(html`<line class="grid" x1="${L}" x2="${W - R}" y1="${y}" y2="${y}"/><text class="tick" x="${L - 6}" y="${y + 4}" text-anchor="end">${formatBytes(2n ** BigInt(e))}</text>`);
  }
  out.push(html`<rect class="frame" x="${L}" y="${T}" width="${W - L - R}" height="${H - T - B}"/>`);
  out.push(html`<text class="axis" x="${(L + W - R) / 2}" y="${H - 6}" text-anchor="middle">context (tokens)</text>`);
  out.push(html`<text class="axis" transform="translate(14,${(T + H - B) / 2}) rotate(-90)" text-anchor="middle">bytes</text>`);
  return out;
}

/**
 * The weights line, the crossover, the budget's longest context, the formula's line and
 * points, the selected context's label.
 * @param {ReturnType<typeof chartScales>} S
 * @param {KvReply} r
 * @param {number} selected
 */
function chartFormula(S, r, selected) {
  const { W, H, L, R, T, B } = CHART;
  const out = [];
  if (r.weight_bytes !== null) {
    const y = S.py(Number(r.weight_bytes));
    out.push(html`<line class="weights-line" x1="${L}" x2="${W - R}" y1="${y}" y2="${y}" data-testid="kv-weights-line" data-value="${r.weight_bytes}"/>\
<text class="chart-label" x="${L + 6}" y="${y - 5}">weights ${formatBytes(r.weight_bytes)} (${r.dtype})</text>`);
  }
  if (r.crossover_context !== null && S.inRange(Number(r.crossover_context))) {
    const x = S.px(Number(r.crossover_context));
    out.push(html`<line class="cross-line" x1="${x}" x2="${x}" y1="${T}" y2="${H - B}"/><text class="chart-label" x="${x - 4}" y="${T + 12}" text-anchor="end">cache = weights at ${formatCount(r.crossover_context)}</text>`);
  }
  if (r.budget && r.budget.weights_fit && S.inRange(Number(r.budget.max_context))) {
    const x = S.px(Number(r.budget.max_context));
    out.push(html`<line class="budget-line" x1="${x}" x2="${x}" y1="${T}" y2="${H - B}"/><text class="chart-label" x="${x + 4}" y="${H - B - 8}">budget: ${formatCount(r.budget.max_context)}</text>`);
  }
  out.push(html`<polyline class="formula-line" points="${r.rows.map((row) => `${S.px(Number(row.context)).toFixed(1)},${S.py(Number(row.cache_bytes)).toFixed(1)}`).join(' ')}"/>`);
  for (const row of r.rows) {
    const sel = Number(row.context) === selected;
    out.push(html`<circle class="formula-pt${sel ? ' selected' : ''}" cx="${S.px(Number(row.context)).toFixed(1)}" cy="${S.py(Number(row.cache_bytes)).toFixed(1)}" r="${sel ? 5.5 : 3}" \
data-context="${row.context}" data-bytes="${row.cache_bytes}"><title>${formatCount(row.context)} tokens: ${formatCountBytes(row.cache_bytes)}</title></circle>`);
  }
  const selRow = r.rows.find((row) => Number(row.context) === selected);
  if (selRow) {
    const x = S.px(selected), y = S.py(Number(selRow.cache_bytes));
    const anchor = x > W - 200 ? 'end' : 'start';
    out.push(html`<text class="chart-label sel-label" x="${x + (anchor === 'end' ? -9 : 9)}" y="${y + 16}" text-anchor="${anchor}" data-testid="kv-chart-selected">${formatCount(selected)} tokens: ${formatBytes(selRow.cache_bytes)}</text>`);
  }
  return out;
}

/**
 * The measured points (malloc squares, resident-memory triangles) and, when fewer layers
 * were decoded than the model has, the formula for those layers.
 * @param {ReturnType<typeof chartScales>} S
 * @param {KvMeasured} meas
 * @param {number} layers  the model's
 */
function chartMeasured(S, meas, layers) {
  const out = [];
  if (meas.layers !== layers) out.push(html`<polyline class="measured-formula" points="${meas.points.map((p) => `${S.px(Number(p.context)).toFixed(1)},${S.py(Number(p.formula_bytes)).toFixed(1)}`).join(' ')}"/>`);
  for (const p of meas.points) {
    const x = S.px(Number(p.context));
    out.push(html`<rect class="measured-pt" x="${(x - 4).toFixed(1)}" y="${(S.py(Number(p.allocator_bytes)) - 4).toFixed(1)}" width="8" height="8" data-context="${p.context}" data-bytes="${p.allocator_bytes}"><title>measured, malloc: ${formatCountBytes(p.allocator_bytes)}</title></rect>`);
    if (Number(p.rss_bytes) > 0) out.push(html`<path class="measured-rss" d="M${(x - 5).toFixed(1)},${(S.py(Number(p.rss_bytes)) + 4).toFixed(1)} l5,-9 l5,9 z"><title>measured, resident: ${formatCountBytes(p.rss_bytes)}</title></path>`);
  }
  return out;
}

/**
 * The log-log chart of the KV cache against context, and its legend. Positions are
 * drawing; every label is an API number.
 * @param {KvReply} r
 * @param {number} selected
 * @param {KvMeasured | null} meas
 */
function kvChart(r, selected, meas) {
  const S = chartScales(r, meas);
  const layers = r.model.layers;
  const legend = [html`<span class="key formula-key"></span>KV cache, the formula`];
  if (r.weight_bytes !== null) legend.push(html`<span class="key weights-key"></span>the weights`);
  if (r.crossover_context !== null) legend.push(html`<span class="key cross-key"></span>where the cache overtakes them`);
  if (meas) {
    legend.push(html`<span class="key measured-key"></span>measured (malloc), ${meas.layers} of ${layers} layers`);
    legend.push(html`<span class="key rss-key"></span>measured (resident memory)`);
    if (meas.layers !== layers) legend.push(html`<span class="key mformula-key"></span>the formula for ${meas.layers} layers`);
  }
  return html`<svg class="chart" viewBox="0 0 ${CHART.W} ${CHART.H}" role="img" \
aria-label="KV cache bytes against context, log-log: the formula, the weights and any measured points" data-testid="kv-svg">\
${chartAxes(S)}${chartFormula(S, r, selected)}${meas ? chartMeasured(S, meas, layers) : ''}</svg>\
<p class="chart-legend">${legend.map((x) => html`<span>${x}</span>`)}</p>`;
}

/**
 * The measurement's table.
 * @param {KvReply} r
 * @param {KvMeasured} m
 */
function measuredTable(r, m) {
  /** @param {number} s */
  const dur = (s) => (s >= 1 ? `${formatNumber(s, 2)} s` : s >= 1e-3 ? `${formatNumber(s * 1e3, 2)} ms` : `${formatNumber(s * 1e6, 2)} µs`);
  const rows = m.points.map((p) => html`<tr data-testid="kv-measured-${p.context}" data-formula="${p.formula_bytes}" data-cache="${p.cache_bytes}" \
data-allocator="${p.allocator_bytes}"><th scope="row">${formatCount(p.context)}</th><td class="num">${formatBytes(p.formula_bytes)}</td>\
<td class="num">${formatBytes(p.cache_bytes)}</td><td class="num">${formatBytes(p.allocator_bytes)}</td><td class="num">${formatBytes(p.rss_bytes)}</td>\
<td class="num">${dur(p.decode_seconds)}</td></tr>`);
  return html`<p>Measured on the server: ${r.model.name} decoded with random weights (d<sub>model</sub> ${formatCount(m.d_model)}) in \
${m.layers} of its ${r.model.layers} layers, KV cache in ${r.dtype}. The server measures while it serves: its resident memory is noisier than the CLI's.</p>\
<table class="data-table"><thead><tr><th scope="col">context</th><th scope="col">formula (${m.layers} layer${m.layers === 1 ? '' : 's'})</th>\
<th scope="col">KVCache::bytes</th><th scope="col">malloc in use</th><th scope="col">resident (RSS)</th><th scope="col">decode step</th></tr></thead>\
<tbody>${rows}</tbody></table>`;
}

/** @param {KvState} kv */
function renderInputs(kv) {
  const model = byId('kv-model', HTMLSelectElement);
  setOptions(model, kv.models.map((m) => [m.name, m.name, `${m.layers} layers, ${m.kv_heads} KV heads of ${m.head_dim} (${m.source})`]),
    kv.models.map((m) => m.name).join('\u0000'));
  if (kv.models.length && model.value !== kv.model) model.value = kv.model;
  setValue(byId('kv-dtype', HTMLSelectElement), kv.dtype);
  setValue(byId('kv-budget', HTMLInputElement), kv.budget);
  const slider = byId('kv-context', HTMLInputElement);
  setValue(slider, String(contextToSlider(kv.context)));
  setText($('kv-context-value'), formatCount(kv.context));
  setAttr(slider, 'aria-valuetext', `${formatCount(kv.context)} tokens`);
  setValue(byId('kv-context-input', HTMLInputElement), String(kv.context));
  setFlag(byId('kv-measure', HTMLButtonElement), 'disabled', kv.measuring);
  const status = $('kv-measure-status');
  setText(status, kv.measureStatus);
  setAttr(status, 'data-points', kv.measurePoints === null ? null : String(kv.measurePoints));
}

/** @type {WeakMap<HTMLElement, {reply: KvReply, context: number, measured: KvMeasured | null}>} */
const shown = new WeakMap();

/** @param {State} s */
export function renderKv(s) {
  const kv = s.kv;
  renderInputs(kv);
  const r = kv.reply;
  if (!r) return;
  const box = $('kv-text');
  const meas = measuredNow(kv);
  const last = shown.get(box);
  if (last && last.reply === r && last.context === kv.context && last.measured === meas) return;
  setHtml(box, kvText(r));
  setHtml($('kv-table'), kvTable(r, kv.context, kv.tableContexts));
  setHtml($('kv-chart'), kvChart(r, kv.context, meas));
  setHtml($('kv-measured'), meas ? measuredTable(r, meas) : html``);
  shown.set(box, { reply: r, context: kv.context, measured: meas });
}

/** @param {Partial<KvState>} patch */
const patchKv = (patch) => update({ kv: { ...getState().kv, ...patch } });

/** @param {number} c  the selected context in tokens */
const setContext = (c) => patchKv({ context: Math.max(1, Math.round(c)) });

export function bindKv() {
  const model = byId('kv-model', HTMLSelectElement);
  model.addEventListener('change', () => patchKv({ model: model.value }));
  const dtype = byId('kv-dtype', HTMLSelectElement);
  dtype.addEventListener('change', () => patchKv({ dtype: dtype.value }));
  const slider = byId('kv-context', HTMLInputElement);
  slider.addEventListener('input', () => setContext(sliderToContext(Number(slider.value))));
  const typed = byId('kv-context-input', HTMLInputElement);
  typed.addEventListener('change', () => {
    const raw = typed.value.trim();
    if (!/^\d+$/.test(raw) || Number(raw) < 1) { update({ costError: `context: expected a whole number ≥ 1 but got "${raw}"` }); return; }
    setContext(Number(raw));
  });
  const budget = byId('kv-budget', HTMLInputElement);
  budget.addEventListener('change', () => patchKv({ budget: budget.value }));
  $('kv-measure').addEventListener('click', () => measure());
}
