// Browser tests of the page's panels: cost (the n² grid and the KV cache,
// docs/cost-and-kv.md), interventions and "What drove this output?" (the probe,
// docs/interventions.md). Each compares what the page shows with the API (and, where the
// CLI prints the same numbers, with `attnlab cost` and `attnlab kv`: ATTNLAB_BIN, which
// run-with-server.sh sets), and saves a screenshot into tests/e2e/artifacts/.
'use strict';

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const { execFileSync } = require('node:child_process');
const {
  assertNoErrors, BIN, openBrowser, settled, screenshot, postAttention, postApi, heatmapCells, mathsWeights, selectScenario,
} = require('./helpers.js');

const TOL = 1e-9;
let browser;

before(async () => { browser = await openBrowser(); });
after(async () => { if (browser) await browser.close(); });


async function assertNoSidewaysScroll(page) {
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
  assert.ok(overflow <= 0, `the page scrolls sideways by ${overflow}px`);
}

// The attnlab binary (helpers.js), for the tests that compare with the CLI's printout.
function cli(args) {
  if (!fs.existsSync(BIN)) return null;
  return execFileSync(BIN, args, { encoding: 'utf8' });
}

// The CLI's table line for one length: the columns after the first, split on runs of spaces.
function cliRow(section, first) {
  for (const line of section.split('\n')) {
    const cols = line.trim().split(/\s{2,}/);
    if (cols[0] === first) return cols.slice(1);
  }
  return null;
}

const groupDigits = (s) => String(s).replace(/\B(?=(\d{3})+(?!\d))/g, ',');
const fieldValue = (page, testid) => page.getAttribute(`[data-testid="${testid}"]`, 'data-value');
const fieldText = async (page, testid) => (await page.textContent(`[data-testid="${testid}"]`)).trim();

async function setNumber(page, testid, value) {
  await page.fill(`[data-testid="${testid}"]`, String(value));
  await page.press(`[data-testid="${testid}"]`, 'Enter');
  await page.dispatchEvent(`[data-testid="${testid}"]`, 'change');
  await settled(page);
}

const COST_FIELDS = ['dense_cells', 'causal_cells', 'window_cells', 'strided_cells', 'flops_layer_dense', 'flops_layer_causal',
  'flops_layer_window', 'flops_layer_strided', 'flops_model_dense', 'flops_model_causal', 'grid_bytes_head', 'grid_bytes_layer'];

test('cost panel: n² is 9 for three-tokens, and every count equals POST /api/cost and `attnlab cost`', async () => {
  const page = await browser.newPage();
  // the current scenario: three tokens, nine dot products in one head's grid
  await page.waitForSelector('[data-testid="cost-scenario"][data-n="3"]');
  assert.equal(await fieldValue(page, 'cost-scenario-dense_cells'), '9');
  assert.equal(await fieldText(page, 'cost-scenario-dense_cells'), '9');
  // the slider's length, typed in: 100,000 tokens (10^10 dot products per head, docs/cost-and-kv.md)
  await setNumber(page, 'cost-n-input', 100000);
  await page.waitForSelector('[data-testid="cost-slider"][data-n="100000"]');
  assert.equal(await fieldText(page, 'cost-slider-dense_cells'), '10,000,000,000');
  const api = await postApi(browser.url, '/api/cost', { tokens: [3, 100000] });
  for (const [which, row] of [['scenario', api.rows[0]], ['slider', api.rows[1]]]) {
    for (const f of COST_FIELDS) {
      assert.equal(await fieldValue(page, `cost-${which}-${f}`), String(row[f]), `${which} ${f}`);
    }
  }
  // the CLI prints the same numbers for the same flags (the page shows its command line)
  const command = await page.textContent('[data-testid="cost-cli"]');
  assert.match(command, /^attnlab cost --tokens 3,100000 --d-model 4096 --heads 32 --layers 32 --dtype f16 --window 4096$/);
  const out = cli(['cost', '--tokens', '3,100000']);
  if (out) {
    const [cells, flops, bytes] = out.split(/\n(?=Cells|FLOPs|Bytes)/).slice(1);
    const c = cliRow(cells, '100,000'), fl = cliRow(flops, '100,000'), b = cliRow(bytes, '100,000');
    assert.deepEqual([await fieldText(page, 'cost-slider-dense_cells'), await fieldText(page, 'cost-slider-causal_cells'),
      await fieldText(page, 'cost-slider-window_cells'), await fieldText(page, 'cost-slider-strided_cells')], c.slice(0, 4));
    assert.deepEqual([await fieldText(page, 'cost-slider-flops_layer_dense'), await fieldText(page, 'cost-slider-flops_layer_causal'),
      await fieldText(page, 'cost-slider-flops_layer_window'), await fieldText(page, 'cost-slider-flops_layer_strided'),
      await fieldText(page, 'cost-slider-flops_model_dense')], fl);
    assert.deepEqual([await fieldText(page, 'cost-slider-grid_bytes_head'), await fieldText(page, 'cost-slider-grid_bytes_layer')], b);
    assert.equal(cliRow(cells, '3')[0], '9');
  } else {
    console.log(`# ${BIN} not found: the comparison with the CLI's printout was skipped`);
  }
  await screenshot(page, '10-cost-grid');

  // a shape whose FLOPs pass 2^53 with odd factors: exact digits, not a rounded double
  await setNumber(page, 'cost-dmodel', 5625);
  await setNumber(page, 'cost-heads', 75);
  await setNumber(page, 'cost-layers', 75);
  await setNumber(page, 'cost-n-input', 999999);
  await page.waitForSelector('[data-testid="cost-slider"][data-n="999999"]');
  const big = await postApi(browser.url, '/api/cost', { tokens: [3, 999999], d_model: 5625, heads: 75, layers: 75 });
  const flopsModel = big.rows[1].flops_model_dense;
  assert.equal(typeof flopsModel, 'string', 'the API count passes 2^53');
  assert.equal(BigInt(flopsModel), 4n * 999999n * 999999n * 75n * 75n * 75n);
  assert.equal(await fieldValue(page, 'cost-slider-flops_model_dense'), flopsModel);
  assert.equal(await fieldText(page, 'cost-slider-flops_model_dense'), groupDigits(flopsModel));
  const outBig = cli(['cost', '--tokens', '999999', '--d-model', '5625', '--heads', '75', '--layers', '75']);
  if (outBig) assert.ok(outBig.includes(groupDigits(flopsModel)), `the CLI prints ${groupDigits(flopsModel)}`);
  // the slider: its top is 1M tokens
  await page.focus('[data-testid="cost-n"]');
  await page.keyboard.press('Home');
  await page.waitForSelector('[data-testid="cost-slider"][data-n="1"]');
  await page.keyboard.press('End');
  await page.waitForSelector('[data-testid="cost-slider"][data-n="1000000"]');
  await settled(page);
  assert.equal(await page.textContent('[data-testid="cost-n-value"]'), '1,000,000');
  // a grid's bytes on an exact tie: 24 tokens in f16 is 1,152 bytes, "1.12 KiB" as the CLI (half to even)
  await setNumber(page, 'cost-dmodel', 4096);
  await setNumber(page, 'cost-heads', 32);
  await setNumber(page, 'cost-layers', 32);
  await setNumber(page, 'cost-n-input', 24);
  await page.waitForSelector('[data-testid="cost-slider"][data-n="24"]');
  assert.equal(await fieldText(page, 'cost-slider-grid_bytes_head'), '1,152 (1.12 KiB)');
  const out24 = cli(['cost', '--tokens', '24']);
  if (out24) assert.ok(out24.includes('1,152 (1.12 KiB)'));
  await assertNoSidewaysScroll(page);
  assertNoErrors(page);
  await page.close();
});

test('KV chart: llama-3-8b at 8,192 tokens in f16 is the formula\'s 1 GiB, as the API and `attnlab kv` say', async () => {
  const page = await browser.newPage();
  // the picker holds the server's presets (GET /api/models), the ones /api/kv knows
  const { models } = await (await fetch(browser.url + '/api/models')).json();
  const options = await page.$$eval('[data-testid="kv-model"] option', (els) => els.map((e) => e.value));
  assert.deepEqual(options, models.map((m) => m.name));
  const refusal = await postApi(browser.url, '/api/kv', { model: 'no-such-model' }, { expectStatus: 400 });
  assert.equal(/the known models are: ([^(]+?) \(/.exec(refusal.error)[1], options.join(', '));

  await page.waitForSelector('[data-testid="kv-row-8192"]');
  assert.equal(await page.inputValue('[data-testid="kv-model"]'), 'llama-3-8b');
  assert.equal(await page.inputValue('[data-testid="kv-dtype"]'), 'f16');
  const api = await postApi(browser.url, '/api/kv', { model: 'llama-3-8b', context: [8192], dtype: 'f16' });
  assert.equal(api.rows[0].cache_bytes, 1073741824, 'the formula\'s 1 GiB, exactly');
  assert.equal(await page.getAttribute('[data-testid="kv-row-8192"]', 'data-cache'), String(api.rows[0].cache_bytes));
  assert.match(await page.textContent('[data-testid="kv-row-8192"]'), /1,073,741,824 \(1 GiB\)/);
  // the table's other rows are the kv operation's default contexts, served by the API (not kept in the page)
  const { kv: kvDefaults } = await (await fetch(browser.url + '/api/defaults')).json();
  const rows = await page.$$eval('.kv-rows tbody tr', (els) => els.map((e) => Number(e.dataset.testid.slice('kv-row-'.length))));
  assert.deepEqual(rows, [...kvDefaults.context, 8192].sort((a, b) => a - b));
  // the chart: the point at 8,192 tokens, the weights line, the label
  assert.equal(await page.getAttribute('[data-testid="kv-svg"] circle[data-context="8192"]', 'data-bytes'), '1073741824');
  assert.equal(await page.getAttribute('[data-testid="kv-weights-line"]', 'data-value'), String(api.weight_bytes));
  assert.equal(await page.textContent('[data-testid="kv-chart-selected"]'), '8,192 tokens: 1 GiB');
  assert.equal(await fieldValue(page, 'kv-formula'), String(api.bytes_per_token));
  assert.equal(await fieldValue(page, 'kv-crossover'), String(api.crossover_context));
  // every point of the chart is a row of the API's answer for the same contexts
  const points = await page.$$eval('[data-testid="kv-svg"] circle[data-context]', (els) => els.map((e) => [Number(e.dataset.context), e.dataset.bytes]));
  const all = await postApi(browser.url, '/api/kv', { model: 'llama-3-8b', dtype: 'f16', context: points.map((p) => p[0]) });
  assert.deepEqual(points, all.rows.map((r) => [r.context, String(r.cache_bytes)]));
  const out = cli(['kv', '--model', 'llama-3-8b', '--context', '8192', '--dtype', 'f16']);
  if (out) {
    assert.match(out, /8,192\s+1,073,741,824 \(1 GiB\)/);
    const weightsLine = (await page.textContent('[data-testid="kv-weights"]')).trim();
    assert.ok(out.includes(weightsLine), `the CLI prints "${weightsLine}"`);
    // "KV cache = 2 × L × H_kv × ... = 2 × 32 × 8 × 128 × context × 2 = 131,072 bytes (128 KiB) per token"
    const formulaNumbers = (await page.textContent('[data-testid="kv-formula"]')).trim().split(' = ').slice(2).join(' = ');
    assert.match(formulaNumbers, /^2 × 32 × 8 × 128 × context × 2 = 131,072 bytes \(128 KiB\) per token$/);
    assert.ok(out.includes(formulaNumbers), `the CLI prints "${formulaNumbers}"`);
  }
  await screenshot(page, '11-kv-llama-3-8b');
  // f32 doubles it, from the API
  await page.selectOption('[data-testid="kv-dtype"]', 'f32');
  await page.waitForFunction(() => document.querySelector('[data-testid="kv-row-8192"]').dataset.cache === '2147483648');
  assert.match(await page.textContent('[data-testid="kv-row-8192"]'), /2,147,483,648 \(2 GiB\)/);

  // measured on request: gpt2 decoded to 2,048 tokens on the server
  await page.selectOption('[data-testid="kv-dtype"]', 'f16');
  await page.selectOption('[data-testid="kv-model"]', 'gpt2');
  await setNumber(page, 'kv-context-input', 2048);
  await page.waitForSelector('[data-testid="kv-row-2048"]');
  const [response] = await Promise.all([
    page.waitForResponse((r) => r.url().endsWith('/api/kv') && r.request().postData().includes('"measure":true')),
    page.click('[data-testid="kv-measure"]'),
  ]);
  const measured = (await response.json()).measured;
  await page.waitForSelector('[data-testid="kv-measure-status"][data-points]');
  await settled(page);
  assert.ok(measured.points.length >= 1);
  assert.equal(measured.points[measured.points.length - 1].context, 2048);
  for (const p of measured.points) {
    const row = `[data-testid="kv-measured-${p.context}"]`;
    assert.equal(await page.getAttribute(row, 'data-formula'), String(p.formula_bytes));
    assert.equal(await page.getAttribute(row, 'data-cache'), String(p.cache_bytes));
    assert.equal(await page.getAttribute(row, 'data-allocator'), String(p.allocator_bytes));
    assert.equal(p.cache_bytes, p.formula_bytes, 'the cache holds what the formula says');
  }
  assert.equal(await page.locator('[data-testid="kv-svg"] rect.measured-pt').count(), measured.points.length);
  await page.locator('#cost-section').scrollIntoViewIfNeeded();
  await screenshot(page, '11-kv-measured');
  await assertNoSidewaysScroll(page);
  assertNoErrors(page);
  await page.close();
});

// The intervention table's rows: {i, norm, before, after}.
async function interventionRows(page) {
  return page.$$eval('[data-testid="int-result"] tr[data-token]', (trs) => trs.map((tr) => ({
    i: Number(tr.dataset.token), norm: Number(tr.dataset.deltaNorm),
    before: JSON.parse(tr.dataset.before), after: JSON.parse(tr.dataset.after),
  })));
}

test('ablating a head changes the output with a non-zero Δ; ablating every head gives the zero output', async () => {
  const page = await browser.newPage();
  await selectScenario(page, 'multi-head');
  assert.equal(await page.getAttribute('[data-testid="int-result"]', 'data-state'), 'none');
  // zero head 0 ("previous token")
  await page.selectOption('[data-testid="int-ablate-head"]', '0');
  await page.selectOption('[data-testid="int-ablate-kind"]', 'zero');
  await page.click('[data-testid="int-ablate"]');
  await settled(page);
  let rows = await interventionRows(page);
  assert.equal(rows.length, 10);
  assert.ok(rows.some((r) => r.norm > 0.01), 'some token\'s output moved');
  const api = await postAttention(browser.url, { scenario: 'multi-head', options: { causal: false, temperature: 1, ablate_heads: [{ head: 0, kind: 'zero' }] } });
  for (const r of rows) {
    assert.ok(Math.abs(r.norm - api.intervention.delta_norm[r.i]) <= TOL, `token ${r.i}: ‖Δ‖ ${r.norm} vs API ${api.intervention.delta_norm[r.i]}`);
    r.after.forEach((x, c) => assert.ok(Math.abs(x - api.intervention.after[r.i][c]) <= TOL));
    // head 0's two output columns are 0 now, the other heads' are unchanged
    assert.deepEqual(r.after.slice(0, 2), [0, 0]);
    assert.deepEqual(r.after.slice(2), r.before.slice(2));
  }
  assert.match(await page.textContent('[data-testid="int-list"]'), /ablate head 0 “previous token”: zero/);
  assert.match(await page.textContent('[data-testid="int-engine"]'), /ablate head 0 "previous token"/);
  await screenshot(page, '12-ablate-head');
  // every head
  await page.click('[data-testid="int-ablate-all"]');
  await settled(page);
  rows = await interventionRows(page);
  for (const r of rows) assert.ok(r.after.every((x) => x === 0), `token ${r.i}'s output after: ${r.after}`);
  assert.ok(rows.every((r) => r.before.some((x) => x !== 0)));
  assert.equal(await page.getAttribute('[data-testid="int-summary"]', 'data-all-zero'), 'true');
  const trace = await page.evaluate(() => window.attnlab.state.trace.output);
  assert.ok(trace.every((row) => row.every((x) => x === 0)), 'the engine\'s output is 0');
  await screenshot(page, '12-ablate-every-head');
  // mean ablation of every head: every token gets the same output, the mean
  await page.selectOption('[data-testid="int-ablate-kind"]', 'mean');
  await page.click('[data-testid="int-ablate-all"]');
  await settled(page);
  rows = await interventionRows(page);
  for (const r of rows) r.after.forEach((x, c) => assert.ok(Math.abs(x - rows[0].after[c]) <= 1e-12));
  // remove all: the baseline again
  await page.click('[data-testid="int-reset"]');
  await settled(page);
  assert.equal(await page.getAttribute('[data-testid="int-result"]', 'data-state'), 'none');
  assertNoErrors(page);
  await page.close();
});

test('scale, replace and permute from the panel: the engine\'s before/after, and a permutation moves each output unchanged', async () => {
  const page = await browser.newPage(); // three-tokens: no positions, so the head is permutation-equivariant
  // reverse the tokens: every output moves with its token and stays the same (‖Δ‖ = 0)
  await page.click('[data-testid="int-reverse"]');
  await settled(page);
  const strip = () => page.$$eval('[data-testid="token-strip"] [role="option"]', (els) => els.map((e) => e.lastChild.textContent));
  assert.deepEqual(await strip(), ['t3', 't2', 't1']);
  assert.equal(await page.getAttribute('[data-testid="token-strip"]', 'data-query'), '0', 'the query follows t3 to row 0');
  let rows = await interventionRows(page);
  assert.equal(rows.length, 3, 'a row per token of three-tokens');
  for (const r of rows) assert.equal(r.norm, 0, `token ${r.i} moved but its output should not change`);
  // move t3 back to the end: the identity again, no intervention
  await page.selectOption('[data-testid="int-move-to"]', '2');
  await page.click('[data-testid="int-move"]');
  await settled(page);
  assert.deepEqual(await strip(), ['t2', 't1', 't3']);
  await page.click('[data-testid="int-list"] [data-chip="0"]');
  await settled(page);
  assert.deepEqual(await strip(), ['t1', 't2', 't3']);
  // replace t2 by "dog": a word from the word table; t2's slot changes, the outputs move
  await page.selectOption('[data-testid="int-replace-token"]', '1');
  await page.fill('[data-testid="int-replace-word"]', 'dog');
  await page.click('[data-testid="int-replace"]');
  await settled(page);
  assert.deepEqual(await strip(), ['t1', 'dog', 't3']);
  rows = await interventionRows(page);
  assert.equal(rows.length, 3);
  assert.ok(rows.every((r) => r.norm > 0));
  // scale head 0 by 0.5 on top: the output after is half the replaced one's
  await page.fill('[data-testid="int-scale-factor"]', '0.5');
  await page.click('[data-testid="int-scale"]');
  await settled(page);
  const api = await postAttention(browser.url, { scenario: 'three-tokens', options: { replace_tokens: [{ index: 1, word: 'dog' }] } });
  rows = await interventionRows(page);
  assert.equal(rows.length, api.tokens.length);
  for (const r of rows) r.after.forEach((x, c) => assert.ok(Math.abs(x - 0.5 * api.output[r.i][c]) <= 1e-12));
  assert.equal((await page.$$('[data-testid="int-list"] [data-chip]')).length, 2);
  await screenshot(page, '13-replace-scale');
  assertNoErrors(page);
  await page.close();
});

// The probe table's rows: {index, weight, erasure, flips}.
async function probeRows(page) {
  return page.$$eval('[data-testid="probe-table"] tr[data-index]', (trs) => trs.map((tr) => ({
    index: Number(tr.dataset.index), weight: Number(tr.dataset.weight), erasure: Number(tr.dataset.erasure), flips: tr.dataset.flips === 'true',
  })));
}

async function waitForProbe(page, scenario) {
  await page.waitForSelector(`[data-testid="probe"][data-scenario="${scenario}"][data-state="done"]`);
  await settled(page);
}

test('probe: on weights-mislead the highest weight is not the token whose erasure flips the decision; on weights-agree it is', async () => {
  const page = await browser.newPage();
  // the warning near the heatmap leads to the probe
  await page.click('[data-testid="warning-probe-link"]');
  assert.equal(await page.evaluate(() => document.activeElement.id), 'probe-section');
  // weights-mislead, one click from the panel
  await page.click('[data-testid="probe-mislead"]');
  await waitForProbe(page, 'weights-mislead');
  assert.equal(await page.inputValue('[data-testid="scenario-select"]'), 'weights-mislead');
  assert.equal(await page.getAttribute('[data-testid="probe"]', 'data-query'), '5');
  let rows = await probeRows(page);
  const api = await postApi(browser.url, '/api/probe', { scenario: 'weights-mislead', options: { causal: false, temperature: 1 }, query: 5, head: 0 });
  assert.equal(rows.length, api.tokens.length);
  for (const r of rows) {
    assert.ok(Math.abs(r.weight - api.tokens[r.index].weight) <= TOL);
    assert.ok(Math.abs(r.erasure - api.tokens[r.index].erasure) <= TOL);
    assert.equal(r.flips, api.tokens[r.index].flips);
  }
  let top = rows.reduce((a, b) => (b.weight > a.weight ? b : a));
  assert.equal(top.index, 0, '<s> has the largest weight');
  assert.equal(top.flips, false, 'knocking out <s> does not flip the decision');
  const flipping = rows.filter((r) => r.flips).map((r) => r.index);
  assert.deepEqual(flipping, [4], 'knocking out "not" flips it');
  let largest = rows.reduce((a, b) => (Math.abs(b.erasure) > Math.abs(a.erasure) ? b : a));
  assert.notEqual(largest.index, top.index);
  assert.equal(await page.getAttribute('[data-testid="probe-verdict"]', 'data-agree'), 'false');
  assert.match(await page.textContent('[data-testid="probe-verdict"]'), /misleads/);
  assert.equal(await page.textContent('[data-testid="probe-decision"]'), 'negative');
  // the counterfactual: a different row, same readout
  const div = Number(await page.getAttribute('[data-testid="cf-summary"]', 'data-divergence'));
  assert.ok(Math.abs(div - api.counterfactual.divergence) <= TOL && div > 0.1);
  const found = await page.$$eval('[data-testid^="cf-row-"]', (trs) => trs.map((tr) => Number(tr.dataset.found)));
  assert.ok(Math.abs(found.reduce((s, x) => s + x, 0) - 1) <= 1e-9);
  assert.match(await page.textContent('[data-testid="probe"]'), /plausible/);
  assert.match(await page.textContent('[data-testid="probe"]'), /faithful/);
  await page.locator('#probe-section').scrollIntoViewIfNeeded();
  await screenshot(page, '14-probe-weights-mislead');

  await page.click('[data-testid="probe-agree"]');
  await waitForProbe(page, 'weights-agree');
  rows = await probeRows(page);
  top = rows.reduce((a, b) => (b.weight > a.weight ? b : a));
  assert.equal(top.index, 4, '"not" has the largest weight');
  assert.equal(top.flips, true, 'knocking out "not" flips the decision');
  assert.deepEqual(rows.filter((r) => r.flips).map((r) => r.index), [4], 'and no other single knock-out does');
  largest = rows.reduce((a, b) => (Math.abs(b.erasure) > Math.abs(a.erasure) ? b : a));
  assert.equal(largest.index, top.index);
  assert.equal(await page.getAttribute('[data-testid="probe-verdict"]', 'data-agree'), 'true');
  await page.locator('#probe-section').scrollIntoViewIfNeeded();
  await screenshot(page, '14-probe-weights-agree');

  // the probe follows the query: ← to "not" (query 4)
  await page.focus('[data-testid="token-strip"]');
  await page.keyboard.press('ArrowLeft');
  await page.waitForSelector('[data-testid="probe"][data-query="4"][data-state="done"]');
  await settled(page);
  const q4 = await postApi(browser.url, '/api/probe', { scenario: 'weights-agree', options: { causal: false, temperature: 1 }, query: 4, head: 0 });
  rows = await probeRows(page);
  rows.forEach((r) => assert.ok(Math.abs(r.weight - q4.tokens[r.index].weight) <= TOL));
  await assertNoSidewaysScroll(page);
  assertNoErrors(page);
  await page.close();
});

test('a 64-token, 8-head trace comes lean; switching heads brings that head\'s maths from the engine', async () => {
  const page = await browser.newPage();
  await selectScenario(page, 'previous-token');
  const words = Array.from({ length: 64 }, (_, i) => `w${i}`).join(' ');
  await page.fill('[data-testid="sentence-input"]', words);
  await page.press('[data-testid="sentence-input"]', 'Enter');
  await page.waitForFunction(() => window.attnlab.state.trace.tokens.length === 64);
  await settled(page);
  for (let k = 0; k < 7; k++) {
    await page.fill('[data-testid="seed-input"]', String(k + 1));
    await page.click('[data-testid="add-head"]');
    await settled(page);
  }
  const state = await page.evaluate(() => {
    const S = window.attnlab.state;
    return { heads: S.trace.heads.length, lean: !!S.trace.lean, detail: S.lastRequest.detail, detailHeads: S.lastRequest.detail_heads };
  });
  assert.deepEqual(state, { heads: 8, lean: true, detail: 'weights', detailHeads: [7] });
  const options = { causal: false, temperature: 1, sentence: words, add_random_heads: [1, 2, 3, 4, 5, 6, 7].map((seed) => ({ seed })) };
  const api = await postAttention(browser.url, { scenario: 'previous-token', options });
  // head 3 (key 4): its heatmap at once, its maths once fetched
  await page.focus('[data-testid="token-strip"]');
  await page.keyboard.press('4');
  await settled(page);
  assert.equal(await page.getAttribute('[data-testid="maths"]', 'data-head'), '3');
  const cells = await heatmapCells(page);
  assert.equal(cells.length, 64 * 64);
  for (const c of cells) assert.ok(Math.abs(c.weight - api.heads[3].weights[c.row][c.col]) <= TOL, `cell ${c.row},${c.col}`);
  const q = Number(await page.getAttribute('[data-testid="token-strip"]', 'data-query'));
  for (const { j, value } of await mathsWeights(page)) assert.ok(Math.abs(value - api.heads[3].weights[q][j]) <= TOL);
  // causal: the lean heads (not shown, so without their own logits) show the masked cells too
  await page.check('[data-testid="causal-toggle"]');
  await settled(page);
  const lean5 = await page.evaluate(() => {
    const head = window.attnlab.state.trace.heads[5];
    return { ownLogits: Array.isArray(head.logits), masked: window.attnlab.maskGrid(head).map((row) => row.map((x) => x === null)) };
  });
  assert.equal(lean5.ownLogits, false, 'head 5 is lean: its mask is the shared one');
  assert.equal(lean5.masked.length, 64);
  lean5.masked.forEach((row, i) => row.forEach((m, j) => assert.equal(m, j > i, `head 5 cell (${i}, ${j})`)));
  await settled(page);
  await screenshot(page, '15-lean-64x8');
  assertNoErrors(page);
  await page.close();
});
