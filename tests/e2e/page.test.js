// Browser tests of attnlab's page (web/), driven through Debian's Chromium with
// playwright-core, run by node's own test runner:
//
//   ATTNLAB_URL=http://127.0.0.1:8080 node --test tests/e2e/
//
// Each test opens a fresh page, asserts something that would fail if the page were wrong,
// and saves a screenshot into tests/e2e/artifacts/.
'use strict';

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const {
  assertNoErrors, openBrowser, settled, screenshot, postAttention, heatmapCells, mathsWeights, selectScenario,
} = require('./helpers.js');

const TOL = 1e-9;
let browser;

before(async () => { browser = await openBrowser(); });
after(async () => { if (browser) await browser.close(); });


function rowsOf(cells) {
  const rows = new Map();
  for (const c of cells) {
    if (!rows.has(c.row)) rows.set(c.row, []);
    rows.get(c.row).push(c);
  }
  return rows;
}

test('page loads without console errors and shows the three-tokens scenario', async () => {
  const page = await browser.newPage();
  const tokens = await page.$$eval('[data-testid="token-strip"] [role="option"]', (els) => els.map((e) => e.textContent));
  assert.deepEqual(tokens, ['0t1', '1t2', '2t3']);
  assert.equal(await page.inputValue('[data-testid="scenario-select"]'), 'three-tokens');
  // the three-token worked example (docs/worked-example.md), query t3: weights 0.31 0.07 0.62, output 0.69 0.93
  assert.equal(await page.getAttribute('[data-testid="token-strip"]', 'data-query'), '2');
  const weights = await page.$$eval('[data-testid^="math-weight-"] b', (els) => els.map((e) => e.textContent));
  assert.deepEqual(weights, ['0.31', '0.07', '0.62']);
  assert.match(await page.textContent('[data-testid="math-output"]'), /^\(0\.69 0\.93\)$/);
  assert.match(await page.textContent('[data-testid="maths"]'), /2×1 \+ 1×2 = 4/);
  assert.equal((await heatmapCells(page)).length, 9);
  assert.match(await page.textContent('[data-testid="warning"]'), /not proof/);
  await screenshot(page, '01-load-1280x800');
  // usable at 800 px: no horizontal scrolling of the page
  await page.setViewportSize({ width: 800, height: 900 });
  await page.waitForTimeout(100);
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
  assert.ok(overflow <= 0, `the page scrolls sideways by ${overflow}px at 800 px wide`);
  await screenshot(page, '01-load-800');
  assertNoErrors(page);
  await page.close();
});

test('← and → move the query, and the maths panel shows the API\'s weights for that row', async () => {
  const page = await browser.newPage();
  const traces = []; // the page's own requests: packed replies (docs/api.md), read in the page
  page.on('response', (res) => {
    if (res.url().endsWith('/api/attention')) traces.push({ sent: JSON.parse(res.request().postData()).encoding, type: res.headers()['content-type'] });
  });
  await selectScenario(page, 'previous-token');
  assert.ok(traces.length >= 1);
  for (const t of traces) assert.deepEqual(t, { sent: 'packed', type: 'application/octet-stream' });
  const api = await postAttention(browser.url, { scenario: 'previous-token', options: { causal: false, temperature: 1 } });
  const n = api.tokens.length;
  assert.equal(await page.getAttribute('[data-testid="token-strip"]', 'data-query'), String(n - 1));
  await page.focus('[data-testid="token-strip"]');
  const visited = [];
  for (const key of ['ArrowLeft', 'ArrowLeft', 'ArrowLeft', 'ArrowRight']) {
    await page.keyboard.press(key);
    const q = Number(await page.getAttribute('[data-testid="token-strip"]', 'data-query'));
    visited.push(q);
    assert.equal(Number(await page.getAttribute('[data-testid="heatmap"]', 'data-query')), q, 'heatmap row follows the query');
    const shown = await mathsWeights(page);
    assert.equal(shown.length, api.source_tokens.length);
    for (const { j, value } of shown) {
      assert.ok(Math.abs(value - api.heads[0].weights[q][j]) <= TOL,
        `query ${q} key ${j}: page ${value} vs API ${api.heads[0].weights[q][j]}`);
    }
    // the previous-token head: the largest weight sits on key q-1
    const best = shown.reduce((a, b) => (b.value > a.value ? b : a));
    assert.equal(best.j, q - 1);
  }
  assert.deepEqual(visited, [n - 2, n - 3, n - 4, n - 3]);
  await screenshot(page, '02-arrow-keys');
  assertNoErrors(page);
  await page.close();
});

test('the causal toggle masks every upper-triangle cell and each row still sums to 1', async () => {
  const page = await browser.newPage();
  await selectScenario(page, 'random-head');
  let cells = await heatmapCells(page);
  assert.ok(cells.some((c) => c.col > c.row && !c.masked && c.weight > 0), 'before: the upper triangle carries weight');
  await page.check('[data-testid="causal-toggle"]');
  await settled(page);
  const api = await postAttention(browser.url, { scenario: 'random-head', options: { causal: true, temperature: 1 } });
  const n = api.tokens.length;
  for (let h = 0; h < api.heads.length; h++) {
    await page.keyboard.press(String(h + 1));
    assert.equal(await page.getAttribute('[data-testid="heatmap"]', 'data-head'), String(h));
    cells = await heatmapCells(page);
    assert.equal(cells.length, n * n);
    for (const c of cells) {
      if (c.col > c.row) {
        assert.ok(c.masked, `head ${h} cell (${c.row}, ${c.col}) should be masked`);
        assert.equal(c.weight, 0);
      } else {
        assert.ok(!c.masked, `head ${h} cell (${c.row}, ${c.col}) should not be masked`);
      }
      assert.ok(Math.abs(c.weight - api.heads[h].weights[c.row][c.col]) <= TOL, `head ${h} cell (${c.row}, ${c.col}) equals the API's`);
    }
    for (const [row, list] of rowsOf(cells)) {
      const sum = list.reduce((s, c) => s + c.weight, 0);
      assert.ok(Math.abs(sum - 1) <= 1e-9, `head ${h} row ${row} sums to ${sum}`);
    }
  }
  await screenshot(page, '03-causal');
  assertNoErrors(page);
  await page.close();
});

test('temperature 0.1 gives a row whose largest weight is higher than at 3', async () => {
  const page = await browser.newPage();
  await selectScenario(page, 'random-head');
  const row = Number(await page.getAttribute('[data-testid="token-strip"]', 'data-query'));
  const slider = '[data-testid="temperature"]';
  await page.focus(slider);
  await page.keyboard.press('Home');
  await settled(page);
  assert.equal(await page.textContent('[data-testid="temperature-value"]'), '0.1');
  const cold = Number(await page.getAttribute(`[data-testid="row-max-${row}"]`, 'data-value'));
  const coldEntropy = Number(await page.getAttribute(`[data-testid="row-entropy-${row}"]`, 'data-value'));
  await screenshot(page, '04-temperature-0.1');
  const asked = []; // the page's engine answers a temperature change: no request
  page.on('request', (req) => { if (req.url().endsWith('/api/attention')) asked.push(req.url()); });
  await page.keyboard.press('End');
  await settled(page);
  assert.deepEqual(asked, [], 'a temperature change is recomputed in the page (web/engine.js)');
  assert.equal(await page.getAttribute('html', 'data-computed'), 'page');
  assert.equal(await page.textContent('[data-testid="temperature-value"]'), '3');
  const warm = Number(await page.getAttribute(`[data-testid="row-max-${row}"]`, 'data-value'));
  const warmEntropy = Number(await page.getAttribute(`[data-testid="row-entropy-${row}"]`, 'data-value'));
  assert.ok(cold > warm, `largest weight at T=0.1 (${cold}) should exceed that at T=3 (${warm})`);
  assert.ok(coldEntropy < warmEntropy, `entropy at T=0.1 (${coldEntropy}) should be below that at T=3 (${warmEntropy})`);
  // the page's numbers are the engine's at T = 3
  const api = await postAttention(browser.url, { scenario: 'random-head', options: { causal: false, temperature: 3 } });
  assert.ok(Math.abs(warm - Math.max(...api.heads[0].weights[row])) <= TOL);
  await screenshot(page, '04-temperature-3');
  assertNoErrors(page);
  await page.close();
});

test('add random head adds a heatmap, shows its seed, and the same seed gives the same weights', async () => {
  const page = await browser.newPage();
  await selectScenario(page, 'previous-token');
  const thumbs = '[data-testid="head-thumb"]';
  assert.equal(await page.locator(thumbs).count(), 1);
  await page.fill('[data-testid="seed-input"]', '7');
  await page.click('[data-testid="add-head"]');
  await settled(page);
  assert.equal(await page.locator(thumbs).count(), 2);
  assert.equal(await page.locator(thumbs).nth(1).getAttribute('data-seed'), '7');
  assert.match(await page.locator(thumbs).nth(1).textContent(), /seed 7/);
  assert.equal(await page.inputValue('[data-testid="seed-input"]'), '8', 'the next seed increments');
  assert.equal(await page.getAttribute('[data-testid="heatmap"]', 'data-head'), '1', 'the new head is shown');
  const first = await heatmapCells(page);
  // the engine gives the same head for the same seed
  const api = await postAttention(browser.url, { scenario: 'previous-token', options: { add_random_heads: [{ seed: 7 }] } });
  for (const c of first) assert.ok(Math.abs(c.weight - api.heads[1].weights[c.row][c.col]) <= TOL, `cell ${c.row},${c.col}`);
  // a second add with the same seed gives an identical head
  await page.fill('[data-testid="seed-input"]', '7');
  await page.click('[data-testid="add-head"]');
  await settled(page);
  assert.equal(await page.locator(thumbs).count(), 3);
  const second = await heatmapCells(page);
  assert.deepEqual(second, first);
  // a different seed gives a different head
  await page.click('[data-testid="add-head"]');
  await settled(page);
  const third = await heatmapCells(page);
  assert.notDeepEqual(third, first);
  // remove the selected head
  await page.click('[data-testid="remove-head"]');
  await settled(page);
  assert.equal(await page.locator(thumbs).count(), 3);
  await screenshot(page, '05-random-head');
  assertNoErrors(page);
  await page.close();
});

test('editing the sentence re-tokenises: the token strip shows the new words', async () => {
  const page = await browser.newPage();
  await selectScenario(page, 'previous-token');
  await page.fill('[data-testid="sentence-input"]', 'the cat sat on the mat');
  await page.press('[data-testid="sentence-input"]', 'Enter');
  await page.waitForFunction(() => window.attnlab.state.trace.tokens.length === 6);
  await settled(page);
  const tokens = await page.$$eval('[data-testid="token-strip"] [role="option"]', (els) => els.map((e) => e.lastChild.textContent));
  assert.deepEqual(tokens, ['the', 'cat', 'sat', 'on', 'the', 'mat']);
  const cells = await heatmapCells(page);
  assert.equal(cells.length, 36);
  assert.equal((await mathsWeights(page)).length, 6);
  await screenshot(page, '06-sentence');
  assertNoErrors(page);
  await page.close();
});

test('export produces a non-empty PNG, an SVG of the heatmap and the trace JSON', async () => {
  const page = await browser.newPage();
  const grab = async (testid) => {
    const [download] = await Promise.all([page.waitForEvent('download'), page.click(`[data-testid="${testid}"]`)]);
    const file = await download.path();
    return { name: download.suggestedFilename(), bytes: fs.readFileSync(file) };
  };
  const png = await grab('export-png');
  assert.match(png.name, /\.png$/);
  assert.ok(png.bytes.length > 100, `PNG is ${png.bytes.length} bytes`);
  assert.deepEqual([...png.bytes.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
  const svg = await grab('export-svg');
  assert.match(svg.name, /\.svg$/);
  const text = svg.bytes.toString('utf8');
  assert.match(text, /^<svg[^>]*xmlns="http:\/\/www.w3.org\/2000\/svg"/);
  assert.equal((text.match(/<rect class="cell"/g) || []).length, 9);
  assert.match(text, />0\.62</);
  const json = await grab('export-json');
  const trace = JSON.parse(json.bytes.toString('utf8'));
  assert.equal(trace.heads[0].weights.length, 3);
  assert.equal(trace.attention_input, undefined, 'the export is the trace, not the engine\'s input');
  await screenshot(page, '07-export');
  assertNoErrors(page);
  await page.close();
});

test('keyboard only: every control can be reached with Tab and shows a visible focus ring', async () => {
  const page = await browser.newPage();
  const seen = new Set();
  for (let k = 0; k < 60; k++) {
    await page.keyboard.press('Tab');
    const info = await page.evaluate(() => {
      const el = document.activeElement;
      if (!el || el === document.body) return null;
      const cs = getComputedStyle(el);
      const id = el.id || el.dataset.testid || el.dataset.view || el.dataset.temp || el.dataset.head || el.textContent.trim().slice(0, 20);
      return { id, tag: el.tagName, outline: cs.outlineStyle !== 'none' && parseFloat(cs.outlineWidth) >= 2, shadow: cs.boxShadow !== 'none' };
    });
    if (!info) continue;
    assert.ok(info.outline || info.shadow, `${info.tag}#${info.id} has no visible focus style`);
    seen.add(info.id);
  }
  for (const id of ['scenario-select', 'sentence-input', 'causal-toggle', 'temperature', 'seed-input', 'add-head', 'token-strip', 'export-png', 'guide-1']) {
    assert.ok(seen.has(id), `Tab never reached ${id}; reached: ${[...seen].join(', ')}`);
  }
  // head switching with the keyboard
  await page.focus('[data-testid="token-strip"]');
  await selectScenario(page, 'multi-head');
  await page.focus('[data-testid="token-strip"]');
  await page.keyboard.press('ArrowDown');
  assert.equal(await page.getAttribute('[data-testid="heatmap"]', 'data-head'), '1');
  await page.keyboard.press('3');
  assert.equal(await page.getAttribute('[data-testid="heatmap"]', 'data-head'), '2');
  await page.keyboard.press('ArrowUp');
  assert.equal(await page.getAttribute('[data-testid="maths"]', 'data-head'), '1');
  await screenshot(page, '08-keyboard');
  assertNoErrors(page);
  await page.close();
});

test('hiding a token masks that key for every query (an intervention)', async () => {
  const page = await browser.newPage();
  await selectScenario(page, 'previous-token');
  await page.focus('[data-testid="token-strip"]');
  for (let k = 0; k < 4; k++) await page.keyboard.press('ArrowLeft'); // query 5
  assert.equal(await page.getAttribute('[data-testid="token-strip"]', 'data-query'), '5');
  await page.click('[data-testid="hide-token"]');
  await settled(page);
  assert.equal(await page.getAttribute('html', 'data-computed'), 'server', 'an intervention is the server\'s to compute');
  assert.match(await page.getAttribute('#tok-5', 'class'), /hidden-key/);
  const cells = await heatmapCells(page);
  for (const c of cells) assert.equal(c.masked, c.col === 5, `cell (${c.row}, ${c.col})`);
  // query 6 loses its previous token; its weight moves elsewhere and the row still sums to 1
  const api = await postAttention(browser.url, { scenario: 'previous-token', options: { mask_tokens: [5] } });
  const row6 = cells.filter((c) => c.row === 6);
  assert.ok(Math.abs(row6.reduce((s, c) => s + c.weight, 0) - 1) <= 1e-9);
  for (const c of row6) assert.ok(Math.abs(c.weight - api.heads[0].weights[6][c.col]) <= TOL);
  assert.equal(await page.getAttribute('[data-testid="math-weight-5"]', 'data-masked'), 'true');
  await screenshot(page, '09-hide-token');
  assertNoErrors(page);
  await page.close();
});
