// @ts-check
// Export: the shown head's heatmap as PNG (the canvas drawing, wider) or SVG (the same
// layout, one <rect class="cell"> per cell with its data-* attributes), and the trace as
// JSON (with every intermediate: a lean trace is asked for again in full).

import { css, HIGHLIGHT, MASKED, MASKED_INK, STOPS, textOn } from './colour.js';
import { formatNumber } from './format.js';
import { html } from './html.js';
import { scaleMax } from './selectors.js';
import { fullTrace } from './traces.js';
import { drawHeatmap, heatmapLayout, viewWidth } from './view-heatmap.js';

/**
 * @typedef {import('./types.js').State} State
 * @typedef {import('./types.js').Trace} Trace
 */

/**
 * Saves a file through a temporary link.
 * @param {Blob} blob
 * @param {string} filename
 */
function download(blob, filename) {
  const url = URL.createObjectURL(blob);
  const a = document.createElement('a');
  a.href = url;
  a.download = filename;
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 30000);
}

/** @param {string} name */
const fileSafe = (name) => name.replace(/[^A-Za-z0-9_-]+/g, '-');

/** "attnlab-three-tokens-head0". @param {State} s @param {Trace} t */
const baseName = (s, t) => `attnlab-${fileSafe(t.scenario || s.name || 'scenario')}-head${s.head}`;

/**
 * The SVG of head h's heatmap: title, cells, labels, the query's row, the legend.
 * @param {Trace} trace
 * @param {number} h
 * @param {number} query
 * @param {string} title
 * @param {number} top  the weight drawn darkest
 */
export function heatmapSvg(trace, h, query, title, top) {
  const head = trace.heads[h];
  const L = heatmapLayout(trace, { width: 120 + Math.max(trace.source_tokens.length * 40, 240), maxCell: 48 });
  const W = Math.max(L.width, 540), H = L.height + 56 + 28;
  const y0 = 28;
  const { n, m, cell, left, gap } = L;
  const inner = cell - gap;
  const fs = Math.max(9, Math.min(13, Math.floor(cell / 3.1)));
  const G = head.logits || head.mask || head.weights;
  const out = [];
  out.push(html`<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="system-ui, sans-serif" font-size="12">`);
  out.push(html`<defs><pattern id="masked" width="8" height="8" patternUnits="userSpaceOnUse" patternTransform="rotate(45)">\
<rect width="8" height="8" fill="${MASKED}"/><line x1="0" y1="0" x2="0" y2="8" stroke="${MASKED_INK}" stroke-width="3"/></pattern>\
<linearGradient id="scale" x1="0" x2="1" y1="0" y2="0">\
${STOPS.map((c, k) => html`<stop offset="${(k / (STOPS.length - 1)).toFixed(3)}" stop-color="${c}"/>`)}</linearGradient></defs>`);
  out.push(html`<rect width="${W}" height="${H}" fill="#ffffff"/>`);
  out.push(html`<text x="4" y="16" font-weight="bold">${title}</text>`);
  const topY = y0 + L.top;
  for (let i = 0; i < n; i++) {
    for (let j = 0; j < m; j++) {
      const x = left + j * cell, y = topY + i * cell;
      const masked = G[i][j] === null;
      const w = head.weights[i][j];
      out.push(html`<rect class="cell" data-row="${i}" data-col="${j}" data-weight="${w}" data-masked="${masked}" x="${x}" y="${y}" width="${inner}" height="${inner}" fill="${masked ? 'url(#masked)' : css(w / top)}"/>`);
      if (masked && cell >= 14) out.push(html`<text x="${x + inner / 2}" y="${y + inner / 2}" text-anchor="middle" dominant-baseline="central" fill="#f0f0f0" font-size="${fs}">×</text>`);
      else if (!masked && L.showText) out.push(html`<text x="${x + inner / 2}" y="${y + inner / 2}" text-anchor="middle" dominant-baseline="central" fill="${textOn(w / top)}" font-size="${fs}">${formatNumber(w, 2)}</text>`);
    }
  }
  for (let i = 0; i < n; i += L.labelEvery) {
    const mark = i === query ? html` fill="${HIGHLIGHT}" font-weight="bold"` : '';
    out.push(html`<text x="${left - 6}" y="${topY + i * cell + inner / 2}" text-anchor="end" dominant-baseline="central"${mark}>${L.qLabels[i]}</text>`);
  }
  for (let j = 0; j < m; j += L.labelEvery) {
    const cx = left + j * cell + inner / 2;
    if (L.rotate) out.push(html`<text transform="translate(${cx},${topY - 6}) rotate(-45)">${L.kLabels[j]}</text>`);
    else out.push(html`<text x="${cx}" y="${topY - 12}" text-anchor="middle" dominant-baseline="central">${L.kLabels[j]}</text>`);
  }
  if (query >= 0 && query < n) {
    out.push(html`<rect x="${left - 1.5}" y="${topY + query * cell - 1.5}" width="${m * cell - gap + 3}" height="${inner + 3}" fill="none" stroke="${HIGHLIGHT}" stroke-width="2.5"/>`);
  }
  // legend
  const ly = y0 + L.height + 10;
  out.push(html`<text x="4" y="${ly + 10}">weight</text>`);
  out.push(html`<rect x="56" y="${ly}" width="200" height="14" fill="url(#scale)" stroke="#999"/>`);
  for (const t of [0, 0.25, 0.5, 0.75, 1]) {
    out.push(html`<text x="${56 + 200 * t}" y="${ly + 28}" text-anchor="middle" font-size="11">${top === 1 ? t : formatNumber(t * top, 2)}</text>`);
  }
  out.push(html`<rect x="270" y="${ly}" width="14" height="14" fill="url(#masked)"/><text x="290" y="${ly + 11}" font-size="11">masked (logit −∞, weight exactly 0)</text>`);
  out.push(html`<text x="4" y="${ly + 46}" font-size="11" fill="#555">A weight is a normalised similarity, not proof that the token caused the output.</text>`);
  out.push(html`</svg>`);
  return out.map((x) => x.text).join('\n');
}

/** @param {State} s */
export function exportPng(s) {
  const t = s.trace;
  if (!t) return;
  const canvas = document.createElement('canvas');
  drawHeatmap(canvas, t, s.head, { width: Math.max(viewWidth(s), Math.min(1600, 160 + t.source_tokens.length * 48)), query: s.query, scaleMax: scaleMax(s, s.head) });
  canvas.toBlob((blob) => { if (blob) download(blob, baseName(s, t) + '.png'); }, 'image/png');
}

/** @param {State} s */
export function exportSvg(s) {
  const t = s.trace;
  if (!t) return;
  const title = `${t.scenario} · head ${s.head} "${t.heads[s.head].name}" · T = ${formatNumber(t.temperature, 2)}${t.causal ? ' · causal' : ''}`;
  const svg = heatmapSvg(t, s.head, s.query, title, scaleMax(s, s.head));
  download(new Blob([svg], { type: 'image/svg+xml' }), baseName(s, t) + '.svg');
}

/**
 * The trace as JSON, every intermediate of every head.
 * @param {State} s
 * @returns {Promise<string | null>}  the error, if the full trace could not be had
 */
export async function exportJson(s) {
  if (!s.trace) return null;
  const name = fileSafe(s.trace.scenario || 'scenario');
  let trace;
  try {
    trace = await fullTrace(s);
  } catch (e) {
    return e instanceof Error ? e.message : String(e);
  }
  if (trace) download(new Blob([JSON.stringify(trace, null, 1)], { type: 'application/json' }), `attnlab-${name}-trace.json`);
  return null;
}
