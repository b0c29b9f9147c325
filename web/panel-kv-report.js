// @ts-check
// The KV panel's "loaded model" block (docs/cost-and-kv.md, docs/long-context.md): the
// model the server runs, its own KV cache measured at the contexts typed (POST
// api/model/kv, the `model kv` operation), and the Markdown report of that measure ready to
// download and share (the machine, attnlab's version, the model, each context's formula and
// measured bytes, the longest context this machine holds). Nothing leaves the browser but
// the file the user saves. The block's state is the store's `kvReport` part.

import { api, messageOf } from './api.js';
import { $, byId, setAttr, setFlag, setText, setValue } from './dom.js';
import { bindOptions, optionFields, renderOptions } from './options.js';
import { getState, update } from './state.js';

/**
 * @typedef {import('./types.js').State} State
 * @typedef {import('./types.js').KvReportState} KvReportState
 */

/** The fields this block sets itself; the others are its "More options". */
const KV_FIELDS = ['context', 'run', 'step'];

/** @param {Partial<KvReportState>} patch */
function patchReport(patch) {
  update({ kvReport: { ...getState().kvReport, ...patch } });
}

async function measure() {
  const s = getState(), typed = s.kvReport.contexts.trim();
  /** @type {Record<string, unknown>} */
  const body = optionFields(s, 'model kv', KV_FIELDS);
  if (s.model.source.run !== null) body.run = s.model.source.run;
  if (s.model.source.step !== null) body.step = s.model.source.step;
  if (typed !== '') {
    const parts = typed.split(/[\s,]+/).filter(Boolean);
    if (parts.some((p) => !/^\d+$/.test(p))) {
      patchReport({ status: 'contexts: write whole numbers of tokens, e.g. 16, 256, 1024', error: true });
      return;
    }
    body.context = parts.map(Number);
  }
  patchReport({ status: 'measuring the cache…', error: false });
  try {
    patchReport({ reply: await api('api/model/kv', body), status: '', error: false });
  } catch (e) {
    patchReport({ status: messageOf(e), error: true });
  }
}

/** @param {State} s */
export function renderKvReport(s) {
  const info = s.model.info;
  setFlag($('kv-model-block'), 'hidden', !info || !info.loaded);
  if (!info || !info.loaded) return;
  const r = s.kvReport;
  renderOptions(s, 'kv-model-options', 'model kv', KV_FIELDS);
  setValue(byId('kv-model-contexts', HTMLInputElement), r.contexts);
  const status = $('kv-model-status');
  setText(status, r.status);
  status.classList.toggle('error', r.error);
  const link = byId('kv-model-download', HTMLAnchorElement);
  const report = r.reply ? String(r.reply.report) : '';
  setFlag(link, 'hidden', !report);
  setAttr(link, 'href', report ? `data:text/markdown;charset=utf-8,${encodeURIComponent(report)}` : '#');
  setText($('kv-model-report'), report);
}

export function bindKvReport() {
  bindOptions('kv-model-options', 'model kv');
  $('kv-model-run').addEventListener('click', () => { void measure(); });
  byId('kv-model-contexts', HTMLInputElement).addEventListener('input', (e) => {
    patchReport({ contexts: /** @type {HTMLInputElement} */ (e.target).value });
  });
}
