// @ts-check
// The token strip (the query picker: one option per token, the query selected, hidden
// keys struck through), the one-line summary of the trace under it, and what a screen
// reader hears when the query or head changes.

import { $, setAttr, setHtml, setText } from './dom.js';
import { formatNumber } from './format.js';
import { html } from './html.js';
import { isCross, rowStats } from './selectors.js';

/** @typedef {import('./types.js').State} State */

/** @type {WeakMap<HTMLElement, {key: string, selected: number}>} what the strip shows: its tokens, the selected one */
const shown = new WeakMap();

/** @param {State} s */
function renderStrip(s) {
  const t = /** @type {import('./types.js').Trace} */ (s.trace);
  const strip = $('token-strip');
  const hidden = isCross(s) ? [] : t.mask_tokens || [];
  const key = t.tokens.join('\u0000') + '\u0001' + hidden.join(',');
  let last = shown.get(strip);
  if (!last || last.key !== key) {
    const hiddenSet = new Set(hidden);
    setHtml(strip, html`${t.tokens.map((tok, i) => html`<span role="option" id="tok-${i}" \
class="tok${hiddenSet.has(i) ? ' hidden-key' : ''}" data-index="${i}" aria-selected="false"><span class="tok-i">${i}</span>${tok}</span>`)}`);
    shown.set(strip, (last = { key, selected: -1 }));
  }
  if (last.selected !== s.query) {
    const prev = document.getElementById('tok-' + last.selected);
    if (prev) { prev.classList.remove('selected'); prev.setAttribute('aria-selected', 'false'); }
    const cur = document.getElementById('tok-' + s.query);
    if (cur) { cur.classList.add('selected'); cur.setAttribute('aria-selected', 'true'); }
    last.selected = s.query;
  }
  setAttr(strip, 'aria-activedescendant', `tok-${s.query}`);
  setAttr(strip, 'data-query', String(s.query));
}

/** @param {State} s */
function renderSummary(s) {
  const t = /** @type {import('./types.js').Trace} */ (s.trace);
  const n = t.tokens.length, m = t.source_tokens.length, H = t.heads.length;
  const parts = [isCross(s) ? `${n} queries → ${m} source tokens (${t.source_tokens.join(' ')})` : `${n} tokens`];
  parts.push(`${H} head${H === 1 ? '' : 's'}`);
  parts.push(`positions ${t.positions}`);
  parts.push(t.causal ? 'causal mask' : 'no causal mask');
  if (t.window !== null && t.window !== undefined) parts.push(`window ${t.window}`);
  if (t.mask_tokens && t.mask_tokens.length) parts.push(`hidden keys ${t.mask_tokens.join(', ')}`);
  parts.push(`T = ${formatNumber(t.temperature, 2)}`);
  setText($('trace-summary'), parts.join(' · '));
}

/** @param {State} s */
function renderAnnouncement(s) {
  const t = /** @type {import('./types.js').Trace} */ (s.trace);
  const st = rowStats(t.heads[s.head], s.query);
  setText($('announce'), `Query ${s.query} ${t.tokens[s.query]}, head ${s.head}: ` +
    (st.fully ? 'every key masked' : `largest weight ${formatNumber(st.max, 2)} on ${t.source_tokens[st.arg]}`));
}

/** @param {State} s */
export function renderTokens(s) {
  if (!s.trace) return;
  renderStrip(s);
  renderSummary(s);
  renderAnnouncement(s);
}
