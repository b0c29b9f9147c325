// @ts-check
// "Generate" (docs/long-context.md): the loaded model continues a prompt one token at a time
// through its KV cache (POST api/model/generate with "trace": true). A scrubber replays the
// steps; each shows the token chosen and the most probable alternatives, every head's
// attention row over the cache it was chosen from (a 1 × N strip per head, the heads grouped
// by the KV head they share), and the cache itself: its tokens and bytes, per layer and in
// all, growing step by step. Every number is the server's, the same as `attnlab model
// generate --trace --json`; each cell carries it in data-value. The panel's state is the
// store's `generation` part.

import { api, messageOf } from './api.js';
import { css } from './colour.js';
import { $, byId, setFlag, setHtml, setText, setValue } from './dom.js';
import { formatBytes, formatNumber } from './format.js';
import { html } from './html.js';
import { bindOptions, optionFields, renderOptions } from './options.js';
import { parseModelInput, requestFor, visibleToken } from './panel-model.js';
import { getState, update } from './state.js';

/**
 * @typedef {import('./types.js').State} State
 * @typedef {import('./types.js').GenerationState} GenerationState
 */

/** The longest cache drawn a cell a key; longer rows are drawn pooled (the mean of each run of keys). */
const CELLS = 160;
/** The fields the panel's own boxes set; the others are its "More options". */
const GENERATE_FIELDS = ['text', 'ids', 'tokens', 'temperature', 'top_k', 'seed', 'trace'];

/** The state's generation part, patched. @param {Partial<GenerationState>} patch */
function patchGeneration(patch) {
  update({ generation: { ...getState().generation, ...patch } });
}

/** @param {string} text @param {boolean} [error] */
function say(text, error = false) {
  patchGeneration({ status: text, error });
}

async function generate() {
  const s = getState(), info = s.model.info, g = s.generation;
  if (!info) return;
  const typed = g.prompt.trim() !== '' ? g.prompt : s.model.input;
  const parsed = parseModelInput(info, typed);
  if ('error' in parsed) {
    say(`the prompt: ${parsed.error}`, true);
    return;
  }
  /** @type {Record<string, unknown>} */
  const body = { ...requestFor(parsed.request, s.model.source), ...optionFields(s, 'model generate', GENERATE_FIELDS),
    trace: true };
  for (const [field, value] of /** @type {[string, string][]} */ ([['tokens', g.tokens], ['temperature', g.temperature],
    ['top_k', g.topK], ['seed', g.seed]])) {
    if (value.trim() === '') continue;
    const x = Number(value);
    if (!Number.isFinite(x)) {
      say(`${field}: "${value.slice(0, 12)}" is not a number`, true);
      return;
    }
    body[field] = x;
  }
  say('generating…');
  try {
    const reply = await api('api/model/generate', body);
    patchGeneration({ reply, step: reply.generated.length, status: '', error: false });
  } catch (e) {
    say(messageOf(e), true);
  }
}

/** The tokens so far, the prompt's then the generated, the step's new one marked. @param {any} r @param {number} step */
function tokensMarkup(r, step) {
  const prompt = r.prompt.tokens.map((/** @type {string} */ t) => html`<span class="gen-token gen-prompt">${visibleToken(t)}</span>`);
  const made = r.generated.slice(0, step).map((/** @type {any} */ t, /** @type {number} */ k) => html`<span \
class="gen-token${k === step - 1 ? ' gen-current' : ''}" data-testid="generate-token">${visibleToken(t.token)}</span>`);
  return html`<p class="gen-tokens" data-testid="generate-tokens">${prompt}${made}</p>`;
}

/** @param {any} t the step */
function alternativesMarkup(t) {
  const rows = t.alternatives.map((/** @type {any} */ a) => html`<tr data-testid="generate-alternative" data-id="${a.id}" \
data-probability="${a.probability}"${a.id === t.id ? html` class="gen-chosen"` : html``}><td>${visibleToken(a.token)}</td>\
<td class="num">${formatNumber(a.probability, 3)}</td><td><span class="gen-bar" style="width:${(100 * a.probability).toFixed(1)}px">\
</span></td></tr>`);
  return html`<table class="data-table"><caption>the most probable next tokens at position ${t.position} \
(chosen: ${visibleToken(t.token)}, p ${formatNumber(t.probability, 3)})</caption>${rows}</table>`;
}

/**
 * A head's row over the cache: a cell a key, or pooled into CELLS cells when longer.
 * @param {number[]} row
 */
function stripMarkup(row) {
  const n = row.length, pool = Math.max(1, Math.ceil(n / CELLS));
  const cells = [];
  for (let first = 0; first < n; first += pool) {
    const part = row.slice(first, first + pool);
    const w = part.reduce((a, b) => a + b, 0) / part.length;
    const keys = pool === 1 ? `key ${first}` : `keys ${first}–${first + part.length - 1} (mean)`;
    cells.push(html`<span class="gen-cell" data-value="${w}" style="background:${css(w)}" title="${keys}: ${formatNumber(w, 3)}"></span>`);
  }
  return html`${cells}`;
}

/** Every head's row, layer by layer, the heads of one KV head together. @param {any} r @param {any} t */
function stripsMarkup(r, t) {
  const group = r.cache.heads / r.cache.kv_heads;
  const layers = t.attention.map((/** @type {number[][]} */ heads, /** @type {number} */ l) => {
    const groups = [];
    for (let g = 0; g < r.cache.kv_heads; g++) {
      const rows = heads.slice(g * group, (g + 1) * group).map((row, k) => html`<div class="gen-strip" \
data-testid="generate-strip" data-head-ref="${l}.${g * group + k}"><span class="gen-head">${l}.${g * group + k}</span>\
${stripMarkup(row)}</div>`);
      groups.push(html`<div class="gen-group">${group > 1 ? html`<span class="hint">KV head ${g}</span>` : html``}${rows}</div>`);
    }
    return html`<div class="gen-layer">${groups}</div>`;
  });
  return html`<div class="gen-strips"><p class="hint">each head's weights over the ${t.position + 1} cached tokens \
(left: the first; right: the token the new one was chosen after)${t.position + 1 > CELLS ? ', pooled' : ''}</p>${layers}</div>`;
}

/** The cache's bytes at every step, the current one marked. @param {any} r @param {number} step */
function cacheMarkup(r, step) {
  const t = r.generated[step - 1], steps = r.generated.length, largest = r.generated[steps - 1].cache_bytes;
  const bars = r.generated.map((/** @type {any} */ g, /** @type {number} */ k) => {
    const h = 60 * g.cache_bytes / largest;
    return html`<rect x="${k * 12}" y="${(60 - h).toFixed(1)}" width="10" height="${h.toFixed(1)}" \
class="${k === step - 1 ? 'gen-now' : ''}"><title>step ${k + 1}: ${g.cache_tokens} tokens, ${formatBytes(g.cache_bytes)}</title></rect>`;
  });
  return html`<div class="gen-cache" data-testid="generate-cache" data-bytes="${t.cache_bytes}">\
<p>the cache after this token: <strong>${t.cache_tokens} tokens</strong> × ${formatBytes(r.cache.bytes_per_token)} \
(2 × ${r.cache.layers} layers × ${r.cache.kv_heads} KV heads × ${r.cache.head_dim} × ${r.cache.dtype}) = \
<strong>${formatBytes(t.cache_bytes)}</strong>, ${formatBytes(t.cache_bytes_per_layer)} a layer</p>\
<svg viewBox="0 0 ${steps * 12} 60" width="${Math.min(480, steps * 12)}" height="60" role="img" \
aria-label="the cache's bytes at each step">${bars}</svg></div>`;
}

/** @param {State} s */
export function renderGenerate(s) {
  const info = s.model.info;
  setFlag($('generate-section'), 'hidden', !info || !info.loaded);
  if (!info || !info.loaded) return;
  const g = s.generation;
  renderOptions(s, 'generate-options', 'model generate', GENERATE_FIELDS);
  setValue(byId('generate-prompt', HTMLInputElement), g.prompt);
  byId('generate-prompt', HTMLInputElement).placeholder = s.model.input || '';
  setValue(byId('generate-tokens', HTMLInputElement), g.tokens);
  setValue(byId('generate-temperature', HTMLInputElement), g.temperature);
  setValue(byId('generate-top-k', HTMLInputElement), g.topK);
  setValue(byId('generate-seed', HTMLInputElement), g.seed);
  const status = $('generate-status');
  setText(status, g.status);
  status.classList.toggle('error', g.error);
  const r = g.reply;
  const scrub = byId('generate-step', HTMLInputElement);
  setFlag(scrub, 'hidden', !r);
  if (!r || !r.generated.length) {
    setHtml($('generate-result'), html``);
    return;
  }
  scrub.max = String(r.generated.length);
  setValue(scrub, String(g.step));
  const t = r.generated[g.step - 1];
  setHtml($('generate-result'), html`<p class="hint" data-testid="generate-at">step ${g.step} of ${r.generated.length}</p>\
${tokensMarkup(r, g.step)}<div class="gen-views">${alternativesMarkup(t)}${cacheMarkup(r, g.step)}</div>${stripsMarkup(r, t)}`);
}

export function bindGenerate() {
  bindOptions('generate-options', 'model generate');
  $('generate-run').addEventListener('click', () => { void generate(); });
  /** @type {[string, keyof GenerationState][]} */
  const boxes = [['generate-prompt', 'prompt'], ['generate-tokens', 'tokens'], ['generate-temperature', 'temperature'],
    ['generate-top-k', 'topK'], ['generate-seed', 'seed']];
  for (const [id, key] of boxes)
    byId(id, HTMLInputElement).addEventListener('input', (e) => {
      patchGeneration({ [key]: /** @type {HTMLInputElement} */ (e.target).value });
    });
  byId('generate-step', HTMLInputElement).addEventListener('input', (e) => {
    patchGeneration({ step: Number(/** @type {HTMLInputElement} */ (e.target).value) });
  });
}
