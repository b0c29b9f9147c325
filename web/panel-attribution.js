// @ts-check
// Why this prediction (docs/attribution.md): the model panel's text, explained at its last
// token. "Attribute" asks POST api/model/attribute (at once) and draws direct logit
// attribution per head (a layer × head grid coloured by contribution), the logit lens (layer ×
// position: the top token and the answer's probability) and the context mixing at the last
// token (the raw attention beside value norms, rollout and ALTI). "Verdict" and "Patch" start
// a job (POST api/model/analysis) whose progress the panel follows and which "Cancel" stops;
// the verdict draws every measure beside erasure and ablation and the rank agreements, the
// patching a layer × position heatmap of the share restored, and the heads' and MLPs'.
// Every number is the server's, the same as `attnlab model attribute | lens | verdict |
// patch --json`; each cell carries it in data-value.
//
// The panel's state (what it last asked, the answers, the job it follows) is the store's
// `attribution` part: each answer is an update(), and the page's render calls
// renderAttribution, which draws the panel from the state it is given.

import { api, messageOf } from './api.js';
import { followJob } from './jobs.js';
import { LUT_RGB, css, lutIndex } from './colour.js';
import { $, byId, setAttr, setFlag, setHtml, setText } from './dom.js';
import { formatNumber } from './format.js';
import { html } from './html.js';
import { parseModelInput, requestFor, visibleToken } from './panel-model.js';
import { getState, update } from './state.js';

/**
 * @typedef {import('./types.js').State} State
 * @typedef {import('./types.js').AttributionState} AttributionState
 */

/** The state's attribution part, patched. @param {Partial<AttributionState>} patch */
function patchAttribution(patch) {
  update({ attribution: { ...getState().attribution, ...patch } });
}

// ---- colours and cells -------------------------------------------------------------------

/**
 * A signed contribution's colour: red for the answer, blue against it, white at 0, full at
 * ±scale.
 * @param {number} x
 * @param {number} scale
 */
function signed(x, scale) {
  const t = scale > 0 ? Math.max(-1, Math.min(1, x / scale)) : 0;
  const fade = Math.round(255 * (1 - Math.abs(t)));
  return t >= 0 ? `rgb(255,${fade},${fade})` : `rgb(${fade},${fade},255)`;
}

/** The largest |x|. @param {number[]} xs */
const largest = (xs) => xs.reduce((m, x) => Math.max(m, Math.abs(x)), 0);

/** @param {number} x */
const number = (x) => (x === null || x === undefined || !Number.isFinite(x) ? '–' : formatNumber(x, 3));

/**
 * A weight-like value in [0, 1] as the views colour it, with white ink on the dark end.
 * @param {number} w
 */
const shade = (w) => `background:${css(w)};color:${w > 0.55 ? '#fff' : 'inherit'}`;

/**
 * A table cell with its value: styled by `style` (shade, or a signed background), its
 * number in data-value.
 * @param {number} x
 * @param {string} style
 * @param {string} [text]
 */
const cell = (x, style, text) => html`<td class="num attr-cell" data-value="${x}" style="${style}">${text === undefined ? number(x) : text}</td>`;

/** @param {number} x @param {number} scale */
const diverging = (x, scale) => `background:${signed(x, scale)};color:${scale > 0 && Math.abs(x) > 0.6 * scale ? '#fff' : 'inherit'}`;

// ---- the quick read-outs -----------------------------------------------------------------

/** @param {any} q */
function dlaMarkup(q) {
  const heads = /** @type {number[][]} */ (q.attribution.heads);
  const scale = largest(heads.flat());
  const columns = heads.length ? heads[0].length : 0;
  const header = html`<tr><th>layer</th>${Array.from({ length: columns }, (_, h) => html`<th>head ${h}</th>`)}</tr>`;
  const rows = heads.map((row, l) => html`<tr><th>${l}</th>${row.map((x, h) => html`<td class="num attr-cell" data-head-ref="${l}.${h}" \
data-value="${x}" style="${diverging(x, scale)}">${number(x)}</td>`)}</tr>`);
  const target = visibleToken(q.attribution.target_token);
  return html`<h3>Direct logit attribution <span class="hint">what each head writes along logit(${target})\
${q.attribution.contrast !== null ? ' − the contrast' : ''} = ${number(q.attribution.logit)}, the final norm frozen</span></h3>\
<table class="data-table attr-grid" data-testid="attr-dla">${header}${rows}</table>`;
}

/** @param {any} q */
function lensMarkup(q) {
  const tokens = /** @type {string[]} */ (q.tokens);
  const header = html`<tr><th>stream</th>${tokens.map((t) => html`<th><code>${visibleToken(t)}</code></th>`)}</tr>`;
  const rows = q.lens.rows.map((/** @type {any} */ row) => html`<tr><th>${row.layer}</th>${row.cells.map((/** @type {any} */ c) =>
    html`<td class="attr-cell" data-value="${c.target_probability}" data-top="${c.top}" style="${shade(c.target_probability)}" \
title="top ${visibleToken(c.top_token)} (${number(c.top_probability)}); the answer's rank ${c.target_rank}">\
<code>${visibleToken(c.top_token)}</code> ${formatNumber(c.target_probability, 2)}</td>`)}</tr>`);
  return html`<h3>Logit lens <span class="hint">the stream after each block read as if it were the last: its top token, and \
${visibleToken(q.lens.target_token)}'s probability (the colour)</span></h3>\
<div class="attr-scroll"><table class="data-table attr-grid" data-testid="attr-lens">${header}${rows}</table></div>`;
}

/** @param {any} q */
function mixingMarkup(q) {
  const m = q.mixing, tokens = /** @type {string[]} */ (q.tokens);
  const p = m.position;
  const layers = /** @type {number[][][]} */ (m.attention);
  const mean = tokens.map((_, j) => layers.reduce((s, layer) => s + layer.reduce((t, head) => t + head[j], 0) / layer.length, 0) / layers.length);
  const norms = tokens.map((_, j) => m.value_norms.reduce((/** @type {number} */ s, /** @type {number[]} */ row) => s + row[j], 0) / m.value_norms.length);
  const top = largest(norms);
  const rows = tokens.slice(0, p + 1).map((t, j) => html`<tr data-source="${j}"><td class="num">${j}</td><td><code>${visibleToken(t)}</code></td>\
${cell(mean[j], shade(mean[j]))}${cell(norms[j], shade(top > 0 ? norms[j] / top : 0))}${cell(m.rollout[j], shade(m.rollout[j]))}\
${cell(m.alti[j], shade(m.alti[j]))}${cell(q.attribution.by_source[j], diverging(q.attribution.by_source[j], largest(q.attribution.by_source)))}</tr>`);
  const maps = [['attention', 'the weights, mean over layers and heads'], ['rollout', 'rollout'], ['alti', 'ALTI']];
  return html`<h3>Context mixing <span class="hint">how much each source j (columns) fed each row i (rows): the raw weights \
beside rollout and ALTI, which follow the mixing through the layers; dark is more</span></h3>\
<div class="attr-maps">${maps.map(([name, label]) => html`<figure><canvas data-testid="attr-map-${name}" data-map="${name}"></canvas>\
<figcaption>${label}</figcaption></figure>`)}</div>\
<h4>At position ${p} <span class="hint">the prediction's row of each, with value norms and DLA per source</span></h4>\
<table class="data-table attr-mixing" data-testid="attr-mixing"><tr><th>j</th><th>source</th><th>attention</th><th>value norms</th>\
<th>rollout</th><th>ALTI</th><th>DLA</th></tr>${rows}</table>`;
}

// ---- the jobs ----------------------------------------------------------------------------

/** @param {any} v */
function verdictMarkup(v) {
  const tokens = /** @type {string[]} */ (v.tokens);
  // The measures in the verdict's order (its agreements'), not the JSON object's.
  /** @type {string[]} */
  const measures = v.agreements.filter((/** @type {any} */ a) => a.intervention === 'erasure').map((/** @type {any} */ a) => a.measure);
  const erasure = /** @type {number[]} */ (v.tokens_intervened.erasure);
  const scale = largest(erasure);
  const rows = tokens.map((t, j) => html`<tr data-source="${j}"><td class="num">${j}</td><td><code>${visibleToken(t)}</code></td>\
${measures.map((name) => { const xs = v.tokens_measured[name]; return cell(xs[j], diverging(xs[j], largest(xs))); })}\
${cell(erasure[j], diverging(erasure[j], scale))}</tr>`);
  const agreements = v.agreements.map((/** @type {any} */ a) => html`<tr data-measure="${a.measure}" data-intervention="${a.intervention}">\
<td>${a.measure}</td><td>${a.intervention}</td>${cell(a.kendall, diverging(a.kendall ?? 0, 1))}${cell(a.spearman, diverging(a.spearman ?? 0, 1))}</tr>`);
  return html`<h3>The verdict <span class="hint">m = ${number(v.metric)}; erasure: m with the token hidden as a key in every layer, \
minus m (the intervention the measures are ranked against)</span></h3>\
<div class="attr-scroll"><table class="data-table attr-grid" data-testid="attr-verdict-tokens"><tr><th>j</th><th>source</th>\
${measures.map((name) => html`<th>${name.replace(/_/g, ' ')}</th>`)}<th>erasure</th></tr>${rows}</table></div>\
<h4>Heads <span class="hint">direct logit attribution beside m with the head's output zeroed, or set to its mean over the \
positions, minus m</span></h4>${headsMarkup(v)}\
<h4>Agreement with the interventions <span class="hint">rank correlations of the sizes (1: the same order, 0: none)</span></h4>\
<table class="data-table" data-testid="attr-agreements"><tr><th>measure</th><th>intervention</th><th>Kendall τ</th><th>Spearman ρ</th></tr>\
${agreements}</table>\
<h4>What each shows, and what it cannot</h4><dl class="attr-meanings" data-testid="attr-meanings">\
${Object.entries(v.meanings).map(([name, text]) => html`<dt>${name.replace(/_/g, ' ')}</dt><dd>${String(text)}</dd>`)}</dl>`;
}

/** @param {any} v */
function headsMarkup(v) {
  const dla = /** @type {number[]} */ (v.heads_measured.dla);
  const zero = /** @type {number[]} */ (v.heads_intervened.zero_ablation), mean = /** @type {number[]} */ (v.heads_intervened.mean_ablation);
  const H = Math.max(1, /** @type {number} */ (v.heads));
  const rows = dla.map((x, k) => html`<tr data-head-ref="${Math.floor(k / H)}.${k % H}"><td>${Math.floor(k / H)}.${k % H}</td>\
${cell(x, diverging(x, largest(dla)))}${cell(zero[k], diverging(zero[k], largest(zero)))}${cell(mean[k], diverging(mean[k], largest(mean)))}</tr>`);
  return html`<table class="data-table" data-testid="attr-verdict-heads"><tr><th>head</th><th>DLA</th><th>zero ablation</th>\
<th>mean ablation</th></tr>${rows}</table>`;
}

/** @param {any} p */
function patchMarkup(p) {
  const clean = /** @type {string[]} */ (p.clean.tokens), corrupt = /** @type {string[]} */ (p.corrupt.tokens);
  const header = html`<tr><th>stream</th>${clean.map((t, i) => html`<th><code>${visibleToken(t)}${t === corrupt[i] ? '' : html`/${visibleToken(corrupt[i])}`}</code></th>`)}</tr>`;
  const share = (/** @type {number} */ x) => cell(x, diverging(x, 1), `${Math.round(100 * x) + 0}%`);
  const rows = p.rows.map((/** @type {any} */ r) => html`<tr><th>${r.layer}</th>${r.restored.map(share)}</tr>`);
  const heads = p.heads.map((/** @type {number[]} */ row, /** @type {number} */ l) => html`<tr><th>${l}</th>${row.map(share)}${share(p.mlps[l])}</tr>`);
  const columns = p.heads.length ? p.heads[0].length : 0;
  return html`<h3>Activation patching <span class="hint">the corrupted run with one site taken from the clean run: the share of \
logit(${visibleToken(p.target_token)}) − logit(${visibleToken(p.contrast_token)}) it restores (${number(p.clean_metric)} clean, \
${number(p.corrupt_metric)} corrupted)</span></h3>\
<div class="attr-scroll"><table class="data-table attr-grid" data-testid="attr-patch-stream">${header}${rows}</table></div>\
<h4>Each head's output and each MLP's</h4><table class="data-table attr-grid" data-testid="attr-patch-heads">\
<tr><th>layer</th>${Array.from({ length: columns }, (_, h) => html`<th>head ${h}</th>`)}<th>mlp</th></tr>${heads}</table>`;
}

// ---- asking ------------------------------------------------------------------------------

/** The model panel's request (its text and model), or null with the reason in the status. */
function modelRequest() {
  const m = getState().model;
  if (!m.request) {
    say('run the model on a text first (the Model panel above)', true);
    return null;
  }
  return m.request;
}

/** @param {string} text @param {boolean} [error] */
function say(text, error = false) {
  patchAttribution({ status: text, error });
}

async function attribute() {
  const request = modelRequest();
  if (!request) return;
  say('attributing…');
  try {
    const quick = await api('api/model/attribute', request);
    patchAttribution({ quick, key: JSON.stringify(request), status: '', error: false });
  } catch (e) {
    say(messageOf(e), true);
  }
}

// What is drawn now (the page renders on every update; these redraw when their answer changes).
/** @type {any} the read-outs */
let drawn = null;
/** @type {any} the job's result */
let drawnResult = null;

/** Follows the job until it ends, drawing its progress. */
const follow = () => followJob('attribution', () => getState().attribution.job, (job) => patchAttribution({ job }), say);

/** @param {'verdict' | 'patch'} kind */
async function startJob(kind) {
  const request = modelRequest();
  if (!request) return;
  // The operation's own fields (docs/operations.md: model verdict, model patch) and which one.
  /** @type {Record<string, unknown>} */
  let body = { kind, ...request };
  if (kind === 'patch') {
    const info = getState().model.info;
    const input = byId('attr-corrupt', HTMLInputElement).value;
    const parsed = info ? parseModelInput(info, input) : { error: 'no model' };
    if ('error' in parsed) {
      say(`the corrupted run: ${parsed.error}`, true);
      return;
    }
    const corrupt = requestFor(parsed.request, { run: null, step: null });
    const { text, ids, ...model } = /** @type {Record<string, unknown>} */ (request); // the clean run is clean or clean_ids
    body = { kind, ...model, ...(text !== undefined ? { clean: text } : { clean_ids: ids }),
      ...('text' in corrupt ? { corrupt: corrupt.text } : { corrupt_ids: corrupt.ids }) };
  }
  try {
    patchAttribution({ job: await api('api/model/analysis', body), key: JSON.stringify(request),
      status: `${kind === 'verdict' ? 'the verdict' : 'patching'}: started`, error: false });
    await follow();
  } catch (e) {
    say(messageOf(e), true);
  }
}

async function cancelJob() {
  try {
    patchAttribution({ job: await api('api/model/analysis/cancel', {}) });
  } catch (e) {
    say(messageOf(e), true);
  }
}

// ---- showing -----------------------------------------------------------------------------

/** Light grey where a row cannot see a column (j > i), or past the prediction. */
const UNSEEN = [232, 232, 232];

/**
 * Each map's n × n values into its canvas, one pixel per cell (CSS scales it up).
 * @param {any} q
 */
function drawMaps(q) {
  const n = q.tokens.length, p = q.mixing.position;
  for (const canvas of $('attr-quick').querySelectorAll('canvas[data-map]')) {
    if (!(canvas instanceof HTMLCanvasElement)) continue;
    const map = /** @type {number[][]} */ (q.mixing[`${canvas.dataset.map}_map`]);
    canvas.width = n;
    canvas.height = n;
    const ctx = canvas.getContext('2d');
    if (!ctx) continue;
    const image = ctx.createImageData(n, n);
    for (let i = 0; i < n; i++) {
      for (let j = 0; j < n; j++) {
        const k = 4 * (i * n + j);
        const rgb = j > i || i > p ? UNSEEN : LUT_RGB.subarray(3 * lutIndex(map[i][j]), 3 * lutIndex(map[i][j]) + 3);
        image.data[k] = rgb[0]; image.data[k + 1] = rgb[1]; image.data[k + 2] = rgb[2]; image.data[k + 3] = 255;
      }
    }
    ctx.putImageData(image, 0, 0);
    setAttr(canvas, 'data-n', String(n));
  }
}

/** @param {AttributionState} view */
function draw(view) {
  const status = $('attr-status');
  setText(status, view.status);
  status.classList.toggle('error', view.error);
  const job = view.job;
  const running = !!job && job.state === 'running';
  setFlag(byId('attr-cancel', HTMLButtonElement), 'hidden', !running);
  const progress = byId('attr-progress', HTMLProgressElement);
  setFlag(progress, 'hidden', !running);
  if (running && job) {
    progress.max = Math.max(1, job.total);
    progress.value = job.done;
    setText(status, `${job.kind === 'verdict' ? 'the verdict' : 'patching'}: ${job.stage || 'starting'} ${job.done}/${job.total}`);
  }
  setAttr($('attribution-section'), 'data-state', running ? 'running' : job ? job.state : 'idle');
  const q = view.quick;
  if (q !== drawn) {
    setHtml($('attr-quick'), q ? html`${dlaMarkup(q)}${lensMarkup(q)}${mixingMarkup(q)}` : html``);
    if (q) drawMaps(q);
    drawn = q;
  }
  const result = job && job.state === 'done' ? job.result : null;
  if (result !== drawnResult) {
    setHtml($('attr-job'), !result ? html`` : job && job.kind === 'verdict' ? verdictMarkup(result) : patchMarkup(result));
    drawnResult = result;
  }
}

/** @param {State} s */
export function renderAttribution(s) {
  const info = s.model.info;
  setFlag($('attribution-section'), 'hidden', !info || !info.loaded);
  // Another text or model: the answers shown were for the one before.
  const a = s.attribution;
  const key = s.model.request ? JSON.stringify(s.model.request) : null;
  if (a.key !== null && key !== a.key && !(a.job && a.job.state === 'running')) {
    patchAttribution({ key: null, quick: null, job: null, status: '', error: false });
    return;  // the update renders again with the cleared state
  }
  draw(a);
}

export function bindAttribution() {
  $('attr-run').addEventListener('click', () => { void attribute(); });
  $('attr-verdict').addEventListener('click', () => { void startJob('verdict'); });
  $('attr-patch').addEventListener('click', () => { void startJob('patch'); });
  $('attr-cancel').addEventListener('click', () => { void cancelJob(); });
}
