// @ts-check
// Canvas helpers shared by the heatmap, the thumbnails and the arcs: fonts, text width,
// sizing a canvas for the screen's pixel ratio, and the hatch of masked cells.

import { MASKED, MASKED_INK } from './colour.js';

export const FONT = '12px system-ui, -apple-system, "Segoe UI", Roboto, sans-serif';
export const FONT_BOLD = 'bold 12px system-ui, -apple-system, "Segoe UI", Roboto, sans-serif';

/** @type {CanvasRenderingContext2D | null} */
let measureCtx = null;
/** Widths measured so far, by font and text: every redraw labels the same tokens. @type {Map<string, number>} */
const widths = new Map();

/**
 * The width of `text` in `font`, in CSS px.
 * @param {string} text
 * @param {string} [font]
 */
export function textWidth(text, font = FONT) {
  const key = font + '\u0000' + text;
  let w = widths.get(key);
  if (w === undefined) {
    if (!measureCtx) measureCtx = context2d(document.createElement('canvas'));
    measureCtx.font = font;
    w = measureCtx.measureText(text).width;
    if (widths.size > 10000) widths.clear();
    widths.set(key, w);
  }
  return w;
}

/**
 * The canvas's 2D context (every browser the page supports has one).
 * @param {HTMLCanvasElement} canvas
 */
export function context2d(canvas) {
  const ctx = canvas.getContext('2d');
  if (!ctx) throw new Error('this browser gives no 2D canvas');
  return ctx;
}

/**
 * Sizes the canvas to cssW × cssH CSS px at the screen's pixel ratio (up to 3) and returns
 * its context, scaled so that drawing is in CSS px. Unchanged sizes cost no style work.
 * @param {HTMLCanvasElement} canvas
 * @param {number} cssW
 * @param {number} cssH
 */
export function sizeCanvas(canvas, cssW, cssH) {
  const dpr = Math.max(1, Math.min(3, window.devicePixelRatio || 1));
  const w = Math.max(1, Math.round(cssW * dpr)), h = Math.max(1, Math.round(cssH * dpr));
  if (canvas.width !== w) canvas.width = w;
  if (canvas.height !== h) canvas.height = h;
  if (canvas.style.width !== cssW + 'px') canvas.style.width = cssW + 'px';
  if (canvas.style.height !== cssH + 'px') canvas.style.height = cssH + 'px';
  const ctx = context2d(canvas);
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  return ctx;
}

/** @type {WeakMap<CanvasRenderingContext2D, CanvasPattern>} */
const hatchCache = new WeakMap();

/**
 * The hatch that fills masked cells (distinct from a zero weight's pale blue).
 * @param {CanvasRenderingContext2D} ctx
 */
export function hatchPattern(ctx) {
  const cached = hatchCache.get(ctx);
  if (cached) return cached;
  const tile = document.createElement('canvas');
  tile.width = tile.height = 8;
  const t = context2d(tile);
  t.fillStyle = MASKED;
  t.fillRect(0, 0, 8, 8);
  t.strokeStyle = MASKED_INK;
  t.lineWidth = 1.5;
  t.beginPath();
  t.moveTo(-2, 2); t.lineTo(2, -2);
  t.moveTo(0, 8); t.lineTo(8, 0);
  t.moveTo(6, 10); t.lineTo(10, 6);
  t.stroke();
  const p = ctx.createPattern(tile, 'repeat');
  if (!p) throw new Error('this browser gives no canvas patterns');
  hatchCache.set(ctx, p);
  return p;
}
