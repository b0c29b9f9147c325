// @ts-check
// Small DOM helpers for the views: typed element look-ups, and writes that skip an
// unchanged value. Views run on every state change (state.js) and a new trace rewrites
// hundreds of cells; each real change costs the browser style and layout work, so views
// write through these. What was last written is remembered in WeakMaps keyed by the node
// (nothing is stuck on the nodes themselves).

import { Html } from './html.js';

/**
 * The element with this id, of this kind; throws when index.html lacks it.
 * @template {typeof HTMLElement} K
 * @param {string} id
 * @param {K} kind
 * @returns {InstanceType<K>}
 */
export function byId(id, kind) {
  const el = document.getElementById(id);
  if (!(el instanceof kind)) throw new Error(`index.html has no ${kind.name} #${id}`);
  return /** @type {InstanceType<K>} */ (el);
}

/** An element of index.html by id (any kind). @param {string} id */
export const $ = (id) => byId(id, HTMLElement);

/** @type {WeakMap<Node, string>} */
const lastText = new WeakMap();
/** @type {WeakMap<Element, string>} */
const lastHtml = new WeakMap();
/** @type {WeakMap<Element, Map<string, string>>} */
const lastAttr = new WeakMap();

/**
 * node.textContent = text, unless it already is.
 * @param {Node} node
 * @param {string} text
 */
export function setText(node, text) {
  if (lastText.get(node) === text) return;
  node.textContent = text;
  lastText.set(node, text);
}

/**
 * node.innerHTML = markup, unless it already is.
 * @param {Element} node
 * @param {Html} markup
 */
export function setHtml(node, markup) {
  if (lastHtml.get(node) === markup.text) return;
  node.innerHTML = markup.text;
  lastHtml.set(node, markup.text);
  lastText.delete(node);
}

/**
 * Forgets what setText and setHtml wrote into `node` (someone else rewrote it).
 * @param {Element} node
 */
export function forget(node) {
  lastText.delete(node);
  lastHtml.delete(node);
}

/**
 * node.setAttribute(name, value), unless it already is; null removes it.
 * @param {Element} node
 * @param {string} name   e.g. "data-value", "aria-pressed"
 * @param {string | null} value
 */
export function setAttr(node, name, value) {
  let attrs = lastAttr.get(node);
  if (!attrs) lastAttr.set(node, (attrs = new Map()));
  const key = value === null ? '\u0000' : value;
  if (attrs.get(name) === key) return;
  if (value === null) node.removeAttribute(name);
  else node.setAttribute(name, value);
  attrs.set(name, key);
}

/**
 * A form control's value, unless the user is typing in it.
 * @param {HTMLInputElement | HTMLSelectElement | HTMLTextAreaElement} control
 * @param {string} value
 */
export function setValue(control, value) {
  if (document.activeElement !== control && control.value !== value) control.value = value;
}

/**
 * Replaces a <select>'s options when `key` (what they list) changes, keeping the choice
 * where it still exists.
 * @type {WeakMap<HTMLSelectElement, string>}
 */
const optionKeys = new WeakMap();
/**
 * @param {HTMLSelectElement} sel
 * @param {ReadonlyArray<readonly [string | number, string, string?]>} items  [value, text, title]
 * @param {string} key
 */
export function setOptions(sel, items, key) {
  if (optionKeys.get(sel) === key) return;
  const keep = sel.value;
  sel.textContent = '';
  for (const [value, text, title] of items) {
    const o = document.createElement('option');
    o.value = String(value);
    o.textContent = text;
    if (title) o.title = title;
    sel.appendChild(o);
  }
  optionKeys.set(sel, key);
  if ([...sel.options].some((o) => o.value === keep)) sel.value = keep;
}

/**
 * el.hidden / disabled / checked = on, unless it already is (even an unchanged write of a
 * reflected attribute can cost style work).
 * @param {HTMLElement & {disabled?: boolean, checked?: boolean}} el
 * @param {'hidden' | 'disabled' | 'checked'} prop
 * @param {boolean} on
 */
export function setFlag(el, prop, on) {
  if (el[prop] !== on) el[prop] = on;
}
