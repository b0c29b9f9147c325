// @ts-check
// "Evicting the KV cache" (docs/long-context.md): the model panel's text run a token at a
// time with the cache held to each budget by each policy (a window, attention sinks, H2O's
// heavy hitters, random, by effect), as a job (POST api/model/analysis, kind "evict") whose
// progress the panel follows and which "Cancel" stops. The result: the next-token loss
// against the budget, a line per policy, the full cache's loss as a dashed line, and a table
// with the agreement with the full cache and the bytes kept. Every number is the server's,
// the same as `attnlab model evict --json`; each point and cell carries it in data-value. The
// panel's state is the store's `evict` part.

import { api, messageOf } from './api.js';
import { followJob } from './jobs.js';
import { $, byId, setFlag, setHtml, setText, setValue } from './dom.js';
import { formatBytes, formatNumber } from './format.js';
import { html } from './html.js';
import { getState, update } from './state.js';

/**
 * @typedef {import('./types.js').State} State
 * @typedef {import('./types.js').EvictState} EvictState
 */

export const POLICIES = ['window', 'sinks', 'h2o', 'random', 'effect'];
const COLOURS = { window: '#1f77b4', sinks: '#2ca02c', h2o: '#d62728', random: '#7f7f7f', effect: '#9467bd' };

/** The state's evict part, patched. @param {Partial<EvictState>} patch */
function patchEvict(patch) {
  update({ evict: { ...getState().evict, ...patch } });
}

/** @param {string} text @param {boolean} [error] */
function say(text, error = false) {
  patchEvict({ status: text, error });
}

/**
 * The budgets box as numbers: whole numbers ≥ 1 separated by commas or spaces.
 * @param {string} text
 * @returns {number[] | string} the budgets, or what is wrong
 */
export function parseBudgets(text) {
  const parts = text.split(/[\s,]+/).filter((p) => p !== '');
  if (!parts.length) return 'give at least one budget, in tokens';
  const out = [];
  for (const p of parts) {
    if (!/^\d+$/.test(p) || Number(p) < 1) return `"${p}" is not a budget; write whole numbers of tokens, 1 or more`;
    out.push(Number(p));
  }
  return out;
}

/** Follows the job until it ends. */
const follow = () => followJob('evict', () => getState().evict.job, (job) => patchEvict({ job }), say);

async function start() {
  const s = getState();
  const request = s.model.request;
  if (!request) {
    say('run the model on a text first (the Model panel above)', true);
    return;
  }
  const budgets = parseBudgets(s.evict.budgets);
  if (typeof budgets === 'string') {
    say(budgets, true);
    return;
  }
  if (!s.evict.policies.length) {
    say('pick at least one policy', true);
    return;
  }
  const body = { kind: 'evict', ...request, budget: budgets, policy: ['full', ...s.evict.policies], cache: s.evict.cache };
  try {
    patchEvict({ job: await api('api/model/analysis', body), status: 'started', error: false });
    await follow();
  } catch (e) {
    say(messageOf(e), true);
  }
}

async function cancel() {
  try {
    patchEvict({ job: await api('api/model/analysis/cancel', {}) });
  } catch (e) {
    say(messageOf(e), true);
  }
}

/** Loss against budget, a line per policy. @param {any} r the reply */
function plotMarkup(r) {
  const runs = r.results.filter((/** @type {any} */ x) => x.policy !== 'full');
  const budgets = [...new Set(runs.map((/** @type {any} */ x) => x.budget))].sort((a, b) => a - b);
  const losses = [r.full.loss, ...runs.map((/** @type {any} */ x) => x.loss)];
  const lo = Math.min(...losses), hi = Math.max(...losses), span = hi - lo || 1;
  const W = 420, H = 220, left = 50, right = 110, top = 12, bottom = 32;
  const logs = budgets.map(Math.log2), l0 = Math.min(...logs), l1 = Math.max(...logs);
  const x = (/** @type {number} */ b) => left + (l1 > l0 ? (Math.log2(b) - l0) / (l1 - l0) : 0.5) * (W - left - right);
  const y = (/** @type {number} */ v) => top + (1 - (v - lo) / span) * (H - top - bottom);
  const lines = POLICIES.map((p) => {
    const points = runs.filter((/** @type {any} */ q) => q.policy === p).sort((/** @type {any} */ a, /** @type {any} */ b) => a.budget - b.budget);
    if (!points.length) return html``;
    const colour = /** @type {Record<string, string>} */ (COLOURS)[p];
    const path = points.map((/** @type {any} */ q) => `${x(q.budget).toFixed(1)},${y(q.loss).toFixed(1)}`).join(' ');
    const last = points[points.length - 1];
    const dots = points.map((/** @type {any} */ q) => html`<circle data-testid="evict-point" data-policy="${p}" \
data-budget="${q.budget}" data-value="${q.loss}" cx="${x(q.budget).toFixed(1)}" cy="${y(q.loss).toFixed(1)}" r="3.5" \
fill="${colour}"><title>${p} at ${q.budget} tokens: loss ${formatNumber(q.loss, 4)}</title></circle>`);
    return html`<g><polyline points="${path}" fill="none" stroke="${colour}" stroke-width="1.5"></polyline>${dots}\
<text x="${(x(last.budget) + 8).toFixed(1)}" y="${(y(last.loss) + 4).toFixed(1)}" fill="${colour}">${p}</text></g>`;
  });
  const ticks = budgets.map((b) => html`<text x="${x(b).toFixed(1)}" y="${H - 12}" text-anchor="middle">${b}</text>`);
  return html`<figure class="evict-figure"><svg viewBox="0 0 ${W} ${H}" width="${W}" height="${H}" role="img" \
aria-label="next-token loss against the cache budget, a line per policy">\
<line x1="${left}" x2="${W - right}" y1="${y(r.full.loss).toFixed(1)}" y2="${y(r.full.loss).toFixed(1)}" \
stroke="#000" stroke-dasharray="4 3" data-testid="evict-full" data-value="${r.full.loss}"></line>\
<text x="${left - 6}" y="${y(hi) + 4}" text-anchor="end">${formatNumber(hi, 3)}</text>\
<text x="${left - 6}" y="${y(lo) + 4}" text-anchor="end">${formatNumber(lo, 3)}</text>${ticks}${lines}\
<text x="${(left + W - right) / 2}" y="${H - 1}" text-anchor="middle">budget (tokens kept)</text></svg>\
<figcaption>next-token loss (nats a token) against the budget; dashed: the full f32 cache, \
${formatNumber(r.full.loss, 4)}</figcaption></figure>`;
}

/** @param {any} r */
function tableMarkup(r) {
  const rows = r.results.map((/** @type {any} */ q) => html`<tr data-testid="evict-row" data-policy="${q.policy}" \
data-budget="${q.budget}"><td>${q.policy}</td><td class="num">${q.budget}</td>\
<td class="num" data-value="${q.loss}">${formatNumber(q.loss, 4)}</td>\
<td class="num">${formatNumber(q.loss - r.full.loss, 3)}</td>\
<td class="num" data-value="${q.agreement}">${formatNumber(100 * q.agreement, 3)}%</td>\
<td class="num">${formatBytes(q.kept_bytes)}</td></tr>`);
  return html`<table class="data-table"><caption>${r.texts} text, ${r.predicted} predictions; the cache in ${r.cache}\
</caption><tr><th>policy</th><th>budget</th><th>loss</th><th>Δ loss</th><th>agreement</th><th>kept</th></tr>${rows}</table>`;
}

/** @param {State} s */
export function renderEvict(s) {
  const info = s.model.info;
  setFlag($('evict-section'), 'hidden', !info || !info.loaded);
  if (!info || !info.loaded) return;
  const e = s.evict;
  setValue(byId('evict-budgets', HTMLInputElement), e.budgets);
  setValue(byId('evict-cache', HTMLSelectElement), e.cache);
  for (const box of $('evict-policies').querySelectorAll('input[type=checkbox]'))
    if (box instanceof HTMLInputElement) box.checked = e.policies.includes(box.value);
  const job = e.job;
  const running = !!job && job.state === 'running';
  setFlag(byId('evict-cancel', HTMLButtonElement), 'disabled', !running);
  const status = $('evict-status');
  setText(status, running ? `${job.stage || 'starting'}: ${job.done} of ${job.total}` : e.status);
  status.classList.toggle('error', e.error);
  const r = job && job.state === 'done' && job.kind === 'evict' ? job.result : null;
  setHtml($('evict-result'), r ? html`<div class="evict-views">${plotMarkup(r)}${tableMarkup(r)}</div>` : html``);
}

export function bindEvict() {
  $('evict-run').addEventListener('click', () => { void start(); });
  $('evict-cancel').addEventListener('click', () => { void cancel(); });
  byId('evict-budgets', HTMLInputElement).addEventListener('input', (e) => {
    patchEvict({ budgets: /** @type {HTMLInputElement} */ (e.target).value });
  });
  byId('evict-cache', HTMLSelectElement).addEventListener('change', (e) => {
    patchEvict({ cache: /** @type {HTMLSelectElement} */ (e.target).value });
  });
  $('evict-policies').addEventListener('change', () => {
    const picked = [...$('evict-policies').querySelectorAll('input[type=checkbox]')]
      .filter((b) => b instanceof HTMLInputElement && b.checked).map((b) => /** @type {HTMLInputElement} */ (b).value);
    patchEvict({ policies: POLICIES.filter((p) => picked.includes(p)) });
  });
}
