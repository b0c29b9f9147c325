// @ts-check
// "What drove this output?" (docs/interventions.md): for the selected query and head,
// POST api/probe's measures per key token side by side (the weight, weight·‖v‖, erasure,
// the readout without the token, gradient × input), Kendall τ between them, Serrano &
// Smith's test and Jain & Wallace's counterfactual. Every number is the API's, so it
// equals `attnlab probe`; this file asks for it when the query, head, trace or readout
// changes (sync) and shows the answer (renderProbe).

import { api, busy, coalesced, messageOf } from './api.js';
import { $, byId, setAttr, setHtml, setOptions, setValue } from './dom.js';
import { formatNumber, formatVector, truncate } from './format.js';
import { html } from './html.js';
import { bar } from './panel-interventions.js';
import { baselineOf, liveTrace, precision, scenarioOf } from './selectors.js';
import { getState, update } from './state.js';
import { loadScenario, requestOptions } from './traces.js';

/**
 * @typedef {import('./types.js').State} State
 * @typedef {import('./types.js').Trace} Trace
 * @typedef {import('./types.js').ProbeReply} ProbeReply
 */

const PROBE_MAX_KEYS = 512, PROBE_MAX_CELLS = 2 ** 25; // the API's limits (docs/api.md)

/**
 * The body of POST api/probe for the state, and the key of what it asks (with the trace's
 * token count).
 * @param {State} s
 * @param {Trace} t
 */
function probeRequest(s, t) {
  /** @type {{scenario: import('./types.js').RequestBody['scenario'], options: object, query: number, head: number, readout?: string, epsilon?: number}} */
  const body = { scenario: scenarioOf(s), options: requestOptions(s), query: baselineOf(s, s.query), head: s.head };
  if (s.probe.readout) body.readout = s.probe.readout;
  const eps = Number(s.probe.epsilon);
  if (s.probe.epsilon.trim() !== '' && Number.isFinite(eps) && eps >= 0) body.epsilon = eps;
  return { body, key: JSON.stringify([body, t.tokens.length]) };
}

/**
 * Why the API would refuse to probe this trace, or null.
 * @param {Trace} t
 */
function probeRefusal(t) {
  const n = t.tokens.length, m = t.source_tokens.length, H = t.heads.length;
  if (m > PROBE_MAX_KEYS) return `The probe runs the scenario once per key token and stops at ${PROBE_MAX_KEYS} keys; this one has ${m}.`;
  if ((m + 1) * n * m * H > PROBE_MAX_CELLS) return 'The probe runs the scenario once per key token and stops at 2²⁵ score cells over those runs; use fewer tokens or heads.';
  return null;
}

// ---- asking --------------------------------------------------------------------------------
// The probe reruns the scenario once per key token: tens of milliseconds at 64 tokens × 8
// heads. It starts once the trace, query and head have been still for QUIET_MS, so that a
// dragged slider or a held arrow key does not wait behind probes of states already gone.
// The wait counts as pending work (data-pending), as a request does. One request at a
// time: while one is out, a newer state only marks it dirty, and one more goes out after.
const QUIET_MS = 150;
const job = {
  /** @type {string | null} */
  scheduled: null,  // the key sync last scheduled a probe for
  /** @type {{timer: number, resolve: () => void} | null} */
  wait: null,
};

// A real model's head is wide (GPT-2 small: d_model 768), so its probe, which reruns the
// head once per key token, takes seconds beyond MODEL_PROBE_AUTO_TOKENS tokens (about 13 s
// at 256 tokens here): there it waits for a click instead of starting on every change.
const MODEL_PROBE_AUTO_TOKENS = 64;

/** Asks for the probe of the state as it is now (unless that is the one shown). */
async function probeNow() {
  const s = getState();
  const t = liveTrace(s);
  if (!t) return;
  const refusal = probeRefusal(t);
  if (refusal) {
    update({ probe: { ...s.probe, status: 'refused', message: refusal, reply: null, key: null } });
    return;
  }
  const { body, key } = probeRequest(s, t);
  if (s.probe.key === key && s.probe.status === 'done') return;
  if (s.modelHead && t.source_tokens.length > MODEL_PROBE_AUTO_TOKENS && s.probe.force !== key) {
    update({ probe: { ...s.probe, status: 'waiting', message: `The probe reruns this head once per key token: at \
${t.source_tokens.length} tokens of a real model that takes seconds of the server's time.`, reply: null, key: null } });
    return;
  }
  try {
    /** @type {ProbeReply} */
    const reply = await api('api/probe', body);
    const now = getState();
    if (requests.superseded() || liveTrace(now) !== t) return;
    update({ probe: { ...now.probe, status: 'done', message: '', reply, key } });
  } catch (e) {
    if (!requests.superseded()) update({ probe: { ...getState().probe, status: 'error', message: messageOf(e) } });
  }
}
const requests = coalesced(probeNow);


function probeSoon() {
  if (job.wait) clearTimeout(job.wait.timer);
  else busy(() => new Promise((resolve) => { job.wait = { timer: 0, resolve: () => resolve(undefined) }; }));
  const wait = /** @type {NonNullable<typeof job.wait>} */ (job.wait);
  wait.timer = window.setTimeout(() => {
    job.wait = null;
    requests.run();
    wait.resolve();
  }, QUIET_MS);
}

/**
 * After every state change: a probe once the query, head, trace or readout has changed.
 * @param {State} s
 */
export function syncProbe(s) {
  const t = liveTrace(s);
  if (!t) return;
  const { key } = probeRequest(s, t);
  if (key === job.scheduled) return;
  job.scheduled = key;
  probeSoon();
}

// ---- showing ---------------------------------------------------------------------------------

/**
 * The readouts to choose from: the scenario's classes, the norm, the output's coordinates.
 * @param {State} s
 */
function renderReadoutPicker(s) {
  const base = s.base;
  const t = liveTrace(s);
  /** @type {Array<[string, string]>} */
  const items = [['', base && base.readout ? 'default: the predicted class\'s probability' : 'default: ‖output‖']];
  if (base && base.readout && Array.isArray(base.readout.labels)) for (const l of base.readout.labels) items.push([`class:${l}`, `p(${l})`]);
  items.push(['norm', '‖output‖']);
  const dOut = t && t.output && t.output[0] ? t.output[0].length : 0;
  for (let c = 0; c < Math.min(dOut, 16); c++) items.push([`coordinate:${c}`, `coordinate ${c}`]);
  const sel = byId('probe-readout', HTMLSelectElement);
  setOptions(sel, items, `${JSON.stringify(scenarioOf(s))}|${dOut}`);
  if (sel.value !== s.probe.readout) sel.value = s.probe.readout;
  setValue(byId('probe-epsilon', HTMLInputElement), s.probe.epsilon);
}

/**
 * The per-token table: one column per measure, bars against the column's largest.
 * @param {ProbeReply} r
 */
function probeTable(r) {
  const ss = r.serrano_smith || {};
  const H = r.heads.length;
  /** @param {(x: import('./types.js').ProbeToken) => number} f */
  const maxOf = (f) => r.tokens.reduce((m, x) => Math.max(m, Math.abs(f(x))), 0);
  const mW = maxOf((x) => x.weight), mV = maxOf((x) => x.value_weighted), mE = maxOf((x) => x.erasure), mG = maxOf((x) => x.grad_x_input);
  const headCols = H > 1 && H <= 4;
  const decides = r.decision !== null && r.decision !== undefined;
  /** @param {number} x @param {number} p */
  const signed = (x, p) => {
    const s = formatNumber(x, p);
    return x > 0 && /[1-9]/.test(s) ? '+' + s : s;
  };
  const rows = r.tokens.map((x) => {
    const marks = [
      x.index === ss.top_weight ? html`<span class="mark mark-w" title="highest weight">★ top weight</span>` : '',
      x.index === ss.top_erasure ? html`<span class="mark mark-e" title="largest |erasure|">◆ top erasure</span>` : '',
    ].filter((m) => m !== '');
    const cls = [!x.visible ? 'hidden-key' : '', x.flips ? 'flips' : '', x.index === ss.top_weight ? 'top-weight' : ''].filter(Boolean).join(' ');
    const start = html`<tr data-testid="probe-row-${x.index}" data-index="${x.index}" data-weight="${x.weight}" data-erasure="${x.erasure}" \
data-flips="${x.flips}" data-visible="${x.visible}"${cls ? html` class="${cls}"` : ''}>\
<th scope="row">${x.index} ${truncate(x.token, 12)} ${marks.map((m, k) => html`${k ? ' ' : ''}${m}`)}</th>\
${headCols ? x.weights.map((w) => html`<td class="num">${formatNumber(w, 2)}</td>`) : ''}`;
    if (!x.visible) return html`${start}<td class="num" colspan="5">hidden from this query: every measure is 0</td></tr>`;
    const without = decides
      ? html`${formatNumber(x.readout_without, 3)} (${x.decision_without}${x.flips ? html`, <b>flips</b>` : ''})`
      : html`${formatNumber(x.readout_without, 3)}`;
    return html`${start}<td class="num">${formatNumber(x.weight, 2)} ${bar(x.weight, mW, 'w')}</td>\
<td class="num">${formatNumber(x.value_weighted, 2)} ${bar(x.value_weighted, mV, 'v')}</td>\
<td class="num">${signed(x.erasure, 3)} ${bar(x.erasure, mE, 'e')}</td>\
<td class="num">${without}</td>\
<td class="num">${signed(x.grad_x_input, 3)} ${bar(x.grad_x_input, mG, 'g')}</td></tr>`;
  });
  return html`<table class="data-table probe-grid"><thead><tr><th scope="col">key j</th>\
${headCols ? r.heads.map((name, h) => html`<th scope="col" title="${name}">a<sub>ij</sub> head ${h}</th>`) : ''}\
<th scope="col">weight a<sub>ij</sub>${H > 1 ? ' (mean)' : ''}</th><th scope="col">weight·‖v<sub>j</sub>‖</th>\
<th scope="col">erasure Δ</th><th scope="col">readout without j</th><th scope="col">gradient × input</th></tr></thead><tbody>${rows}</tbody></table>`;
}

/**
 * Serrano & Smith's verdict, with a headline only where the test is decisive: one side's
 * knock-out flips the decision, the other's not.
 * @param {ProbeReply} r
 */
function renderVerdict(r) {
  const ss = r.serrano_smith || {};
  const v = $('probe-verdict');
  setAttr(v, 'data-agree', String(!!ss.weights_agree));
  setAttr(v, 'data-top-weight', String(ss.top_weight));
  setAttr(v, 'data-top-erasure', String(ss.top_erasure));
  setAttr(v, 'data-top-flips', String(!!ss.top_flips));
  setAttr(v, 'data-others-flipping', JSON.stringify(ss.others_flipping || []));
  const others = (ss.others_flipping || []).length;
  let headline = '', tone = '';
  if (!ss.has_decision) headline = 'Serrano & Smith\'s test needs a decision to flip (a class, or the sign of a coordinate or direction).';
  else if (ss.top_flips && !others) { headline = 'Here the largest weight points at what the decision rests on.'; tone = ' agree'; }
  else if (!ss.top_flips && others) { headline = 'Here the largest weight misleads: another token\'s removal flips the decision, its own does not.'; tone = ' mislead'; }
  v.className = 'verdict' + tone;
  setHtml(v, html`${headline ? html`<b>${headline}</b> ` : ''}<span class="verdict-text">${ss.verdict || ''}</span>`);
}

/** Jain & Wallace's counterfactual: both rows of weights, the divergence, the readouts. @param {ProbeReply} r */
function counterfactual(r) {
  const cf = r.counterfactual;
  if (!cf) return html``;
  const name = r.heads[cf.head] !== undefined ? r.heads[cf.head] : '';
  const rows = r.source_tokens.map((tok, j) => html`<tr data-testid="cf-row-${j}" data-original="${cf.original[j]}" data-found="${cf.found[j]}">\
<th scope="row">${j} ${truncate(tok, 12)}</th><td class="num">${formatNumber(cf.original[j], 2)} ${bar(cf.original[j], 1, 'w')}</td>\
<td class="num">${formatNumber(cf.found[j], 2)} ${bar(cf.found[j], 1, 'cf')}</td></tr>`);
  const decision = cf.decision_before !== null && cf.decision_before !== undefined ? html`, decision ${cf.decision_before} → ${cf.decision_after}` : '';
  return html`<h3>Jain &amp; Wallace's counterfactual <span class="hint">(head ${cf.head} <q>${name}</q>: the most different weights \
that keep the readout within ε = ${formatNumber(cf.epsilon, 3)})</span></h3>\
<div class="table-scroll cf-scroll"><table class="data-table cf-table"><thead><tr><th scope="col">key</th><th scope="col">the head's weights</th>\
<th scope="col">counterfactual</th></tr></thead><tbody>${rows}</tbody></table></div>\
<p class="probe-line" data-testid="cf-summary" data-divergence="${cf.divergence}">Jensen–Shannon divergence \
<b>${formatNumber(cf.divergence, 3)}</b> bits (0: the same, 1: disjoint); readout ${formatNumber(cf.readout_before, 4)} → \
${formatNumber(cf.readout_after, 4)}${decision}.\
${cf.exact ? ' The readout is linear and every pair of keys was tried: this is the largest divergence there is.' : ''}\
${cf.note ? html` <span class="hint">${cf.note}</span>` : ''}</p>`;
}

/**
 * The probe's answer: the summary line, the table, τ, the verdict, the counterfactual.
 * @param {ProbeReply} r
 * @param {number} p
 */
function renderReply(r, p) {
  const section = $('probe-section');
  setAttr(section, 'data-query', String(r.query));
  setAttr(section, 'data-scenario', String(r.scenario));
  setAttr(section, 'data-state', 'done');
  const decides = r.decision !== null && r.decision !== undefined;
  setHtml($('probe-summary'), html`Query ${r.query} <q>${r.query_token}</q> · readout <b>${r.readout.description}</b>: \
output (${formatVector(r.output, p)}) → <b data-testid="probe-value" data-value="${r.value}">${formatNumber(r.value, 4)}</b>\
${decides ? html`, decision <b data-testid="probe-decision">${r.decision}</b>` : ', no decision to flip (a norm)'}`);
  setHtml($('probe-table'), probeTable(r));
  const tau = r.kendall_tau || {};
  /** @param {number | null | undefined} v */
  const tv = (v) => (v === null || v === undefined ? 'undefined' : formatNumber(v, 2));
  setHtml($('probe-tau'), html`<span class="label">Kendall τ</span> between the weights and \
weight·‖v‖ <b data-testid="tau-value-weighted">${tv(tau.value_weighted)}</b>, \
|erasure| <b data-testid="tau-erasure">${tv(tau.erasure)}</b>, \
|gradient × input| <b data-testid="tau-grad">${tv(tau.grad_x_input)}</b> \
<span class="hint">(1: the same order, −1: the reverse)</span>`);
  renderVerdict(r);
  setHtml($('probe-cf'), counterfactual(r));
}

/** @type {WeakMap<HTMLElement, {probe: import('./types.js').ProbeState, p: number}>} what the section shows */
const shown = new WeakMap();

/** @param {State} s */
export function renderProbe(s) {
  renderReadoutPicker(s);
  const pr = s.probe, p = precision(s);
  const section = $('probe-section');
  const last = shown.get(section);
  if (last && last.probe === pr && last.p === p) return;
  shown.set(section, { probe: pr, p });
  if (pr.status === 'waiting') {
    setAttr(section, 'data-state', 'waiting');
    setHtml($('probe-summary'), html`${pr.message} <button type="button" id="probe-run" data-testid="probe-run">Probe this query</button>`);
    for (const id of ['probe-table', 'probe-tau', 'probe-verdict', 'probe-cf']) setHtml($(id), html``);
  } else if (pr.status === 'running') {
    setAttr(section, 'data-state', 'running');
    setHtml($('probe-summary'), html`Probing: the head runs once per key token…`);
  } else if (pr.status === 'refused') {
    setAttr(section, 'data-state', 'refused');
    setHtml($('probe-summary'), html`${pr.message}`);
    for (const id of ['probe-table', 'probe-tau', 'probe-verdict', 'probe-cf']) setHtml($(id), html``);
  } else if (pr.status === 'error') {
    setAttr(section, 'data-state', 'error');
    setHtml($('probe-summary'), html`<span class="error">${pr.message}</span>`);
  } else if (pr.reply) {
    renderReply(pr.reply, p);
  }
}

export function bindProbe() {
  byId('probe-readout', HTMLSelectElement).addEventListener('change', (e) => {
    update({ probe: { ...getState().probe, readout: /** @type {HTMLSelectElement} */ (e.target).value } });
  });
  byId('probe-epsilon', HTMLInputElement).addEventListener('change', (e) => {
    update({ probe: { ...getState().probe, epsilon: /** @type {HTMLInputElement} */ (e.target).value } });
  });
  /** @param {string} name */
  const load = async (name) => {
    await loadScenario(name);
    const section = $('probe-section');
    section.scrollIntoView({ block: 'start' });
    section.focus({ preventScroll: true });
  };
  // a long model head's probe, asked for by hand (probeNow)
  $('probe-summary').addEventListener('click', (e) => {
    const s = getState();
    const t = liveTrace(s);
    if (!t || !(e.target instanceof Element) || !e.target.closest('#probe-run')) return;
    update({ probe: { ...s.probe, status: 'running', force: probeRequest(s, t).key, message: '' } });
    requests.run();
  });
  $('probe-mislead').addEventListener('click', () => load('weights-mislead'));
  $('probe-agree').addEventListener('click', () => load('weights-agree'));
}
