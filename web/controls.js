// @ts-check
// The page's input: DOM events of the sidebar, the token strip, the thumbnails, the
// heatmap, the tabs, the export buttons, the guided path and the keyboard, each turned
// into a state change (actions.js, or update() directly). No handler renders or picks a
// view to redraw: main.js renders every view from the new state.

import {
  addRandomHead, applySentence, removeSelectedHead, resetSentence, restoreHeads, setCausal, setHead, setQuery,
  setTemperature, toggleHideToken,
} from './actions.js';
import { messageOf } from './api.js';
import { $, byId } from './dom.js';
import { exportJson, exportPng, exportSvg } from './export.js';
import { isCross } from './selectors.js';
import { getState, update } from './state.js';
import { loadScenario } from './traces.js';
import { sliderToT } from './view-controls.js';
import { cellAt, ZOOM_TOKENS } from './view-heatmap.js';

/** @typedef {import('./types.js').State} State */

/**
 * Loads a scenario; a failure shows in the error line.
 * @param {string} name
 * @param {{query?: number}} [options]
 */
function load(name, options) {
  return loadScenario(name, options).catch((e) => update({ error: messageOf(e) }));
}

/** The element of the event's target that matches `selector`, or null. @param {Event} e @param {string} selector */
function closest(e, selector) {
  const el = e.target instanceof Element ? e.target.closest(selector) : null;
  return el instanceof HTMLElement ? el : null;
}

// ---- the keyboard ------------------------------------------------------------------------------

/**
 * A control that takes typing: the arrow keys are its own.
 * @param {EventTarget | null} el
 */
function isTyping(el) {
  if (!(el instanceof HTMLElement)) return false;
  if (el instanceof HTMLInputElement) return !['checkbox', 'radio', 'button', 'submit', 'reset'].includes(el.type);
  return el instanceof HTMLSelectElement || el instanceof HTMLTextAreaElement || el.isContentEditable;
}

/** ← → move the query, ↑ ↓ and 1–9 pick the head, Home End the first and last query. @param {KeyboardEvent} e */
function onKey(e) {
  const s = getState();
  if (e.altKey || e.ctrlKey || e.metaKey || !s.trace || isTyping(e.target)) return;
  let handled = true;
  switch (e.key) {
    case 'ArrowLeft': setQuery(s.query - 1); break;
    case 'ArrowRight': setQuery(s.query + 1); break;
    case 'ArrowUp': setHead(s.head - 1); break;
    case 'ArrowDown': setHead(s.head + 1); break;
    case 'Home': setQuery(0); break;
    case 'End': setQuery(s.trace.tokens.length - 1); break;
    default:
      if (/^[1-9]$/.test(e.key) && !e.shiftKey) setHead(Number(e.key) - 1);
      else handled = false;
  }
  if (handled) e.preventDefault();
}

// ---- the sidebar ---------------------------------------------------------------------------------

/** The scenario picker, the sentence box and its buttons. */
function bindScenario() {
  const picker = byId('scenario-select', HTMLSelectElement);
  picker.addEventListener('change', () => {
    const name = picker.value; // read first: until it has loaded, the state names the old one
    update({ guideStep: 0 });
    load(name);
  });
  const sentence = byId('sentence-input', HTMLInputElement);
  sentence.addEventListener('input', () => update({ sentenceInput: sentence.value }));
  $('sentence-form').addEventListener('submit', (e) => {
    e.preventDefault();
    applySentence(sentence.value);
  });
  $('sentence-reset').addEventListener('click', () => resetSentence());
}

/** The causal toggle, the temperature slider and its presets. */
function bindMaskAndTemperature() {
  const causal = byId('causal-toggle', HTMLInputElement);
  causal.addEventListener('change', () => setCausal(causal.checked));
  const slider = byId('temperature', HTMLInputElement);
  slider.addEventListener('input', () => setTemperature(sliderToT(Number(slider.value))));
  for (const b of document.querySelectorAll('[data-temp]')) {
    if (b instanceof HTMLElement) b.addEventListener('click', () => setTemperature(Number(b.dataset.temp)));
  }
}

/** Adding, removing and restoring heads; hiding the query token as a key. */
function bindHeads() {
  const seed = byId('seed-input', HTMLInputElement);
  seed.addEventListener('input', () => update({ seedInput: seed.value }));
  $('add-head').addEventListener('click', () => addRandomHead(seed.value === '' ? NaN : Number(seed.value)));
  $('remove-head').addEventListener('click', () => removeSelectedHead());
  $('restore-heads').addEventListener('click', () => restoreHeads());
  $('hide-token').addEventListener('click', () => toggleHideToken());
}

// ---- the main column --------------------------------------------------------------------------------

/** Picking a query from the strip and a head from the thumbnails. */
function bindPickers() {
  $('token-strip').addEventListener('click', (e) => {
    const tok = closest(e, '.tok');
    if (tok) setQuery(Number(tok.dataset.index));
  });
  $('head-thumbs').addEventListener('click', (e) => {
    const b = closest(e, '.thumb');
    if (b) setHead(Number(b.dataset.head));
  });
}

/** The view tabs, the colour scale, the export buttons. */
function bindViews() {
  for (const tab of document.querySelectorAll('[role="tab"][data-view]')) {
    if (!(tab instanceof HTMLElement)) continue;
    const view = /** @type {State['view']} */ (tab.dataset.view);
    tab.addEventListener('click', () => update({ view }));
  }
  const mode = byId('scale-mode', HTMLSelectElement);
  mode.addEventListener('change', () => update({ scaleMode: mode.value === 'head' ? 'head' : 'absolute' }));
  $('export-png').addEventListener('click', () => exportPng(getState()));
  $('export-svg').addEventListener('click', () => exportSvg(getState()));
  $('export-json').addEventListener('click', async () => {
    const error = await exportJson(getState());
    if (error) update({ error });
  });
}

const ZOOM_HALF = ZOOM_TOKENS / 2;

/** The heatmap under the pointer: its cell is read out; a click picks its row (and opens a pooled cell). */
function bindHeatmapPointer() {
  const heat = byId('heatmap', HTMLCanvasElement);
  /** @param {MouseEvent} e */
  const cell = (e) => {
    const r = heat.getBoundingClientRect();
    return cellAt(heat, e.clientX - r.left, e.clientY - r.top);
  };
  heat.addEventListener('mousemove', (e) => {
    const c = cell(e), h = getState().hover;
    if (c ? !h || h.row !== c.row || h.col !== c.col || h.tile !== c.tile : h !== null) update({ hover: c });
  });
  heat.addEventListener('click', (e) => {
    const c = cell(e);
    if (!c) return;
    // a pooled cell opens the window of tokens around the weight it shows
    if (c.tile > 1) update({ heatmapZoom: { row0: c.row - ZOOM_HALF, col0: c.col - ZOOM_HALF } });
    setQuery(c.row);
  });
  $('heatmap-whole').addEventListener('click', () => update({ heatmapZoom: null }));
}

/** The guided path: four experiments, each a button (the focus goes where the step reads). */
function bindGuide() {
  $('guide-1').addEventListener('click', async () => {
    update({ guideStep: 1 });
    await load('previous-token', { query: 1 });
    $('token-strip').focus();
  });
  $('guide-2').addEventListener('click', async () => {
    update({ guideStep: 2 });
    const s = getState();
    if (!s.base || isCross(s)) await load('previous-token');
    await setCausal(true);
    $('causal-toggle').focus();
  });
  $('guide-3a').addEventListener('click', () => { update({ guideStep: 3 }); setTemperature(0.1); });
  $('guide-3b').addEventListener('click', () => { update({ guideStep: 3 }); setTemperature(3); });
  $('guide-4').addEventListener('click', async () => {
    update({ guideStep: 4 });
    if (!getState().base) await load('previous-token');
    const v = Number(getState().seedInput);
    await addRandomHead(Number.isInteger(v) && v >= 0 ? v : 1);
  });
}

/** Links to a panel move the focus there too (keyboard users land where they read). */
function bindJumps() {
  for (const a of document.querySelectorAll('a.jump[data-jump]')) {
    if (!(a instanceof HTMLElement)) continue;
    a.addEventListener('click', (e) => {
      const target = document.getElementById(a.dataset.jump || '');
      if (!target) return;
      e.preventDefault();
      target.scrollIntoView({ block: 'start' });
      target.focus({ preventScroll: true });
      history.replaceState(null, '', '#' + a.dataset.jump);
    });
  }
}

/** The views' width follows the layout (a ResizeObserver, so drawing never reads it). */
function observeWidth() {
  const main = /** @type {HTMLElement} */ (document.querySelector('.view-main'));
  update({ viewWidth: main.clientWidth });
  new ResizeObserver((entries) => {
    const w = Math.floor(entries[entries.length - 1].contentRect.width);
    if (w !== getState().viewWidth) update({ viewWidth: w });
  }).observe(main);
}

export function bindControls() {
  document.addEventListener('keydown', onKey);
  bindScenario();
  bindMaskAndTemperature();
  bindHeads();
  bindPickers();
  bindViews();
  bindHeatmapPointer();
  bindGuide();
  bindJumps();
  observeWidth();
}
