// @ts-check
// All heads side by side: a button per head with its n × m weights as a small image (one
// pixel per cell, scaled up without smoothing), a mark at the query's row, and a caption
// (the 1–9 key, the name, the seed of a random head, "(added)").
//
// Every head's image is written into one scratch canvas, side by side: one putImageData
// per trace and colour scale (each costs a copy of the canvas once it has been drawn
// from), none when only the query mark moves.

import { context2d, sizeCanvas } from './canvas.js';
import { HIGHLIGHT, LUT_RGB, lutIndex, MASKED_RGB } from './colour.js';
import { $, setAttr, setHtml } from './dom.js';
import { html } from './html.js';
import { headSeed, headSources, maskGrid, scaleMax } from './selectors.js';

/**
 * @typedef {import('./types.js').State} State
 * @typedef {import('./types.js').Trace} Trace
 */

/** @typedef {{canvas: HTMLCanvasElement, image: ImageData | null, trace: Trace | null, scales: string}} Scratch */
/** @type {WeakMap<HTMLElement, Scratch>} the scratch canvas of a thumbnails box */
const scratches = new WeakMap();
/** @type {WeakMap<HTMLElement, {trace: Trace, query: number, scales: string}>} what the box's canvases show */
const drawn = new WeakMap();

/**
 * Thumbnails are about 100 px; whole pixels per cell when the grid is small.
 * @param {number} n
 * @param {number} m
 */
function thumbSize(n, m) {
  const k = Math.max(n, m);
  return k > 50 ? 100 : Math.floor(100 / k) * k;
}

/**
 * Writes every head's image into the scratch canvas.
 * @param {Scratch} T
 * @param {Trace} trace
 * @param {number[]} tops  the weight drawn darkest, per head
 */
function fillImages(T, trace, tops) {
  const n = trace.tokens.length, m = trace.source_tokens.length, H = trace.heads.length;
  if (T.canvas.width !== m * H || T.canvas.height !== n) {
    T.canvas.width = m * H;
    T.canvas.height = n;
    T.image = null;
  }
  const ctx = context2d(T.canvas);
  if (!T.image) T.image = ctx.createImageData(m * H, n);
  const data = T.image.data;
  for (let h = 0; h < H; h++) {
    const head = trace.heads[h], G = maskGrid(head), inv = 1 / (tops[h] || 1);
    for (let i = 0; i < n; i++) {
      const wRow = head.weights[i], gRow = G[i];
      for (let j = 0, k = 4 * (i * m * H + h * m); j < m; j++, k += 4) {
        if (gRow[j] === null) {
          data[k] = MASKED_RGB[0]; data[k + 1] = MASKED_RGB[1]; data[k + 2] = MASKED_RGB[2];
        } else {
          const t = lutIndex(wRow[j] * inv) * 3;
          data[k] = LUT_RGB[t]; data[k + 1] = LUT_RGB[t + 1]; data[k + 2] = LUT_RGB[t + 2];
        }
        data[k + 3] = 255;
      }
    }
  }
  ctx.putImageData(T.image, 0, 0);
}

/**
 * Draws every head's image into its button's canvas with the query's mark.
 * @param {HTMLElement} box
 * @param {Trace} trace
 * @param {number} query
 * @param {number[]} tops
 */
function drawThumbs(box, trace, query, tops) {
  const n = trace.tokens.length, m = trace.source_tokens.length;
  const scales = tops.join(' ');
  const last = drawn.get(box);
  if (last && last.trace === trace && last.query === query && last.scales === scales) return;
  let T = scratches.get(box);
  if (!T) scratches.set(box, (T = { canvas: document.createElement('canvas'), image: null, trace: null, scales: '' }));
  if (T.trace !== trace || T.scales !== scales) {
    fillImages(T, trace, tops);
    T.trace = trace;
    T.scales = scales;
  }
  const scale = thumbSize(n, m) / Math.max(n, m);
  const w = Math.round(m * scale), hgt = Math.round(n * scale);
  for (let h = 0; h < trace.heads.length; h++) {
    const canvas = /** @type {HTMLCanvasElement} */ (box.children[h].firstChild);
    const ctx = sizeCanvas(canvas, w + 6, hgt);
    ctx.clearRect(0, 0, w + 6, hgt);
    ctx.imageSmoothingEnabled = scale < 1; // average when shrinking, crisp cells when growing
    ctx.drawImage(T.canvas, h * m, 0, m, n, 6, 0, w, hgt);
    if (query < n) {
      ctx.fillStyle = HIGHLIGHT;
      ctx.fillRect(0, Math.floor(query * scale), 4, Math.max(2, Math.round(scale)));
    }
  }
  drawn.set(box, { trace, query, scales });
}

/**
 * A button per head (made when the count changes).
 * @param {HTMLElement} box
 * @param {number} count
 */
function ensureButtons(box, count) {
  if (box.children.length === count) return;
  box.textContent = '';
  drawn.delete(box);
  for (let h = 0; h < count; h++) {
    const b = document.createElement('button');
    b.type = 'button';
    b.className = 'thumb';
    b.dataset.head = String(h);
    b.dataset.testid = 'head-thumb';
    b.appendChild(document.createElement('canvas'));
    const cap = document.createElement('span');
    cap.className = 'thumb-cap';
    b.appendChild(cap);
    box.appendChild(b);
  }
}

/**
 * A head's caption: the 1–9 key, the name with its seed marked, "(added)".
 * @param {Trace} t
 * @param {number} h
 * @param {number | null} seed
 * @param {boolean} added
 */
function caption(t, h, seed, added) {
  const name = t.heads[h].name;
  const seedMark = seed !== null ? html`<span class="seed">seed ${seed}</span>` : null;
  const at = seed !== null ? name.indexOf(`seed ${seed}`) : -1;
  const named = at >= 0 ? html`${name.slice(0, at)}${seedMark}${name.slice(at + `seed ${seed}`.length)}` : html`${name}`;
  return html`${h < 9 ? html`<kbd>${h + 1}</kbd> ` : ''}head ${h} · ${named}${at < 0 && seedMark ? html` ${seedMark}` : ''}${added ? html` <span class="added">(added)</span>` : ''}`;
}

/** @param {State} s */
export function renderThumbnails(s) {
  const t = s.trace;
  if (!t) return;
  const box = $('head-thumbs');
  ensureButtons(box, t.heads.length);
  const sources = headSources(s);
  const key = sources.map((x) => x.kind).join(' ');
  const last = labelled.get(box);
  if (!last || last.trace !== t || last.head !== s.head || last.sources !== key) labelButtons(box, t, s.head, sources);
  labelled.set(box, { trace: t, head: s.head, sources: key });
  drawThumbs(box, t, s.query, t.heads.map((_, h) => scaleMax(s, h)));
}

/** @type {WeakMap<HTMLElement, {trace: Trace, head: number, sources: string}>} what the buttons say */
const labelled = new WeakMap();

/**
 * The buttons' captions, labels and selection.
 * @param {HTMLElement} box
 * @param {Trace} t
 * @param {number} shown  the head shown
 * @param {ReturnType<typeof headSources>} sources
 */
function labelButtons(box, t, shown, sources) {
  for (let h = 0; h < t.heads.length; h++) {
    const b = /** @type {HTMLElement} */ (box.children[h]);
    const seed = headSeed(t, h);
    const src = sources[h];
    const selected = h === shown;
    b.classList.toggle('selected', selected);
    setAttr(b, 'aria-pressed', String(selected));
    setAttr(b, 'data-seed', seed === null ? '' : String(seed));
    setAttr(b, 'aria-label', `Head ${h}: ${t.heads[h].name}${seed !== null ? `, random seed ${seed}` : ''}`);
    setHtml(/** @type {HTMLElement} */ (b.lastChild), caption(t, h, seed, !!src && src.kind === 'added'));
  }
}
