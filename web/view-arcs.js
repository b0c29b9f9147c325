// @ts-check
// The Arcs view: the queries on top, the keys below, a curve from the selected query to
// each key whose thickness is the weight it gives that key (× on a masked key, the weight
// printed under each key when there is room). Drawn only while the Arcs tab is shown.

import { FONT, FONT_BOLD, sizeCanvas, textWidth } from './canvas.js';
import { css, HIGHLIGHT, MASKED } from './colour.js';
import { byId } from './dom.js';
import { formatNumber, truncate } from './format.js';
import { maskGrid } from './selectors.js';
import { viewWidth } from './view-heatmap.js';

/**
 * @typedef {import('./types.js').State} State
 * @typedef {import('./types.js').Trace} Trace
 */

const PAD = 16;

/**
 * The canvas's size and where each token sits.
 * @param {Trace} trace
 * @param {number} width
 */
function arcsLayout(trace, width) {
  const n = trace.tokens.length, m = trace.source_tokens.length;
  const count = Math.max(n, m);
  const step = Math.max(6, (width - 2 * PAD) / count);
  const W = Math.max(width, 2 * PAD + step * count);
  let maxLabel = 0;
  for (const t of trace.tokens.concat(trace.source_tokens)) maxLabel = Math.max(maxLabel, textWidth(truncate(t, 12), FONT));
  const rotate = maxLabel + 6 > step;
  const labelH = rotate ? Math.min(90, maxLabel * 0.72 + 14) : 22;
  const H = 2 * labelH + 200;
  return {
    W, H, rotate,
    /** @param {number} i */ xq: (i) => PAD + (i + 0.5) * ((W - 2 * PAD) / n),
    /** @param {number} j */ xk: (j) => PAD + (j + 0.5) * ((W - 2 * PAD) / m),
    yTop: labelH + 8, yBot: H - labelH - 8,
    maxLine: Math.max(3, Math.min(28, ((W - 2 * PAD) / m) * 0.85)),
    showWeights: (W - 2 * PAD) / m >= 34,
  };
}

/** @typedef {ReturnType<typeof arcsLayout>} ArcsLayout */

/**
 * The curves from the query to each visible key, lightest first so heavy ones stay on top.
 * @param {CanvasRenderingContext2D} ctx
 * @param {ArcsLayout} L
 * @param {number[]} row   the query's weights
 * @param {(number | null)[]} gRow  null where a key is masked
 * @param {number} query
 */
function drawLines(ctx, L, row, gRow, query) {
  const order = Array.from({ length: row.length }, (_, j) => j).sort((a, b) => row[a] - row[b]);
  const mid = (L.yTop + L.yBot) / 2;
  ctx.lineCap = 'butt';
  for (const j of order) {
    const w = row[j];
    if (gRow[j] === null || w * L.maxLine < 0.25) continue;
    ctx.strokeStyle = css(Math.max(0.35, w));
    ctx.globalAlpha = 0.35 + 0.65 * w;
    ctx.lineWidth = w * L.maxLine;
    ctx.beginPath();
    ctx.moveTo(L.xq(query), L.yTop);
    ctx.bezierCurveTo(L.xq(query), mid, L.xk(j), mid, L.xk(j), L.yBot);
    ctx.stroke();
  }
  ctx.globalAlpha = 1;
}

/**
 * The tokens: queries on top (the selected one in orange), keys below with their weight
 * (or × when masked).
 * @param {CanvasRenderingContext2D} ctx
 * @param {ArcsLayout} L
 * @param {Trace} trace
 * @param {number[]} row
 * @param {(number | null)[]} gRow
 * @param {number} query
 */
function drawTokens(ctx, L, trace, row, gRow, query) {
  ctx.textBaseline = 'middle';
  /**
   * @param {string} text
   * @param {number} x
   * @param {number} y
   * @param {boolean} up
   * @param {string} color
   * @param {boolean} bold
   */
  const label = (text, x, y, up, color, bold) => {
    ctx.font = bold ? FONT_BOLD : FONT;
    ctx.fillStyle = color;
    if (L.rotate) {
      ctx.save();
      ctx.translate(x, y);
      ctx.rotate(up ? -Math.PI / 3 : Math.PI / 3);
      ctx.textAlign = 'left';
      ctx.fillText(text, 0, 0);
      ctx.restore();
    } else {
      ctx.textAlign = 'center';
      ctx.fillText(text, x, y);
    }
  };
  trace.tokens.forEach((tok, i) => {
    const sel = i === query;
    label(truncate(tok, 12), L.xq(i), L.yTop - 12, true, sel ? HIGHLIGHT : '#555555', sel);
    ctx.fillStyle = sel ? HIGHLIGHT : '#bbbbbb';
    ctx.beginPath();
    ctx.arc(L.xq(i), L.yTop, sel ? 4 : 2, 0, 2 * Math.PI);
    ctx.fill();
  });
  trace.source_tokens.forEach((tok, j) => {
    const masked = gRow[j] === null;
    label(truncate(tok, 12), L.xk(j), L.yBot + 14, false, masked ? '#999999' : '#222222', false);
    ctx.textAlign = 'center';
    if (masked) {
      ctx.fillStyle = MASKED;
      ctx.font = FONT_BOLD;
      ctx.fillText('×', L.xk(j), L.yBot - 4);
    } else if (L.showWeights) {
      ctx.font = '11px system-ui, sans-serif';
      ctx.fillStyle = '#333333';
      ctx.fillText(formatNumber(row[j], 2), L.xk(j), L.yBot - 8);
    }
  });
}

/**
 * @param {HTMLCanvasElement} canvas
 * @param {Trace} trace
 * @param {number} h
 * @param {number} query
 * @param {number} width
 */
function drawArcs(canvas, trace, h, query, width) {
  const head = trace.heads[h];
  const L = arcsLayout(trace, width);
  const ctx = sizeCanvas(canvas, L.W, L.H);
  ctx.fillStyle = '#ffffff';
  ctx.fillRect(0, 0, L.W, L.H);
  const row = head.weights[query] || [];
  const gRow = maskGrid(head)[query];
  drawLines(ctx, L, row, gRow, query);
  drawTokens(ctx, L, trace, row, gRow, query);
}

/** @type {WeakMap<HTMLCanvasElement, {trace: Trace, head: number, query: number, width: number}>} */
const drawn = new WeakMap();

/** @param {State} s */
export function renderArcs(s) {
  const t = s.trace;
  if (!t || s.view !== 'arcs') return;
  const canvas = byId('arcs', HTMLCanvasElement);
  const width = viewWidth(s);
  const last = drawn.get(canvas);
  if (last && last.trace === t && last.head === s.head && last.query === s.query && last.width === width) return;
  drawArcs(canvas, t, s.head, s.query, width);
  drawn.set(canvas, { trace: t, head: s.head, query: s.query, width });
}
