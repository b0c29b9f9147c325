// @ts-check
// The Table view: the shown head's weights as an HTML table, each cell with data-row,
// data-col, data-weight and data-masked (what the browser tests read). It holds n × m
// cells, tens of milliseconds of HTML for a 64-token head, so it is built only while the
// Table view is shown, or on request (renderTable(s, true): the test hook's tableNow).

import { $, setAttr } from './dom.js';
import { formatNumber, truncate } from './format.js';
import { html } from './html.js';
import { maskGrid } from './selectors.js';

/**
 * @typedef {import('./types.js').State} State
 * @typedef {import('./types.js').Trace} Trace
 */

/**
 * @param {Trace} trace
 * @param {number} h
 */
function weightsTable(trace, h) {
  const head = trace.heads[h];
  const G = maskGrid(head);
  const header = trace.source_tokens.map((tok, j) => html`<th scope="col">${j} ${truncate(tok, 10)}</th>`);
  const rows = trace.tokens.map((tok, i) => {
    const wRow = head.weights[i], gRow = G[i];
    const cells = wRow.map((w, j) => (gRow[j] === null
      ? html`<td data-row="${i}" data-col="${j}" data-weight="${w}" data-masked="true" class="masked">×</td>`
      : html`<td data-row="${i}" data-col="${j}" data-weight="${w}" data-masked="false">${formatNumber(w, 2)}</td>`));
    return html`<tr><th scope="row">${i} ${truncate(tok, 10)}</th>${cells}</tr>`;
  });
  return html`<table class="weights-table" data-head="${h}"><thead><tr><th scope="col">query \\ key</th>${header}</tr></thead><tbody>${rows}</tbody></table>`;
}

/** @type {WeakMap<HTMLElement, {trace: Trace, head: number}>} */
const built = new WeakMap();

/**
 * @param {State} s
 * @param {boolean} [now]  build it even when the Table view is hidden
 */
export function renderTable(s, now = false) {
  const t = s.trace;
  if (!t || (s.view !== 'table' && !now)) return;
  const box = $('weights-table');
  const last = built.get(box);
  if (last && last.trace === t && last.head === s.head) return;
  box.innerHTML = weightsTable(t, s.head).text;
  setAttr(box, 'data-head', String(s.head));
  built.set(box, { trace: t, head: s.head });
}
