// @ts-check
// The controls as the state says: the scenario picker and its description, the sentence
// and seed boxes, the causal toggle, the temperature slider, the head buttons, "hide
// token", the view tabs, the colour-scale picker, the shown head's title, the error line,
// the server's status and the guided path's active step. Form controls the user is typing
// in are left alone (dom.js, setValue).

import { $, byId, setAttr, setFlag, setOptions, setText, setValue } from './dom.js';
import { baselineOf, isCross } from './selectors.js';

/** @typedef {import('./types.js').State} State */

// The temperature slider is logarithmic: 0..1000 -> 0.1..3, three significant digits.
const T_MIN = 0.1, T_MAX = 3, SLIDER_MAX = 1000;
/** @param {number} x  the slider's value */
export const sliderToT = (x) => Number((T_MIN * Math.pow(T_MAX / T_MIN, x / SLIDER_MAX)).toPrecision(3));
/** @param {number} t */
export const tToSlider = (t) => Math.max(0, Math.min(SLIDER_MAX, Math.round(SLIDER_MAX * Math.log(t / T_MIN) / Math.log(T_MAX / T_MIN))));

/** @param {State} s */
function renderScenario(s) {
  const sel = byId('scenario-select', HTMLSelectElement);
  setOptions(sel, s.scenarios.map((x) => [x.name, x.name, x.description || '']), s.scenarios.map((x) => x.name).join('\u0000'));
  if (s.name !== null) setValue(sel, s.name); // while it is focused, the choice is the user's (a load is on its way)
  else if (s.modelHead) setValue(sel, ''); // a model's head: no bundled scenario is picked
  setText($('scenario-desc'), s.base ? s.base.description || '' : '');
  const sentence = byId('sentence-input', HTMLInputElement);
  setValue(sentence, s.sentenceInput);
  // a model's head has the model's tokens (the Model panel's text) and its one head
  const model = !!s.modelHead;
  for (const el of [sentence, byId('sentence-apply', HTMLButtonElement), byId('sentence-reset', HTMLButtonElement),
    byId('add-head', HTMLButtonElement)]) setFlag(el, 'disabled', model);
}

/** @param {State} s */
function renderTemperature(s) {
  const causal = byId('causal-toggle', HTMLInputElement);
  setFlag(causal, 'checked', s.causal);
  setFlag(causal, 'disabled', isCross(s));
  setFlag($('causal-note'), 'hidden', !isCross(s));
  const slider = byId('temperature', HTMLInputElement);
  // while the slider is dragged, its position is the user's (the temperature rounds it)
  if (document.activeElement !== slider || Math.abs(sliderToT(Number(slider.value)) - s.temperature) > 1e-9) {
    const value = String(tToSlider(s.temperature));
    if (slider.value !== value) slider.value = value;
  }
  setText($('temperature-value'), String(s.temperature));
  setAttr(slider, 'aria-valuetext', `T = ${s.temperature}`);
}

/** @param {State} s */
function renderHeadControls(s) {
  setValue(byId('seed-input', HTMLInputElement), s.seedInput);
  const t = s.trace;
  if (!t) return;
  setFlag(byId('remove-head', HTMLButtonElement), 'disabled', t.heads.length <= 1 || !!s.modelHead);
  setFlag(byId('restore-heads', HTMLButtonElement), 'disabled', !s.removeHeads.length && !s.addHeads.length);
  setText($('view-head-name'), `${s.head} “${t.heads[s.head].name}”`);
  setText($('view-head-count'), `(${s.head + 1} of ${t.heads.length})`);
  const hide = byId('hide-token', HTMLButtonElement);
  const hidden = s.maskTokens.includes(baselineOf(s, s.query)) || (t.mask_tokens || []).includes(s.query);
  setFlag(hide, 'disabled', isCross(s));
  setAttr(hide, 'aria-pressed', String(hidden));
  setText(hide, hidden ? `Show token ${s.query} as a key again` : `Hide token ${s.query} as a key`);
}

/** @type {WeakMap<HTMLElement, {view: string, guideStep: number}>} */
const shown = new WeakMap();

/** @param {State} s */
function renderTabs(s) {
  const last = shown.get(document.body);
  if (last && last.view === s.view && last.guideStep === s.guideStep) return;
  shown.set(document.body, { view: s.view, guideStep: s.guideStep });
  for (const li of document.querySelectorAll('.guide-steps li')) {
    if (li instanceof HTMLElement) li.classList.toggle('active', li.dataset.step === String(s.guideStep));
  }
  for (const tab of document.querySelectorAll('[role="tab"][data-view]')) {
    if (!(tab instanceof HTMLElement)) continue;
    const on = tab.dataset.view === s.view;
    setAttr(tab, 'aria-selected', String(on));
    if (tab.tabIndex !== (on ? 0 : -1)) tab.tabIndex = on ? 0 : -1;
    setFlag($('view-' + tab.dataset.view), 'hidden', !on);
  }
}

/** @param {State} s */
function renderMessages(s) {
  const mode = byId('scale-mode', HTMLSelectElement);
  if (mode.value !== s.scaleMode) mode.value = s.scaleMode;
  const error = $('error');
  setFlag(error, 'hidden', s.error === null);
  setText(error, s.error || '');
  setText($('server-status'), s.serverStatus);
}

/** @param {State} s */
export function renderControls(s) {
  renderScenario(s);
  renderTemperature(s);
  renderHeadControls(s);
  renderTabs(s);
  renderMessages(s);
}
