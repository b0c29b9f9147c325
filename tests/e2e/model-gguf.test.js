// Browser test of the Model source with a GGUF file (`attnlab serve --model FILE.gguf` on
// tests/model/fixtures/gguf/llama-q8_0.gguf: the Llama fixture converted as llama.cpp's
// converter converts it, its matrices quantized to Q8_0, a SentencePiece tokenizer in its
// metadata). Text typed in the page goes through the file's tokenizer, every head is in the
// grid, and a head loads into the heatmap with the weights POST /api/model/run gives.
//
// It needs the attnlab binary (ATTNLAB_BIN, which run-with-server.sh sets): without it the
// test is skipped, saying so.
'use strict';

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { openBrowser, settled, heatmapCells, postApi } = require('./helpers.js');

const FIXTURE = path.join(__dirname, '..', 'model', 'fixtures', 'gguf', 'llama-q8_0.gguf');
const TEXT = 'the cat sat on the mat';
const SKIP = process.env.ATTNLAB_BIN ? false : 'ATTNLAB_BIN is not set: this test starts `attnlab serve --model` itself and needs the binary';
let browser;

before(async () => { if (!SKIP) browser = await openBrowser({ serveArgs: ['--model', FIXTURE] }); });
after(async () => { if (browser) await browser.close(); });

test('model source, a quantized GGUF file: text through its own tokenizer, every head in the grid, head 1.2 in the heatmap',
  { skip: SKIP }, async () => {
    const page = await browser.newPage({ height: 1400 });
    await page.waitForSelector('[data-testid="model"]:not([hidden])');
    assert.match(await page.textContent('[data-testid="model-shape"]'), /llama: 2 layers × 4 query heads sharing 2 KV heads/);
    await page.fill('[data-testid="model-input"]', TEXT);
    await page.click('[data-testid="model-run"]');
    const run = await postApi(browser.url, '/api/model/run', { text: TEXT });
    assert.deepEqual(run.ids, [1, 32, 35, 37, 39, 32, 42], 'BOS, then the SentencePiece merges of the file');
    await page.waitForFunction((want) => {
      const r = window.attnlab.state.model.run;
      return r && JSON.stringify(r.ids) === want;
    }, JSON.stringify(run.ids));
    await settled(page);
    const heads = await page.$$eval('[data-testid="model-head"]', (els) => els.map((e) => e.dataset.headRef));
    assert.deepEqual(heads, ['0.0', '0.1', '0.2', '0.3', '1.0', '1.1', '1.2', '1.3']);
    await page.click('[data-testid="model-thumb-1.2"]');
    await page.waitForFunction(() => window.attnlab.state.trace && window.attnlab.state.trace.scenario === 'head 1.2');
    await settled(page);
    const cells = await heatmapCells(page);
    assert.equal(cells.length, run.ids.length * run.ids.length);
    for (const c of cells) {
      const want = run.weights[1][2][c.row][c.col];
      assert.ok(Math.abs(c.weight - want) <= 5e-5 + 1e-9, `cell ${c.row},${c.col}: ${c.weight} vs ${want}`);
    }
  });
