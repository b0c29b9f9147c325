// Browser test of the maths panel on a head of a real width: a model `attnlab train` makes
// here with d_model 128 and 2 heads (d_k 64), served with `attnlab serve --model DIR`, and a
// row of 40 keys. Vectors of 64 numbers are shortened to their first and last few until
// "full vectors" is on; past 32 keys the rows go by weight, heaviest first, until the box
// says position order; each weight has a bar as long as the weight. And the heatmap of 240
// tokens, more than fit at 4 px a cell: pooled blocks, each its largest weight, a click
// opening the tokens around it.
//
// It needs the attnlab binary (ATTNLAB_BIN, which run-with-server.sh sets): without it the
// test is skipped, saying so.
'use strict';

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { execFileSync } = require('node:child_process');
const { openBrowser, settled } = require('./helpers.js');
const { llama_shaped } = require('../../bench/llama_cpp_peer.js');

const SKIP = process.env.ATTNLAB_BIN ? false : 'ATTNLAB_BIN is not set: this test trains a model and serves it itself';
const IDS = Array.from({ length: 40 }, (_, i) => 1 + ((i * 7) % 27));
let browser, dir;

before(async () => {
  if (SKIP) return;
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'attnlab-wide-'));
  execFileSync(process.env.ATTNLAB_BIN, ['train', '--out', dir, '--d-model', '128', '--heads', '2', '--context', '256',
    '--steps', '2', '--batch', '2', '--prev-token-steps', '0', '--log-every', '1', '--checkpoint-every', '2', '--force']);
  browser = await openBrowser({ serveArgs: ['--model', dir] });
});
after(async () => {
  if (browser) await browser.close();
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

/** Each key's row as the panel shows it: its position j, its place, its weight and its bar. */
const rows = (page) => page.$$eval('[data-testid^="math-weight-"]', (els) => els.map((el) => ({
  j: Number(el.dataset.testid.slice('math-weight-'.length)),
  place: Number(/** @type {HTMLElement} */ (el.parentElement).style.order),
  weight: Number(el.dataset.value),
  bar: /** @type {HTMLElement} */ (el.querySelector('.math-bar')).style.width,
})));

test('the maths panel at d_k 64 and 40 keys: shortened vectors, the heaviest keys first, a bar for each weight',
  { skip: SKIP }, async () => {
    const page = await browser.newPage({ height: 1600 });
    await page.waitForSelector('[data-testid="model"]:not([hidden])');
    await page.fill('[data-testid="model-input"]', IDS.join(' '));
    await page.click('[data-testid="model-run"]');
    await page.waitForFunction((n) => window.attnlab.state.model.run?.ids?.length === n, IDS.length);
    await page.click('[data-testid="model-thumb-1.1"]');
    await page.waitForFunction(() => window.attnlab.state.trace?.scenario === 'head 1.1');
    await settled(page);
    await page.evaluate(() => window.attnlab.setQuery(39));
    await page.waitForSelector('[data-testid="maths"][data-query="39"]');

    const query = await page.textContent('[data-testid="math-query"]');
    assert.match(query, /^\((\S+ ){5}… \S+ \S+ ‹64›\)$/, query);
    assert.equal(await page.isChecked('[data-testid="maths-by-weight"]'), true, 'past 32 keys: by weight');
    let shown = await rows(page);
    assert.equal(shown.length, IDS.length);
    const byPlace = [...shown].sort((a, b) => a.place - b.place);
    for (let r = 1; r < byPlace.length; r++) assert.ok(byPlace[r - 1].weight >= byPlace[r].weight, `place ${r}`);
    for (const row of shown) assert.ok(Math.abs(parseFloat(row.bar) - 100 * row.weight) <= 0.05, `key ${row.j}'s bar ${row.bar}`);
    // The output's sum starts with the heaviest key's term.
    const top = byPlace[0];
    const out = await page.textContent('.math-out');
    const first = /= (\S+)×\(/.exec(out);
    assert.ok(first && Math.abs(Number(first[1]) - top.weight) < 1e-3, out);
    assert.match(out, /… \(40 terms in all\)/);

    await page.check('[data-testid="maths-full"]');
    await page.waitForFunction(() => window.attnlab.state.mathsFull);
    const full = await page.textContent('[data-testid="math-query"]');
    assert.equal(full.slice(1, -1).trim().split(/\s+/).length, 64, full);
    await page.uncheck('[data-testid="maths-by-weight"]');
    await page.waitForFunction(() => window.attnlab.state.mathsByWeight === false);
    shown = await rows(page);
    for (const row of shown) assert.equal(row.place, row.j, 'position order');
    await page.close();
  });

test('the heatmap of 240 tokens: blocks of 2 × 2 tokens, each its largest weight; a click opens the tokens around it',
  { skip: SKIP }, async () => {
    const page = await browser.newPage({ height: 1600 });
    const ids = Array.from({ length: 240 }, (_, i) => 1 + ((i * 5) % 27));
    await page.waitForSelector('[data-testid="model"]:not([hidden])');
    await page.fill('[data-testid="model-input"]', ids.join(' '));
    await page.click('[data-testid="model-run"]');
    await page.waitForFunction((n) => window.attnlab.state.model.run?.ids?.length === n, ids.length);
    await page.click('[data-testid="model-thumb-1.0"]');
    await page.waitForFunction(() => window.attnlab.state.trace?.scenario === 'head 1.0');
    await settled(page);
    assert.equal(await page.getAttribute('[data-testid="heatmap"]', 'data-tile'), '2');
    assert.match(await page.textContent('[data-testid="heatmap-lod"]'), /240 × 240 tokens: each cell the largest weight in a block of 2 × 2/);
    // Each drawn cell is its block's largest weight, found in the trace's weights here.
    const { shown, weights } = await page.evaluate(() => ({
      shown: window.attnlab.heatmapShown(), weights: window.attnlab.state.trace.heads[0].weights }));
    assert.equal(shown.n, 120);
    for (let i = 0; i < shown.n; i++)
      for (let j = 0; j <= i; j++) {
        let best = 0;
        for (let r = 2 * i; r < 2 * i + 2; r++) for (let c = 2 * j; c < 2 * j + 2 && c <= r; c++) best = Math.max(best, weights[r][c]);
        assert.equal(shown.weights[i][j], best, `cell ${i},${j}`);
        assert.equal(weights[shown.rows[i][j]][shown.cols[i][j]], best);
      }
    // A click on a cell opens the 48 × 48 tokens around its largest weight, and selects its query.
    const [i, j] = [100, 40];
    const canvas = await page.$('[data-testid="heatmap"]');
    await canvas.click({ position: { x: shown.left + (j + 0.5) * shown.cell, y: shown.top + (i + 0.5) * shown.cell } });
    await page.waitForSelector('[data-testid="heatmap"][data-tile="1"]');
    const row = shown.rows[i][j], col = shown.cols[i][j];
    assert.equal(await page.evaluate(() => window.attnlab.state.query), row);
    const [row0, col0, n, m] = (await page.getAttribute('[data-testid="heatmap"]', 'data-window')).split(',').map(Number);
    assert.deepEqual([row0, col0, n, m], [row - 24, col - 24, 48, 48]);
    const zoomed = await page.evaluate(() => window.attnlab.heatmapShown());
    assert.equal(zoomed.weights[24][24], weights[row][col], 'the cell clicked, now alone');
    await page.click('[data-testid="heatmap-whole"]');
    await page.waitForSelector('[data-testid="heatmap"][data-tile="2"]');
    assert.equal(await page.isHidden('[data-testid="heatmap-whole"]'), true);
    await page.close();
  });

// Past the weights a run returns (layers × heads × n² over 2^24), the model panel draws each
// head from its sparse rows: a Llama of 2 layers × 2 heads and 4,096 positions (a GGUF file
// written here), 2,100 tokens.
test('a run of 2,100 tokens: each head drawn from its sparse rows, with its sink and entropy, as the API gives them',
  { skip: SKIP }, async () => {
    const file = path.join(dir, 'tiny-4k.gguf');
    fs.writeFileSync(file, llama_shaped('tiny-4k', 'F32'));
    const long = await openBrowser({ serveArgs: ['--model', file] });
    try {
      const page = await long.newPage({ height: 1400 });
      // its tokenizer has no merges: a character a token
      const text = Array.from({ length: 2100 }, (_, i) => 'abcdefghijklmnopqrstuvwxyz'[(i * 7) % 26]).join('');
      await page.waitForSelector('[data-testid="model"]:not([hidden])');
      await page.fill('[data-testid="model-input"]', text);
      await page.click('[data-testid="model-run"]');
      await page.waitForFunction(() => window.attnlab.state.model.run || window.attnlab.state.model.status === 'error');
      assert.equal(await page.evaluate(() => window.attnlab.state.model.message), '');
      await page.waitForSelector('[data-testid="model-sparse-note"]');
      assert.match(await page.textContent('[data-testid="model-sparse-note"]'), /^2100 tokens: .* the 8 keys each query weighs most/);
      const heads = await page.$$eval('[data-testid="model-head"]', (els) => els.map((e) => ({
        ref: e.dataset.headRef, text: e.querySelector('.model-scores').textContent,
        n: Number(e.querySelector('canvas').dataset.n), side: e.querySelector('canvas').width })));
      assert.deepEqual(heads.map((h) => h.ref), ['0.0', '0.1', '1.0', '1.1']);
      const run = await page.evaluate(() => window.attnlab.state.model.run);
      assert.equal(run.weights, null);
      for (const h of heads) {
        const [l, k] = h.ref.split('.').map(Number);
        const sink = run.sparse.sink[l][k].slice(1), entropy = run.sparse.entropy[l][k];
        const mean = (xs) => xs.reduce((a, b) => a + b, 0) / xs.length;
        assert.match(h.text, new RegExp(`sink ${mean(sink).toFixed(2)} .*${mean(entropy).toFixed(1)} bits`), h.ref);
        assert.equal(h.n, 2100);
        assert.equal(h.side, 256, 'drawn at 256 pixels a side, not 2,100');
      }
      // A head opened: its weights over the whole text pooled by the server (POST api/model/map),
      // a cell the largest weight of its block; hovering reads out where it is; a click opens
      // the 48 × 48 tokens around it, whose cell there has the same weight; "Whole map" goes back.
      await page.click('[data-testid="model-thumb-1.1"]');
      await page.waitForSelector('[data-testid="model-map-canvas"][data-tile]');
      const map = await page.evaluate(() => window.attnlab.state.model.map);
      assert.equal(map.reply.head, '1.1');
      const cells = map.reply.weights.length, tile = Math.ceil(2100 / cells);
      assert.equal(map.reply.tile, tile);
      assert.ok(tile > 1 && cells >= 16, `${cells} cells of ${tile} tokens`);
      assert.match(await page.textContent('[data-testid="model-map-lod"]'), new RegExp(`^2100 × 2100 tokens: .* block of ${tile} × ${tile}`));
      const where = await page.evaluate(() => window.attnlab.modelMapShown());
      const canvas = await page.$('[data-testid="model-map-canvas"]');
      const a = cells - 1, b = 1;  // the last queries' second block of keys
      const at = { position: { x: where.left + (b + 0.5) * where.cell, y: where.top + (a + 0.5) * where.cell } };
      await canvas.hover(at);
      const q = map.reply.query[a][b], k = map.reply.key[a][b], w = map.reply.weights[a][b];
      assert.ok(q >= a * tile && k >= b * tile && k < (b + 1) * tile, 'the cell\'s weight is in its block');
      assert.match(await page.textContent('[data-testid="model-map-readout"]'),
        new RegExp(`block of ${tile} × ${tile}: query ${q} .* key ${k} .*weight ${w.toPrecision(4)}`));
      await canvas.click(at);
      await page.waitForFunction(() => window.attnlab.state.model.map.status === 'done' && window.attnlab.state.model.map.reply.tile === 1);
      const zoomed = await page.evaluate(() => window.attnlab.state.model.map.reply);
      assert.equal(zoomed.weights.length, 48);
      assert.ok(zoomed.row0 <= q && q < zoomed.row0 + 48 && zoomed.col0 <= k && k < zoomed.col0 + 48);
      assert.ok(Math.abs(zoomed.weights[q - zoomed.row0][k - zoomed.col0] - w) < 1e-6, 'the same weight, a cell of its own');
      assert.equal(await page.getAttribute('[data-testid="model-map-canvas"]', 'data-tile'), '1');
      await page.click('[data-testid="model-map-whole"]');
      await page.waitForFunction((t) => window.attnlab.state.model.map.reply.tile === t && window.attnlab.state.model.map.status === 'done', tile);
      assert.equal(await page.getAttribute('[data-testid="model-map-canvas"]', 'data-tile'), String(tile));
      await page.close();
    } finally {
      await long.close();
    }
  });
