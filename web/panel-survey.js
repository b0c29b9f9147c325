// @ts-check
// "Every head across texts" (docs/survey.md): the texts typed in the box, a document a line,
// surveyed as a job (POST api/model/analysis, kind "survey") whose progress the panel follows
// and which "Cancel" stops. The result: a line per head's means, and the head finder (the page
// `attnlab model survey --html` writes, web/survey-finder.html) with this survey inside, to
// open in a tab or save, and shown in the panel itself, where an example's "open in the lab"
// runs its window through the model and shows the head's heatmap at the example's query. Every
// number is the server's, the same as `attnlab model survey --json`. The panel's state is the
// store's `survey` part.

import { api, messageOf } from './api.js';
import { followJob } from './jobs.js';
import { $, byId, setAttr, setFlag, setHtml, setText, setValue } from './dom.js';
import { formatNumber } from './format.js';
import { html } from './html.js';
import { parseModelInput, requestFor } from './panel-model.js';
import { getState, update } from './state.js';
import { loadModelHead } from './traces.js';

/**
 * @typedef {import('./types.js').State} State
 * @typedef {import('./types.js').SurveyState} SurveyState
 */

/** The state's survey part, patched. @param {Partial<SurveyState>} patch */
function patchSurvey(patch) {
  update({ survey: { ...getState().survey, ...patch } });
}

/** @param {string} text @param {boolean} [error] */
function say(text, error = false) {
  patchSurvey({ status: text, error });
}

/** The box's documents: its non-empty lines. @param {string} text */
export const surveyDocuments = (text) => text.split('\n').filter((line) => line.trim() !== '');

const follow = () => followJob('survey', () => getState().survey.job, (job) => patchSurvey({ job }), say);

async function start() {
  const s = getState();
  const info = s.model.info;
  const lines = surveyDocuments(s.survey.texts);
  if (!lines.length || !info) {
    say(info && !info.tokenizer ? 'type token ids, a document a line' : 'type some texts, a document a line', true);
    return;
  }
  // a model without a tokenizer takes token ids, as the model panel's box does
  /** @type {{documents: string[]} | {sequences: number[][]}} */
  let documents = { documents: lines };
  if (!info.tokenizer) {
    /** @type {number[][]} */
    const sequences = [];
    for (const line of lines) {
      const parsed = parseModelInput(info, line);
      if ('error' in parsed) {
        say(`line ${sequences.length + 1}: ${parsed.error}`, true);
        return;
      }
      sequences.push(/** @type {number[]} */ (parsed.request.ids));
    }
    documents = { sequences };
  }
  const body = { kind: 'survey', ...documents, ...(s.model.source.run ? { run: s.model.source.run } : {}),
    ...(s.model.source.step !== null ? { step: s.model.source.step } : {}) };
  if (s.survey.finder) URL.revokeObjectURL(s.survey.finder);  // the last survey's page
  try {
    patchSurvey({ job: await api('api/model/analysis', body), status: 'started', error: false, finder: null, asked: documents });
    await follow();
  } catch (e) {
    say(messageOf(e), true);
  }
}

async function cancel() {
  try {
    patchSurvey({ job: await api('api/model/analysis/cancel', {}) });
  } catch (e) {
    say(messageOf(e), true);
  }
}

/**
 * The head finder's page with `survey` inside, as `model survey --html` writes it ("</" escaped
 * so that the data cannot end its script element).
 * @param {string} page
 * @param {any} survey
 */
export function finderPage(page, survey) {
  return page.replace('/*SURVEY*/null', () => JSON.stringify(survey).replace(/<\//g, '<\\/'));
}

/**
 * An example the finder's "open in the lab" posted: its document's window (the survey's cut,
 * max_tokens a window) run through the model, and head L.H loaded into the lab's views with
 * the example's query row, so that its heatmap, maths and interventions work on it.
 * @param {{layer: number, head: number, document: number, window: number, position: number}} x
 */
async function openExample(x) {
  const s = getState(), r = s.survey.job && s.survey.job.result, asked = s.survey.asked;
  if (!r || !asked) {  // a survey this page did not start (one the server finished before a reload)
    say('survey the texts again here to open its examples', true);
    return;
  }
  const source = s.model.source;
  try {
    const ids = 'sequences' in asked ? asked.sequences[x.document]
      : (await api('api/model/run', { ...requestFor({ text: asked.documents[x.document] }, source), weights: false })).ids;
    const start = x.window * r.max_tokens;
    const input = requestFor({ ids: ids.slice(start, start + r.max_tokens) }, source);
    const run = await api('api/model/run', { ...input, weights: false });
    await loadModelHead(input, run, x.layer, x.head, x.position - start);
    say(`head ${x.layer}.${x.head} at position ${x.position} of document ${x.document}: in the views below`);
  } catch (e) {
    say(messageOf(e), true);
  }
}

/** @param {any} r */
function tableMarkup(r) {
  const cell = (/** @type {number | null} */ x, /** @type {number} */ digits) =>
    html`<td class="num" data-value="${x === null ? '' : x}">${x === null ? '–' : formatNumber(x, digits)}</td>`;
  const rows = r.heads.map((/** @type {any} */ h) => html`<tr data-testid="survey-row" data-head="${h.head}">\
<td>${h.head}</td>${cell(h.previous_token, 3)}${cell(h.self, 3)}${cell(h.sink, 3)}${cell(h.induction, 3)}\
${cell(h.entropy, 2)}${cell(h.distance_mean, 1)}</tr>`);
  return html`<table class="data-table"><caption>${r.documents} documents, ${r.tokens} tokens; every head's mean \
over its query rows</caption><tr><th>head</th><th>previous</th><th>self</th><th>sink</th><th>induction</th>\
<th>entropy (bits)</th><th>distance</th></tr>${rows}</table>`;
}

/** @param {State} s */
export function renderSurvey(s) {
  const info = s.model.info;
  setFlag($('survey-section'), 'hidden', !info || !info.loaded);
  if (!info || !info.loaded) return;
  const v = s.survey;
  setValue(byId('survey-texts', HTMLTextAreaElement), v.texts);
  const job = v.job;
  const running = !!job && job.state === 'running';
  setFlag(byId('survey-cancel', HTMLButtonElement), 'disabled', !running);
  const status = $('survey-status');
  setText(status, running ? `${job.done} of ${job.total} tokens` : v.status);
  status.classList.toggle('error', v.error);
  const r = job && job.state === 'done' && job.kind === 'survey' ? job.result : null;
  setHtml($('survey-result'), r ? tableMarkup(r) : html``);
  const link = byId('survey-finder', HTMLAnchorElement), frame = byId('survey-finder-frame', HTMLIFrameElement);
  setFlag(link, 'hidden', !r || !v.finder);
  setFlag(frame, 'hidden', !r || !v.finder);
  if (v.finder) {
    setAttr(link, 'href', v.finder);
    setAttr(frame, 'src', v.finder);
  }
  if (r && !v.finder && !v.making) void makeFinder(r);
}

/** The finder's page for this survey, as a link (a blob: URL) to open or save. @param {any} survey */
async function makeFinder(survey) {
  patchSurvey({ making: true });
  try {
    const page = await (await fetch('survey-finder.html')).text();
    const url = URL.createObjectURL(new Blob([finderPage(page, survey)], { type: 'text/html' }));
    patchSurvey({ finder: url, making: false });
  } catch (e) {
    patchSurvey({ making: false, status: messageOf(e), error: true });
  }
}

export function bindSurvey() {
  $('survey-run').addEventListener('click', () => { void start(); });
  $('survey-cancel').addEventListener('click', () => { void cancel(); });
  // the finder in the panel's frame asks for an example (and only it: other windows' messages are not ours)
  window.addEventListener('message', (e) => {
    const frame = byId('survey-finder-frame', HTMLIFrameElement);
    if (e.source === frame.contentWindow && e.data && e.data.attnlab === 'survey-example') void openExample(e.data);
  });
  byId('survey-texts', HTMLTextAreaElement).addEventListener('input', (e) => {
    patchSurvey({ texts: /** @type {HTMLTextAreaElement} */ (e.target).value });
  });
}
