// @ts-check
// "More options": the fields an operation offers the API that a panel has no control of its
// own for, made from the operation's one description (GET api/operations; docs/operations.md).
// Each is an input with the field's help and its default as a placeholder; what is typed is
// kept in the store (state.options[operation][field], as typed) and goes into the panel's
// request beside its own fields, so an option added to an operation in the library appears
// here with its default, and its mistakes come back from the server naming it as the API
// spells it. An empty input leaves the field out: the server's default applies.

import { api } from './api.js';
import { $, setHtml, setText, setValue } from './dom.js';
import { html } from './html.js';
import { getState, update } from './state.js';

/**
 * @typedef {import('./types.js').State} State
 * @typedef {import('./types.js').OperationField} OperationField
 * @typedef {import('./types.js').OperationDescription} OperationDescription
 */

/** GET api/operations at start, into the store. */
export async function loadOperations() {
  try {
    /** @type {{operations: OperationDescription[]}} */
    const reply = await api('api/operations');
    /** @type {Record<string, OperationDescription>} */
    const operations = {};
    for (const d of reply.operations) operations[d.name] = d;
    update({ operations });
  } catch {
    // an older server without api/operations: the panels keep their own controls only
  }
}

/**
 * The fields of `operation` the API offers and the panel does not handle itself.
 * @param {State} s
 * @param {string} operation
 * @param {readonly string[]} handled
 * @returns {OperationField[]}
 */
function extraFields(s, operation, handled) {
  const d = s.operations[operation];
  if (!d) return [];
  return d.fields.filter((f) => f.faces.includes('api') && !handled.includes(f.name) && !(f.ids && handled.includes(f.ids)));
}

/**
 * A typed value as the API's JSON takes a field of this kind: numbers as numbers, lists
 * split at commas, a flag as true or false. Text that is not of the kind goes as it is, and
 * the server's reader says what is wrong with it.
 * @param {OperationField} f
 * @param {string} typed
 */
function valueOf(f, typed) {
  const t = typed.trim();
  const number = (/** @type {string} */ x) => (x !== '' && Number.isFinite(Number(x)) ? Number(x) : x);
  switch (f.kind) {
    case 'count': case 'number': return number(t);
    case 'flag': return t === 'true' ? true : t === 'false' ? false : t;
    case 'counts': return t.split(',').map((x) => number(x.trim()));
    case 'heads': case 'choices': return t.split(',').map((x) => x.trim()).filter((x) => x !== '');
    case 'token': return /^\d+$/.test(t) ? Number(t) : typed;
    default: return typed;
  }
}

/**
 * The fields typed into `operation`'s options, as the request's JSON.
 * @param {State} s
 * @param {string} operation
 * @param {readonly string[]} handled
 * @returns {Record<string, unknown>}
 */
export function optionFields(s, operation, handled) {
  const typed = s.options[operation] || {};
  /** @type {Record<string, unknown>} */
  const out = {};
  for (const f of extraFields(s, operation, handled)) {
    const t = typed[f.name];
    if (t !== undefined && t.trim() !== '') out[f.name] = valueOf(f, t);
  }
  return out;
}

/** A field's default as the placeholder shows it. @param {OperationField} f */
function defaultText(f) {
  if (f.default === null || f.default === '') return f.required ? 'required' : 'none';
  return Array.isArray(f.default) ? f.default.join(',') : String(f.default);
}

/** @param {OperationField} f */
function inputMarkup(f) {
  const range = f.min !== undefined && f.min !== null ? ` (${f.min} to ${f.max ?? '…'})` : '';
  const choices = f.choices ? ` (${f.choices.join(', ')})` : '';
  const hint = `${f.help}${f.unit ? ` (${f.unit})` : ''}${range}${choices}`;
  return html`<label class="option" title="${hint}"><code>${f.name}</code> \
<input data-option="${f.name}" data-testid="option-${f.name}" type="text" spellcheck="false" placeholder="${defaultText(f)}">\
<span class="hint">${hint}</span></label>`;
}

/**
 * Draws `operation`'s options into the element `id` (a <details>), hidden when there are none.
 * @param {State} s
 * @param {string} id
 * @param {string} operation
 * @param {readonly string[]} handled
 */
export function renderOptions(s, id, operation, handled) {
  const box = $(id);
  const fields = extraFields(s, operation, handled);
  box.hidden = fields.length === 0;
  const list = box.querySelector('.options');
  if (!list || !(list instanceof HTMLElement)) return;
  setHtml(list, html`${fields.map(inputMarkup)}`);
  const typed = s.options[operation] || {};
  for (const input of list.querySelectorAll('input[data-option]')) {
    if (input instanceof HTMLInputElement && document.activeElement !== input) setValue(input, typed[input.dataset.option || ''] ?? '');
  }
  const summary = box.querySelector('summary');
  if (summary instanceof HTMLElement) {
    const count = Object.values(typed).filter((t) => t.trim() !== '').length;
    setText(summary, count ? `More options (${count} set)` : 'More options');
  }
}

/**
 * Keeps what is typed into the options of `operation` in the store.
 * @param {string} id
 * @param {string} operation
 */
export function bindOptions(id, operation) {
  $(id).addEventListener('change', (e) => {
    const input = e.target;
    if (!(input instanceof HTMLInputElement) || !input.dataset.option) return;
    const s = getState();
    update({ options: { ...s.options, [operation]: { ...(s.options[operation] || {}), [input.dataset.option]: input.value } } });
  });
}
