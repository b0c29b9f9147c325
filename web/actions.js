// @ts-check
// The page's state changes, each one update() (state.js): what a control, a key or the
// test hook asks for. None of them renders: main.js renders every view from the new state,
// and traces.js asks the engine for the trace it needs. Those that change the request
// resolve once the new trace is in.

import { baselineOf, clamp, headSources, isCross, liveTrace } from './selectors.js';
import { getState, update } from './state.js';
import { computed } from './traces.js';

/** @typedef {import('./types.js').State} State */

/** No interventions (docs/interventions.md). @type {Partial<State>} */
export const NO_INTERVENTIONS = Object.freeze({ maskTokens: [], ablate: [], scale: [], replace: [], permute: null });

/** @param {number} i  the query token (clamped) */
export function setQuery(i) {
  const s = getState();
  if (!s.trace) return;
  const q = clamp(i, 0, s.trace.tokens.length - 1);
  if (q !== s.query) update({ query: q });
}

/** @param {number} h  the head shown (clamped) */
export function setHead(h) {
  const s = getState();
  if (!s.trace) return;
  const k = clamp(h, 0, s.trace.heads.length - 1);
  if (k !== s.head) update({ head: k });
}

/** @param {number} t  the temperature, > 0 */
export function setTemperature(t) {
  if (t !== getState().temperature) update({ temperature: t });
  return computed();
}

/** @param {boolean} on */
export function setCausal(on) {
  update({ causal: on });
  return computed();
}

/**
 * Adds a random head drawn from `seed` and shows it; the seed box moves to the next seed.
 * @param {number} seed
 */
export function addRandomHead(seed) {
  const s = getState();
  if (!Number.isInteger(seed) || seed < 0) {
    update({ error: `seed: expected a whole number ≥ 0 but got "${s.seedInput}"` });
    return Promise.resolve();
  }
  update({ addHeads: [...s.addHeads, { seed }], seedInput: String(seed + 1), head: headSources(s).length });
  return computed();
}

/** Removes the shown head; the head interventions follow their heads. */
export function removeSelectedHead() {
  const s = getState();
  if (!s.trace || s.trace.heads.length <= 1) return Promise.resolve();
  const src = headSources(s)[s.head];
  if (!src) return Promise.resolve();
  const gone = s.head;
  /** @template {{head: number}} T @param {T[]} list @returns {T[]} */
  const shift = (list) => list.filter((a) => a.head !== gone).map((a) => ({ ...a, head: a.head > gone ? a.head - 1 : a.head }));
  update({
    removeHeads: src.kind === 'scenario' ? [...s.removeHeads, src.index] : s.removeHeads,
    addHeads: src.kind === 'added' ? s.addHeads.filter((_, k) => k !== src.k) : s.addHeads,
    ablate: shift(s.ablate),
    scale: shift(s.scale),
    head: Math.max(0, s.head - 1),
  });
  return computed();
}

/** The scenario's own heads again (head interventions go: their indices no longer hold). */
export function restoreHeads() {
  update({ removeHeads: [], addHeads: [], head: 0, ablate: [], scale: [] });
  return computed();
}

/** Hides the query token as a key, or shows it again (an intervention). */
export function toggleHideToken() {
  const s = getState();
  if (!s.trace || isCross(s)) return Promise.resolve();
  const i = baselineOf(s, s.query);
  update({ maskTokens: s.maskTokens.includes(i) ? s.maskTokens.filter((j) => j !== i) : [...s.maskTokens, i] });
  return computed();
}

/**
 * A new sentence: its words become tokens (the interventions' indices belonged to the old one).
 * @param {string} text
 */
export function applySentence(text) {
  const s = getState();
  const words = text.trim().split(/\s+/).filter(Boolean);
  if (!words.length || !s.base) {
    update({ error: 'sentence: type at least one word' });
    return Promise.resolve();
  }
  const sentence = words.join(' ');
  update({ ...NO_INTERVENTIONS, sentence: sentence === s.base.tokens.join(' ') ? null : sentence, query: words.length - 1 });
  return computed();
}

/** The scenario's own sentence again. */
export function resetSentence() {
  const s = getState();
  if (!s.base) return Promise.resolve();
  update({ ...NO_INTERVENTIONS, sentence: null, sentenceInput: s.base.tokens.join(' ') });
  return computed();
}

/**
 * An intervention from the panel: `patch(s, trace)` says what changes; the query stays on
 * its token wherever the intervention moves it.
 * @param {(s: State, trace: import('./types.js').Trace) => Partial<State>} patch
 */
export function intervene(patch) {
  const s = getState();
  const t = liveTrace(s);
  if (!t) return Promise.resolve();
  update({ follow: baselineOf(s, s.query), ...patch(s, t) });
  return computed();
}
