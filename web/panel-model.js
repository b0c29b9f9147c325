// @ts-check
// The Model source (`attnlab serve --model DIR`, docs/models.md): shown when GET api/model
// says a model is loaded. A text box the model tokenizes (or token ids, for a model without
// a tokenizer), the tokens as the model sees them (a leading space shown as ␣), every head
// as a thumbnail of its weights with its three detector scores (sortable), the next-token
// top-k, and head ablation: pick heads, and the top-k before and after stand side by side.
// A click on a head loads it as the scenario ({"model": ...} in POST api/attention), so the
// heatmap, arcs, maths, interventions and probe work on it unchanged.
//
// Every number is the server's (POST api/model/run); this file asks for a run when the
// request changes, for the ablated top-k when the picked heads change (syncModel), and
// draws what came back (renderModel). Handlers only call update() or loadModelHead.

import { api, busy, coalesced, messageOf } from './api.js';
import { context2d } from './canvas.js';
import { LUT_RGB, lutIndex } from './colour.js';
import { $, byId, setAttr, setFlag, setHtml, setText, setValue } from './dom.js';
import { formatNumber, truncate } from './format.js';
import { html } from './html.js';
import { bar } from './panel-interventions.js';
import { bindOptions, optionFields, renderOptions } from './options.js';
import { getState, update } from './state.js';
import { loadModelHead } from './traces.js';
import { drawShownCells, layoutCellAt, viewWidth, ZOOM_TOKENS } from './view-heatmap.js';

/**
 * @typedef {import('./types.js').State} State
 * @typedef {import('./types.js').ModelState} ModelState
 * @typedef {import('./types.js').ModelRun} ModelRun
 * @typedef {import('./types.js').ModelInput} ModelInput
 * @typedef {import('./types.js').TokenGuess} TokenGuess
 * @typedef {import('./types.js').HeadScore} HeadScore
 * @typedef {import('./types.js').HeadSort} HeadSort
 * @typedef {import('./types.js').ModelSource} ModelSource
 */

/**
 * A token's text made visible, as `attnlab model tokenize` prints it: a space is ␣, a
 * newline ↵, a tab ⇥.
 * @param {string} text
 */
export function visibleToken(text) {
  return text.replace(/ /g, '␣').replace(/\n/g, '↵').replace(/\t/g, '⇥');
}

/**
 * What the text box asks the model to run: the text itself, or (without a tokenizer)
 * token ids separated by spaces or commas. An error message when the ids are not ids.
 * @param {import('./types.js').ModelInfo} info
 * @param {string} input
 * @returns {{request: ModelInput} | {error: string}}
 */
export function parseModelInput(info, input) {
  if (info.tokenizer) return input.trim() === '' ? { error: 'type some text' } : { request: { text: input } };
  const parts = input.trim().split(/[\s,]+/).filter(Boolean);
  if (!parts.length) return { error: 'type token ids, e.g. 3 17 5' };
  const vocab = info.vocab_size || 0;
  /** @type {number[]} */
  const ids = [];
  for (const p of parts) {
    const id = /^\d+$/.test(p) ? Number(p) : NaN;
    if (!Number.isInteger(id) || id >= vocab) return { error: `"${p.slice(0, 12)}" is not a token id; ids run from 0 to ${vocab - 1}` };
    ids.push(id);
  }
  return { request: { ids } };
}

/**
 * A default input: a short text, or (without a tokenizer) a few ids repeated once, so that
 * the duplicate-token and induction detectors have something to score.
 * @param {import('./types.js').ModelInfo} info
 */
function defaultInput(info) {
  if (info.tokenizer) return 'When Mary and John went to the store, John gave a drink to';
  const vocab = info.vocab_size || 1, half = Math.max(1, Math.min(6, Math.floor((info.n_positions || 2) / 2)));
  const ids = Array.from({ length: half }, (_, k) => (3 + 7 * k) % vocab);
  return [...ids, ...ids].join(' ');
}

/**
 * The input a link gives the panel: the page's address ending in #text=... (Python's
 * attnlab.show(model, text) opens such a link), or null.
 * @returns {string | null}
 */
function linkedInput() {
  const text = new URLSearchParams(location.hash.slice(1)).get('text');
  return text === null || text === '' ? null : text;
}

/**
 * The request for an input on a model: the text or ids, then the run and the step when
 * they are not the defaults (the --model directory, its final model). The keys always come
 * in this order, so that equal requests are equal as JSON.
 * @param {ModelInput} input
 * @param {ModelSource} source
 * @returns {ModelInput}
 */
export function requestFor(input, source) {
  /** @type {ModelInput} */
  const r = input.text !== undefined ? { text: input.text } : { ids: input.ids };
  if (source.run !== null) r.run = source.run;
  if (source.step !== null) r.step = source.step;
  return r;
}

/**
 * The model's name as the panel shows it: the directory or run, and the checkpoint.
 * @param {import('./types.js').ModelInfo} info
 * @param {ModelSource} source
 */
function sourceName(info, source) {
  return source.step === null ? `${info.name}` : `${info.name} at step ${source.step}`;
}

// ---- asking ----------------------------------------------------------------------------------

/** The state's model part, patched. @param {Partial<ModelState>} patch */
function patchModel(patch) {
  update({ model: { ...getState().model, ...patch } });
}

/** GET api/model at start; with a model, the panel shows and runs its default input. */
export async function loadModel() {
  try {
    /** @type {import('./types.js').ModelInfo} */
    const info = await api('api/model');
    if (!info.loaded) {
      patchModel({ info });
      return;
    }
    const input = linkedInput() ?? defaultInput(info);
    const parsed = parseModelInput(info, input);
    patchModel({ info, input, request: 'request' in parsed ? requestFor(parsed.request, getState().model.source) : null });
  } catch (e) {
    patchModel({ info: { loaded: false } }); // an older server without /api/model
  }
}

/**
 * Shows another model in the panel: a training run (or the --model directory, run null) at
 * a checkpoint (or its final model, step null). Its text starts as the default input.
 * @param {ModelSource} source
 */
export async function openModel(source) {
  const query = [source.run !== null ? `run=${encodeURIComponent(source.run)}` : '',
    source.step !== null ? `step=${source.step}` : ''].filter(Boolean).join('&');
  /** @type {import('./types.js').ModelInfo} */
  const info = await busy(() => api(`api/model${query ? `?${query}` : ''}`));
  const input = defaultInput(info);
  const parsed = parseModelInput(info, input);
  patchModel({
    info, source, input, request: 'request' in parsed ? requestFor(parsed.request, source) : null,
    ablate: [], ablated: null, status: 'running', message: '',
  });
}

/**
 * The panel's model at another checkpoint of the same run (the training panel's slider):
 * the text stays, the run and the head shown follow.
 * @param {number | null} step
 */
export function setModelStep(step) {
  const m = getState().model;
  if (m.source.step === step) return;
  const source = { ...m.source, step };
  patchModel({ source, request: m.request ? requestFor(m.request, source) : null, ablated: null, status: 'running', message: '' });
}

const asked = {
  /** @type {string | null} */
  run: null,      // the request of the last run asked for
  /** @type {string | null} */
  ablated: null,  // the key of the last ablation asked for
};

/** The fields of `model run` the panel sets itself; the rest are its "More options". */
export const RUN_FIELDS = ['text', 'ids', 'ablate', 'weights', 'sparse'];
// The keys per query a long text's heads are drawn from, where the weights are over the
// server's limit (HeadVis keeps 8: most of a row's weight).
const SPARSE_TOP = 8;

/** Runs the model on the state's request (one at a time: api.js, coalesced). */
const runs = coalesced(async () => {
  const s = getState();
  const request = s.model.request;
  if (!request) return;
  const key = JSON.stringify(request);
  try {
    /** @type {ModelRun} */
    // the weights where they fit the server's limit, else each head's rows in brief
    const run = await api('api/model/run', { ...request, ...optionFields(s, 'model run', RUN_FIELDS), sparse: SPARSE_TOP });
    if (runs.superseded()) return;
    patchModel({ run, runKey: key, status: 'done', message: '', map: null });
    // the head shown follows the new text (or checkpoint), if the model has it
    const now = getState();
    const h = now.modelHead, info = now.model.info;
    if (h && JSON.stringify(inputOf(h)) !== key && info && h.layer < (info.n_layer || 0) && h.head < (info.n_head || 0)) {
      await loadModelHead(request, run, h.layer, h.head);
    }
  } catch (e) {
    if (!runs.superseded()) patchModel({ status: 'error', message: messageOf(e) });
  }
});

// ---- a head of a long run: its map from the server ------------------------------------------

/** Cells a side of a head's whole map: 4 px each across the views' width, at most 160. @param {State} s */
const mapCells = (s) => Math.max(16, Math.min(160, Math.floor((viewWidth(s) - 140) / 4)));

/**
 * POST api/model/map's request for the opened head: the run's text, the head, and the whole
 * map or the window of ZOOM_TOKENS a side a click opened.
 * @param {State} s
 */
function mapRequest(s) {
  const m = s.model, map = m.map;
  if (!map || !m.runKey) return null;
  const head = `${map.layer}.${map.head}`;
  return map.zoom ? { ...JSON.parse(m.runKey), head, cells: ZOOM_TOKENS, query: map.zoom.query, key: map.zoom.key }
    : { ...JSON.parse(m.runKey), head, cells: mapCells(s) };
}

/** The opened head's map (one request at a time: api.js, coalesced). */
const maps = coalesced(async () => {
  const request = mapRequest(getState());
  if (!request) return;
  const key = JSON.stringify(request);
  try {
    /** @type {import('./types.js').HeadMapReply} */
    const reply = await api('api/model/map', request);
    const map = getState().model.map;
    if (maps.superseded() || !map) return;
    patchModel({ map: { ...map, reply, key, status: 'done', message: '' } });
  } catch (e) {
    const map = getState().model.map;
    if (!maps.superseded() && map) patchModel({ map: { ...map, status: 'error', message: messageOf(e) } });
  }
});

/**
 * Opens a head of the run (a whole map) or a window of it.
 * @param {{layer: number, head: number}} head
 * @param {{query: number, key: number} | null} zoom
 */
function openMap(head, zoom) {
  const old = getState().model.map;
  const same = old && old.layer === head.layer && old.head === head.head;  // its last map stays while the next comes
  patchModel({ map: { layer: head.layer, head: head.head, zoom, reply: same ? old.reply : null, key: same ? old.key : '',
    status: 'running', message: '' } });
  maps.run();
}

/** The ablated heads' key: the run's request and the heads, sorted. @param {ModelState} m */
const ablationKey = (m) => JSON.stringify([m.runKey, m.ablate.slice().sort()]);

/** The next token with the picked heads ablated (the weights are not asked for again). */
const ablations = coalesced(async () => {
  const m = getState().model;
  if (!m.runKey || !m.ablate.length) return;
  const key = ablationKey(m);
  try {
    /** @type {ModelRun} */
    const reply = await api('api/model/run', { ...JSON.parse(m.runKey), ...optionFields(getState(), 'model run', RUN_FIELDS),
      ablate: m.ablate.slice().sort(), weights: false });
    if (ablations.superseded()) return;
    patchModel({ ablated: { key, topK: reply.top_k_ablated || [] }, message: '' });
  } catch (e) {
    if (!ablations.superseded()) patchModel({ status: 'error', message: messageOf(e) });
  }
});

/**
 * The model input of a head (its text or ids, run and step, without layer and head).
 * @param {import('./types.js').ModelHead} h
 * @returns {ModelInput}
 */
export function inputOf(h) {
  const { layer, head, ...input } = h; // layer and head go; the order of the rest is the request's
  return input;
}

/**
 * After every state change: a run when the request changed, an ablation when the picked
 * heads did.
 * @param {State} s
 */
export function syncModel(s) {
  const m = s.model;
  if (!m.info || !m.info.loaded) return;
  // the request and its options: either changed, the model runs again
  const runKey = m.request ? JSON.stringify([m.request, optionFields(s, 'model run', RUN_FIELDS)]) : null;
  if (runKey !== null && runKey !== asked.run) {
    asked.run = runKey;
    runs.run();
  }
  if (m.runKey && m.ablate.length) {
    const key = ablationKey(m);
    if (key !== asked.ablated) {
      asked.ablated = key;
      ablations.run();
    }
  }
}

// ---- showing ---------------------------------------------------------------------------------

/** @param {number | null} x */
const score = (x) => (x === null ? '–' : formatNumber(x, 2));

/**
 * The heads in the order asked: layer by layer, or by a score, highest first (heads
 * without a score last).
 * @param {HeadScore[]} heads
 * @param {HeadSort} sort
 */
function sortedHeads(heads, sort) {
  if (sort === 'head') return heads;
  const value = (/** @type {HeadScore} */ h) => (h[sort] === null ? -1 : /** @type {number} */ (h[sort]));
  return heads.slice().sort((a, b) => value(b) - value(a) || a.layer - b.layer || a.head - b.head);
}

/** The mean of a list (null for none). @param {number[]} xs */
const mean = (xs) => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : null);

/**
 * The run's heads: its detector scores, or for sparse rows every head with its mean sink
 * weight (over the queries after the first) and none of the detectors.
 * @param {ModelRun} run
 * @returns {HeadScore[]}
 */
function runHeads(run) {
  if (run.heads) return run.heads;
  const sparse = run.sparse;
  if (!sparse) return [];
  return sparse.sink.flatMap((heads, layer) => heads.map((sink, head) => ({
    layer, head, previous_token: null, duplicate_token: null, induction: null, sink: mean(sink.slice(1)) })));
}

/**
 * The grid of heads: a button per head (its thumbnail, its name, its scores) and its
 * ablation toggle.
 * @param {ModelRun} run
 * @param {HeadSort} sort
 * @param {number} columns
 * @param {number} group  query heads per KV head (1: each head its own)
 */
function gridMarkup(run, sort, columns, group) {
  const sparse = run.sparse;
  const cells = sortedHeads(runHeads(run), sort).map((h) => {
    const name = `${h.layer}.${h.head}`;
    // Grouped-query attention: query heads that read the same keys and values carry their KV
    // head's number and a colour band of their group.
    const kv = Math.floor(h.head / group);
    const shared = group > 1;
    return html`<div class="model-head${shared ? ` kv-group-${kv % 4}` : ''}" data-testid="model-head" data-head-ref="${name}" data-layer="${h.layer}" data-head="${h.head}" \
data-kv-head="${kv}" data-previous-token="${h.previous_token}" data-duplicate-token="${h.duplicate_token}" data-induction="${h.induction}">\
<button type="button" class="model-thumb" data-testid="model-thumb-${name}" aria-label="Load head ${name} into the views">\
<canvas></canvas><span class="model-head-name">${name}${shared ? html` <span class="model-kv" title="reads the keys and values of KV head ${kv}, shared by ${group} query heads">KV ${kv}</span>` : ''}</span>\
${sparse ? html`<span class="model-scores"><span title="mean weight on the first token">sink ${score(h.sink ?? null)}</span> \
<span title="mean entropy of the rows">${formatNumber(mean(sparse.entropy[h.layer][h.head]) ?? 0, 1)} bits</span></span>`
    : html`<span class="model-scores"><span title="previous-token">prev ${score(h.previous_token)}</span> \
<span title="duplicate-token">dup ${score(h.duplicate_token)}</span> <span title="induction">ind ${score(h.induction)}</span></span>`}</button>\
<button type="button" class="model-ablate" data-testid="model-ablate-${name}" aria-pressed="false" \
title="Ablate head ${name} (zero its output) and see the next token move">ablate</button></div>`;
  });
  const note = sparse ? html`<p class="hint" data-testid="model-sparse-note">${run.ids.length} tokens: more attention \
weights than the server returns, so each head is drawn from the ${sparse.top} keys each query weighs most (sparse rows, \
docs/long-context.md), a pixel the heaviest of the tokens it covers. Click a head to see its weights over the whole text, pooled by the server.</p>` : html``;
  return html`${note}<div class="model-grid-cells" style="grid-template-columns: repeat(${columns}, auto)">${cells}</div>`;
}

/**
 * Query heads per KV head (1 without grouped-query attention).
 * @param {import('./types.js').ModelInfo} info
 */
function kvGroup(info) {
  const heads = info.n_head || 1, kv = info.n_kv_head || heads;
  return kv > 0 && heads % kv === 0 ? heads / kv : 1;
}

/** Light grey for the cells a causal head cannot see (j > i). */
const HIDDEN_RGB = [232, 232, 232];
/** A sparse head's thumbnail: at most this many pixels a side. */
const SPARSE_PIXELS = 256;

/**
 * Draws each head's n × n weights into its canvas, one pixel per cell (CSS scales it).
 * @param {HTMLElement} grid
 * @param {ModelRun} run
 */
function drawGrid(grid, run) {
  if (run.sparse) return drawSparseGrid(grid, run, run.sparse);
  const weights = run.weights;
  if (!weights) return;
  const n = run.ids.length;
  for (const cell of grid.querySelectorAll('.model-head')) {
    if (!(cell instanceof HTMLElement)) continue;
    const canvas = cell.querySelector('canvas');
    if (!canvas) continue;
    const w = weights[Number(cell.dataset.layer)][Number(cell.dataset.head)];
    canvas.width = n;
    canvas.height = n;
    const ctx = context2d(canvas);
    const image = ctx.createImageData(n, n);
    const data = image.data;
    for (let i = 0; i < n; i++) {
      for (let j = 0; j < n; j++) {
        const k = 4 * (i * n + j);
        if (j > i) {
          data[k] = HIDDEN_RGB[0]; data[k + 1] = HIDDEN_RGB[1]; data[k + 2] = HIDDEN_RGB[2];
        } else {
          const t = lutIndex(w[i][j]) * 3;
          data[k] = LUT_RGB[t]; data[k + 1] = LUT_RGB[t + 1]; data[k + 2] = LUT_RGB[t + 2];
        }
        data[k + 3] = 255;
      }
    }
    ctx.putImageData(image, 0, 0);
    setAttr(canvas, 'data-n', String(n));
  }
}

/**
 * Each head from its sparse rows, at most SPARSE_PIXELS a side: a pixel the heaviest of the
 * kept weights of the queries and keys it covers (0 where none is kept), grey above the
 * diagonal.
 * @param {HTMLElement} grid
 * @param {ModelRun} run
 * @param {import('./types.js').SparseRows} sparse
 */
function drawSparseGrid(grid, run, sparse) {
  const n = run.ids.length, side = Math.min(n, SPARSE_PIXELS), at = (/** @type {number} */ t) => Math.floor(t * side / n);
  for (const cell of grid.querySelectorAll('.model-head')) {
    if (!(cell instanceof HTMLElement)) continue;
    const canvas = cell.querySelector('canvas');
    if (!canvas) continue;
    const l = Number(cell.dataset.layer), h = Number(cell.dataset.head);
    const pooled = new Float32Array(side * side);
    sparse.keys[l][h].forEach((keys, i) => keys.forEach((j, k) => {
      const p = at(i) * side + at(j);
      pooled[p] = Math.max(pooled[p], sparse.weights[l][h][i][k]);
    }));
    canvas.width = side;
    canvas.height = side;
    const ctx = context2d(canvas);
    const image = ctx.createImageData(side, side);
    const data = image.data;
    for (let y = 0; y < side; y++)
      for (let x = 0; x < side; x++) {
        const k = 4 * (y * side + x), t = lutIndex(pooled[y * side + x]) * 3;
        const rgb = x > y ? HIDDEN_RGB : [LUT_RGB[t], LUT_RGB[t + 1], LUT_RGB[t + 2]];
        data[k] = rgb[0]; data[k + 1] = rgb[1]; data[k + 2] = rgb[2]; data[k + 3] = 255;
      }
    ctx.putImageData(image, 0, 0);
    setAttr(canvas, 'data-n', String(n));
  }
}

/**
 * A probability to 3 decimals, or to 2 significant digits below 0.001 (an untrained model
 * over 50,257 tokens gives each about 2e-5).
 * @param {number} p
 */
const probability = (p) => (p >= 0.001 || p === 0 ? formatNumber(p, 3) : p.toExponential(1));

/**
 * One next-token list: rank, token, probability with a bar.
 * @param {TokenGuess[]} guesses
 * @param {string} testid
 */
function topKList(guesses, testid) {
  const rows = guesses.map((g, k) => html`<tr data-id="${g.id}" data-probability="${g.probability}">\
<td class="num">${k + 1}</td><td><code class="model-tok">${visibleToken(g.token)}</code></td>\
<td class="num">${probability(g.probability)} ${bar(g.probability, 1, 'w')}</td></tr>`);
  return html`<table class="data-table model-topk-table" data-testid="${testid}"><tbody>${rows}</tbody></table>`;
}

/** @type {WeakMap<HTMLElement, unknown>} what each part shows (rendered again only when it changes) */
const shown = new WeakMap();

/**
 * True when `el` already shows `key`; remembers it otherwise.
 * @param {HTMLElement} el
 * @param {unknown[]} key
 */
function same(el, key) {
  const last = /** @type {unknown[] | undefined} */ (shown.get(el));
  if (last && last.length === key.length && last.every((x, k) => x === key[k])) return true;
  shown.set(el, key);
  return false;
}

/** @param {State} s */
export function renderModel(s) {
  const m = s.model;
  const section = $('model-section');
  const info = m.info;
  setFlag(section, 'hidden', !info || !info.loaded);
  if (!info || !info.loaded) return;
  renderOptions(s, 'model-options', 'model run', RUN_FIELDS);
  setText($('model-shape'), info.description
    ? `${sourceName(info, m.source)}: ${info.description}`
    : `${sourceName(info, m.source)}: ${info.n_layer} layers × ${info.n_head} heads, d_model ${info.n_embd}, ` +
      `${info.n_positions} positions, vocabulary ${info.vocab_size}`);
  setText($('model-input-label'), info.tokenizer ? 'Text' : 'Token ids');
  setText($('model-input-hint'), info.tokenizer
    ? 'Tokenized by the model\'s own tokenizer (byte-level BPE); a leading space is part of a token, shown as ␣.'
    : `This model has no tokenizer (no tokenizer.json, nor vocab.json and merges.txt): type token ids separated by spaces, e.g. 3 17 5 (0 to ${(info.vocab_size || 1) - 1}, at most ${info.n_positions}).`);
  setValue(byId('model-input', HTMLInputElement), m.input);
  const status = $('model-status');
  setAttr(section, 'data-state', m.status);
  setText(status, m.status === 'error' ? m.message : m.status === 'running' ? 'running the model…' : '');
  status.classList.toggle('error', m.status === 'error');

  const run = m.run;
  const tokens = $('model-tokens');
  if (!same(tokens, [run])) {
    setHtml(tokens, run ? html`${run.tokens.map((t, i) => html`<span class="model-tok" data-testid="model-token" data-id="${run.ids[i]}" \
title="position ${i}, id ${run.ids[i]}">${visibleToken(t)}</span>`)}` : html``);
  }

  const grid = $('model-grid');
  const columns = info.n_head || 1;
  if (!same(grid, [run, m.sort])) {
    setHtml(grid, run ? gridMarkup(run, m.sort, columns, kvGroup(info)) : html``);
    if (run) drawGrid(grid, run);
  }
  setValue(byId('model-sort', HTMLSelectElement), m.sort);
  renderModelMap(s);
  // which head is shown, which are picked for ablation
  const current = s.modelHead ? `${s.modelHead.layer}.${s.modelHead.head}` : null;
  for (const cell of grid.querySelectorAll('.model-head')) {
    if (!(cell instanceof HTMLElement)) continue;
    const ref = cell.dataset.headRef || '';
    cell.classList.toggle('selected', ref === current);
    const ablated = m.ablate.includes(ref);
    cell.classList.toggle('ablated', ablated);
    const toggle = cell.querySelector('.model-ablate');
    if (toggle instanceof HTMLElement) {
      setAttr(toggle, 'aria-pressed', String(ablated));
      setText(toggle, ablated ? 'ablated ✕' : 'ablate');
    }
  }

  const topk = $('model-topk');
  const after = m.ablate.length && m.ablated && m.ablated.key === ablationKey(m) ? m.ablated.topK : null;
  if (!same(topk, [run, after, m.ablate.join(' ')])) {
    const picked = m.ablate.slice().sort().join(', ');
    setHtml(topk, !run ? html`` : html`<div class="model-topk-cols"><div><h4>as the model predicts</h4>${topKList(run.top_k, 'model-topk-before')}</div>\
${m.ablate.length ? html`<div><h4>with ${picked} ablated</h4>${after ? topKList(after, 'model-topk-after') : html`<p class="hint">running…</p>`}</div>` : ''}</div>`);
  }
  setText($('model-ablate-list'), m.ablate.length ? m.ablate.slice().sort().join(', ') : 'none (pick heads in the grid)');
  setFlag(byId('model-ablate-clear', HTMLButtonElement), 'disabled', !m.ablate.length);
}

// ---- the opened head's map -------------------------------------------------------------------

/** What the map canvas shows now (for hit tests). @type {{layout: import('./view-heatmap.js').Layout, shown: import('./view-heatmap.js').Shown, reply: import('./types.js').HeadMapReply} | null} */
let mapDrawn = null;

/** Where the map's cells are drawn (the test hook's), or null before the first. */
export function modelMapShown() {
  return mapDrawn ? { left: mapDrawn.layout.left, top: mapDrawn.layout.top, cell: mapDrawn.layout.cell,
    n: mapDrawn.shown.n, m: mapDrawn.shown.m } : null;
}

/**
 * The server's map as the heatmap's cells: null weights masked (drawn hatched), labels a token
 * or a block of tokens.
 * @param {import('./types.js').HeadMapReply} r
 * @returns {import('./view-heatmap.js').Shown}
 */
export function mapCellsShown(r) {
  const n = r.weights.length, m = n ? r.weights[0].length : 0;
  const label = (/** @type {number} */ first, /** @type {number} */ end) =>
    (r.tile === 1 ? `${first} ${truncate(visibleToken(r.tokens[first]), 14)}` : `${first}–${end - 1}`);
  const rows = r.query.map((row, a) => row.map((q) => (q === null ? r.row0 + a * r.tile : q)));
  const cols = r.key.map((row) => row.map((k, b) => (k === null ? r.col0 + b * r.tile : k)));
  return {
    row0: r.row0, col0: r.col0, tile: r.tile, n, m, rows, cols,
    weights: r.weights.map((row) => row.map((w) => w ?? 0)),
    grid: r.weights,
    qLabels: Array.from({ length: n }, (_, a) => label(r.row0 + a * r.tile, Math.min(r.row0 + r.rows, r.row0 + (a + 1) * r.tile))),
    kLabels: Array.from({ length: m }, (_, b) => label(r.col0 + b * r.tile, Math.min(r.col0 + r.cols, r.col0 + (b + 1) * r.tile))),
  };
}

/**
 * A map's colour scale's top: its largest weight, past the first row of blocks in a whole map
 * (the first queries see a few keys, so their weights are large whatever the head does: query 0's
 * on itself is 1); 1 for none.
 * @param {import('./types.js').HeadMapReply} r
 */
function mapTop(r) {
  let top = 0;
  r.weights.forEach((row, a) => {
    if (r.tile === 1 || a > 0 || r.weights.length === 1)
      for (const w of row) if (w !== null && w > top) top = w;
  });
  return top || 1;
}

/** @param {State} s */
function renderModelMap(s) {
  const map = s.model.map, box = $('model-map');
  setFlag(box, 'hidden', !map);
  if (!map) return;
  const n = s.model.run ? s.model.run.ids.length : 0;
  setText($('model-map-name'), `${map.layer}.${map.head}`);
  setText($('model-map-status'), map.status === 'running' ? 'computing the head\'s weights…' : map.message);
  setFlag($('model-map-whole'), 'hidden', !map.zoom);
  const r = map.reply;
  if (!r) return;
  const canvas = byId('model-map-canvas', HTMLCanvasElement);
  const width = viewWidth(s);
  if (!same(canvas, [r, width])) {
    const shown = mapCellsShown(r), top = mapTop(r);
    const layout = drawShownCells(canvas, shown, { width, maxHeight: 640, scaleMax: top });
    mapDrawn = { layout, shown, reply: r };
    setAttr(canvas, 'data-tile', String(r.tile));
    setAttr(canvas, 'data-window', `${r.row0},${r.col0},${shown.n},${shown.m}`);
    setText($('model-map-lod'), r.tile > 1
      ? `${n} × ${n} tokens: each cell the largest weight in a block of ${r.tile} × ${r.tile} (darkest: ` +
        `${formatNumber(top, 3)}, the largest past the first block of queries); click one to see its tokens`
      : `queries ${r.row0}–${r.row0 + r.rows - 1}, keys ${r.col0}–${r.col0 + r.cols - 1} of ${n} tokens, a weight ` +
        `a cell (darkest: ${formatNumber(top, 3)})`);
  }
}

/**
 * The line under the map: the cell under the pointer, its query, key and weight.
 * @param {HTMLCanvasElement} canvas
 * @param {MouseEvent} e
 */
function mapCellUnder(canvas, e) {
  if (!mapDrawn) return null;
  const box = canvas.getBoundingClientRect();
  const at = layoutCellAt(mapDrawn.layout, e.clientX - box.left, e.clientY - box.top);
  if (!at) return null;
  const r = mapDrawn.reply, q = r.query[at.row][at.col], k = r.key[at.row][at.col];
  return { ...at, query: q, key: k, weight: r.weights[at.row][at.col], tile: r.tile };
}

// ---- input -----------------------------------------------------------------------------------

export function bindModel() {
  bindOptions('model-options', 'model run');
  const input = byId('model-input', HTMLInputElement);
  input.addEventListener('input', () => patchModel({ input: input.value }));
  $('model-form').addEventListener('submit', (e) => {
    e.preventDefault();
    const m = getState().model;
    if (!m.info || !m.info.loaded) return;
    const parsed = parseModelInput(m.info, input.value);
    if ('error' in parsed) {
      patchModel({ input: input.value, status: 'error', message: parsed.error });
      return;
    }
    const request = requestFor(parsed.request, m.source);
    if (JSON.stringify(request) === m.runKey) patchModel({ input: input.value, request, status: 'done', message: '' });
    // a new text: the ablation's heads stay picked, its answer goes
    else patchModel({ input: input.value, request, status: 'running', message: '', ablated: null });
  });
  const sort = byId('model-sort', HTMLSelectElement);
  sort.addEventListener('change', () => patchModel({ sort: /** @type {HeadSort} */ (sort.value) }));
  $('model-grid').addEventListener('click', (e) => {
    const target = e.target instanceof Element ? e.target : null;
    const cell = target && target.closest('.model-head');
    if (!(cell instanceof HTMLElement)) return;
    const m = getState().model;
    const ref = cell.dataset.headRef || '';
    if (target && target.closest('.model-ablate')) {
      patchModel({ ablate: m.ablate.includes(ref) ? m.ablate.filter((x) => x !== ref) : [...m.ablate, ref] });
      return;
    }
    if (!m.run || !m.runKey) return;
    const head = { layer: Number(cell.dataset.layer), head: Number(cell.dataset.head) };
    // a long run's head is its map from the server; a short one's goes into the views below
    if (m.run.sparse) openMap(head, null);
    else loadModelHead(JSON.parse(m.runKey), m.run, head.layer, head.head).catch((err) => update({ error: messageOf(err) }));
  });
  const mapCanvas = byId('model-map-canvas', HTMLCanvasElement), readout = $('model-map-readout');
  mapCanvas.addEventListener('mousemove', (e) => {
    const c = mapCellUnder(mapCanvas, e), tokens = mapDrawn ? mapDrawn.reply.tokens : [];
    if (!c) return setText(readout, 'Hover or click a cell.');
    if (c.query === null || c.key === null) return setText(readout, 'no query of this cell sees its keys (masked)');
    const block = c.tile > 1 ? `the largest in its block of ${c.tile} × ${c.tile}: ` : '';
    setText(readout, `${block}query ${c.query} “${visibleToken(tokens[c.query])}” → key ${c.key} ` +
      `“${visibleToken(tokens[c.key])}”: weight ${c.weight === null ? '–' : c.weight.toPrecision(4)}`);
  });
  mapCanvas.addEventListener('click', (e) => {
    const c = mapCellUnder(mapCanvas, e), map = getState().model.map, run = getState().model.run;
    if (!c || !map || !run || c.tile === 1 || c.query === null || c.key === null) return;
    // the window of ZOOM_TOKENS × ZOOM_TOKENS around the cell's weight, inside the text
    const n = run.ids.length, side = Math.min(ZOOM_TOKENS, n), half = Math.floor(side / 2);
    const first = (/** @type {number} */ t) => Math.max(0, Math.min(n - side, t - half));
    openMap(map, { query: first(c.query), key: first(c.key) });
  });
  $('model-map-whole').addEventListener('click', () => {
    const map = getState().model.map;
    if (map) openMap(map, null);
  });
  $('model-map-close').addEventListener('click', () => patchModel({ map: null }));
  $('model-ablate-clear').addEventListener('click', () => patchModel({ ablate: [], ablated: null }));
}
