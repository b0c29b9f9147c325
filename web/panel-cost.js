// @ts-check
// "What long context costs", its first half: the n² score grid of the current scenario and
// of a context length n on a log slider up to 1M tokens (dense, causal, sliding-window and
// strided cells, FLOPs, grid bytes) for a shape you set, with the equivalent
// `attnlab cost` command line. Every count is POST api/cost's (exact above 2^53), so it
// equals what the CLI prints.

import { api, coalesced, messageOf } from './api.js';
import { $, byId, setAttr, setFlag, setHtml, setText, setValue } from './dom.js';
import { formatCount, formatCountBytes } from './format.js';
import { html } from './html.js';
import { bindOptions, optionFields, renderOptions } from './options.js';
import { isCross, liveTrace } from './selectors.js';
import { getState, update } from './state.js';

/**
 * @typedef {import('./types.js').State} State
 * @typedef {import('./types.js').CostState} CostState
 * @typedef {import('./types.js').CostBody} CostBody
 * @typedef {import('./types.js').CostReply} CostReply
 */

// n slider: 0..600 -> 10^(x/100), two significant digits (1 to 1,000,000)
/** @param {number} x */
export const sliderToN = (x) => {
  const v = Math.pow(10, x / 100);
  const mag = Math.pow(10, Math.max(0, Math.floor(Math.log10(v)) - 1));
  return Math.max(1, Math.round(v / mag) * mag);
};
/** @param {number} n */
const nToSlider = (n) => Math.max(0, Math.min(600, Math.round((100 * Math.log10(Math.max(1, n))) / 5) * 5));

/** The shape's inputs: id, the field of CostState, the name in messages. */
const SHAPE = /** @type {const} */ ([
  ['cost-dmodel', 'dModel', 'd_model'], ['cost-heads', 'heads', 'heads'], ['cost-layers', 'layers', 'layers'], ['cost-window', 'window', 'window'],
]);

/**
 * @param {string} raw
 * @param {string} what
 */
function positiveInt(raw, what) {
  const text = raw.trim();
  if (!/^\d+$/.test(text) || Number(text) < 1 || !Number.isSafeInteger(Number(text))) throw new Error(`${what}: expected a whole number ≥ 1 but got "${text}"`);
  return Number(text);
}

/**
 * The body of POST api/cost: the scenario's length and n, the shape; throws an Error
 * naming a field that is not right.
 * @param {State} s
 * @returns {CostBody}
 */
function costBody(s) {
  const c = s.cost;
  const body = {
    d_model: positiveInt(c.dModel, 'd_model'),
    heads: positiveInt(c.heads, 'heads'),
    layers: positiveInt(c.layers, 'layers'),
    dtype: c.dtype,
    window: positiveInt(c.window, 'window'),
  };
  if (body.d_model % body.heads !== 0) {
    throw new Error(`heads: ${body.heads} heads do not divide d_model ${body.d_model} into equal heads (d_k = d_model / heads); change one of them`);
  }
  const t = liveTrace(s);
  const tokens = t ? [t.tokens.length] : [];
  if (!tokens.includes(c.n)) tokens.push(c.n);
  return { tokens, ...body, ...optionFields(s, 'cost', COST_FIELDS) };
}

/** The fields of `cost` the panel sets itself; the rest are its "More options". */
const COST_FIELDS = ['tokens', 'd_model', 'heads', 'layers', 'dtype', 'window'];

/**
 * What is wrong with the shape as typed, or null (shown in the error line while it lasts).
 * @param {State} s
 */
function shapeError(s) {
  try {
    costBody(s);
    return null;
  } catch (e) {
    return messageOf(e);
  }
}

// The body last asked about; requests go one at a time (coalesced, api.js).
const job = {
  /** @type {string | null} */
  requested: null,
};

async function askCost() {
  const s = getState();
  if (shapeError(s)) return;
  const body = costBody(s);
  try {
    /** @type {CostReply} */
    const reply = await api('api/cost', body, { exact: true });
    if (!requests.superseded()) update({ cost: { ...getState().cost, reply, body }, costError: null });
  } catch (e) {
    if (!requests.superseded()) update({ costError: messageOf(e) });
  }
}
const requests = coalesced(askCost);


/**
 * After every state change: ask again when the body changed (once the page has a trace).
 * @param {State} s
 */
export function syncCost(s) {
  if (!liveTrace(s) || shapeError(s)) return;
  const key = JSON.stringify(costBody(s));
  if (key === job.requested) return;
  job.requested = key;
  requests.run();
}

/**
 * One card: a row of the API's answer as a table.
 * @param {CostReply} r
 * @param {string} which   'scenario' or 'slider'
 * @param {Record<string, import('./types.js').Count>} row
 * @param {import('./html.js').Html} title
 */
function costCard(r, which, row, title) {
  const sh = r.shape;
  /** @param {string} field */
  const cell = (field) => html`<td class="num" data-testid="cost-${which}-${field}" data-value="${row[field]}">${formatCount(row[field])}</td>`;
  return html`<div class="cost-card" data-testid="cost-${which}" data-n="${row.n}"><h4>${title}</h4>\
<div class="table-scroll"><table class="data-table cost-table"><thead><tr><th scope="col"></th><th scope="col">dense n²</th>\
<th scope="col">causal</th><th scope="col">window w = ${formatCount(sh.window)}</th>\
<th scope="col">strided (Child), l = ${formatCount(row.strided_stride)}</th></tr></thead><tbody>\
<tr><th scope="row">cells in one head's grid</th>${cell('dense_cells')}${cell('causal_cells')}${cell('window_cells')}${cell('strided_cells')}</tr>\
<tr><th scope="row">FLOPs, one layer (${formatCount(sh.heads)} heads)</th>${cell('flops_layer_dense')}${cell('flops_layer_causal')}${cell('flops_layer_window')}${cell('flops_layer_strided')}</tr>\
<tr><th scope="row">FLOPs, all ${formatCount(sh.layers)} layers</th>${cell('flops_model_dense')}${cell('flops_model_causal')}<td class="num muted">—</td><td class="num muted">—</td></tr>\
</tbody></table></div>\
<p class="cost-bytes">One materialised dense grid in ${sh.dtype}: <span data-testid="cost-${which}-grid_bytes_head" data-value="${row.grid_bytes_head}">${formatCountBytes(row.grid_bytes_head)}</span> per head, \
<span data-testid="cost-${which}-grid_bytes_layer" data-value="${row.grid_bytes_layer}">${formatCountBytes(row.grid_bytes_layer)}</span> per layer (${formatCount(sh.heads)} heads).</p></div>`;
}

/**
 * The command line and the cards: this scenario's length, and the slider's.
 * @param {State} s
 * @param {CostBody} body
 * @param {CostReply} r
 */
function renderCards(s, body, r) {
  const sh = r.shape;
  setText($('cost-cli'), `attnlab cost --tokens ${body.tokens.join(',')} --d-model ${sh.d_model} --heads ${sh.heads} ` +
    `--layers ${sh.layers} --dtype ${sh.dtype} --window ${sh.window}`);
  const t = liveTrace(s);
  const byN = new Map(r.rows.map((row) => [Number(row.n), row]));
  // the body's lengths: the scenario's first, then the slider's (one when they are equal)
  const nScenario = body.tokens[0], nSlider = body.tokens[body.tokens.length - 1];
  const cards = [];
  const scenarioRow = byN.get(nScenario);
  if (t && scenarioRow) {
    const cross = isCross(s) ? html` <span class="hint">(cross-attention: this heatmap is ${t.tokens.length} × ${t.source_tokens.length}; the counts are for n queries against n keys)</span>` : '';
    cards.push(costCard(r, 'scenario', scenarioRow, html`This scenario: n = ${formatCount(nScenario)} tokens, ${formatCount(scenarioRow.dense_cells)} dot products per head${cross}`));
  }
  const sliderRow = byN.get(nSlider);
  if (sliderRow) cards.push(costCard(r, 'slider', sliderRow, html`Context n = ${formatCount(nSlider)} tokens`));
  const box = $('cost-tables');
  setHtml(box, html`${cards}`);
  setAttr(box, 'data-key', JSON.stringify(body));
}

/** @type {WeakMap<HTMLElement, {reply: CostReply, trace: unknown}>} */
const shown = new WeakMap();

/** @param {State} s */
export function renderCost(s) {
  const c = s.cost;
  renderOptions(s, 'cost-options', 'cost', COST_FIELDS);
  const slider = byId('cost-n', HTMLInputElement);
  if (document.activeElement !== slider) setValue(slider, String(nToSlider(c.n)));
  setText($('cost-n-value'), formatCount(c.n));
  setAttr(slider, 'aria-valuetext', `n = ${formatCount(c.n)} tokens`);
  setValue(byId('cost-n-input', HTMLInputElement), String(c.n));
  for (const [id, field] of SHAPE) setValue(byId(id, HTMLInputElement), c[field]);
  setValue(byId('cost-dtype', HTMLSelectElement), c.dtype);
  const error = $('cost-error');
  const message = shapeError(s) || s.costError;
  setFlag(error, 'hidden', !message);
  setText(error, message || '');
  const box = $('cost-tables');
  const last = shown.get(box);
  const trace = liveTrace(s);
  if (!c.reply || !c.body || !trace || (last && last.reply === c.reply && last.trace === trace)) return;
  renderCards(s, c.body, c.reply);
  shown.set(box, { reply: c.reply, trace });
}

/**
 * A new context length n (clamped to 1 .. 10^9).
 * @param {number} n
 */
function setCostN(n) {
  update({ cost: { ...getState().cost, n: Math.max(1, Math.min(1000000000, Math.round(n))) } });
}

/** @param {Partial<CostState>} patch */
const patchCost = (patch) => update({ cost: { ...getState().cost, ...patch } });

export function bindCost() {
  bindOptions('cost-options', 'cost');
  for (const [id, field] of SHAPE) {
    const input = byId(id, HTMLInputElement);
    input.addEventListener('change', () => patchCost({ [field]: input.value }));
  }
  const dtype = byId('cost-dtype', HTMLSelectElement);
  dtype.addEventListener('change', () => patchCost({ dtype: dtype.value }));
  const slider = byId('cost-n', HTMLInputElement);
  slider.addEventListener('input', () => setCostN(sliderToN(Number(slider.value))));
  const typed = byId('cost-n-input', HTMLInputElement);
  typed.addEventListener('change', () => {
    const raw = typed.value.trim();
    if (!/^\d+$/.test(raw) || Number(raw) < 1) { update({ costError: `n: expected a whole number ≥ 1 but got "${raw}"` }); return; }
    setCostN(Number(raw));
  });
  for (const b of document.querySelectorAll('[data-cost-n]')) {
    if (b instanceof HTMLElement) b.addEventListener('click', () => setCostN(Number(b.dataset.costN)));
  }
}
