// Browser test of the Model source (`attnlab serve --model DIR`, docs/models.md): the page
// against a server of its own started with the tiny GPT-2 fixture (2 layers × 4 heads,
// vocabulary 40, no tokenizer, so the text box takes token ids). The model panel appears,
// its grid has every head, a click on head 1.2 shows that head's weights in the heatmap
// (equal to POST /api/model/run's), and an ablation moves the next-token top-k.
//
// It needs the attnlab binary (ATTNLAB_BIN, which run-with-server.sh sets): without it the
// test is skipped, saying so.
'use strict';

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { assertNoErrors, openBrowser, settled, screenshot, heatmapCells, postApi } = require('./helpers.js');

const FIXTURE = path.join(__dirname, '..', 'model', 'fixtures', 'tiny-f32');
const IDS = [3, 17, 5, 9, 3, 17, 5, 9, 22];
const SKIP = process.env.ATTNLAB_BIN ? false : 'ATTNLAB_BIN is not set: this test starts `attnlab serve --model` itself and needs the binary';
let browser;

before(async () => { if (!SKIP) browser = await openBrowser({ serveArgs: ['--model', FIXTURE] }); });
after(async () => { if (browser) await browser.close(); });

// Waits until the model panel shows a run of `ids` and nothing is pending.
async function ranOn(page, ids) {
  await page.waitForFunction((want) => {
    const run = window.attnlab.state.model.run;
    return run && JSON.stringify(run.ids) === want;
  }, JSON.stringify(ids));
  await settled(page);
}

// The next-token list `testid` as [{id, probability}].
const topK = (page, testid) => page.$$eval(`[data-testid="${testid}"] tr[data-id]`,
  (rows) => rows.map((r) => ({ id: Number(r.dataset.id), probability: Number(r.dataset.probability) })));

test('model source: a link ending in #text=... (attnlab.show(model, text)) runs that input first', { skip: SKIP }, async () => {
  const page = await browser.newPage({ hash: `text=${encodeURIComponent(IDS.join(' '))}` });
  await page.waitForSelector('[data-testid="model"]:not([hidden])');
  await ranOn(page, IDS);
  assert.equal(await page.inputValue('[data-testid="model-input"]'), IDS.join(' '));
  assertNoErrors(page);
  await page.close();
});

test('model source: the grid of 2 × 4 heads, head 1.2 in the heatmap as /api/model/run gives it, an ablation moves the top-k',
  { skip: SKIP }, async () => {
    const page = await browser.newPage({ height: 1400 });
    await page.waitForSelector('[data-testid="model"]:not([hidden])');
    assert.match(await page.textContent('[data-testid="model-shape"]'), /tiny-f32: gpt2: 2 layers × 4 heads/);
    // no tokenizer: the box takes ids, and says so
    assert.equal((await page.textContent('#model-input-label')).trim(), 'Token ids');
    assert.match(await page.textContent('[data-testid="model-input-hint"]'), /no tokenizer.*token ids separated by spaces/);

    await page.fill('[data-testid="model-input"]', IDS.join(' '));
    await page.click('[data-testid="model-run"]');
    await ranOn(page, IDS);
    const tokens = await page.$$eval('[data-testid="model-token"]', (els) => els.map((e) => e.textContent));
    assert.deepEqual(tokens, IDS.map((id) => `#${id}`));
    const heads = await page.$$eval('[data-testid="model-head"]', (els) => els.map((e) => e.dataset.headRef));
    assert.deepEqual(heads, ['0.0', '0.1', '0.2', '0.3', '1.0', '1.1', '1.2', '1.3']);

    // sorting by a score puts the highest first
    await page.selectOption('[data-testid="model-sort"]', 'previous_token');
    const scores = await page.$$eval('[data-testid="model-head"]', (els) => els.map((e) => Number(e.dataset.previousToken)));
    assert.deepEqual(scores, scores.slice().sort((a, b) => b - a));

    // head 1.2 into the views: the heatmap's weights are the run's (4 decimals there)
    const run = await postApi(browser.url, '/api/model/run', { ids: IDS });
    await page.click('[data-testid="model-thumb-1.2"]');
    await page.waitForFunction(() => window.attnlab.state.trace && window.attnlab.state.trace.scenario === 'head 1.2');
    await settled(page);
    const cells = await heatmapCells(page);
    assert.equal(cells.length, IDS.length * IDS.length);
    for (const c of cells) {
      const want = run.weights[1][2][c.row][c.col];
      assert.ok(Math.abs(c.weight - want) <= 5e-5 + 1e-9, `cell ${c.row},${c.col}: ${c.weight} vs ${want}`);
      assert.equal(c.masked, c.col > c.row, `cell ${c.row},${c.col} masked`); // a GPT-2 head is causal
    }
    assert.ok(await page.$('[data-testid="model-head"][data-head-ref="1.2"].selected'));
    // "Why here?": the query's score on the key it weighs most, taken apart as /api/model/qk gives it
    await page.waitForSelector('[data-testid="why"]:not([hidden])');
    await page.click('[data-testid="why-run"]');
    await page.waitForSelector('[data-testid="why-pair"]');
    const query = await page.evaluate(() => window.attnlab.state.query);
    const why = await postApi(browser.url, '/api/model/qk', { ids: IDS, head: '1.2', query, top: 12 });
    const bars = await page.$$eval('[data-testid="why-pair"]', (rows) => rows.map((r) => Number(r.dataset.value)));
    assert.deepEqual(bars, why.parts.map((p) => p.score));
    assert.match(await page.textContent('[data-testid="why-summary"]'), new RegExp(`^query ${query} .* on key ${why.key} `));
    // another key, typed: its score taken apart instead
    const other = why.key === 0 ? 1 : 0;
    await page.fill('[data-testid="why-key"]', String(other));
    await page.press('[data-testid="why-key"]', 'Enter');
    await page.click('[data-testid="why-run"]');
    await page.waitForFunction((k) => { const w = window.attnlab.state.why; return w.reply && w.reply.key === k; }, other);
    const typed = await postApi(browser.url, '/api/model/qk', { ids: IDS, head: '1.2', query, key: other, top: 12 });
    assert.deepEqual(await page.$$eval('[data-testid="why-pair"]', (rows) => rows.map((r) => Number(r.dataset.value))),
      typed.parts.map((p) => p.score));
    // the rest of the lab works on it: the probe, and the temperature recomputed in the page
    await page.waitForSelector('[data-testid="probe"][data-state="done"][data-scenario="head 1.2"]');
    await page.evaluate(() => window.attnlab.setTemperature(0.5));
    await settled(page);
    assert.equal(await page.evaluate(() => window.attnlab.state.computedBy), 'page');
    const cooler = await postApi(browser.url, '/api/attention',
      { scenario: { model: { ids: IDS, layer: 1, head: 2 } }, options: { temperature: 0.5 } });
    for (const c of await heatmapCells(page)) {
      const want = cooler.heads[0].weights[c.row][c.col];
      assert.ok(Math.abs(c.weight - want) <= 1e-12 * Math.max(1, Math.abs(want)), `T = 0.5, cell ${c.row},${c.col}: ${c.weight} vs ${want}`);
    }

    // ablation: pick heads, the next token moves, before and after side by side
    const before = await topK(page, 'model-topk-before');
    assert.equal(before.length, 5);
    for (const h of ['0.0', '0.1', '1.2', '1.3']) await page.click(`[data-testid="model-ablate-${h}"]`);
    await page.waitForSelector('[data-testid="model-topk-after"] tr[data-id]');
    await settled(page);
    const afterAblation = await topK(page, 'model-topk-after');
    assert.equal(afterAblation.length, 5);
    assert.notDeepEqual(afterAblation, before, 'the ablation did not move the top-k');
    const asked = await postApi(browser.url, '/api/model/run', { ids: IDS, ablate: ['0.0', '0.1', '1.2', '1.3'], weights: false });
    assert.deepEqual(afterAblation.map((g) => g.id), asked.top_k_ablated.map((g) => g.id));
    assert.deepEqual(await topK(page, 'model-topk-before'), before); // the model's own prediction stays
    await screenshot(page, 'model-tiny-f32');
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
    assert.ok(overflow <= 0, `the page scrolls sideways by ${overflow}px`);

    // bad ids are refused in the page, naming the range
    await page.fill('[data-testid="model-input"]', '3 99');
    await page.click('[data-testid="model-run"]');
    assert.match(await page.textContent('[data-testid="model-status"]'), /"99" is not a token id; ids run from 0 to 39/);
    assertNoErrors(page);
    await page.close();
  });

// "More options": the fields of `model run` the panel has no control for, from the
// operation's one description (GET /api/operations), with its defaults as placeholders; a
// value typed goes into the run, and a bad one comes back from the server naming the field.
test('model source: More options are the operation\'s other fields; top_k typed changes the run, a bad one is named',
  { skip: SKIP }, async () => {
    const page = await browser.newPage({ height: 1400 });
    await page.waitForSelector('[data-testid="model"]:not([hidden])');
    await page.fill('[data-testid="model-input"]', IDS.join(' '));
    await page.click('[data-testid="model-run"]');
    await ranOn(page, IDS);
    const operations = await (await fetch(`${browser.url}/api/operations`)).json();
    const run = operations.operations.find((d) => d.name === 'model run');
    const offered = run.fields.filter((f) => f.faces.includes('api') && !['text', 'ids', 'ablate', 'weights', 'sparse'].includes(f.name));
    await page.waitForSelector('[data-testid="model-options"]:not([hidden])');
    await page.click('[data-testid="model-options"] summary');
    for (const f of offered) {
      assert.equal(await page.getAttribute(`[data-testid="option-${f.name}"]`, 'placeholder'), String(f.default), f.name);
    }
    assert.ok(offered.some((f) => f.name === 'top_k'), 'top_k is one of them');
    assert.equal((await topK(page, 'model-topk-before')).length, 5);
    await page.fill('[data-testid="option-top_k"]', '3');
    await page.press('[data-testid="option-top_k"]', 'Enter');
    await page.waitForFunction(() => window.attnlab.state.model.run && window.attnlab.state.model.run.top_k.length === 3);
    await settled(page);
    assert.equal((await topK(page, 'model-topk-before')).length, 3);
    assert.match(await page.textContent('[data-testid="model-options"] summary'), /1 set/);
    await page.fill('[data-testid="option-top_k"]', '0');
    await page.press('[data-testid="option-top_k"]', 'Enter');
    await page.waitForFunction(() => window.attnlab.state.model.status === 'error');
    assert.match(await page.textContent('[data-testid="model-status"]'), /top_k: 0 is not a whole number from 1 to /);
    await page.close();
  });

// Every head's circuits: the copying grid and the composition arrows as /api/model/circuits gives them.
test('model source: the circuits panel shows each head\'s copying score and the largest compositions as arrows',
  { skip: SKIP }, async () => {
    const page = await browser.newPage({ height: 1400 });
    await page.waitForSelector('[data-testid="circuits"]:not([hidden])');
    await page.click('[data-testid="circuits-run"]');
    await page.waitForSelector('[data-testid="circuits-copying"]');
    const want = await postApi(browser.url, '/api/model/circuits', {});
    const copying = await page.$$eval('[data-testid="circuits-copying"]', (cells) => cells.map((c) => Number(c.dataset.value)));
    assert.deepEqual(copying, want.ov_copying);
    const largest = (kind) => want.composition[kind].flat().filter((x) => x !== null).sort((a, b) => b - a).slice(0, 12);
    const arrows = () => page.$$eval('[data-testid="circuits-arrow"]', (lines) => lines.map((l) => Number(l.dataset.value)));
    assert.deepEqual(await arrows(), largest('k'));
    await page.selectOption('[data-testid="circuits-kind"]', 'q');
    await page.waitForFunction(() => window.attnlab.state.circuits.kind === 'q');
    assert.deepEqual(await arrows(), largest('q'));
    assertNoErrors(page);
    await page.close();
  });

// Generation step by step: each strip and alternative is `attnlab model generate --trace --json`'s.
test('model source: the Generate panel replays each step\'s alternatives, every head\'s row over the cache and its bytes',
  { skip: SKIP }, async () => {
    const page = await browser.newPage({ height: 1600 });
    await page.waitForSelector('[data-testid="generate"]:not([hidden])');
    const prompt = IDS.slice(0, 5);
    await page.fill('[data-testid="generate-prompt"]', prompt.join(' '));
    await page.fill('[data-testid="generate-tokens"]', '4');
    await page.click('[data-testid="generate-run"]');
    await page.waitForSelector('[data-testid="generate-strip"]');
    const { execFileSync } = require('node:child_process');
    const want = JSON.parse(execFileSync(process.env.ATTNLAB_BIN, ['model', 'generate', FIXTURE, '--ids', prompt.join(','),
      '--tokens', '4', '--trace', '--json'], { encoding: 'utf8' }));
    const shown = async () => ({
      strips: await page.$$eval('[data-testid="generate-strip"]', (rows) => rows.map((r) => ({
        head: r.dataset.headRef, weights: [...r.querySelectorAll('.gen-cell')].map((c) => Number(c.dataset.value)) }))),
      alternatives: await page.$$eval('[data-testid="generate-alternative"]', (rows) => rows.map((r) => Number(r.dataset.id))),
      bytes: Number(await page.getAttribute('[data-testid="generate-cache"]', 'data-bytes')),
    });
    const expected = (step) => {
      const t = want.generated[step - 1];
      return { strips: t.attention.flatMap((heads, l) => heads.map((w, h) => ({ head: `${l}.${h}`, weights: w }))),
        alternatives: t.alternatives.map((a) => a.id), bytes: t.cache_bytes };
    };
    assert.deepEqual(await shown(), expected(4));  // the last step first
    assert.equal(await page.$$eval('[data-testid="generate-token"]', (els) => els.length), 4);
    await page.fill('[data-testid="generate-step"]', '2');
    await page.waitForFunction(() => window.attnlab.state.generation.step === 2);
    assert.deepEqual(await shown(), expected(2));
    assert.equal((await shown()).strips[0].weights.length, prompt.length + 1);  // the cache before the second new token
    // The cache's storage, an option from the operation's description: q8_0's bytes as the command counts them.
    await page.click('#generate-options summary');
    await page.fill('#generate-options [data-testid="option-cache"]', 'q8_0');
    await page.press('#generate-options [data-testid="option-cache"]', 'Enter');
    await page.click('[data-testid="generate-run"]');
    await page.waitForFunction(() => window.attnlab.state.generation.reply?.cache?.dtype === 'q8_0');
    const q8 = JSON.parse(execFileSync(process.env.ATTNLAB_BIN, ['model', 'generate', FIXTURE, '--ids', prompt.join(','),
      '--tokens', '4', '--trace', '--cache', 'q8_0', '--json'], { encoding: 'utf8' }));
    assert.equal((await shown()).bytes, q8.generated[3].cache_bytes);
    // (this fixture's rows of 4 values are one zero-padded block of 32: 34 bytes, more than f32's 16)
    assert.equal(q8.generated[3].cache_bytes, q8.generated[3].cache_tokens * q8.cache.bytes_per_token);
    assert.notEqual(q8.cache.bytes_per_token, want.cache.bytes_per_token);
    await page.fill('[data-testid="generate-temperature"]', 'warm');
    await page.click('[data-testid="generate-run"]');
    await page.waitForFunction(() => window.attnlab.state.generation.error);
    assert.match(await page.textContent('[data-testid="generate-status"]'), /temperature: "warm" is not a number/);
    await screenshot(page, 'model-generate');
    assertNoErrors(page);
    await page.close();
  });

// The loaded model's own cache in the KV panel, and the report to share.
test('model source: the KV panel measures the loaded model\'s cache and offers its report as a Markdown file',
  { skip: SKIP }, async () => {
    const page = await browser.newPage({ height: 1600 });
    await page.waitForSelector('[data-testid="kv-model-block"]:not([hidden])');
    await page.fill('[data-testid="kv-model-contexts"]', '4 x');
    await page.click('[data-testid="kv-model-run"]');
    await page.waitForFunction(() => window.attnlab.state.kvReport.error);
    assert.match(await page.textContent('[data-testid="kv-model-status"]'), /whole numbers of tokens/);
    await page.fill('[data-testid="kv-model-contexts"]', '4, 16');
    await page.click('[data-testid="kv-model-run"]');
    await page.waitForSelector('[data-testid="kv-model-download"]:not([hidden])');
    const report = await page.textContent('[data-testid="kv-model-report"]');
    const href = await page.getAttribute('[data-testid="kv-model-download"]', 'href');
    assert.equal(decodeURIComponent(href.slice('data:text/markdown;charset=utf-8,'.length)), report);
    const { execFileSync } = require('node:child_process');
    const want = JSON.parse(execFileSync(process.env.ATTNLAB_BIN, ['model', 'kv', FIXTURE, '--context', '4,16', '--json'],
      { encoding: 'utf8' }));
    for (const point of want.contexts)  // the formula's bytes, as the report writes them
      assert.match(report, new RegExp(`\\| ${point.tokens} \\| ${point.formula_bytes === 1024 ? '1 KiB' : '4 KiB'} \\|`));
    assert.match(report, /- machine: .*cores/);
    assert.match(report, /longest context this machine holds: the model's own 16 positions/);
    await page.click('#kv-model-options summary');
    await page.fill('#kv-model-options [data-testid="option-dtype"]', 'q8_0');
    await page.press('#kv-model-options [data-testid="option-dtype"]', 'Enter');
    await page.click('[data-testid="kv-model-run"]');
    await page.waitForFunction(() => window.attnlab.state.kvReport.reply?.dtype === 'q8_0');
    assert.match(await page.textContent('[data-testid="kv-model-report"]'), /- cache: q8_0, /);
    assertNoErrors(page);
    await page.close();
  });

// KV-cache eviction as a job: each point of the plot is `attnlab model evict --json`'s loss.
test('model source: the eviction panel plots each policy\'s loss against the budget as the command measures it',
  { skip: SKIP }, async () => {
    const page = await browser.newPage({ height: 1600 });
    await page.waitForSelector('[data-testid="model"]:not([hidden])');
    await page.fill('[data-testid="model-input"]', IDS.join(' '));
    await page.click('[data-testid="model-run"]');
    await ranOn(page, IDS);
    await page.waitForSelector('[data-testid="evict"]:not([hidden])');
    await page.fill('[data-testid="evict-budgets"]', '3 x');
    await page.click('[data-testid="evict-run"]');
    await page.waitForFunction(() => window.attnlab.state.evict.error);
    assert.match(await page.textContent('[data-testid="evict-status"]'), /"x" is not a budget/);
    await page.fill('[data-testid="evict-budgets"]', '3, 5');
    await page.uncheck('[data-testid="evict-policies"] input[value="random"]');
    await page.selectOption('[data-testid="evict-cache"]', 'q8_0');
    await page.click('[data-testid="evict-run"]');
    await page.waitForSelector('[data-testid="evict-point"]');
    const points = await page.$$eval('[data-testid="evict-point"]',
      (dots) => dots.map((d) => ({ policy: d.dataset.policy, budget: Number(d.dataset.budget), loss: Number(d.dataset.value) })));
    const { execFileSync } = require('node:child_process');
    const want = JSON.parse(execFileSync(process.env.ATTNLAB_BIN, ['model', 'evict', FIXTURE, '--ids', IDS.join(','),
      '--budget', '3,5', '--policy', 'full,window,sinks,h2o,effect', '--cache', 'q8_0', '--json'], { encoding: 'utf8' }));
    const expected = want.results.filter((r) => r.policy !== 'full').map((r) => ({ policy: r.policy, budget: r.budget, loss: r.loss }));
    assert.deepEqual(points, expected);
    assert.equal(Number(await page.getAttribute('[data-testid="evict-full"]', 'data-value')), want.full.loss);
    assert.equal(await page.$$eval('[data-testid="evict-row"]', (rows) => rows.length), want.results.length);
    await screenshot(page, 'model-evict');
    assertNoErrors(page);
    await page.close();
  });

// Every head across texts (docs/survey.md): a survey as a job, each head's means as `attnlab
// model survey --json` gives them for the same documents, and the head finder's page made for it.
test('model source: the survey panel gives every head\'s means as the command does, and its head finder',
  { skip: SKIP }, async () => {
    const page = await browser.newPage({ height: 1600 });
    await page.waitForSelector('[data-testid="survey"]:not([hidden])');
    const docs = [[3, 17, 5, 9, 3, 17, 5, 9, 22], [1, 2, 3, 1, 2, 3, 4], [30, 31, 32, 33, 30, 31]];
    await page.fill('[data-testid="survey-texts"]', 'not ids');
    await page.click('[data-testid="survey-run"]');
    await page.waitForFunction(() => window.attnlab.state.survey.error);
    assert.match(await page.textContent('[data-testid="survey-status"]'), /^line 1: /);
    await page.fill('[data-testid="survey-texts"]', docs.map((d) => d.join(' ')).join('\n'));
    await page.click('[data-testid="survey-run"]');
    await page.waitForSelector('[data-testid="survey-row"]');
    const rows = await page.$$eval('[data-testid="survey-row"]', (trs) => trs.map((tr) => ({
      head: tr.dataset.head, values: Array.from(tr.querySelectorAll('td[data-value]')).map((td) => Number(td.dataset.value)) })));
    const fs = require('node:fs'), os = require('node:os');
    const corpus = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'attnlab-survey-')), 'corpus.jsonl');
    fs.writeFileSync(corpus, docs.map((ids) => JSON.stringify({ ids })).join('\n') + '\n');
    const { execFileSync } = require('node:child_process');
    const want = JSON.parse(execFileSync(process.env.ATTNLAB_BIN, ['model', 'survey', FIXTURE, corpus, '--json'], { encoding: 'utf8' }));
    assert.deepEqual(rows, want.heads.map((h) => ({ head: h.head,
      values: [h.previous_token, h.self, h.sink, h.induction, h.entropy, h.distance_mean] })));
    await page.waitForSelector('[data-testid="survey-finder"]:not([hidden])');
    const finder = await page.evaluate(async () => {
      const link = /** @type {HTMLAnchorElement} */ (document.querySelector('[data-testid="survey-finder"]'));
      return { href: link.href, page: await (await fetch(link.href)).text() };
    });
    assert.match(finder.href, /^blob:/);
    assert.ok(!finder.page.includes('/*SURVEY*/null'), 'the survey is inside the page');
    const inside = JSON.parse(/<script id="survey-data" type="application\/json">([^]*?)<\/script>/.exec(finder.page)[1]);
    assert.deepEqual(inside.heads.map((h) => h.previous_token), want.heads.map((h) => h.previous_token));
    // the finder in the panel: a head's strongest example opened in the lab's views, its query's
    // row there holding the example's heaviest keys with their weights
    await page.waitForSelector('[data-testid="survey-finder-frame"]:not([hidden])');
    const frame = page.frameLocator('[data-testid="survey-finder-frame"]');
    const head = want.heads.find((h) => h.examples.top.length > 0);
    const strongest = head.examples.top[0];
    await frame.locator(`[data-testid="finder-head-${head.head}"]`).click();
    await frame.locator('[data-testid="finder-open"]').first().click();
    await page.waitForFunction((name) => window.attnlab.state.trace && window.attnlab.state.trace.scenario === name, `head ${head.head}`);
    const opened = await page.evaluate(() => ({ query: window.attnlab.state.query, tokens: window.attnlab.state.trace.tokens.length,
      row: window.attnlab.state.trace.heads[0].weights[window.attnlab.state.query] }));
    const start = strongest.window * want.max_tokens;
    assert.equal(opened.query, strongest.position - start);
    assert.equal(opened.tokens, Math.min(want.max_tokens, docs[strongest.document].length - start));
    for (const k of strongest.keys) assert.ok(Math.abs(opened.row[k.position - start] - k.weight) < 1e-3, `key ${k.position}`);
    await page.locator('[data-testid="survey-finder-frame"]').scrollIntoViewIfNeeded();
    await screenshot(page, 'model-survey-finder');
    assertNoErrors(page);
    await page.close();
  });

// Why this prediction: the quick read-outs and both jobs, each cell the server's number.
test('attribution panel: DLA, the lens and the mixing as /api/model/attribute gives them; the verdict and patching as jobs',
  { skip: SKIP }, async () => {
    const page = await browser.newPage({ height: 1400 });
    await page.waitForSelector('[data-testid="attribution"]:not([hidden])');
    // before a run, the panel says what it needs
    await page.fill('[data-testid="model-input"]', IDS.join(' '));
    await page.click('[data-testid="model-run"]');
    await ranOn(page, IDS);

    await page.click('[data-testid="attr-run"]');
    await page.waitForSelector('[data-testid="attr-dla"] td[data-head-ref]');
    const quick = await postApi(browser.url, '/api/model/attribute', { ids: IDS });
    const dla = await page.$$eval('[data-testid="attr-dla"] td[data-head-ref]',
      (cells) => cells.map((c) => ({ ref: c.dataset.headRef, value: Number(c.dataset.value) })));
    assert.equal(dla.length, 8);
    for (const { ref, value } of dla) {
      const [l, h] = ref.split('.').map(Number);
      assert.equal(value, quick.attribution.heads[l][h], `head ${ref}`);
    }
    const lens = await page.$$eval('[data-testid="attr-lens"] tr', (rows) => rows.slice(1).map((r) =>
      Array.from(r.querySelectorAll('td')).map((c) => Number(c.dataset.top))));
    assert.deepEqual(lens, quick.lens.rows.map((r) => r.cells.map((c) => c.top)));
    const rollout = await page.$$eval('[data-testid="attr-mixing"] tr[data-source]',
      (rows) => rows.map((r) => Number(r.querySelectorAll('td')[4].dataset.value)));
    assert.deepEqual(rollout, quick.mixing.rollout);
    // the three maps, n × n each, beside one another
    const maps = await page.$$eval('[data-testid="attr-quick"] canvas[data-map]', (cs) => cs.map((c) => [c.dataset.map, Number(c.dataset.n)]));
    assert.deepEqual(maps, [['attention', IDS.length], ['rollout', IDS.length], ['alti', IDS.length]]);
    assert.equal(quick.mixing.rollout_map.length, IDS.length);
    assert.deepEqual(quick.mixing.rollout_map[IDS.length - 1], quick.mixing.rollout);

    // the verdict: a job, followed to its end
    await page.click('[data-testid="attr-verdict"]');
    await page.waitForSelector('[data-testid="attr-agreements"] tr[data-measure]');
    const verdict = (await (await fetch(`${browser.url}/api/model/analysis`)).json()).result;
    const erasure = await page.$$eval('[data-testid="attr-verdict-tokens"] tr[data-source]',
      (rows) => rows.map((r) => { const cells = r.querySelectorAll('td'); return Number(cells[cells.length - 1].dataset.value); }));
    assert.deepEqual(erasure, verdict.tokens_intervened.erasure);
    assert.equal(await page.$$eval('[data-testid="attr-agreements"] tr[data-measure]', (r) => r.length), verdict.agreements.length);
    assert.match(await page.textContent('[data-testid="attr-meanings"]'), /attention.*a similarity of query and key/s);

    // patching: a corrupted text of the same length; the changed token entering block 0 restores 100%
    const corrupt = IDS.slice();
    corrupt[2] = 11;
    await page.fill('[data-testid="attr-corrupt"]', corrupt.join(' '));
    await page.click('[data-testid="attr-patch"]');
    await page.waitForSelector('[data-testid="attr-patch-heads"] td');
    const first = await page.$$eval('[data-testid="attr-patch-stream"] tr', (rows) =>
      Array.from(rows[1].querySelectorAll('td')).map((c) => c.textContent));
    assert.equal(first[2], '100%');
    assert.equal(first[0], '0%');
    // a bad corrupted text is refused in the page
    await page.fill('[data-testid="attr-corrupt"]', '3 99');
    await page.click('[data-testid="attr-patch"]');
    assert.match(await page.textContent('[data-testid="attr-status"]'), /the corrupted run: "99" is not a token id/);
    await screenshot(page, 'attribution-tiny-f32');
    assertNoErrors(page);
    await page.close();
  });
