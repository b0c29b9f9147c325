// @ts-check
// Per row of the shown head: the entropy in bits and the largest weight with its key (the
// trace does not carry them; selectors.js, rowStats), the query's row marked and kept in
// view. Built once per row count; after that only text changes. Div rows with
// content-visibility: auto, so rows outside the scroll box cost no layout.

import { $, setAttr, setText } from './dom.js';
import { formatNumber, truncate } from './format.js';
import { html } from './html.js';
import { rowStats } from './selectors.js';

/**
 * @typedef {import('./types.js').State} State
 * @typedef {import('./types.js').Head} Head
 */

/** @typedef {{cells: HTMLCollection[], rows: HTMLElement[], head: Head | null, tokens: string[] | null, sources: string[] | null, query: number}} Readouts */
/** @type {WeakMap<HTMLElement, Readouts>} */
const built = new WeakMap();

/**
 * The grid for n rows (made when n changes).
 * @param {HTMLElement} container
 * @param {number} n
 * @returns {Readouts}
 */
function readoutRows(container, n) {
  const had = built.get(container);
  if (had && had.rows.length === n) return had;
  const rows = Array.from({ length: n }, (_, i) => html`<div class="ro-row" role="row" data-row="${i}"><span role="rowheader"></span>\
<span role="cell" class="num" data-testid="row-entropy-${i}"></span><span role="cell" class="num" data-testid="row-max-${i}"></span>\
<span role="cell"></span></div>`);
  container.innerHTML = html`<div class="readouts${n > 24 ? ' virtual' : ''}" role="table" aria-label="Per-row entropy and largest weight">\
<div class="ro-row ro-head" role="row"><span role="columnheader">query</span>\
<span role="columnheader" title="Shannon entropy of the row in bits: 0 is one-hot, log₂ m is uniform">entropy (bits)</span>\
<span role="columnheader">largest weight</span><span role="columnheader">on key</span></div>${rows}</div>`.text;
  const elements = /** @type {HTMLElement[]} */ (Array.from(container.querySelectorAll('.ro-row[data-row]')));
  const out = { rows: elements, cells: elements.map((r) => r.children), head: null, tokens: null, sources: null, query: -1 };
  built.set(container, out);
  return out;
}

/**
 * Every row's numbers for the head.
 * @param {Readouts} R
 * @param {Head} head
 * @param {string[]} tokens
 * @param {string[]} sources
 */
function writeRows(R, head, tokens, sources) {
  for (let i = 0; i < tokens.length; i++) {
    const r = rowStats(head, i);
    const cells = R.cells[i];
    setText(cells[0], `${i} ${truncate(tokens[i], 16)}`);
    if (r.fully) {
      setAttr(cells[1], 'data-value', '0');
      setText(cells[1], '—');
      setAttr(cells[2], 'data-value', '0');
      setText(cells[2], 'all masked');
      setText(cells[3], '—');
    } else {
      setAttr(cells[1], 'data-value', String(r.entropy));
      setText(cells[1], r.entropy.toFixed(2));
      setAttr(cells[2], 'data-value', String(r.max));
      setText(cells[2], formatNumber(r.max, 2));
      setText(cells[3], `${r.arg} ${truncate(sources[r.arg], 16)}`);
    }
  }
}

/**
 * Keeps the selected row visible inside its own scroll box (not the page), in the next
 * frame so that reading the layout does not force an extra one now.
 * @type {WeakMap<HTMLElement, number>}
 */
const scrollFrames = new WeakMap();
/**
 * @param {HTMLElement} box
 * @param {HTMLElement} row
 */
function scrollRowIntoView(box, row) {
  cancelAnimationFrame(scrollFrames.get(box) || 0);
  scrollFrames.set(box, requestAnimationFrame(() => {
    const head = /** @type {HTMLElement | null} */ (box.querySelector('.ro-head'));
    const pad = head ? head.offsetHeight : 0;
    const top = row.offsetTop, bottom = top + row.offsetHeight;
    if (top - pad < box.scrollTop) box.scrollTop = Math.max(0, top - pad);
    else if (bottom > box.scrollTop + box.clientHeight) box.scrollTop = bottom - box.clientHeight;
  }));
}

/** @param {State} s */
export function renderReadouts(s) {
  const t = s.trace;
  if (!t) return;
  const box = $('readouts');
  const R = readoutRows(box, t.tokens.length);
  const head = t.heads[s.head];
  if (R.head !== head || R.tokens !== t.tokens || R.sources !== t.source_tokens) {
    writeRows(R, head, t.tokens, t.source_tokens);
    R.head = head;
    R.tokens = t.tokens;
    R.sources = t.source_tokens;
  }
  if (R.query !== s.query) {
    if (R.rows[R.query]) R.rows[R.query].classList.remove('selected');
    const row = R.rows[s.query];
    if (row) {
      row.classList.add('selected');
      scrollRowIntoView(box, row);
    }
    R.query = s.query;
  }
}
