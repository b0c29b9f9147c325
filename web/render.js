// attnlab's page: drawing. Every number drawn here comes from the engine's trace
// (POST api/attention); nothing recomputes attention. The only figures derived here
// are the per-row readouts (entropy and largest weight), which the trace does not carry.
//
// Views: the per-head heatmap (canvas), the all-heads small multiples (canvas, one
// ImageData pixel per cell, scaled), the arcs from the query to its keys (canvas), the
// weights as a table (DOM, which also carries the data-* attributes the tests read),
// the maths panel (DOM) and the row readouts (DOM). exportSvg writes the heatmap as SVG.
(function (A) {
  'use strict';
  const { formatNumber, formatFactor, formatVector } = A.fmt;
  const C = A.colour;
  const MAX_TERMS = 16; // per written-out sum, as the CLI
  const FONT = '12px system-ui, -apple-system, "Segoe UI", Roboto, sans-serif';
  const FONT_BOLD = 'bold 12px system-ui, -apple-system, "Segoe UI", Roboto, sans-serif';

  function escapeHtml(s) {
    return String(s).replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[c]));
  }

  // Text and data-* writes that skip an unchanged value: a new trace rewrites hundreds of
  // cells, and each real change costs the browser layout work.
  function setText(node, text) {
    if (node._text !== text) { node.textContent = text; node._text = text; }
  }
  function setData(node, key, value) {
    const cached = '_data_' + key;
    if (node[cached] !== value) { node.dataset[key] = value; node[cached] = value; }
  }

  // The grid whose nulls mark the masked cells: the head's logits, or for a head of a lean
  // trace (no intermediates) the shared pattern the page attached (app.js, prepareTrace).
  function maskGrid(head) {
    return head.logits || head.mask;
  }

  function truncate(s, max) {
    return s.length > max ? s.slice(0, max - 1) + '…' : s;
  }

  // ---- canvas helpers ---------------------------------------------------------------
  let measureCtx = null;
  function textWidth(text, font) {
    if (!measureCtx) measureCtx = document.createElement('canvas').getContext('2d');
    measureCtx.font = font || FONT;
    return measureCtx.measureText(text).width;
  }

  function sizeCanvas(canvas, cssW, cssH) {
    const dpr = Math.max(1, Math.min(3, window.devicePixelRatio || 1));
    const w = Math.max(1, Math.round(cssW * dpr)), h = Math.max(1, Math.round(cssH * dpr));
    if (canvas.width !== w) canvas.width = w;
    if (canvas.height !== h) canvas.height = h;
    if (canvas.style.width !== cssW + 'px') canvas.style.width = cssW + 'px'; // unchanged: no style work
    if (canvas.style.height !== cssH + 'px') canvas.style.height = cssH + 'px';
    const ctx = canvas.getContext('2d');
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    return ctx;
  }

  const hatchCache = new WeakMap();
  function hatchPattern(ctx) {
    let p = hatchCache.get(ctx);
    if (p) return p;
    const tile = document.createElement('canvas');
    tile.width = tile.height = 8;
    const t = tile.getContext('2d');
    t.fillStyle = C.masked;
    t.fillRect(0, 0, 8, 8);
    t.strokeStyle = C.maskedInk;
    t.lineWidth = 1.5;
    t.beginPath();
    t.moveTo(-2, 2); t.lineTo(2, -2);
    t.moveTo(0, 8); t.lineTo(8, 0);
    t.moveTo(6, 10); t.lineTo(10, 6);
    t.stroke();
    p = ctx.createPattern(tile, 'repeat');
    hatchCache.set(ctx, p);
    return p;
  }

  // ---- heatmap layout (shared by canvas and SVG) ---------------------------------------
  // Cells are square; labels go left (queries) and top (keys, rotated when narrow).
  function heatmapLayout(trace, opts) {
    const n = trace.tokens.length, m = trace.source_tokens.length;
    const qLabels = trace.tokens.map((t, i) => `${i} ${truncate(t, 14)}`);
    const kLabels = trace.source_tokens.map((t, j) => `${j} ${truncate(t, 14)}`);
    let left = 8;
    for (const l of qLabels) left = Math.max(left, textWidth(l, FONT_BOLD));
    left = Math.ceil(Math.min(left, 120)) + 12;
    const availW = Math.max(60, opts.width - left - 6);
    const maxCell = opts.maxCell || 64;
    let cell = Math.floor(availW / m);
    if (opts.maxHeight) cell = Math.min(cell, Math.floor((opts.maxHeight - 40) / n));
    cell = Math.max(3, Math.min(maxCell, cell));
    let kMax = 0;
    for (const l of kLabels) kMax = Math.max(kMax, textWidth(l, FONT));
    const rotate = kMax + 8 > cell;
    const top = rotate ? Math.ceil(Math.min(kMax, 110) * 0.72) + 16 : 24;
    const labelEvery = Math.max(1, Math.ceil(14 / cell));
    return {
      n, m, cell, left, top, rotate, labelEvery, qLabels, kLabels,
      width: left + m * cell + 6, height: top + n * cell + 6,
      showText: cell >= 30,
      gap: cell >= 10 ? 1 : 0,
    };
  }

  // Cell indices (i·m + j) per colour-table entry; the last list holds the masked cells.
  function bucketCells(W, G, n, m, scaleMax) {
    const buckets = Array.from({ length: C.size + 1 }, () => []);
    const inv = 1 / scaleMax;
    for (let i = 0; i < n; i++) {
      const wRow = W[i], gRow = G[i];
      for (let j = 0; j < m; j++) buckets[gRow[j] === null ? C.size : C.lutIndex(wRow[j] * inv)].push(i * m + j);
    }
    return buckets;
  }

  // The largest visible weight of a head (for the "0 to the head's largest weight" scale).
  function headMax(head) {
    let max = 0;
    const G = maskGrid(head);
    for (let i = 0; i < head.weights.length; i++) {
      const w = head.weights[i], g = G[i];
      for (let j = 0; j < w.length; j++) if (g[j] !== null && w[j] > max) max = w[j];
    }
    return max > 0 ? max : 1;
  }

  // Draws head `h` of the trace into the canvas, the query row outlined. Returns the layout
  // (for hit tests). opts: {width, maxHeight, query, hover: {row, col}|null}.
  function drawHeatmap(canvas, trace, h, opts) {
    const head = trace.heads[h];
    const L = heatmapLayout(trace, opts);
    const ctx = sizeCanvas(canvas, L.width, L.height);
    ctx.fillStyle = '#ffffff';
    ctx.fillRect(0, 0, L.width, L.height);
    const { n, m, cell, left, top, gap } = L;
    const W = head.weights, G = maskGrid(head);
    const pattern = hatchPattern(ctx);
    const inner = cell - gap;
    // cells, grouped by colour: one path of rectangles and one fill per colour (a fillRect
    // per cell costs thousands of calls for a 64-token head)
    const scaleMax = opts.scaleMax || 1;
    const buckets = bucketCells(W, G, n, m, scaleMax);
    for (let b = 0; b < buckets.length; b++) {
      const list = buckets[b];
      if (!list.length) continue;
      ctx.fillStyle = b === buckets.length - 1 ? pattern : C.cssAt(b);
      ctx.beginPath();
      for (let k = 0; k < list.length; k++) {
        const cellIndex = list[k], i = (cellIndex / m) | 0, j = cellIndex - i * m;
        ctx.rect(left + j * cell, top + i * cell, inner, inner);
      }
      ctx.fill();
    }
    // × on masked cells, weights in cells that fit
    if (cell >= 14 || L.showText) {
      ctx.textAlign = 'center';
      ctx.textBaseline = 'middle';
      const fs = Math.max(9, Math.min(13, Math.floor(cell / 3.1)));
      ctx.font = `${fs}px system-ui, sans-serif`;
      for (let i = 0; i < n; i++) {
        const cy = top + i * cell + inner / 2;
        for (let j = 0; j < m; j++) {
          const cx = left + j * cell + inner / 2;
          if (G[i][j] === null) {
            ctx.fillStyle = '#f0f0f0';
            ctx.fillText('×', cx, cy);
          } else if (L.showText) {
            const w = W[i][j];
            ctx.fillStyle = C.textOn(w / scaleMax);
            ctx.fillText(formatNumber(w, 2), cx, cy);
          }
        }
      }
    }
    // labels
    ctx.font = FONT;
    ctx.textBaseline = 'middle';
    ctx.textAlign = 'right';
    ctx.fillStyle = '#333333';
    for (let i = 0; i < n; i++) {
      if (i % L.labelEvery !== 0 || i === opts.query) continue;
      ctx.fillText(L.qLabels[i], left - 6, top + i * cell + inner / 2);
    }
    if (opts.query !== undefined && opts.query >= 0 && opts.query < n) {
      ctx.font = FONT_BOLD;
      ctx.fillStyle = C.highlight;
      ctx.fillText(L.qLabels[opts.query], left - 6, top + opts.query * cell + inner / 2);
      ctx.font = FONT;
      ctx.fillStyle = '#333333';
    }
    for (let j = 0; j < m; j++) {
      if (j % L.labelEvery !== 0) continue;
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
    // the selected query row
    if (opts.query !== undefined && opts.query >= 0 && opts.query < n) {
      ctx.strokeStyle = C.highlight;
      ctx.lineWidth = 2.5;
      ctx.strokeRect(left - 1.5, top + opts.query * cell - 1.5, m * cell - gap + 3, inner + 3);
    }
    if (opts.hover && opts.hover.row < n && opts.hover.col < m) {
      ctx.strokeStyle = '#111111';
      ctx.lineWidth = 1.5;
      ctx.strokeRect(left + opts.hover.col * cell - 0.75, top + opts.hover.row * cell - 0.75, inner + 1.5, inner + 1.5);
    }
    return L;
  }

  function hitHeatmap(L, x, y) {
    const col = Math.floor((x - L.left) / L.cell), row = Math.floor((y - L.top) / L.cell);
    if (row < 0 || col < 0 || row >= L.n || col >= L.m) return null;
    return { row, col };
  }

  // ---- small multiples ----------------------------------------------------------------
  // Every head's n×m image, one pixel per cell, side by side in one scratch canvas: one
  // putImageData per trace (each costs a copy of the canvas once it has been drawn from),
  // none when only the query marker moves.
  const thumbScratch = { canvas: null, image: null, trace: null, scales: '' };
  function fillThumbImages(trace, scaleMaxes) {
    const n = trace.tokens.length, m = trace.source_tokens.length, H = trace.heads.length;
    const T = thumbScratch;
    if (!T.canvas) T.canvas = document.createElement('canvas');
    if (T.canvas.width !== m * H || T.canvas.height !== n) {
      T.canvas.width = m * H;
      T.canvas.height = n;
      T.image = null;
    }
    const ctx = T.canvas.getContext('2d');
    if (!T.image) T.image = ctx.createImageData(m * H, n);
    const data = T.image.data, lut = C.lutRgb, mr = C.maskedRgb;
    for (let h = 0; h < H; h++) {
      const head = trace.heads[h], G = maskGrid(head), inv = 1 / (scaleMaxes[h] || 1);
      for (let i = 0; i < n; i++) {
        const wRow = head.weights[i], gRow = G[i];
        for (let j = 0, k = 4 * (i * m * H + h * m); j < m; j++, k += 4) {
          if (gRow[j] === null) {
            data[k] = mr[0]; data[k + 1] = mr[1]; data[k + 2] = mr[2];
          } else {
            const t = C.lutIndex(wRow[j] * inv) * 3;
            data[k] = lut[t]; data[k + 1] = lut[t + 1]; data[k + 2] = lut[t + 2];
          }
          data[k + 3] = 255;
        }
      }
    }
    ctx.putImageData(T.image, 0, 0);
  }

  // Draws every head's thumbnail into canvases[h] (about `size` px, scaled up without
  // smoothing), with a mark at the query row. scaleMaxes[h]: the weight drawn darkest.
  function drawThumbs(canvases, trace, size, query, scaleMaxes) {
    const n = trace.tokens.length, m = trace.source_tokens.length;
    const scales = scaleMaxes.join(' ');
    if (thumbScratch.trace !== trace || thumbScratch.scales !== scales) {
      fillThumbImages(trace, scaleMaxes);
      thumbScratch.trace = trace;
      thumbScratch.scales = scales;
    }
    const scale = size / Math.max(n, m);
    const w = Math.round(m * scale), hgt = Math.round(n * scale);
    for (let h = 0; h < trace.heads.length; h++) {
      const ctx = sizeCanvas(canvases[h], w + 6, hgt);
      ctx.clearRect(0, 0, w + 6, hgt);
      ctx.imageSmoothingEnabled = scale < 1; // average when shrinking, crisp cells when growing
      ctx.drawImage(thumbScratch.canvas, h * m, 0, m, n, 6, 0, w, hgt);
      if (query !== undefined && query < n) {
        ctx.fillStyle = C.highlight;
        ctx.fillRect(0, Math.floor(query * scale), 4, Math.max(2, Math.round(scale)));
      }
    }
  }

  // ---- arcs: queries on top, keys below, a curve per key, thickness = weight -----------
  function drawArcs(canvas, trace, h, query, width) {
    const head = trace.heads[h];
    const n = trace.tokens.length, m = trace.source_tokens.length;
    const pad = 16;
    const count = Math.max(n, m);
    const step = Math.max(6, (width - 2 * pad) / count);
    const W = Math.max(width, 2 * pad + step * count);
    let maxLabel = 0;
    for (const t of trace.tokens.concat(trace.source_tokens)) maxLabel = Math.max(maxLabel, textWidth(truncate(t, 12), FONT));
    const rotate = maxLabel + 6 > step;
    const labelH = rotate ? Math.min(90, maxLabel * 0.72 + 14) : 22;
    const H = 2 * labelH + 200;
    const ctx = sizeCanvas(canvas, W, H);
    ctx.fillStyle = '#ffffff';
    ctx.fillRect(0, 0, W, H);
    const xq = (i) => pad + (i + 0.5) * ((W - 2 * pad) / n);
    const xk = (j) => pad + (j + 0.5) * ((W - 2 * pad) / m);
    const yTop = labelH + 8, yBot = H - labelH - 8;
    const maxLine = Math.max(3, Math.min(28, ((W - 2 * pad) / m) * 0.85));
    const row = head.weights[query] || [];
    const gRow = maskGrid(head)[query];
    // lines, lightest first so heavy ones stay on top
    const order = [];
    for (let j = 0; j < m; j++) order.push(j);
    order.sort((a, b) => row[a] - row[b]);
    ctx.lineCap = 'butt';
    for (const j of order) {
      if (gRow[j] === null) continue;
      const w = row[j];
      const lw = w * maxLine;
      if (lw < 0.25) continue;
      ctx.strokeStyle = C.css(Math.max(0.35, w));
      ctx.globalAlpha = 0.35 + 0.65 * w;
      ctx.lineWidth = lw;
      ctx.beginPath();
      ctx.moveTo(xq(query), yTop);
      const mid = (yTop + yBot) / 2;
      ctx.bezierCurveTo(xq(query), mid, xk(j), mid, xk(j), yBot);
      ctx.stroke();
    }
    ctx.globalAlpha = 1;
    // token labels
    ctx.textBaseline = 'middle';
    const label = (text, x, y, up, color, bold) => {
      ctx.font = bold ? FONT_BOLD : FONT;
      ctx.fillStyle = color;
      if (rotate) {
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
    for (let i = 0; i < n; i++) {
      const sel = i === query;
      label(truncate(trace.tokens[i], 12), xq(i), yTop - 12, true, sel ? C.highlight : '#555555', sel);
      ctx.fillStyle = sel ? C.highlight : '#bbbbbb';
      ctx.beginPath();
      ctx.arc(xq(i), yTop, sel ? 4 : 2, 0, 2 * Math.PI);
      ctx.fill();
    }
    const showW = (W - 2 * pad) / m >= 34;
    for (let j = 0; j < m; j++) {
      const masked = gRow[j] === null;
      label(truncate(trace.source_tokens[j], 12), xk(j), yBot + 14, false, masked ? '#999999' : '#222222', false);
      if (masked) {
        ctx.fillStyle = C.masked;
        ctx.font = FONT_BOLD;
        ctx.textAlign = 'center';
        ctx.fillText('×', xk(j), yBot - 4);
      } else if (showW) {
        ctx.font = '11px system-ui, sans-serif';
        ctx.textAlign = 'center';
        ctx.fillStyle = '#333333';
        ctx.fillText(formatNumber(row[j], 2), xk(j), yBot - 8);
      }
    }
  }

  // ---- per-row readouts: entropy (bits) and the largest weight --------------------------
  function rowStats(head, i) {
    const w = head.weights[i];
    const g = maskGrid(head)[i];
    let H = 0, max = -1, arg = -1;
    for (let j = 0; j < w.length; j++) {
      const x = w[j];
      if (x > 0) H -= x * Math.log2(x);
      if (g[j] !== null && x > max) { max = x; arg = j; }
    }
    return { entropy: H === 0 ? 0 : H, max: Math.max(0, max), arg, fully: !!(head.fully_masked && head.fully_masked[i]) };
  }

  // The readouts are built once per row count and then only their text changes; div rows
  // with content-visibility: auto, so rows outside the scroll box cost no layout.
  function updateReadouts(container, trace, h) {
    const head = trace.heads[h];
    const n = trace.tokens.length;
    let rows = container._rows;
    if (!rows || rows.length !== n) {
      let s = '<div class="readouts" role="table" aria-label="Per-row entropy and largest weight">' +
        '<div class="ro-row ro-head" role="row"><span role="columnheader">query</span>' +
        '<span role="columnheader" title="Shannon entropy of the row in bits: 0 is one-hot, log₂ m is uniform">entropy (bits)</span>' +
        '<span role="columnheader">largest weight</span><span role="columnheader">on key</span></div>';
      for (let i = 0; i < n; i++) {
        s += `<div class="ro-row" role="row" data-row="${i}"><span role="rowheader"></span><span role="cell" class="num" data-testid="row-entropy-${i}"></span>` +
          `<span role="cell" class="num" data-testid="row-max-${i}"></span><span role="cell"></span></div>`;
      }
      container.innerHTML = s + '</div>';
      container.firstChild.classList.toggle('virtual', n > 24);
      rows = container._rows = Array.from(container.querySelectorAll('.ro-row[data-row]'), (r) => r.children);
    }
    for (let i = 0; i < n; i++) {
      const r = rowStats(head, i);
      const cells = rows[i];
      setText(cells[0], `${i} ${truncate(trace.tokens[i], 16)}`);
      if (r.fully) {
        setData(cells[1], 'value', '0');
        setText(cells[1], '—');
        setData(cells[2], 'value', '0');
        setText(cells[2], 'all masked');
        setText(cells[3], '—');
      } else {
        setData(cells[1], 'value', String(r.entropy));
        setText(cells[1], r.entropy.toFixed(2));
        setData(cells[2], 'value', String(r.max));
        setText(cells[2], formatNumber(r.max, 2));
        setText(cells[3], `${r.arg} ${truncate(trace.source_tokens[r.arg], 16)}`);
      }
    }
  }

  // ---- the weights as a table (and the data-* attributes for tests) ---------------------
  function weightsTableHtml(trace, h) {
    const head = trace.heads[h];
    const m = trace.source_tokens.length;
    const parts = ['<table class="weights-table" data-head="', String(h), '"><thead><tr><th scope="col">query \\ key</th>'];
    for (let j = 0; j < m; j++) parts.push('<th scope="col">', String(j), ' ', escapeHtml(truncate(trace.source_tokens[j], 10)), '</th>');
    parts.push('</tr></thead><tbody>');
    const G = maskGrid(head);
    for (let i = 0; i < trace.tokens.length; i++) {
      parts.push('<tr><th scope="row">', String(i), ' ', escapeHtml(truncate(trace.tokens[i], 10)), '</th>');
      const wRow = head.weights[i], gRow = G[i];
      for (let j = 0; j < m; j++) {
        parts.push('<td data-row="', String(i), '" data-col="', String(j), '" data-weight="', String(wRow[j]));
        if (gRow[j] === null) parts.push('" data-masked="true" class="masked">×</td>');
        else parts.push('" data-masked="false">', formatNumber(wRow[j], 2), '</td>');
      }
      parts.push('</tr>');
    }
    parts.push('</tbody></table>');
    return parts.join('');
  }

  // ---- the maths panel: one head, one query, every number from the trace ---------------
  // Built once per key count; each ← / → only rewrites text (no re-parse, fixed table
  // layout with widths in ch of the monospace font), so a 64-key row stays cheap.
  // "a + b + c", at most MAX_TERMS of `total` terms shown (terms may hold only those).
  function termList(terms, sep, total) {
    const count = total === undefined ? terms.length : total;
    const shown = terms.slice(0, MAX_TERMS).join(sep);
    return count > MAX_TERMS ? `${shown}${sep}… (${count} terms in all)` : shown;
  }

  const MATH_COLS = 8; // j+key, k_j, v_j, score, ÷√d_k, ÷T, exp, weight
  // A grid of div rows (ARIA table roles) rather than a <table>: each row has
  // content-visibility: auto, so rows scrolled out of the panel's box cost no layout.
  function buildMaths(container, m) {
    let s = '<p class="math-title"></p><p class="math-vec"></p>' +
      '<div class="math-scroll"><div class="math-grid" role="table" aria-label="The query against each key">' +
      '<div class="math-row math-headrow" role="row"><span role="columnheader" class="stick-l">j key</span>' +
      '<span role="columnheader">k<sub>j</sub></span><span role="columnheader">v<sub>j</sub></span>' +
      '<span role="columnheader">score q·k<sub>j</sub></span>' +
      '<span role="columnheader"></span><span role="columnheader"></span><span role="columnheader"></span>' +
      '<span role="columnheader"></span></div>';
    for (let j = 0; j < m; j++) {
      s += `<div class="math-row" role="row" data-testid="math-row-${j}"><span role="rowheader" class="stick-l"></span>` +
        '<span role="cell" class="num"></span><span role="cell" class="num"></span><span role="cell" class="num"><span></span><b></b></span>' +
        '<span role="cell" class="num"></span><span role="cell" class="num"></span><span role="cell" class="num"></span>' +
        `<span role="cell" class="num weight" data-testid="math-weight-${j}"><span></span><b></b></span></div>`;
    }
    s += '</div></div><p class="math-line math-shift note" hidden></p><p class="math-line math-sum"></p>' +
      '<p class="math-line math-out"></p><p class="math-line math-top"></p>';
    container.innerHTML = s;
    const q = (sel) => container.querySelector(sel);
    q('.math-grid').classList.toggle('virtual', m > 24);
    container._maths = {
      m,
      title: q('.math-title'), vec: q('.math-vec'), grid: q('.math-grid'),
      heads: q('.math-headrow').children,
      rows: Array.from(container.querySelectorAll('.math-row:not(.math-headrow)')),
      shift: q('.math-shift'), sum: q('.math-sum'), out: q('.math-out'), top: q('.math-top'),
    };
  }

  function updateMaths(container, trace, h, i, p) {
    const head = trace.heads[h];
    const m = trace.source_tokens.length;
    if (!container._maths || container._maths.m !== m) buildMaths(container, m);
    const M = container._maths;
    // the key token, k_j and v_j columns depend on the head only, not on the query
    const sameHead = M.head === head && M.p === p;
    M.head = head;
    M.p = p;
    const T = trace.temperature;
    const q = head.queries[i];
    const sqrtDk = Math.sqrt(head.d_k); // only the divisor's label; the quotients are the trace's
    const shift = head.shifts[i];
    const fully = !!(head.fully_masked && head.fully_masked[i]);
    M.title.innerHTML = `Head ${h} <q>${escapeHtml(head.name)}</q>, query ${i} <q>${escapeHtml(trace.tokens[i])}</q>` +
      ` · d<sub>k</sub> = ${head.d_k}, d<sub>v</sub> = ${head.d_v}, T = ${formatNumber(T, p)}`;
    M.vec.innerHTML = `q<sub>${i}</sub> = x<sub>${i}</sub>·W<sub>Q</sub> = <span class="vec" data-testid="math-query">(${formatVector(q, p)})</span>`;
    M.heads[4].innerHTML = `÷ √d<sub>k</sub> (√${head.d_k} ≈ ${formatNumber(sqrtDk, p)})`;
    M.heads[5].textContent = `÷ T (${formatNumber(T, p)}) = logit`;
    M.heads[6].textContent = shift !== 0 ? `exp(logit − ${formatNumber(shift, p)})` : 'exp(logit)';
    M.heads[7].innerHTML = 'weight a<sub>ij</sub> = exp ÷ row sum';
    const width = new Array(MATH_COLS).fill(0);
    // headers wrap, so a column is as wide as its numbers (at least its header's longest word)
    for (let c = 0; c < MATH_COLS; c++) width[c] = Math.max(7, ...M.heads[c].textContent.split(/\s+/).map((w) => w.length + 1));
    let top = -1, topW = -1;
    for (let j = 0; j < m; j++) {
      if (head.logits[i][j] !== null && head.weights[i][j] > topW) { topW = head.weights[i][j]; top = j; }
    }
    const expTerms = [], mixTerms = [];
    let weightSum = 0, visible = 0;
    const row = [];
    if (!sameHead) M.staticWidth = [0, 0, 0, 0, 0, 0, 0, 0];
    const staticWidth = M.staticWidth;
    for (let j = 0; j < m; j++) {
      const k = head.keys[j];
      const products = [];
      for (let t = 0; t < q.length && t < MAX_TERMS; t++) products.push(`${formatFactor(q[t], p)}×${formatFactor(k[t], p)}`);
      const masked = head.logits[i][j] === null;
      const w = head.weights[i][j];
      weightSum += w;
      const tr = M.rows[j];
      const rowClass = masked ? 'math-row masked' : (j === top ? 'math-row top' : 'math-row');
      if (tr.className !== rowClass) tr.className = rowClass;
      const c = tr.children;

      row[3] = `${termList(products, ' + ', q.length)} = `;
      const score = formatNumber(head.scores[i][j], p);
      row[4] = formatNumber(head.scaled[i][j], p);
      let weightText, weightBold;
      if (masked) {
        row[5] = 'masked: −∞';
        row[6] = 'e^−∞ = 0';
        weightText = '0 (masked)';
        weightBold = '';
      } else {
        const e = formatNumber(head.exponentials[i][j], p);
        row[5] = formatNumber(head.logits[i][j], p);
        row[6] = e;
        weightText = '';
        weightBold = formatNumber(w, p);
        visible++;
        if (expTerms.length < MAX_TERMS) {
          expTerms.push(e);
          mixTerms.push(`${weightBold}×(${formatVector(head.values[j], p)})`);
        }
      }
      if (!sameHead) {
        const key = `${j} ${truncate(trace.source_tokens[j], 14)}`, kv = `(${formatVector(k, p)})`, vv = `(${formatVector(head.values[j], p)})`;
        setText(c[0], key);
        setText(c[1], kv);
        setText(c[2], vv);
        staticWidth[0] = Math.max(staticWidth[0], key.length);
        staticWidth[1] = Math.max(staticWidth[1], kv.length);
        staticWidth[2] = Math.max(staticWidth[2], vv.length);
      }
      setText(c[3].firstChild, row[3]);
      setText(c[3].lastChild, score);
      setText(c[4], row[4]);
      setText(c[5], row[5]);
      setText(c[6], row[6]);
      setText(c[7].firstChild, weightText);
      setText(c[7].lastChild, weightBold);
      setData(c[7], 'value', String(w));
      setData(c[7], 'masked', masked ? 'true' : 'false');
      width[3] = Math.max(width[3], row[3].length + score.length);
      width[4] = Math.max(width[4], row[4].length);
      width[5] = Math.max(width[5], row[5].length);
      width[6] = Math.max(width[6], row[6].length);
      width[7] = Math.max(width[7], weightText.length + weightBold.length);
    }
    for (const c of [0, 1, 2]) width[c] = Math.max(width[c], staticWidth[c]);
    let cols = '';
    for (let c = 0; c < MATH_COLS; c++) cols += `${Math.min(c === 3 ? 400 : 120, width[c]) + 2}ch `;
    if (M.cols !== cols) { M.grid.style.setProperty('--math-cols', cols); M.cols = cols; }
    if (fully) {
      M.shift.hidden = true;
      M.sum.textContent = 'Every key is hidden from this query: all weights are 0 and the output is 0.';
    } else {
      M.shift.hidden = shift === 0;
      if (shift !== 0) M.shift.textContent = `The row's largest logit, ${formatNumber(shift, p)}, is subtracted before e^x so it stays finite; the weights do not change.`;
      M.sum.innerHTML = `<span class="step">row sum</span> Σ<sub>j</sub> exp = ${termList(expTerms, ' + ', visible)} = ` +
        `<b data-testid="math-row-sum" data-value="${head.row_sums[i]}">${formatNumber(head.row_sums[i], p)}</b>` +
        ` <span class="muted">(weights sum to ${weightSum.toFixed(p)})</span>`;
    }
    M.out.innerHTML = `<span class="step">output</span> o<sub>${i}</sub> = Σ<sub>j</sub> a<sub>${i}j</sub> v<sub>j</sub> = ` +
      `${mixTerms.length ? termList(mixTerms, ' + ', visible) : '0'} = ` +
      `<b data-testid="math-output" data-value="${escapeHtml(JSON.stringify(head.output[i]))}">(${formatVector(head.output[i], p)})</b>`;
    M.top.hidden = top < 0 || fully;
    if (top >= 0 && !fully) {
      M.top.innerHTML = `<span class="step">largest</span> key ${top} <q>${escapeHtml(trace.source_tokens[top])}</q> (${formatNumber(topW, p)})`;
    }
  }

  // While a lean trace's head fetches its intermediates: a one-line placeholder (the grid
  // is rebuilt when they arrive).
  function mathsLoading(container, trace, h) {
    container._maths = null;
    container.innerHTML = `<p class="math-title">Head ${h} <q>${escapeHtml(trace.heads[h].name)}</q>: fetching this head's ` +
      'queries, keys, scores and softmax from the engine…</p>';
  }

  // ---- SVG export of the heatmap -------------------------------------------------------
  function exportSvg(trace, h, query, title, scaleMax) {
    const head = trace.heads[h];
    const sMax = scaleMax || 1;
    const L = heatmapLayout(trace, { width: 120 + Math.max(trace.source_tokens.length * 40, 240), maxCell: 48 });
    const legendH = 56;
    const W = Math.max(L.width, 540), H = L.height + legendH + 28;
    const x0 = 0, y0 = 28;
    const esc = escapeHtml;
    const out = [];
    out.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="system-ui, sans-serif" font-size="12">`);
    out.push('<defs><pattern id="masked" width="8" height="8" patternUnits="userSpaceOnUse" patternTransform="rotate(45)">' +
      `<rect width="8" height="8" fill="${C.masked}"/><line x1="0" y1="0" x2="0" y2="8" stroke="${C.maskedInk}" stroke-width="3"/></pattern>` +
      '<linearGradient id="scale" x1="0" x2="1" y1="0" y2="0">' +
      C.stops.map((c, k) => `<stop offset="${(k / (C.stops.length - 1)).toFixed(3)}" stop-color="${c}"/>`).join('') +
      '</linearGradient></defs>');
    out.push(`<rect width="${W}" height="${H}" fill="#ffffff"/>`);
    out.push(`<text x="4" y="16" font-weight="bold">${esc(title)}</text>`);
    const { n, m, cell, left, top, gap } = L;
    const inner = cell - gap;
    const fs = Math.max(9, Math.min(13, Math.floor(cell / 3.1)));
    const G = maskGrid(head);
    for (let i = 0; i < n; i++) {
      for (let j = 0; j < m; j++) {
        const x = x0 + left + j * cell, y = y0 + top + i * cell;
        const masked = G[i][j] === null;
        const w = head.weights[i][j];
        out.push(`<rect class="cell" data-row="${i}" data-col="${j}" data-weight="${w}" data-masked="${masked}" x="${x}" y="${y}" width="${inner}" height="${inner}" fill="${masked ? 'url(#masked)' : C.css(w / sMax)}"/>`);
        if (masked && cell >= 14) out.push(`<text x="${x + inner / 2}" y="${y + inner / 2}" text-anchor="middle" dominant-baseline="central" fill="#f0f0f0" font-size="${fs}">×</text>`);
        else if (!masked && L.showText) out.push(`<text x="${x + inner / 2}" y="${y + inner / 2}" text-anchor="middle" dominant-baseline="central" fill="${C.textOn(w / sMax)}" font-size="${fs}">${formatNumber(w, 2)}</text>`);
      }
    }
    for (let i = 0; i < n; i += L.labelEvery) {
      out.push(`<text x="${x0 + left - 6}" y="${y0 + top + i * cell + inner / 2}" text-anchor="end" dominant-baseline="central"${i === query ? ` fill="${C.highlight}" font-weight="bold"` : ''}>${esc(L.qLabels[i])}</text>`);
    }
    for (let j = 0; j < m; j += L.labelEvery) {
      const cx = x0 + left + j * cell + inner / 2;
      if (L.rotate) out.push(`<text transform="translate(${cx},${y0 + top - 6}) rotate(-45)">${esc(L.kLabels[j])}</text>`);
      else out.push(`<text x="${cx}" y="${y0 + top - 12}" text-anchor="middle" dominant-baseline="central">${esc(L.kLabels[j])}</text>`);
    }
    if (query >= 0 && query < n) {
      out.push(`<rect x="${x0 + left - 1.5}" y="${y0 + top + query * cell - 1.5}" width="${m * cell - gap + 3}" height="${inner + 3}" fill="none" stroke="${C.highlight}" stroke-width="2.5"/>`);
    }
    // legend
    const ly = y0 + L.height + 10;
    out.push(`<text x="4" y="${ly + 10}">weight</text>`);
    out.push(`<rect x="56" y="${ly}" width="200" height="14" fill="url(#scale)" stroke="#999"/>`);
    [0, 0.25, 0.5, 0.75, 1].forEach((t) => out.push(`<text x="${56 + 200 * t}" y="${ly + 28}" text-anchor="middle" font-size="11">${sMax === 1 ? t : formatNumber(t * sMax, 2)}</text>`));
    out.push(`<rect x="270" y="${ly}" width="14" height="14" fill="url(#masked)"/><text x="290" y="${ly + 11}" font-size="11">masked (logit −∞, weight exactly 0)</text>`);
    out.push(`<text x="4" y="${ly + 46}" font-size="11" fill="#555">A weight is a normalised similarity, not proof that the token caused the output.</text>`);
    out.push('</svg>');
    return out.join('\n');
  }

  A.render = {
    escapeHtml, maskGrid, mathsLoading, heatmapLayout, drawHeatmap, hitHeatmap, drawThumbs, drawArcs, headMax,
    rowStats, updateReadouts, weightsTableHtml, updateMaths, exportSvg,
  };
})(window.Attn = window.Attn || {});
