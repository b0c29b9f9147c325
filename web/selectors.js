// @ts-check
// Values derived from the state (state.js) that several views and panels need: whether
// the scenario is cross-attention, the heads' origins, the decimals to print, the mapping
// between the trace's rows and the baseline's tokens, the masked cells of a head, and the
// colour scale's top. Pure functions of their arguments (headMax caches per head object).

/**
 * @typedef {import('./types.js').State} State
 * @typedef {import('./types.js').Trace} Trace
 * @typedef {import('./types.js').Head} Head
 * @typedef {import('./types.js').FullHead} FullHead
 * @typedef {import('./types.js').Grid} Grid
 */

/**
 * @param {number} x
 * @param {number} lo
 * @param {number} hi
 */
export const clamp = (x, lo, hi) => Math.max(lo, Math.min(hi, x));

/**
 * The "scenario" of POST api/attention and api/probe: the bundled name, or the model's head.
 * @param {State} s
 * @returns {string | {model: import('./types.js').ModelHead}}
 */
export function scenarioOf(s) {
  return s.modelHead ? { model: s.modelHead } : s.name || '';
}

/** Cross-attention: the keys are another sequence's tokens. @param {State} s */
export function isCross(s) {
  return !!(s.base && s.base.source);
}

/**
 * Where each head of the next trace comes from: the scenario's own (not removed), then
 * the added random ones.
 * @param {State} s
 * @returns {Array<{kind: 'scenario', index: number} | {kind: 'added', k: number, seed: number}>}
 */
export function headSources(s) {
  /** @type {ReturnType<typeof headSources>} */
  const list = [];
  const count = s.base ? s.base.heads.length : 0;
  for (let i = 0; i < count; i++) if (!s.removeHeads.includes(i)) list.push({ kind: 'scenario', index: i });
  s.addHeads.forEach((h, k) => list.push({ kind: 'added', k, seed: h.seed }));
  return list;
}

/**
 * The random seed a head was drawn from, or null for a designed head.
 * @param {Trace} trace
 * @param {number} h
 */
export function headSeed(trace, h) {
  const head = trace.heads[h];
  if (head.random_seed !== undefined && head.random_seed !== null) return head.random_seed;
  const m = /^random \(seed (\d+)\)$/.exec(head.name || '');
  return m ? Number(m[1]) : null;
}

/**
 * Decimals to print: the scenario's own "precision" (at most 12), else 2.
 * @param {State} s
 */
export function precision(s) {
  const sj = s.trace && s.trace.scenario_json;
  if (sj && Number.isInteger(sj.precision)) return Math.min(12, /** @type {number} */ (sj.precision));
  if (s.base && Number.isInteger(s.base.precision)) return Math.min(12, /** @type {number} */ (s.base.precision));
  return 2;
}

/**
 * The baseline token shown at `row` of the trace (a permutation moves tokens).
 * @param {State} s
 * @param {number} row
 */
export function baselineOf(s, row) {
  const iv = s.trace && s.trace.intervention;
  if (!iv) return row;
  const b = iv.after_row.indexOf(row);
  return b < 0 ? row : b;
}

/**
 * The row of `trace` that shows baseline token b.
 * @param {Trace} trace
 * @param {number} b
 */
export function rowOf(trace, b) {
  const iv = trace.intervention;
  return iv && b < iv.after_row.length ? iv.after_row[b] : b;
}

/**
 * The trace the API answered for the page's own request, or null (while a scenario loads,
 * or while the benchmark shows a trace of its own): only that one drives the panels.
 * @param {State} s
 */
export function liveTrace(s) {
  return s.trace && s.trace === s.apiTrace ? s.trace : null;
}

/**
 * A head of a lean trace lacks its intermediates (queries ... logits).
 * @param {Head | undefined} head
 * @returns {head is FullHead}
 */
export function hasDetail(head) {
  return !!head && Array.isArray(head.logits);
}

/**
 * Head h with its intermediates: the trace's, or those fetched since for a lean trace;
 * null while they are on their way.
 * @param {State} s
 * @param {number} h
 * @returns {FullHead | null}
 */
export function detailedHead(s, h) {
  if (!s.trace) return null;
  const head = s.trace.heads[h];
  if (hasDetail(head)) return head;
  return s.headDetail[h] || null;
}

/**
 * The grid whose nulls mark the masked cells: the head's logits, or for a head of a lean
 * trace the shared pattern (traces.js, prepareTrace).
 * @param {Head} head
 * @returns {Grid}
 */
export function maskGrid(head) {
  return head.logits || head.mask || head.weights;
}

/** @type {WeakMap<Head, number>} */
const headMaxes = new WeakMap();

/**
 * The largest visible weight of a head (the top of the "0 to the head's largest weight"
 * colour scale); 1 when there is none.
 * @param {Head} head
 */
export function headMax(head) {
  const cached = headMaxes.get(head);
  if (cached !== undefined) return cached;
  let max = 0;
  const G = maskGrid(head);
  for (let i = 0; i < head.weights.length; i++) {
    const w = head.weights[i], g = G[i];
    for (let j = 0; j < w.length; j++) if (g[j] !== null && w[j] > max) max = w[j];
  }
  const out = max > 0 ? max : 1;
  headMaxes.set(head, out);
  return out;
}

/**
 * The weight drawn darkest for head h.
 * @param {State} s
 * @param {number} h
 */
export function scaleMax(s, h) {
  return s.scaleMode === 'head' && s.trace ? headMax(s.trace.heads[h]) : 1;
}

/**
 * Per-row readouts: entropy (bits) and the largest visible weight, which the trace does
 * not carry.
 * @param {Head} head
 * @param {number} i
 */
export function rowStats(head, i) {
  const w = head.weights[i];
  const g = maskGrid(head)[i];
  let H = 0, max = -1, arg = -1;
  for (let j = 0; j < w.length; j++) {
    const x = w[j];
    if (x > 0) H -= x * Math.log2(x);
    if (g[j] !== null && x > max) { max = x; arg = j; }
  }
  return { entropy: H === 0 ? 0 : H, max: Math.max(0, max), arg, fully: !!(head.fully_masked && head.fully_masked[i]) };
}
