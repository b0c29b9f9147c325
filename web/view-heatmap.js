// @ts-check
// The heatmap of the shown head: a canvas of n × m cells coloured by weight (the weight
// printed in cells that fit, masked cells hatched and marked ×), the query's row outlined;
// the line under it that reads out the cell under the pointer; and the colour legend.
// heatmapLayout is shared with the SVG export (export.js).
//
// Levels of detail: a head of more tokens than fit at MIN_CELL px a cell is drawn pooled,
// each cell a tile × tile block of tokens coloured by the block's largest weight (the
// strongest link in it stays visible where a mean would wash it out); the pointer reads out
// that weight and where it is, and a click opens a window of ZOOM_TOKENS × ZOOM_TOKENS tokens
// around it, cell by cell ("Whole map" goes back).

import { FONT, FONT_BOLD, hatchPattern, sizeCanvas, textWidth } from './canvas.js';
import { cssAt, HIGHLIGHT, LUT_SIZE, lutIndex, STOPS, textOn } from './colour.js';
import { $, byId, setAttr, setFlag, setText } from './dom.js';
import { formatNumber, truncate } from './format.js';
import { detailedHead, maskGrid, scaleMax } from './selectors.js';

/**
 * @typedef {import('./types.js').State} State
 * @typedef {import('./types.js').Trace} Trace
 * @typedef {import('./types.js').Grid} Grid
 */

const MIN_CELL = 4; // px: a head whose cells would be narrower is drawn pooled
export const ZOOM_TOKENS = 48; // a side of the window a click on a pooled heatmap opens
const MAX_HEIGHT = 640; // px: the heatmap's height in the page

/**
 * What the canvas shows of a head: its cells (tokens, or pooled blocks of tile × tile
 * tokens), from query row0 and key col0 on.
 * @typedef {object} Shown
 * @property {number} row0
 * @property {number} col0
 * @property {number} tile          tokens a side of a cell (1: a cell is a query and a key)
 * @property {number} n             cells down
 * @property {number} m             cells across
 * @property {number[][]} weights   [n][m] each cell's weight (a block's largest)
 * @property {(number | null)[][]} grid  null where every token of the cell is masked
 * @property {number[][]} rows      [n][m] the query of each cell's weight
 * @property {number[][]} cols      [n][m] its key
 * @property {string[]} qLabels
 * @property {string[]} kLabels
 */

/**
 * The cells of head h for a window of queries [row0, row0 + rows) and keys [col0, col0 +
 * cols), pooled in blocks of tile × tile tokens.
 * @param {Trace} trace
 * @param {number} h
 * @param {{row0: number, col0: number, rows: number, cols: number, tile: number}} w
 * @returns {Shown}
 */
export function shownCells(trace, h, w) {
  const head = trace.heads[h], G = maskGrid(head), W = head.weights;
  const n = Math.ceil(w.rows / w.tile), m = Math.ceil(w.cols / w.tile);
  /** @type {Shown} */
  const out = { row0: w.row0, col0: w.col0, tile: w.tile, n, m, weights: [], grid: [], rows: [], cols: [], qLabels: [], kLabels: [] };
  const label = (/** @type {string[]} */ tokens, /** @type {number} */ first, /** @type {number} */ end) =>
    (w.tile === 1 ? `${first} ${truncate(tokens[first], 14)}` : `${first}–${end - 1}`);
  for (let i = 0; i < n; i++) {
    const r0 = w.row0 + i * w.tile, r1 = Math.min(w.row0 + w.rows, r0 + w.tile);
    out.qLabels.push(label(trace.tokens, r0, r1));
    const weights = [], grid = [], rows = [], cols = [];
    for (let j = 0; j < m; j++) {
      const c0 = w.col0 + j * w.tile, c1 = Math.min(w.col0 + w.cols, c0 + w.tile);
      let best = -1, at = [r0, c0];
      for (let r = r0; r < r1; r++)
        for (let c = c0; c < c1; c++)
          if (G[r][c] !== null && W[r][c] > best) { best = W[r][c]; at = [r, c]; }
      weights.push(Math.max(best, 0));
      grid.push(best < 0 ? null : best);
      rows.push(at[0]);
      cols.push(at[1]);
    }
    out.weights.push(weights);
    out.grid.push(grid);
    out.rows.push(rows);
    out.cols.push(cols);
  }
  for (let j = 0; j < m; j++) {
    const c0 = w.col0 + j * w.tile;
    out.kLabels.push(label(trace.source_tokens, c0, Math.min(w.col0 + w.cols, c0 + w.tile)));
  }
  return out;
}

/**
 * Which cells the heatmap shows: the whole head when its tokens fit at MIN_CELL px, else
 * pooled tiles, or the window `zoom` opens.
 * @param {Trace} trace
 * @param {number} h
 * @param {number} width
 * @param {{row0: number, col0: number} | null} zoom
 * @returns {Shown}
 */
export function heatmapCellsShown(trace, h, width, zoom) {
  const n = trace.tokens.length, m = trace.source_tokens.length;
  const across = Math.max(1, Math.floor((width - 140) / MIN_CELL)), down = Math.floor((MAX_HEIGHT - 40) / MIN_CELL);
  const tile = Math.max(1, Math.ceil(m / across), Math.ceil(n / down));
  if (tile === 1) return shownCells(trace, h, { row0: 0, col0: 0, rows: n, cols: m, tile: 1 });
  if (zoom) {
    const rows = Math.min(ZOOM_TOKENS, n), cols = Math.min(ZOOM_TOKENS, m);
    const row0 = Math.max(0, Math.min(n - rows, zoom.row0)), col0 = Math.max(0, Math.min(m - cols, zoom.col0));
    return shownCells(trace, h, { row0, col0, rows, cols, tile: 1 });
  }
  return shownCells(trace, h, { row0: 0, col0: 0, rows: n, cols: m, tile });
}

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
 * @param {Shown} [shown]  the cells drawn (default: every token)
 * @returns {Layout}
 */
export function heatmapLayout(trace, opts, shown) {
  if (shown) return cellsLayout(shown.n, shown.m, shown.qLabels, shown.kLabels, opts);
  return cellsLayout(trace.tokens.length, trace.source_tokens.length,
    trace.tokens.map((t, i) => `${i} ${truncate(t, 14)}`), trace.source_tokens.map((t, j) => `${j} ${truncate(t, 14)}`), opts);
}

/**
 * The layout of n × m cells with their row and column labels.
 * @param {number} n
 * @param {number} m
 * @param {string[]} qLabels
 * @param {string[]} kLabels
 * @param {{width: number, maxHeight?: number, maxCell?: number}} opts
 * @returns {Layout}
 */
function cellsLayout(n, m, qLabels, kLabels, opts) {
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
 * @param {{weights: number[][], grid: Grid}} cells
 * @param {number} top  the weight drawn darkest
 */
function drawCells(ctx, L, cells, top) {
  const { m, cell, left, gap } = L;
  const inner = cell - gap;
  const buckets = bucketCells(cells.weights, cells.grid, L.n, m, top);
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
 * @param {{weights: number[][], grid: Grid}} cells
 * @param {number} top  the weight drawn darkest
 */
function drawCellText(ctx, L, cells, top) {
  const { n, m, cell, left, gap } = L;
  if (cell < 14 && !L.showText) return;
  const inner = cell - gap;
  const W = cells.weights, G = cells.grid;
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
 * (for hit tests). `shown`: the cells to draw (default: every token).
 * @param {HTMLCanvasElement} canvas
 * @param {Trace} trace
 * @param {number} h
 * @param {{width: number, maxHeight?: number, query: number, scaleMax: number}} opts
 * @param {Shown} [shown]
 */
export function drawHeatmap(canvas, trace, h, opts, shown) {
  const head = trace.heads[h];
  const L = heatmapLayout(trace, opts, shown);
  const cells = shown || { weights: head.weights, grid: maskGrid(head) };
  // the query's row among the cells drawn
  const row = shown ? Math.floor((opts.query - shown.row0) / shown.tile) : opts.query;
  drawLaidOut(canvas, L, cells, opts.query >= 0 && row >= 0 && row < L.n ? row : -1, opts.scaleMax);
  return L;
}

/**
 * Draws cells that came from elsewhere (a head's map from the server: panel-model.js) as the
 * heatmap draws a head, no row outlined; returns the layout (for hit tests).
 * @param {HTMLCanvasElement} canvas
 * @param {Shown} shown
 * @param {{width: number, maxHeight?: number, scaleMax: number}} opts
 */
export function drawShownCells(canvas, shown, opts) {
  const L = cellsLayout(shown.n, shown.m, shown.qLabels, shown.kLabels, opts);
  drawLaidOut(canvas, L, shown, -1, opts.scaleMax);
  return L;
}

/**
 * The cells, their text and labels, and the query's row (-1: none) outlined.
 * @param {HTMLCanvasElement} canvas
 * @param {Layout} L
 * @param {{weights: number[][], grid: Grid}} cells
 * @param {number} query
 * @param {number} top  the weight drawn darkest
 */
function drawLaidOut(canvas, L, cells, query, top) {
  const ctx = sizeCanvas(canvas, L.width, L.height);
  ctx.fillStyle = '#ffffff';
  ctx.fillRect(0, 0, L.width, L.height);
  drawCells(ctx, L, cells, top);
  drawCellText(ctx, L, cells, top);
  drawLabels(ctx, L, query);
  if (query >= 0) { // the selected query's row
    const inner = L.cell - L.gap;
    ctx.strokeStyle = HIGHLIGHT;
    ctx.lineWidth = 2.5;
    ctx.strokeRect(L.left - 1.5, L.top + query * L.cell - 1.5, L.m * L.cell - L.gap + 3, inner + 3);
  }
}

/**
 * The cell of a layout under a point (CSS px from the canvas's corner), or null.
 * @param {Layout} L
 * @param {number} x
 * @param {number} y
 */
export function layoutCellAt(L, x, y) {
  const col = Math.floor((x - L.left) / L.cell), row = Math.floor((y - L.top) / L.cell);
  return row < 0 || col < 0 || row >= L.n || col >= L.m ? null : { row, col };
}

// What the canvas shows now: drawn again only when one of these changes.
/** @type {WeakMap<HTMLCanvasElement, {trace: Trace, head: number, query: number, width: number, top: number, zoom: string, layout: Layout, shown: Shown}>} */
const drawn = new WeakMap();

/** The cells the heatmap shows now and where they are (the test hook's), or null before the first drawing. */
export function heatmapShown() {
  const d = drawn.get(byId('heatmap', HTMLCanvasElement));
  return d ? { ...d.shown, left: d.layout.left, top: d.layout.top, cell: d.layout.cell } : null;
}

/** The views' width: at least 200 px. @param {State} s */
export const viewWidth = (s) => Math.max(200, s.viewWidth);

/** @param {State} s */
export function renderHeatmap(s) {
  const t = s.trace;
  if (!t) return;
  const canvas = byId('heatmap', HTMLCanvasElement);
  const width = viewWidth(s), top = scaleMax(s, s.head);
  const last = drawn.get(canvas), zoom = JSON.stringify(s.heatmapZoom);
  if (!last || last.trace !== t || last.head !== s.head || last.query !== s.query || last.width !== width ||
      last.top !== top || last.zoom !== zoom) {
    const shown = heatmapCellsShown(t, s.head, width, s.heatmapZoom);
    const layout = drawHeatmap(canvas, t, s.head, { width, maxHeight: MAX_HEIGHT, query: s.query, scaleMax: top }, shown);
    drawn.set(canvas, { trace: t, head: s.head, query: s.query, width, top, zoom, layout, shown });
    const pooled = shown.tile > 1, zoomed = shown.n * shown.m < t.tokens.length * t.source_tokens.length && !pooled;
    setAttr(canvas, 'data-tile', String(shown.tile));
    setAttr(canvas, 'data-window', `${shown.row0},${shown.col0},${shown.n},${shown.m}`);
    setFlag($('heatmap-whole'), 'hidden', !zoomed);
    setFlag($('heatmap-lod-line'), 'hidden', !pooled && !zoomed);
    setText($('heatmap-lod'), pooled
      ? `${t.tokens.length} × ${t.source_tokens.length} tokens: each cell the largest weight in a block of ` +
        `${shown.tile} × ${shown.tile}; click one to see its tokens`
      : zoomed ? `queries ${shown.row0}–${shown.row0 + shown.n - 1}, keys ${shown.col0}–${shown.col0 + shown.m - 1} ` +
        `of ${t.tokens.length} × ${t.source_tokens.length}` : '');
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
  const S = d.shown, at = layoutCellAt(d.layout, x, y);
  if (!at) return null;
  // the token pair whose weight the cell shows (a block's largest), and the block
  return { row: S.rows[at.row][at.col], col: S.cols[at.row][at.col], tile: S.tile };
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
  const block = c.tile && c.tile > 1 ? `the largest in its block of ${c.tile} × ${c.tile}: ` : '';
  setText(out, `${block}query ${c.row} “${t.tokens[c.row]}” → key ${c.col} “${t.source_tokens[c.col]}”: ` +
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
