// @ts-check
// The interventions panel (docs/interventions.md): knock out a key token, ablate or scale
// a head, replace a token by a word, reverse the tokens or move one. Each button adds its
// intervention to the state (actions.js, intervene); the engine runs the scenario again
// and POST api/attention's `intervention` says, per baseline token, the output before and
// after and Δ. This file shows that report and the list of what is applied; it computes
// nothing.

import { intervene, NO_INTERVENTIONS } from './actions.js';
import { $, byId, setAttr, setFlag, setHtml, setOptions, setText } from './dom.js';
import { formatNumber, formatVector, truncate } from './format.js';
import { html } from './html.js';
import { baselineOf, isCross, liveTrace, precision } from './selectors.js';
import { getState, update } from './state.js';

/**
 * @typedef {import('./types.js').State} State
 * @typedef {import('./types.js').Trace} Trace
 */

/** @param {Trace} t */
const baselineTokens = (t) => (t.intervention ? t.intervention.tokens : t.tokens);
/** The keys a knock-out can hide: the source tokens in cross-attention. @param {State} s @param {Trace} t */
const keyTokens = (s, t) => (isCross(s) ? t.source_tokens : baselineTokens(t));

/**
 * A vector, its first `max` numbers and its length.
 * @param {number[]} v
 * @param {number} p
 */
function shortVector(v, p, max = 6) {
  const shown = formatVector(v.slice(0, max), p);
  return v.length > max ? `${shown} … (${v.length})` : shown;
}

/**
 * A bar whose length is |value| against the column's largest |value|.
 * @param {number} value
 * @param {number} max
 * @param {string} cls
 */
export function bar(value, max, cls) {
  const w = max > 0 ? Math.min(100, (100 * Math.abs(value)) / max) : 0;
  return html`<span class="bar ${cls}${value < 0 ? ' neg' : ''}" style="--w:${w.toFixed(1)}%" aria-hidden="true"></span>`;
}

/**
 * The interventions applied, each with the patch that removes it.
 * @param {State} s
 * @param {Trace} t
 * @returns {Array<{text: string, remove: Partial<State>}>}
 */
function appliedList(s, t) {
  const toks = baselineTokens(t), keys = keyTokens(s, t), heads = t.heads;
  /** @param {number} i */
  const tok = (i) => `${i} “${toks[i] !== undefined ? toks[i] : '?'}”`;
  /** @param {number} j */
  const key = (j) => `${j} “${keys[j] !== undefined ? keys[j] : '?'}”`;
  /** @param {number} h */
  const head = (h) => `head ${h}${heads[h] ? ` “${heads[h].name}”` : ''}`;
  /** @template T @param {T[]} list @param {number} k */
  const without = (list, k) => list.filter((_, x) => x !== k);
  return [
    ...s.replace.map((r, k) => ({ text: `replace ${tok(r.index)} by “${r.word}”`, remove: { replace: without(s.replace, k) } })),
    ...s.maskTokens.map((j, k) => ({ text: `knock out key ${key(j)}`, remove: { maskTokens: without(s.maskTokens, k) } })),
    ...s.ablate.map((a, k) => ({ text: `ablate ${head(a.head)}: ${a.kind}`, remove: { ablate: without(s.ablate, k) } })),
    ...s.scale.map((a, k) => ({ text: `scale ${head(a.head)} × ${a.factor}`, remove: { scale: without(s.scale, k) } })),
    ...(s.permute ? [{ text: `permute: new order ${s.permute.join(',')}`, remove: { permute: null } }] : []),
  ];
}

/**
 * Follows the page's selection unless the user is working in that control.
 * @param {HTMLSelectElement} sel
 * @param {number} value
 */
function follow(sel, value) {
  if (document.activeElement === sel) return;
  if ([...sel.options].some((o) => o.value === String(value))) sel.value = String(value);
}

/**
 * The pickers' options: the tokens, keys, heads and positions of the trace.
 * @param {State} s
 * @param {Trace} t
 */
function renderPickers(s, t) {
  const toks = baselineTokens(t);
  const keys = keyTokens(s, t);
  const tokItems = toks.map((w, i) => /** @type {const} */ ([i, `${i} ${truncate(w, 14)}`]));
  setOptions(byId('int-knock-token', HTMLSelectElement), keys.map((w, j) => [j, `${j} ${truncate(w, 14)}`]), keys.join('\u0000') + (isCross(s) ? '|source' : ''));
  setOptions(byId('int-replace-token', HTMLSelectElement), tokItems, toks.join('\u0000'));
  setOptions(byId('int-move-to', HTMLSelectElement), t.tokens.map((w, i) => [i, `position ${i}`]), String(t.tokens.length));
  const headItems = t.heads.map((h, k) => /** @type {const} */ ([k, `${k} ${truncate(h.name, 18)}`]));
  const headKey = t.heads.map((h) => h.name).join('\u0000');
  setOptions(byId('int-ablate-head', HTMLSelectElement), headItems, headKey);
  setOptions(byId('int-scale-head', HTMLSelectElement), headItems, headKey);
}

/**
 * The pickers follow the query and head (unless the user is working in one).
 * @param {State} s
 * @param {Trace} t
 */
function followSelection(s, t) {
  const b = baselineOf(s, s.query);
  if (!isCross(s)) follow(byId('int-knock-token', HTMLSelectElement), b);
  follow(byId('int-replace-token', HTMLSelectElement), b);
  follow(byId('int-ablate-head', HTMLSelectElement), s.head);
  follow(byId('int-scale-head', HTMLSelectElement), s.head);
  setText($('int-move'), `Move token ${s.query} “${truncate(t.tokens[s.query], 12)}” to`);
}

/** @param {State} s @param {Trace} t */
function renderApplied(s, t) {
  const items = appliedList(s, t);
  setHtml($('int-list'), items.length
    ? html`${items.map((it, k) => html`<li><button type="button" class="chip" data-chip="${k}" aria-label="Remove: ${it.text}">${it.text} <span aria-hidden="true">×</span></button></li>`)}`
    : html`<li class="hint">none: the outputs are the baseline's</li>`);
  setFlag(byId('int-reset', HTMLButtonElement), 'disabled', !items.length);
  const iv = t.intervention;
  setText($('int-engine'), iv ? `The engine applied, in this order: ${iv.applied.join('; ')}.` : '');
}

/** The report: each baseline token's output before and after, Δ and ‖Δ‖. @param {State} s @param {Trace} t */
function renderResult(s, t) {
  const box = $('int-result');
  const iv = t.intervention;
  const b = baselineOf(s, s.query);
  if (!iv) {
    setHtml(box, html`<p class="hint">No intervention: pick one above (or hide a token from the controls) and the engine \
runs the scenario again; each token's output before and after, and the difference Δ = after − before, appear here.</p>`);
    setAttr(box, 'data-state', 'none');
    return;
  }
  const p = precision(s);
  let maxNorm = 0, arg = -1;
  iv.delta_norm.forEach((x, i) => { if (x > maxNorm) { maxNorm = x; arg = i; } });
  const allZero = iv.after.every((v) => v.every((x) => x === 0));
  const rows = iv.tokens.map((tok, i) => {
    const row = iv.after_row[i];
    const after = iv.tokens_after[row];
    return html`<tr data-token="${i}" data-testid="int-row-${i}" data-delta-norm="${iv.delta_norm[i]}" \
data-before="${JSON.stringify(iv.before[i])}" data-after="${JSON.stringify(iv.after[i])}">\
<th scope="row">${i} ${truncate(tok, 12)}${after !== tok ? html` → ${truncate(after, 12)}` : ''}${row !== i ? html` <span class="hint">(row ${row})</span>` : ''}</th>\
<td class="num norm">${formatNumber(iv.delta_norm[i], Math.max(p, 3))} ${bar(iv.delta_norm[i], maxNorm, 'delta')}</td>\
<td class="vec">${shortVector(iv.delta[i], p)}</td><td class="vec">${shortVector(iv.before[i], p)}</td><td class="vec">${shortVector(iv.after[i], p)}</td></tr>`;
  });
  let summary;
  if (allZero) summary = html`Every output is 0 after the intervention: nothing of the layer's output is left.`;
  else if (maxNorm === 0) summary = html`No output moved: ‖Δ‖ = 0 for every token.`;
  else summary = html`Largest change: token ${arg} “${iv.tokens[arg]}”, ‖Δ‖ = ${formatNumber(maxNorm, Math.max(p, 3))}.`;
  setHtml(box, html`<p class="int-summary" data-testid="int-summary" data-all-zero="${allZero}">${summary}</p>\
<div class="table-scroll int-scroll"><table class="data-table int-table"><thead><tr><th scope="col">token (baseline)</th>\
<th scope="col">‖Δ‖</th><th scope="col">Δ = after − before</th><th scope="col">output before</th><th scope="col">output after</th></tr></thead>\
<tbody>${rows}</tbody></table></div>`);
  setAttr(box, 'data-state', 'done');
  for (const tr of box.querySelectorAll('tr[data-token]')) {
    if (tr instanceof HTMLElement) tr.classList.toggle('selected', Number(tr.dataset.token) === b);
  }
}

/**
 * What the panel shows, by part: each is drawn again only when what it shows changes.
 * @type {WeakMap<HTMLElement, {trace: Trace, query: number, head: number, lists: unknown[], p: number}>}
 */
const shown = new WeakMap();

/** @param {State} s */
export function renderInterventions(s) {
  const t = liveTrace(s);
  if (!t) return;
  const panel = $('interventions-section');
  const last = shown.get(panel);
  const lists = [s.replace, s.maskTokens, s.ablate, s.scale, s.permute];
  const p = precision(s);
  const sameTrace = !!last && last.trace === t;
  if (!sameTrace) renderPickers(s, t);
  if (!sameTrace || last.query !== s.query || last.head !== s.head) followSelection(s, t);
  if (!sameTrace || last.lists.some((x, k) => x !== lists[k])) renderApplied(s, t);
  if (!sameTrace || last.query !== s.query || last.p !== p) renderResult(s, t);
  shown.set(panel, { trace: t, query: s.query, head: s.head, lists, p });
}

// ---- handlers: each adds or removes an intervention -------------------------------------------

/** @param {string} id */
const selected = (id) => Number(byId(id, HTMLSelectElement).value);

/**
 * The current order of the baseline's tokens.
 * @param {State} s
 * @param {Trace} t
 */
const currentOrder = (s, t) => (s.permute ? s.permute.slice() : baselineTokens(t).map((_, i) => i));
/** @param {number[]} order  the identity is no permutation */
const orderPatch = (order) => ({ permute: order.every((v, i) => v === i) ? null : order });

/** @param {number[]} heads */
function ablate(heads) {
  const kind = byId('int-ablate-kind', HTMLSelectElement).value;
  return intervene((s) => ({ ablate: s.ablate.filter((a) => !heads.includes(a.head)).concat(heads.map((h) => ({ head: h, kind }))) }));
}

function scaleHead() {
  const raw = byId('int-scale-factor', HTMLInputElement).value.trim();
  const f = Number(raw);
  if (raw === '' || !Number.isFinite(f)) { update({ error: `scale factor: expected a number but got "${raw}"` }); return; }
  const h = selected('int-scale-head');
  intervene((s) => ({ scale: s.scale.filter((a) => a.head !== h).concat([{ head: h, factor: f }]) }));
}

function replaceToken() {
  const word = byId('int-replace-word', HTMLInputElement).value.trim();
  if (!word || /\s/.test(word)) { update({ error: `replace: type one word (no spaces), not "${word}"` }); return; }
  const j = selected('int-replace-token');
  intervene((s) => ({ replace: s.replace.filter((r) => r.index !== j).concat([{ index: j, word }]) }));
}

/** @param {MouseEvent} e */
function removeChip(e) {
  const chip = e.target instanceof Element ? e.target.closest('[data-chip]') : null;
  if (!(chip instanceof HTMLElement)) return;
  const s = getState();
  const t = liveTrace(s);
  const item = t ? appliedList(s, t)[Number(chip.dataset.chip)] : undefined;
  if (!item) return;
  intervene(() => item.remove);
  $('int-reset').focus(); // the chip is about to disappear
}

export function bindInterventions() {
  $('int-knock').addEventListener('click', () => {
    const j = selected('int-knock-token');
    intervene((s) => (s.maskTokens.includes(j) ? {} : { maskTokens: [...s.maskTokens, j] }));
  });
  $('int-ablate').addEventListener('click', () => ablate([selected('int-ablate-head')]));
  $('int-ablate-all').addEventListener('click', () => {
    const t = liveTrace(getState());
    if (t) ablate(t.heads.map((_, h) => h));
  });
  $('int-scale').addEventListener('click', scaleHead);
  $('int-replace').addEventListener('click', replaceToken);
  $('int-replace-word').addEventListener('keydown', (e) => { if (e.key === 'Enter') { e.preventDefault(); replaceToken(); } });
  $('int-reverse').addEventListener('click', () => intervene((s, t) => orderPatch(currentOrder(s, t).reverse())));
  $('int-move').addEventListener('click', () => {
    const to = selected('int-move-to');
    intervene((s, t) => {
      const order = currentOrder(s, t);
      const [moved] = order.splice(s.query, 1);
      order.splice(to, 0, moved);
      return orderPatch(order);
    });
  });
  $('int-list').addEventListener('click', removeChip);
  $('int-reset').addEventListener('click', () => intervene(() => NO_INTERVENTIONS));
}
