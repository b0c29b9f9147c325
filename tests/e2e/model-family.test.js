// Browser test of the Model source with a Llama-family model (`attnlab serve --model DIR` on
// tests/model/fixtures/llama-f32: 2 layers × 4 query heads sharing 2 KV heads, rotary
// positions, no tokenizer). The panel names the family and its KV heads, each head in the
// grid says which KV head it reads, and a rotary head loads into the heatmap with the weights
// POST /api/model/run gives, recomputed in the page (its rotation in the engine's input
// document) at another temperature exactly as the server computes it.
//
// It needs the attnlab binary (ATTNLAB_BIN, which run-with-server.sh sets): without it the
// test is skipped, saying so.
'use strict';

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { openBrowser, settled, heatmapCells, postApi } = require('./helpers.js');

const FIXTURE = path.join(__dirname, '..', 'model', 'fixtures', 'llama-f32');
const IDS = [3, 17, 5, 9, 3, 17, 5, 9, 22];
const SKIP = process.env.ATTNLAB_BIN ? false : 'ATTNLAB_BIN is not set: this test starts `attnlab serve --model` itself and needs the binary';
let browser;

before(async () => { if (!SKIP) browser = await openBrowser({ serveArgs: ['--model', FIXTURE] }); });
after(async () => { if (browser) await browser.close(); });

test('model source, Llama: the family and its KV groups in the grid, rotary head 1.3 in the heatmap as the server gives it',
  { skip: SKIP }, async () => {
    const page = await browser.newPage({ height: 1400 });
    await page.waitForSelector('[data-testid="model"]:not([hidden])');
    assert.match(await page.textContent('[data-testid="model-shape"]'),
      /llama: 2 layers × 4 query heads sharing 2 KV heads \(grouped-query\).*rotary/);
    await page.fill('[data-testid="model-input"]', IDS.join(' '));
    await page.click('[data-testid="model-run"]');
    await page.waitForFunction((want) => {
      const run = window.attnlab.state.model.run;
      return run && JSON.stringify(run.ids) === want;
    }, JSON.stringify(IDS));
    await settled(page);
    const groups = await page.$$eval('[data-testid="model-head"]',
      (els) => els.map((e) => `${e.dataset.headRef}:${e.dataset.kvHead}`));
    assert.deepEqual(groups, ['0.0:0', '0.1:0', '0.2:1', '0.3:1', '1.0:0', '1.1:0', '1.2:1', '1.3:1']);
    assert.match(await page.textContent('[data-testid="model-thumb-1.3"]'), /KV 1/);

    const run = await postApi(browser.url, '/api/model/run', { ids: IDS });
    await page.click('[data-testid="model-thumb-1.3"]');
    await page.waitForFunction(() => window.attnlab.state.trace && window.attnlab.state.trace.scenario === 'head 1.3');
    await settled(page);
    const cells = await heatmapCells(page);
    assert.equal(cells.length, IDS.length * IDS.length);
    for (const c of cells) {
      const want = run.weights[1][3][c.row][c.col];
      assert.ok(Math.abs(c.weight - want) <= 5e-5 + 1e-9, `cell ${c.row},${c.col}: ${c.weight} vs ${want}`);
      assert.equal(c.masked, c.col > c.row, `cell ${c.row},${c.col} masked`);
    }
    // The maths panel of a rotary head: q and k before and after their rotation, and the
    // score against the offset, which at the actual offset is the trace's score.
    await page.waitForSelector('[data-testid="math-rope"]:not([hidden])');
    const rope = await page.evaluate(() => {
      const el = /** @type {HTMLElement} */ (document.querySelector('[data-testid="math-rope-score"]'));
      return { offset: Number(el.dataset.offset), value: Number(el.dataset.value), query: window.attnlab.state.query };
    });
    const full = await postApi(browser.url, '/api/attention', { scenario: { model: { ids: IDS, layer: 1, head: 3 } } });
    const score = full.heads[0].scores[rope.query][rope.query - rope.offset];
    assert.ok(Math.abs(rope.value - score) <= 1e-9 * Math.max(1, Math.abs(score)), `score at the offset: ${rope.value} vs ${score}`);
    assert.match(await page.textContent('[data-testid="math-rope"]'), /depends only on the offset/);
    // The page's own engine, with the model's rotation, at T = 0.5: the server's numbers.
    await page.evaluate(() => window.attnlab.setTemperature(0.5));
    await settled(page);
    assert.equal(await page.evaluate(() => window.attnlab.state.computedBy), 'page');
    const cooler = await postApi(browser.url, '/api/attention',
      { scenario: { model: { ids: IDS, layer: 1, head: 3 } }, options: { temperature: 0.5 } });
    for (const c of await heatmapCells(page)) {
      const want = cooler.heads[0].weights[c.row][c.col];
      assert.ok(Math.abs(c.weight - want) <= 1e-12 * Math.max(1, Math.abs(want)), `T = 0.5, cell ${c.row},${c.col}: ${c.weight} vs ${want}`);
    }
    await page.close();
  });
