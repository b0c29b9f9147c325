// @ts-check
// The page's one way to write markup: html`<b>${text}</b>` escapes every value it is given
// (a token, a head's name, an error from the server), unless the value is itself markup
// made by html`` or raw(). Arrays are joined. null and undefined write nothing; numbers,
// BigInts and booleans write themselves (data-flips="false").

/** Markup: a string that is safe to put into innerHTML. */
export class Html {
  /** @param {string} text */
  constructor(text) {
    this.text = text;
  }

  toString() {
    return this.text;
  }
}

/** @typedef {string | number | bigint | boolean | null | undefined | Html | ReadonlyArray<Interpolation>} Interpolation */

/** @type {Record<string, string>} */
const ESCAPES = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

/** @param {unknown} s */
export function escapeHtml(s) {
  return String(s).replace(/[&<>"']/g, (c) => ESCAPES[c]);
}

/** @param {Interpolation} v @returns {string} */
function part(v) {
  if (v instanceof Html) return v.text;
  if (v === null || v === undefined) return '';
  if (Array.isArray(v)) return v.map(part).join('');
  return escapeHtml(v);
}

/**
 * @param {TemplateStringsArray} strings
 * @param {...Interpolation} values
 * @returns {Html}
 */
export function html(strings, ...values) {
  let out = strings[0];
  for (let k = 0; k < values.length; k++) out += part(values[k]) + strings[k + 1];
  return new Html(out);
}

/**
 * Markup this code wrote itself (a constant), taken as it is.
 * @param {string} text
 */
export function raw(text) {
  return new Html(text);
}
