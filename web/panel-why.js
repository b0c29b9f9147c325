// @ts-check
// "Why here?" (docs/circuits.md): for the model's head shown in the views and the query
// picked, the head's score on the key it weighs most (or the key typed), taken apart by POST api/model/qk into
// pairs of what the query and the key read from the residual stream (the token embedding,
// positions, each earlier head, each earlier MLP, the biases). Each pair is a signed bar;
// for a rotary head the same pair unrotated stands beside it, so that what position makes of
// the score can be read off. Every number is the server's, the same as `attnlab model qk
// --json`; each bar carries it in data-value. The panel's state is the store's `why` part.

import { api, messageOf } from './api.js';
import { $, byId, setFlag, setHtml, setText, setValue } from './dom.js';
import { formatNumber } from './format.js';
import { html } from './html.js';
import { inputOf } from './panel-model.js';
import { getState, update } from './state.js';

/**
 * @typedef {import('./types.js').State} State
 * @typedef {import('./types.js').WhyState} WhyState
 */

/** The pairs shown, the largest first; the rest come summed as one. */
const TOP = 12;

/** The state's why part, patched. @param {Partial<WhyState>} patch */
function patchWhy(patch) {
  update({ why: { ...getState().why, ...patch } });
}

/**
 * The request for the head and query the views show (and the key typed, if any), or null when
 * no model head is shown.
 * @param {State} s
 */
function whyRequest(s) {
  const h = s.modelHead;
  if (!h) return null;
  /** @type {Record<string, unknown>} */
  const body = { ...inputOf(h), head: `${h.layer}.${h.head}`, query: s.query, top: TOP };
  const key = s.why.keyInput.trim();
  if (key !== '') body.key = /^\d+$/.test(key) ? Number(key) : key;  // the server names a bad one
  return body;
}

async function ask() {
  const body = whyRequest(getState());
  if (!body) return;
  patchWhy({ status: 'asking…', error: false });
  try {
    const reply = await api('api/model/qk', body);
    patchWhy({ reply, key: JSON.stringify(body), status: '', error: false });
  } catch (e) {
    patchWhy({ status: messageOf(e), error: true });
  }
}

/** @param {number} x */
const number = (x) => formatNumber(x, 3);

/**
 * A pair's bar: red for the score, blue against it, its length against the largest.
 * @param {number} x
 * @param {number} largest
 */
function bar(x, largest) {
  const width = largest > 0 ? Math.round(100 * Math.abs(x) / largest) : 0;
  return html`<span class="why-bar ${x >= 0 ? 'for' : 'against'}" style="width:${width}%"></span>`;
}

/** @param {any} q POST api/model/qk's reply */
function whyMarkup(q) {
  const largest = q.parts.reduce((/** @type {number} */ m, /** @type {any} */ p) => Math.max(m, Math.abs(p.score)), 0);
  const rows = q.parts.map((/** @type {any} */ p) => html`<tr data-testid="why-pair" data-value="${p.score}">\
<td><code>${p.query_side}</code></td><td><code>${p.key_side}</code></td><td class="num">${number(p.score)}</td>\
<td class="why-bar-cell">${bar(p.score, largest)}</td>${q.rotary ? html`<td class="num">${number(p.unrotated)}</td>` : ''}</tr>`);
  const token = (/** @type {number} */ i) => q.tokens[i];
  return html`<p data-testid="why-summary">query ${q.query} <code>${token(q.query)}</code> on key ${q.key} <code>${token(q.key)}</code>: \
score ${number(q.score)}, weight ${number(q.weight)}${q.rotary ? html`; unrotated, the pairs would give ${number(q.unrotated_score)}: \
the rotation by the offset ${q.query - q.key} makes ${number(q.score - q.unrotated_score)} of the score` : ''}</p>\
<table class="data-table why-table" data-testid="why-pairs"><tr><th>query side</th><th>key side</th><th>score</th><th></th>\
${q.rotary ? html`<th>unrotated</th>` : ''}</tr>${rows}</table>`;
}

/** @param {State} s */
export function renderWhy(s) {
  setFlag($('why-section'), 'hidden', !s.modelHead);
  if (!s.modelHead) return;
  const w = s.why;
  const request = whyRequest(s);
  // Another head, text or query: the answer shown was for the one before.
  if (w.key !== null && JSON.stringify(request) !== w.key) {
    patchWhy({ key: null, reply: null, status: '', error: false });
    return;  // the update renders again with the cleared state
  }
  setText($('why-head'), `${s.modelHead.layer}.${s.modelHead.head}`);
  const keyBox = byId('why-key', HTMLInputElement);
  if (document.activeElement !== keyBox) setValue(keyBox, w.keyInput);
  const status = $('why-status');
  setText(status, w.status);
  status.classList.toggle('error', w.error);
  setHtml($('why-result'), w.reply ? whyMarkup(w.reply) : html``);
}

export function bindWhy() {
  $('why-run').addEventListener('click', () => { void ask(); });
  byId('why-key', HTMLInputElement).addEventListener('change', (e) => {
    patchWhy({ keyInput: /** @type {HTMLInputElement} */ (e.target).value });
  });
}
