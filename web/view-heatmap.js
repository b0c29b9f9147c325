// @ts-check
// The heatmap of the shown head: a canvas of n × m cells coloured by weight (the weight
// printed in cells that fit, masked cells hatched and marked ×), the query's row outlined;
// the line under it that reads out the cell under the pointer; and the colour legend.
// heatmapLayout is shared with the SVG export (export.js).

import { FONT, FONT_BOLD, hatchPattern, sizeCanvas, textWidth } from './canvas.js';
import { cssAt, HIGHLIGHT, LUT_SIZE, lutIndex, STOPS, textOn } from './colour.js';
import { $, byId, setAttr, setText } from './dom.js';
import { formatNumber, truncate } from './format.js';
import { detailedHead, maskGrid, scaleMax } from './selectors.js';

/**
 * @typedef {import('./types.js').State} State
 * @typedef {import('./types.js').Trace} Trace
 * @typedef {import('./types.js').Grid} Grid
 */

/**
 * Where everything goes: cells are square; labels go left (queries) and top (keys,
 * rotated when narrow).
 * @typedef {object} Layout
 * @property {number} n
 * @property {number} m
 * @property {number} cell
 * @property {number} left
 * @property {number} top
 * @property {boolean} rotate
 * @property {number} labelEvery
 * @property {string[]} qLabels
 * @property {string[]} kLabels
 * @property {number} width
 * @property {number} height
 * @property {boolean} showText
 * @property {number} gap
 */

/**
 * @param {Trace} trace
 * @param {{width: number, maxHeight?: number, maxCell?: number}} opts
 * @returns {Layout}
 */
export function heatmapLayout(trace, opts) {
  const n = trace.tokens.length, m = trace.source_tokens.length;
  const qLabels = trace.tokens.map((t, i) => `${i} ${truncate(t, 14)}`);
  const kLabels = trace.source_tokens.map((t, j) => `${j} ${truncate(t, 14)}`);
  let left = 8;
  for (const l of qLabels) left = Math.max(left, textWidth(l, FONT_BOLD));
  left = Math.ceil(Math.min(left, 120)) + 12;
  const availW = Math.max(60, opts.width - left - 6);
  let cell = Math.floor(availW / m);
  if (opts.maxHeight) cell = Math.min(cell, Math.floor((opts.maxHeight - 40) / n));
  cell = Math.max(3, Math.min(opts.maxCell || 64, cell));
  let kMax = 0;
  for (const l of kLabels) kMax = Math.max(kMax, textWidth(l, FONT));
  const rotate = kMax + 8 > cell;
  const top = rotate ? Math.ceil(Math.min(kMax, 110) * 0.72) + 16 : 24;
  return {
    n, m, cell, left, top, rotate, qLabels, kLabels,
    labelEvery: Math.max(1, Math.ceil(14 / cell)),
    width: left + m * cell + 6, height: top + n * cell + 6,
    showText: cell >= 30,
    gap: cell >= 10 ? 1 : 0,
  };
}

/**
 * Cell indices (i·m + j) per colour-table entry; the last list holds the masked cells.
 * @param {number[][]} W
 * @param {Grid} G
 * @param {number} n
 * @param {number} m
 * @param {number} top  the weight drawn darkest
 */
function bucketCells(W, G, n, m, top) {
  /** @type {number[][]} */
  const buckets = Array.from({ length: LUT_SIZE + 1 }, () => []);
  const inv = 1 / top;
  for (let i = 0; i < n; i++) {
    const wRow = W[i], gRow = G[i];
    for (let j = 0; j < m; j++) buckets[gRow[j] === null ? LUT_SIZE : lutIndex(wRow[j] * inv)].push(i * m + j);
  }
  return buckets;
}

/**
 * The cells, grouped by colour: one path of rectangles and one fill per colour (a fillRect
 * per cell costs thousands of calls for a 64-token head).
 * @param {CanvasRenderingContext2D} ctx
 * @param {Layout} L
 * @param {import('./types.js').Head} head
 * @param {number} top  the weight drawn darkest
 */
function drawCells(ctx, L, head, top) {
  const { m, cell, left, gap } = L;
  const inner = cell - gap;
  const buckets = bucketCells(head.weights, maskGrid(head), L.n, m, top);
  const pattern = hatchPattern(ctx);
  for (let b = 0; b < buckets.length; b++) {
    const list = buckets[b];
    if (!list.length) continue;
    ctx.fillStyle = b === LUT_SIZE ? pattern : cssAt(b);
    ctx.beginPath();
    for (let k = 0; k < list.length; k++) {
      const cellIndex = list[k], i = (cellIndex / m) | 0, j = cellIndex - i * m;
      ctx.rect(left + j * cell, L.top + i * cell, inner, inner);
    }
    ctx.fill();
  }
}

/**
 * × on masked cells and the weight in cells that fit it.
 * @param {CanvasRenderingContext2D} ctx
 * @param {Layout} L
 * @param {import('./types.js').Head} head
 * @param {number} top  the weight drawn darkest
 */
function drawCellText(ctx, L, head, top) {
  const { n, m, cell, left, gap } = L;
  if (cell < 14 && !L.showText) return;
  const inner = cell - gap;
  const W = head.weights, G = maskGrid(head);
  ctx.textAlign = 'center';
  ctx.textBaseline = 'middle';
  ctx.font = `${Math.max(9, Math.min(13, Math.floor(cell / 3.1)))}px system-ui, sans-serif`;
  for (let i = 0; i < n; i++) {
    const cy = L.top + i * cell + inner / 2;
    for (let j = 0; j < m; j++) {
      const cx = left + j * cell + inner / 2;
      if (G[i][j] === null) {
        ctx.fillStyle = '#f0f0f0';
        ctx.fillText('×', cx, cy);
      } else if (L.showText) {
        ctx.fillStyle = textOn(W[i][j] / top);
        ctx.fillText(formatNumber(W[i][j], 2), cx, cy);
      }
    }
  }
}

/**
 * The query labels down the left (the query's in bold orange) and the key labels across
 * the top (rotated when the cells are narrow).
 * @param {CanvasRenderingContext2D} ctx
 * @param {Layout} L
 * @param {number} query  -1 for none
 */
function drawLabels(ctx, L, query) {
  const { n, m, cell, left, top, gap } = L;
  const inner = cell - gap;
  ctx.font = FONT;
  ctx.textBaseline = 'middle';
  ctx.textAlign = 'right';
  ctx.fillStyle = '#333333';
  for (let i = 0; i < n; i += L.labelEvery) {
    if (i !== query) ctx.fillText(L.qLabels[i], left - 6, top + i * cell + inner / 2);
  }
  if (query >= 0) {
    ctx.font = FONT_BOLD;
    ctx.fillStyle = HIGHLIGHT;
    ctx.fillText(L.qLabels[query], left - 6, top + query * cell + inner / 2);
    ctx.font = FONT;
    ctx.fillStyle = '#333333';
  }
  for (let j = 0; j < m; j += L.labelEvery) {
    const cx = left + j * cell + inner / 2;
    if (L.rotate) {
      ctx.save();
      ctx.translate(cx, top - 6);
      ctx.rotate(-Math.PI / 4);
      ctx.textAlign = 'left';
      ctx.fillText(L.kLabels[j], 0, 0);
      ctx.restore();
    } else {
      ctx.textAlign = 'center';
      ctx.fillText(L.kLabels[j], cx, top - 12);
    }
  }
}

/**
 * Draws head h of the trace into the canvas, the query row outlined; returns the layout
 * (for hit tests).
 * @param {HTMLCanvasElement} canvas
 * @param {Trace} trace
 * @param {number} h
 * @param {{width: number, maxHeight?: number, query: number, scaleMax: number}} opts
 */
export function drawHeatmap(canvas, trace, h, opts) {
  const head = trace.heads[h];
  const L = heatmapLayout(trace, opts);
  const ctx = sizeCanvas(canvas, L.width, L.height);
  ctx.fillStyle = '#ffffff';
  ctx.fillRect(0, 0, L.width, L.height);
  const query = opts.query >= 0 && opts.query < L.n ? opts.query : -1;
  drawCells(ctx, L, head, opts.scaleMax);
  drawCellText(ctx, L, head, opts.scaleMax);
  drawLabels(ctx, L, query);
  if (query >= 0) { // the selected query's row
    const inner = L.cell - L.gap;
    ctx.strokeStyle = HIGHLIGHT;
    ctx.lineWidth = 2.5;
    ctx.strokeRect(L.left - 1.5, L.top + query * L.cell - 1.5, L.m * L.cell - L.gap + 3, inner + 3);
  }
  return L;
}

// What the canvas shows now: drawn again only when one of these changes.
/** @type {WeakMap<HTMLCanvasElement, {trace: Trace, head: number, query: number, width: number, top: number, layout: Layout}>} */
const drawn = new WeakMap();

/** The views' width: at least 200 px. @param {State} s */
export const viewWidth = (s) => Math.max(200, s.viewWidth);

/** @param {State} s */
export function renderHeatmap(s) {
  const t = s.trace;
  if (!t) return;
  const canvas = byId('heatmap', HTMLCanvasElement);
  const width = viewWidth(s), top = scaleMax(s, s.head);
  const last = drawn.get(canvas);
  if (!last || last.trace !== t || last.head !== s.head || last.query !== s.query || last.width !== width || last.top !== top) {
    const layout = drawHeatmap(canvas, t, s.head, { width, maxHeight: 640, query: s.query, scaleMax: top });
    drawn.set(canvas, { trace: t, head: s.head, query: s.query, width, top, layout });
  }
  setAttr(canvas, 'data-head', String(s.head));
  setAttr(canvas, 'data-query', String(s.query));
}

/**
 * The cell under a point of the heatmap canvas (CSS px from its corner), or null.
 * @param {HTMLCanvasElement} canvas
 * @param {number} x
 * @param {number} y
 */
export function cellAt(canvas, x, y) {
  const d = drawn.get(canvas);
  if (!d) return null;
  const L = d.layout;
  const col = Math.floor((x - L.left) / L.cell), row = Math.floor((y - L.top) / L.cell);
  if (row < 0 || col < 0 || row >= L.n || col >= L.m) return null;
  return { row, col };
}

/** The line under the heatmap: the cell under the pointer. @param {State} s */
export function renderHoverReadout(s) {
  const out = $('hover-readout');
  const t = s.trace, c = s.hover;
  if (!c || !t || c.row >= t.tokens.length || c.col >= t.source_tokens.length) {
    setText(out, 'Hover or click a cell.');
    return;
  }
  const head = t.heads[s.head];
  const full = detailedHead(s, s.head);
  const masked = maskGrid(head)[c.row][c.col] === null;
  setText(out, `query ${c.row} “${t.tokens[c.row]}” → key ${c.col} “${t.source_tokens[c.col]}”: ` +
    (masked ? 'masked (logit −∞, weight exactly 0)' : `weight ${head.weights[c.row][c.col].toPrecision(6)}` +
      (full ? `, logit ${formatNumber(full.logits[c.row][c.col], 2)}` : '')));
}

/** The legend's gradient (once) and its ticks (0 to the colour scale's top). @param {State} s */
export function renderLegend(s) {
  const gradient = $('legend-gradient');
  if (!gradient.style.background) {
    const stops = STOPS.map((c, k) => `${c} ${(100 * k / (STOPS.length - 1)).toFixed(1)}%`).join(', ');
    gradient.style.background = `linear-gradient(to right, ${stops})`;
  }
  const top = scaleMax(s, s.head);
  const ticks = $('legend-ticks').children;
  for (let k = 0; k < ticks.length; k++) setText(ticks[k], top === 1 ? String(k / 4) : formatNumber(top * k / 4, 2));
}
