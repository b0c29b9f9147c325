// @ts-check
// "Circuits" (docs/circuits.md): every head of the loaded model read from its weights alone,
// POST api/model/circuits. A grid of layers × heads gives each head's OV copying score (red:
// it raises the token it attends to, blue: it suppresses it); beside it, the heads as nodes,
// layer by layer, and an arrow from a head into a later one for each of the largest Q-, K- or
// V-composition scores (the kind picked), its width the score's excess over random matrices'.
// Every number is the server's, the same as `attnlab model circuits --json`; each cell and
// arrow carries it in data-value. The panel's state is the store's `circuits` part.

import { api, messageOf } from './api.js';
import { $, byId, setFlag, setHtml, setText, setValue } from './dom.js';
import { formatNumber } from './format.js';
import { html } from './html.js';
import { getState, update } from './state.js';

/**
 * @typedef {import('./types.js').State} State
 * @typedef {import('./types.js').CircuitsState} CircuitsState
 */

/** How many arrows: the largest scores of the kind picked. */
const ARROWS = 12;

/** The state's circuits part, patched. @param {Partial<CircuitsState>} patch */
function patchCircuits(patch) {
  update({ circuits: { ...getState().circuits, ...patch } });
}

async function ask() {
  const source = getState().model.source;
  /** @type {Record<string, unknown>} */
  const body = {};
  if (source.run !== null) body.run = source.run;
  if (source.step !== null) body.step = source.step;
  patchCircuits({ status: 'reading every head…', error: false });
  try {
    patchCircuits({ reply: await api('api/model/circuits', body), key: JSON.stringify(source), status: '', error: false });
  } catch (e) {
    patchCircuits({ status: messageOf(e), error: true });
  }
}

/** A signed score's colour: red for +1, blue for −1, white at 0. @param {number} x */
function signed(x) {
  const t = Math.max(-1, Math.min(1, x));
  const fade = Math.round(255 * (1 - Math.abs(t)));
  return t >= 0 ? `rgb(255,${fade},${fade})` : `rgb(${fade},${fade},255)`;
}

/** @param {any} c the reply @param {number} layers @param {number} heads */
function copyingMarkup(c, layers, heads) {
  const rows = [];
  for (let l = 0; l < layers; l++) {
    const cells = [];
    for (let h = 0; h < heads; h++) {
      const x = c.ov_copying[l * heads + h];
      cells.push(html`<td class="num" data-testid="circuits-copying" data-head-ref="${l}.${h}" data-value="${x}" \
style="background:${signed(x)}">${formatNumber(x, 2)}</td>`);
    }
    rows.push(html`<tr><th scope="row">${l}</th>${cells}</tr>`);
  }
  const header = Array.from({ length: heads }, (_, h) => html`<th scope="col">${h}</th>`);
  return html`<table class="data-table circuits-grid"><caption>OV copying score, layer × head</caption>\
<tr><th></th>${header}</tr>${rows}</table>`;
}

/** @param {any} c the reply @param {'q' | 'k' | 'v'} kind @param {number} layers @param {number} heads */
function arrowsMarkup(c, kind, layers, heads) {
  const m = /** @type {(number | null)[][]} */ (c.composition[kind]);
  const baseline = c.baseline[kind];
  /** @type {{a: number, b: number, x: number}[]} */
  const all = [];
  m.forEach((row, a) => row.forEach((x, b) => { if (x !== null) all.push({ a, b, x }); }));
  all.sort((p, q) => q.x - p.x);
  const shown = all.slice(0, ARROWS);
  const W = 120 * layers + 40, H = 28 * heads + 20;
  const at = (/** @type {number} */ i) => ({ x: 30 + 120 * Math.floor(i / heads), y: 20 + 28 * (i % heads) });
  const top = shown.length ? shown[0].x - baseline : 0;
  const arrows = shown.map(({ a, b, x }) => {
    const p = at(a), q = at(b);
    const width = top > 0 ? 0.5 + 5 * Math.max(0, x - baseline) / top : 1;
    return html`<line data-testid="circuits-arrow" data-from="${c.heads[a]}" data-to="${c.heads[b]}" data-value="${x}" \
x1="${p.x}" y1="${p.y}" x2="${q.x}" y2="${q.y}" stroke-width="${width.toFixed(2)}"><title>${c.heads[a]} → ${c.heads[b]}: \
${formatNumber(x, 3)}</title></line>`;
  });
  const nodes = c.heads.map((/** @type {string} */ name, /** @type {number} */ i) => {
    const p = at(i);
    return html`<g><circle cx="${p.x}" cy="${p.y}" r="9"></circle><text x="${p.x}" y="${p.y + 4}">${name}</text></g>`;
  });
  return html`<figure class="circuits-figure"><svg viewBox="0 0 ${W} ${H}" width="${W}" height="${H}" role="img" \
aria-label="the ${ARROWS} largest ${kind.toUpperCase()}-composition scores as arrows">${arrows}${nodes}</svg>\
<figcaption>the ${shown.length} largest ${kind.toUpperCase()}-composition scores (random matrices: \
${formatNumber(baseline, 3)}); an arrow's width is its score above that</figcaption></figure>`;
}

/** @param {State} s */
export function renderCircuits(s) {
  const info = s.model.info;
  setFlag($('circuits-section'), 'hidden', !info || !info.loaded);
  if (!info || !info.loaded) return;
  const c = s.circuits;
  if (c.key !== null && c.key !== JSON.stringify(s.model.source)) {  // another checkpoint: read it again
    patchCircuits({ key: null, reply: null, status: '', error: false });
    return;  // the update renders again with the cleared state
  }
  const status = $('circuits-status');
  setText(status, c.status);
  status.classList.toggle('error', c.error);
  setValue(byId('circuits-kind', HTMLSelectElement), c.kind);
  const layers = info.n_layer || 0, heads = info.n_head || 0;
  setHtml($('circuits-result'), c.reply ? html`<div class="circuits-views">${copyingMarkup(c.reply, layers, heads)}\
${arrowsMarkup(c.reply, c.kind, layers, heads)}</div>` : html``);
}

export function bindCircuits() {
  $('circuits-run').addEventListener('click', () => { void ask(); });
  byId('circuits-kind', HTMLSelectElement).addEventListener('change', (e) => {
    const kind = /** @type {HTMLSelectElement} */ (e.target).value;
    if (kind === 'q' || kind === 'k' || kind === 'v') patchCircuits({ kind });
  });
}
