// @ts-check
// The maths panel: one head, one query, every number from the trace (the engine's), in
// the steps of the three-token worked example (docs/worked-example.md): q = x·W_Q; per key
// j the key and value vectors, the dot product written out, ÷ √d_k, ÷ T, the exponential
// and the weight; the row sum; the output as Σ_j a_ij v_j; the largest weight.
//
// The grid is built once per key count (buildGrid) and each ← / → then only rewrites text:
// queryMaths works out every string of the panel (no DOM), and the write* functions put
// them in place, skipping unchanged text. Rows are divs with content-visibility: auto and
// column widths in ch of the monospace font, so a 64-key row stays cheap.
//
// Real heads (d_k 64 to 128, rows of hundreds of keys) stay readable: a vector longer than
// SHORT_VECTOR numbers shows its first and last few and its length ("full vectors" shows every
// number); past AUTO_BY_WEIGHT keys the rows go by weight, the keys that carry the row first
// (a box switches between that and position order), and the sums under the grid list their
// heaviest terms first; each weight has a bar beside its digits.

import { $, forget, setAttr, setFlag, setHtml, setText } from './dom.js';
import { formatFactor, formatFixed, formatNumber, formatVector, truncate } from './format.js';
import { html } from './html.js';
import { rotaryScore } from './rope.js';
import { detailedHead, precision } from './selectors.js';
import { update } from './state.js';

/**
 * @typedef {import('./types.js').State} State
 * @typedef {import('./types.js').Trace} Trace
 * @typedef {import('./types.js').FullHead} FullHead
 */

const MAX_TERMS = 16; // per written-out sum, as the CLI
const SHORT_TERMS = 6; // the dot product's terms when vectors are shortened
const SHORT_VECTOR = 8; // longer vectors are shortened unless "full vectors" is on
const AUTO_BY_WEIGHT = 32; // rows of more keys than this go by weight unless the box says otherwise
const COLS = 8; // j+key, k_j, v_j, score, ÷√d_k, ÷T, exp, weight

/**
 * A vector as the panel writes it: every number, or when it is long and `full` is off, the
 * first five and the last two around "…" and its length ("0.1 0.2 0.3 0.4 0.5 … 0.7 0.8 ‹64›").
 * @param {number[]} v
 * @param {number} p
 * @param {boolean} full
 */
function vectorText(v, p, full) {
  if (full || v.length <= SHORT_VECTOR) return formatVector(v, p);
  return `${formatVector(v.slice(0, 5), p)} … ${formatVector(v.slice(-2), p)} ‹${v.length}›`;
}

/**
 * How the panel writes a head: shortened vectors or not, keys by weight or by position.
 * @param {State} s
 * @param {number} m  keys
 */
function mathsMode(s, m) {
  return { full: s.mathsFull, byWeight: s.mathsByWeight === null ? m > AUTO_BY_WEIGHT : s.mathsByWeight };
}

/**
 * "a + b + c", at most MAX_TERMS of `total` terms shown (terms may hold only those).
 * @param {string[]} terms
 * @param {string} sep
 * @param {number} [total]
 */
function termList(terms, sep, total) {
  const count = total === undefined ? terms.length : total;
  const shown = terms.slice(0, MAX_TERMS).join(sep);
  return count > MAX_TERMS ? `${shown}${sep}… (${count} terms in all)` : shown;
}

// ---- what the panel says: strings only ---------------------------------------------------

/**
 * One key's row for the query: the dot product, ÷ √d_k, ÷ T, exp, weight.
 * @typedef {object} KeyRow
 * @property {boolean} masked
 * @property {number} weight
 * @property {string} products   "2×1 + 1×1 = "
 * @property {string} score
 * @property {string} scaled
 * @property {string} logit
 * @property {string} exp
 * @property {string} weightText  "0 (masked)" for a masked key
 * @property {string} weightBold  the weight, in bold
 */

/**
 * Everything the panel writes for query i of a head, worked out from the trace.
 * @param {FullHead} head
 * @param {number} i
 * @param {number} p  decimals
 * @param {{full: boolean, byWeight: boolean}} mode
 */
function queryMaths(head, i, p, mode) {
  const q = head.queries[i];
  const m = head.keys.length;
  let top = -1, topWeight = -1;
  for (let j = 0; j < m; j++) {
    if (head.logits[i][j] !== null && head.weights[i][j] > topWeight) { topWeight = head.weights[i][j]; top = j; }
  }
  // The order the rows and the sums go in: by position, or the heaviest keys first.
  const order = Array.from({ length: m }, (_, j) => j);
  if (mode.byWeight) order.sort((a, b) => head.weights[i][b] - head.weights[i][a] || a - b);
  const productTerms = mode.full || q.length <= MAX_TERMS ? MAX_TERMS : SHORT_TERMS;
  /** @type {KeyRow[]} */
  const rows = [];
  /** @type {string[]} */
  const expTerms = [], mixTerms = [];
  let weightSum = 0, visible = 0;
  for (let j = 0; j < m; j++) {
    const k = head.keys[j];
    const products = [];
    for (let t = 0; t < q.length && t < productTerms; t++) products.push(`${formatFactor(q[t], p)}×${formatFactor(k[t], p)}`);
    const masked = head.logits[i][j] === null;
    const w = head.weights[i][j];
    weightSum += w;
    const row = {
      masked, weight: w,
      products: `${productTerms < MAX_TERMS && q.length > productTerms ? `${products.join(' + ')} + … (${q.length} terms)` : termList(products, ' + ', q.length)} = `,
      score: formatNumber(head.scores[i][j], p),
      scaled: formatNumber(head.scaled[i][j], p),
      logit: 'masked: −∞', exp: 'e^−∞ = 0', weightText: '0 (masked)', weightBold: '',
    };
    if (!masked) {
      row.logit = formatNumber(head.logits[i][j], p);
      row.exp = formatNumber(head.exponentials[i][j], p);
      row.weightText = '';
      row.weightBold = formatNumber(w, p);
      visible++;
    }
    rows.push(row);
  }
  // The sums' terms, in the rows' order: the first MAX_TERMS visible keys.
  for (const j of order) {
    if (expTerms.length === MAX_TERMS) break;
    if (rows[j].masked) continue;
    expTerms.push(rows[j].exp);
    mixTerms.push(`${rows[j].weightBold}×(${vectorText(head.values[j], p, mode.full)})`);
  }
  return {
    rows, order, top, topWeight, expTerms, mixTerms, weightSum, visible,
    shift: head.shifts[i],
    fully: !!(head.fully_masked && head.fully_masked[i]),
  };
}

/** @typedef {ReturnType<typeof queryMaths>} QueryMaths */

/**
 * The key, k_j and v_j columns: they depend on the head only, not on the query.
 * @param {Trace} trace
 * @param {FullHead} head
 * @param {number} p
 * @param {boolean} full
 */
const keyColumns = (trace, head, p, full) => head.keys.map((k, j) => [
  `${j} ${truncate(trace.source_tokens[j], 14)}`, `(${vectorText(k, p, full)})`, `(${vectorText(head.values[j], p, full)})`,
]);

// ---- the grid ---------------------------------------------------------------------------

/**
 * The panel's elements, and what they show (to skip what has not changed).
 * @typedef {object} MathsGrid
 * @property {number} m
 * @property {HTMLElement} title
 * @property {HTMLElement} vec
 * @property {HTMLElement} grid
 * @property {HTMLElement[]} heads       the column headers
 * @property {HTMLElement[]} rows
 * @property {HTMLElement} shift
 * @property {HTMLElement} sum
 * @property {HTMLElement} out
 * @property {HTMLElement} top
 * @property {HTMLElement} rope          a rotary head's q and k before and after, the score against the offset
 * @property {HTMLInputElement} full      the "full vectors" box
 * @property {HTMLInputElement} byWeight  the "keys by weight" box
 * @property {HTMLElement} orderNote
 * @property {FullHead | null} keysOf    the head whose key columns are written
 * @property {number} keysP
 * @property {boolean} keysFull          whether they were written in full
 * @property {number[]} keyWidths        their widths
 * @property {string} cols               the grid's column widths
 * @property {{head: FullHead, query: number, p: number, trace: Trace, full: boolean, byWeight: boolean} | null} shown
 */

/** @type {WeakMap<HTMLElement, MathsGrid>} */
const grids = new WeakMap();

/**
 * A grid of div rows (ARIA table roles) rather than a <table>: each row has
 * content-visibility: auto, so rows scrolled out of the panel's box cost no layout.
 * @param {HTMLElement} container
 * @param {number} m  keys
 * @returns {MathsGrid}
 */
function buildGrid(container, m) {
  const rows = Array.from({ length: m }, (_, j) => html`<div class="math-row" role="row" data-testid="math-row-${j}">\
<span role="rowheader" class="stick-l"></span><span role="cell" class="num"></span><span role="cell" class="num"></span>\
<span role="cell" class="num"><span></span><b></b></span><span role="cell" class="num"></span><span role="cell" class="num"></span>\
<span role="cell" class="num"></span><span role="cell" class="num weight" data-testid="math-weight-${j}"><span></span><b></b>\
<i class="math-bar" aria-hidden="true"></i></span></div>`);
  setHtml(container, html`<p class="math-title"></p><p class="math-vec"></p><p class="math-modes hint">\
<label class="inline"><input type="checkbox" data-testid="maths-full" data-mode="full"> full vectors</label> \
<label class="inline"><input type="checkbox" data-testid="maths-by-weight" data-mode="byWeight"> keys by weight, \
heaviest first</label> <span class="math-order"></span></p>\
<div class="math-scroll"><div class="math-grid${m > 24 ? ' virtual' : ''}" role="table" aria-label="The query against each key">\
<div class="math-row math-headrow" role="row"><span role="columnheader" class="stick-l">j key</span>\
<span role="columnheader">k<sub>j</sub></span><span role="columnheader">v<sub>j</sub></span>\
<span role="columnheader">score q·k<sub>j</sub></span><span role="columnheader"></span><span role="columnheader"></span>\
<span role="columnheader"></span><span role="columnheader"></span></div>${rows}</div></div>\
<p class="math-line math-shift note" hidden></p><p class="math-line math-sum"></p><p class="math-line math-out"></p><p class="math-line math-top"></p>\
<div class="math-line math-rope" data-testid="math-rope" hidden></div>`);
  /** @param {string} sel */
  const q = (sel) => /** @type {HTMLElement} */ (container.querySelector(sel));
  const grid = {
    m,
    title: q('.math-title'), vec: q('.math-vec'), grid: q('.math-grid'),
    heads: /** @type {HTMLElement[]} */ (Array.from(q('.math-headrow').children)),
    rows: /** @type {HTMLElement[]} */ (Array.from(container.querySelectorAll('.math-row:not(.math-headrow)'))),
    shift: q('.math-shift'), sum: q('.math-sum'), out: q('.math-out'), top: q('.math-top'), rope: q('.math-rope'),
    full: /** @type {HTMLInputElement} */ (container.querySelector('[data-mode="full"]')),
    byWeight: /** @type {HTMLInputElement} */ (container.querySelector('[data-mode="byWeight"]')),
    orderNote: q('.math-order'),
    keysOf: null, keysP: -1, keysFull: false, keyWidths: [0, 0, 0], cols: '', shown: null,
  };
  grids.set(container, grid);
  return grid;
}

/**
 * The title, the query vector and the column headers that name this head's d_k, T, shift.
 * @param {MathsGrid} M
 * @param {Trace} trace
 * @param {FullHead} head
 * @param {number} h
 * @param {number} i
 * @param {number} p
 */
function writeHeader(M, trace, head, h, i, p) {
  const T = trace.temperature;
  const shift = head.shifts[i];
  setHtml(M.title, html`Head ${h} <q>${head.name}</q>, query ${i} <q>${trace.tokens[i]}</q> · d<sub>k</sub> = ${head.d_k}, \
d<sub>v</sub> = ${head.d_v}, T = ${formatNumber(T, p)}`);
  setHtml(M.vec, html`q<sub>${i}</sub> = x<sub>${i}</sub>·W<sub>Q</sub> = <span class="vec" data-testid="math-query">(${vectorText(head.queries[i], p, M.full.checked)})</span>`);
  // only the divisor's label is computed here; the quotients are the trace's
  // a model with its own score scale (Gemma 3) multiplies by it instead
  const scoreScale = trace.score_scale || 0;
  if (scoreScale > 0) setHtml(M.heads[4], html`× the model's scale ${formatNumber(scoreScale, p)}`);
  else setHtml(M.heads[4], html`÷ √d<sub>k</sub> (√${head.d_k} ≈ ${formatNumber(Math.sqrt(head.d_k), p)})`);
  setText(M.heads[5], `÷ T (${formatNumber(T, p)}) = logit`);
  setText(M.heads[6], shift !== 0 ? `exp(logit − ${formatNumber(shift, p)})` : 'exp(logit)');
  setHtml(M.heads[7], html`weight a<sub>ij</sub> = exp ÷ row sum`);
}

/**
 * The key, k_j and v_j columns, rewritten only for another head or precision.
 * @param {MathsGrid} M
 * @param {Trace} trace
 * @param {FullHead} head
 * @param {number} p
 */
function writeKeyColumns(M, trace, head, p) {
  const full = M.full.checked;
  if (M.keysOf === head && M.keysP === p && M.keysFull === full) return;
  const widths = [0, 0, 0];
  keyColumns(trace, head, p, full).forEach((texts, j) => {
    const c = M.rows[j].children;
    for (let k = 0; k < 3; k++) {
      setText(c[k], texts[k]);
      widths[k] = Math.max(widths[k], texts[k].length);
    }
  });
  M.keysOf = head;
  M.keysP = p;
  M.keysFull = full;
  M.keyWidths = widths;
}

/**
 * The query's columns (score to weight) of every key's row; returns their widths in ch.
 * @param {MathsGrid} M
 * @param {QueryMaths} Q
 */
function writeQueryColumns(M, Q) {
  const widths = [0, 0, 0, 0, 0];
  const rank = new Array(Q.rows.length);
  Q.order.forEach((j, r) => { rank[j] = r; });
  Q.rows.forEach((r, j) => {
    const tr = M.rows[j];
    const rowClass = r.masked ? 'math-row masked' : (j === Q.top ? 'math-row top' : 'math-row');
    if (tr.className !== rowClass) tr.className = rowClass;
    const order = String(rank[j]);
    if (tr.style.order !== order) tr.style.order = order;  // the grid is a column of flex items
    const c = tr.children;
    setText(/** @type {Node} */ (c[3].firstChild), r.products);
    setText(/** @type {Node} */ (c[3].lastChild), r.score);
    setText(c[4], r.scaled);
    setText(c[5], r.logit);
    setText(c[6], r.exp);
    const weight = c[7].children;
    setText(weight[0], r.weightText);
    setText(weight[1], r.weightBold);
    const bar = /** @type {HTMLElement} */ (weight[2]), width = `${(100 * r.weight).toFixed(1)}%`;
    if (bar.dataset.width !== width) {
      bar.dataset.width = width;
      bar.style.width = width;
    }
    setAttr(c[7], 'data-value', String(r.weight));
    setAttr(c[7], 'data-masked', r.masked ? 'true' : 'false');
    widths[0] = Math.max(widths[0], r.products.length + r.score.length);
    widths[1] = Math.max(widths[1], r.scaled.length);
    widths[2] = Math.max(widths[2], r.logit.length);
    widths[3] = Math.max(widths[3], r.exp.length);
    widths[4] = Math.max(widths[4], r.weightText.length + r.weightBold.length);  // the bar lies under the digits
  });
  return widths;
}

/**
 * Column widths: as wide as the column's longest text, at least its header's longest word
 * (headers wrap).
 * @param {MathsGrid} M
 * @param {number[]} queryWidths
 */
function sizeColumns(M, queryWidths) {
  const content = [...M.keyWidths, ...queryWidths];
  let cols = '';
  for (let c = 0; c < COLS; c++) {
    const header = Math.max(7, ...(M.heads[c].textContent || '').split(/\s+/).map((w) => w.length + 1));
    cols += `${Math.min(c === 3 ? 400 : 120, Math.max(header, content[c])) + 2}ch `;
  }
  if (M.cols !== cols) {
    M.grid.style.setProperty('--math-cols', cols);
    M.cols = cols;
  }
}

/**
 * The lines under the grid: the shift, the row sum, the output, the largest weight.
 * @param {MathsGrid} M
 * @param {Trace} trace
 * @param {FullHead} head
 * @param {number} i
 * @param {number} p
 * @param {QueryMaths} Q
 */
function writeSums(M, trace, head, i, p, Q) {
  if (Q.fully) {
    setFlag(M.shift, 'hidden', true);
    setText(M.sum, 'Every key is hidden from this query: all weights are 0 and the output is 0.');
  } else {
    setFlag(M.shift, 'hidden', Q.shift === 0);
    if (Q.shift !== 0) setText(M.shift, `The row's largest logit, ${formatNumber(Q.shift, p)}, is subtracted before e^x so it stays finite; the weights do not change.`);
    setHtml(M.sum, html`<span class="step">row sum</span> Σ<sub>j</sub> exp = ${termList(Q.expTerms, ' + ', Q.visible)} = \
<b data-testid="math-row-sum" data-value="${head.row_sums[i]}">${formatNumber(head.row_sums[i], p)}</b> \
<span class="muted">(weights sum to ${formatFixed(Q.weightSum, p)})</span>`);
  }
  setHtml(M.out, html`<span class="step">output</span> o<sub>${i}</sub> = Σ<sub>j</sub> a<sub>${i}j</sub> v<sub>j</sub> = \
${Q.mixTerms.length ? termList(Q.mixTerms, ' + ', Q.visible) : '0'} = \
<b data-testid="math-output" data-value="${JSON.stringify(head.output[i])}">(${vectorText(head.output[i], p, M.full.checked)})</b>`);
  setFlag(M.top, 'hidden', Q.top < 0 || Q.fully);
  if (!M.top.hidden) {
    setHtml(M.top, html`<span class="step">largest</span> key ${Q.top} <q>${trace.source_tokens[Q.top]}</q> (${formatNumber(Q.topWeight, p)})`);
  }
}

/**
 * A rotary head: q_i and the largest key k_j before and after their rotation at their
 * positions, and the score as a function of the offset δ = i − j (the same two vectors
 * placed δ apart), drawn for δ = 0 .. n − 1 with the actual offset marked.
 * @param {MathsGrid} M
 * @param {Trace} trace
 * @param {FullHead} head
 * @param {number} i
 * @param {number} p
 * @param {QueryMaths} Q
 */
function writeRope(M, trace, head, i, p, Q) {
  const rope = trace.rope;
  const show = Boolean(rope && head.queries_unrotated && head.keys_unrotated && Q.top >= 0 && !Q.fully);
  setFlag(M.rope, 'hidden', !show);
  if (!show || !rope || !head.queries_unrotated || !head.keys_unrotated) return;
  const j = Q.top, qu = head.queries_unrotated[i], ku = head.keys_unrotated[j];
  const n = trace.tokens.length, offsets = Array.from({ length: Math.max(n, 2) }, (_, d) => d);
  const curve = offsets.map((d) => rotaryScore(rope, qu, ku, d));
  const lo = Math.min(...curve), hi = Math.max(...curve), W = 240, H = 48;
  const x = (/** @type {number} */ d) => (d / (offsets.length - 1)) * W;
  const y = (/** @type {number} */ s) => (hi > lo ? H - ((s - lo) / (hi - lo)) * H : H / 2);
  const points = curve.map((s, d) => `${x(d).toFixed(1)},${y(s).toFixed(1)}`).join(' ');
  const here = i - j, atHere = rotaryScore(rope, qu, ku, here);
  setHtml(M.rope, html`<span class="step">rotary</span> q<sub>${i}</sub> = (${formatVector(qu, p)}) → (${formatVector(head.queries[i], p)}) rotated to position ${i}; k<sub>${j}</sub> = (${formatVector(ku, p)}) → (${formatVector(head.keys[j], p)}) at ${j}.<br>The score depends only on the offset δ = i − j: the same two vectors δ apart score <svg class="rope-curve" width="${W}" height="${H}" viewBox="-2 -2 ${W + 4} ${H + 4}" role="img" aria-label="score against offset"><polyline points="${points}" fill="none" stroke="currentColor"/><circle cx="${x(here).toFixed(1)}" cy="${y(atHere).toFixed(1)}" r="3"/></svg> (δ = 0 … ${offsets.length - 1}); here δ = ${here}: <b data-testid="math-rope-score" data-offset="${here}" data-value="${atHere}">${formatNumber(atHere, p)}</b>, at δ = 0: ${formatNumber(curve[0], p)}.`);
}

/**
 * While a lean trace's head fetches its intermediates: a one-line placeholder (the grid is
 * built again when they arrive).
 * @param {HTMLElement} container
 * @param {Trace} trace
 * @param {number} h
 */
function writeLoading(container, trace, h) {
  grids.delete(container);
  setHtml(container, html`<p class="math-title">Head ${h} <q>${trace.heads[h].name}</q>: fetching this head's \
queries, keys, scores and softmax from the engine…</p>`);
  setAttr(container, 'data-head', null);
}

/** @param {State} s */
export function renderMaths(s) {
  const t = s.trace;
  if (!t) return;
  const container = $('maths');
  const head = detailedHead(s, s.head);
  if (!head) {
    writeLoading(container, t, s.head);
    return;
  }
  const i = s.query, p = precision(s);
  let M = grids.get(container);
  if (!M || M.m !== head.keys.length) {
    forget(container);
    M = buildGrid(container, head.keys.length);
  }
  const mode = mathsMode(s, head.keys.length);
  const shown = M.shown;
  if (shown && shown.head === head && shown.query === i && shown.p === p && shown.trace === t &&
      shown.full === mode.full && shown.byWeight === mode.byWeight) return;
  M.full.checked = mode.full;
  M.byWeight.checked = mode.byWeight;
  const Q = queryMaths(head, i, p, mode);
  setText(M.orderNote, mode.byWeight && s.mathsByWeight === null
    ? `(${head.keys.length} keys: by weight; the number before each key is its position)` : '');
  writeHeader(M, t, head, s.head, i, p);
  writeKeyColumns(M, t, head, p);
  sizeColumns(M, writeQueryColumns(M, Q));
  writeSums(M, t, head, i, p, Q);
  writeRope(M, t, head, i, p, Q);
  M.shown = { head, query: i, p, trace: t, full: mode.full, byWeight: mode.byWeight };
  setAttr(container, 'data-head', String(s.head));
  setAttr(container, 'data-query', String(i));
}

/** The panel's two boxes: what they say goes into the store, and the panel is written again with it. */
export function bindMaths() {
  $('maths').addEventListener('change', (e) => {
    const box = e.target;
    if (!(box instanceof HTMLInputElement) || !box.dataset.mode) return;
    if (box.dataset.mode === 'full') update({ mathsFull: box.checked });
    else update({ mathsByWeight: box.checked });
  });
}
