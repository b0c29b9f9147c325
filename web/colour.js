// @ts-check
// The colour scale of every view: 0 -> very pale blue, 1 -> dark blue (sequential,
// print-safe), as a 256-entry lookup table (RGB bytes for the thumbnails' ImageData, CSS
// strings for the canvas and SVG fills), and the fixed colours of masked cells and of the
// selected query.

export const STOPS = ['#f7fbff', '#deebf7', '#c6dbef', '#9ecae1', '#6baed6', '#4292c6', '#2171b5', '#08519c', '#08306b'];
export const LUT_SIZE = 256;
export const MASKED = '#5c5c5c';
export const MASKED_INK = '#a8a8a8';
export const MASKED_RGB = [92, 92, 92];
export const HIGHLIGHT = '#e8590c';

const rgbStops = STOPS.map((h) => [parseInt(h.slice(1, 3), 16), parseInt(h.slice(3, 5), 16), parseInt(h.slice(5, 7), 16)]);
/** Entry k's red, green and blue at 3k, 3k + 1, 3k + 2. */
export const LUT_RGB = new Uint8ClampedArray(LUT_SIZE * 3);
/** @type {string[]} */
const LUT_CSS = new Array(LUT_SIZE);
for (let k = 0; k < LUT_SIZE; k++) {
  const pos = (k / (LUT_SIZE - 1)) * (rgbStops.length - 1);
  const lo = Math.min(rgbStops.length - 2, Math.floor(pos));
  const f = pos - lo;
  for (let c = 0; c < 3; c++) LUT_RGB[k * 3 + c] = Math.round(rgbStops[lo][c] + (rgbStops[lo + 1][c] - rgbStops[lo][c]) * f);
  LUT_CSS[k] = `rgb(${LUT_RGB[k * 3]},${LUT_RGB[k * 3 + 1]},${LUT_RGB[k * 3 + 2]})`;
}

/**
 * The table entry of a weight in [0, 1] (clamped).
 * @param {number} w
 */
export function lutIndex(w) {
  if (!(w > 0)) return 0;
  if (w >= 1) return LUT_SIZE - 1;
  return Math.round(w * (LUT_SIZE - 1));
}

/** @param {number} w  a weight in [0, 1] */
export const css = (w) => LUT_CSS[lutIndex(w)];
/** @param {number} k  a table entry */
export const cssAt = (k) => LUT_CSS[k];
/** Text that reads on a cell of weight w. @param {number} w */
export const textOn = (w) => (w > 0.5 ? '#ffffff' : '#0b1f33');
