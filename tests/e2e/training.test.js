// Browser test of the Training panel (docs/training.md, "In the lab"): the page against a
// server of its own started with `--model RUN --runs DIR`, where RUN is a small training run
// made here with `attnlab train` (2 layers × 2 heads, 40 steps, logged every 10,
// checkpoints at 0, 20, 40).
//
//   - the loss curves and the per-head score lines are drawn with a point per log entry,
//     holding train.json's values;
//   - the step slider walks the checkpoints, and the heatmap of a head is that checkpoint's
//     (equal to POST /api/model/run with "step"), different at step 0 and at step 40;
//   - a run started from the page: its log grows on the page as the server writes it, Cancel
//     stops it with its last step kept as a checkpoint, it opens in the Model panel; a short
//     run is followed to its end.
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
const { assertNoErrors, BIN, openBrowser, settled, screenshot, heatmapCells, postApi } = require('./helpers.js');

const SKIP = process.env.ATTNLAB_BIN ? false : 'ATTNLAB_BIN is not set: this test trains a model with `attnlab train` and starts `attnlab serve --model` itself';
let browser;
let tmp;
let run;   // the training run made with `attnlab train`
let runs;  // the server's --runs

before(async () => {
  if (SKIP) return;
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'attnlab-e2e-training-'));
  run = path.join(tmp, 'small-run');
  runs = path.join(tmp, 'runs');
  execFileSync(BIN, ['train', '--out', run, '--steps', '40', '--prev-token-steps', '15', '--log-every', '10', '--checkpoint-every', '20',
    '--layers', '2', '--heads', '2', '--d-model', '16', '--context', '16', '--vocab', '12'], { stdio: 'ignore' });
  browser = await openBrowser({ serveArgs: ['--model', run, '--runs', runs] });
});
after(async () => {
  if (browser) await browser.close();
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
});

/** A run's train.json. @param {string} dir */
const trainJson = (dir) => JSON.parse(fs.readFileSync(path.join(dir, 'train.json'), 'utf8'));

// Every line of the charts: its test id, point count, steps and values, and the points drawn.
const chartLines = (page) => page.$$eval('polyline[data-testid^="training-"]', (els) => els.map((e) => ({
  id: e.dataset.testid,
  count: Number(e.dataset.points),
  steps: e.dataset.steps.split(' ').filter(Boolean).map(Number),
  values: e.dataset.values.split(' ').filter(Boolean).map(Number),
  drawn: e.getAttribute('points').split(' ').filter(Boolean).length,
})));

// The lines the charts must have for `log`: the four losses and, per head, its
// previous-token and induction scores, each with a point per log entry.
function expectLinesOf(lines, log) {
  const byId = new Map(lines.map((l) => [l.id, l]));
  const steps = log.map((e) => e.step);
  const want = [
    ...['loss', 'loss_held_out', 'loss_first_half', 'loss_second_half'].map((k) => [`training-line-${k}`, log.map((e) => e[k])]),
    ...log[log.length - 1].heads.flatMap((h) => ['previous_token', 'induction'].map((k) => [
      `training-score-${k}-${h.layer}.${h.head}`,
      log.map((e) => e.heads.find((x) => x.layer === h.layer && x.head === h.head)[k])])),
  ];
  assert.equal(lines.length, want.length, `lines drawn: ${lines.map((l) => l.id).join(', ')}`);
  for (const [id, values] of want) {
    const l = byId.get(id);
    assert.ok(l, `no line ${id}`);
    assert.equal(l.count, log.length, `${id}: points`);
    assert.equal(l.drawn, log.length, `${id}: points drawn`);
    assert.deepEqual(l.steps, steps, `${id}: steps`);
    assert.deepEqual(l.values, values, `${id}: values`);
  }
}

// Sets the step slider to position k, as a user dragging it does.
const slide = (page, k) => page.$eval('[data-testid="training-step"]', (el, v) => {
  el.value = String(v);
  el.dispatchEvent(new Event('input', { bubbles: true }));
}, k);

test('a training run: the loss and per-head score curves from train.json, the step slider walks the checkpoints into the heatmap',
  { skip: SKIP }, async () => {
    const page = await browser.newPage({ height: 1600 });
    const doc = trainJson(run);
    await page.waitForSelector('[data-testid="training-run"]:not([hidden])');
    await page.waitForFunction(() => window.attnlab.state.model.run !== null);
    await settled(page);
    assert.match(await page.textContent('[data-testid="training-summary"]'), /^small-run: done · step 40 of 40 · in-context loss \d\.\d{3}/);
    // 5 log entries (steps 0 to 40): each line has 5 points holding train.json's numbers
    assert.equal(doc.log.length, 5);
    expectLinesOf(await chartLines(page), doc.log);
    assert.equal(await page.$$eval('[data-testid^="training-legend-induction-"]', (els) => els.length), 4);
    // each chart marks where the second phase begins (step 15: the later layers learn from there)
    const phase = await page.$$eval('[data-testid="training-charts"] .phase-marker', (els) => els.map((e) => ({
      step: Number(e.getAttribute('data-step')), x: Number(e.getAttribute('x1')) })));
    assert.deepEqual(phase.map((p) => p.step), [15, 15, 15]);
    const at10 = await page.$eval('[data-testid="training-line-loss"]', (e) => e.getAttribute('points').split(' ')[1].split(',')[0]);
    const at20 = await page.$eval('[data-testid="training-line-loss"]', (e) => e.getAttribute('points').split(' ')[2].split(',')[0]);
    assert.ok(Math.abs(phase[0].x - (Number(at10) + Number(at20)) / 2) < 0.5, 'halfway between steps 10 and 20');

    // the slider: three checkpoints, at the final model
    const slider = '[data-testid="training-step"]';
    assert.equal(await page.getAttribute(slider, 'max'), '2');
    assert.equal(await page.inputValue(slider), '2');
    assert.equal(await page.textContent('[data-testid="training-step-value"]'), 'step 40 (the final model)');
    assert.equal(await page.$eval('.step-marker', (el) => el.dataset.step), '40');

    // head 1.0 of the final model into the heatmap
    const ids = await page.evaluate(() => window.attnlab.state.model.run.ids);
    await page.click('[data-testid="model-thumb-1.0"]');
    await page.waitForFunction(() => window.attnlab.state.trace && window.attnlab.state.trace.scenario === 'head 1.0');
    const final = await heatmapCells(page);
    const finalRun = await postApi(browser.url, '/api/model/run', { ids });
    for (const c of final) assert.ok(Math.abs(c.weight - finalRun.weights[1][0][c.row][c.col]) <= 5e-5 + 1e-9, `final, cell ${c.row},${c.col}`);

    // step 0: the Model panel, its grid and the heatmap are the checkpoint's
    await slide(page, 0);
    await page.waitForFunction(() => {
      const s = window.attnlab.state;
      return s.modelHead && s.modelHead.step === 0 && s.trace && s.trace.scenario === 'head 1.0' &&
        s.model.runKey && JSON.parse(s.model.runKey).step === 0;
    });
    await settled(page);
    assert.equal(await page.textContent('[data-testid="training-step-value"]'), 'step 0');
    assert.equal(await page.$eval('.step-marker', (el) => el.dataset.step), '0');
    assert.match(await page.textContent('[data-testid="model-shape"]'), /^small-run at step 0: gpt2: 2 layers × 2 heads/);
    const atZero = await postApi(browser.url, '/api/model/run', { ids, step: 0 });
    const cells = await heatmapCells(page);
    assert.equal(cells.length, ids.length * ids.length);
    let moved = 0;
    for (const c of cells) {
      assert.ok(Math.abs(c.weight - atZero.weights[1][0][c.row][c.col]) <= 5e-5 + 1e-9, `step 0, cell ${c.row},${c.col}: ${c.weight}`);
      moved = Math.max(moved, Math.abs(c.weight - finalRun.weights[1][0][c.row][c.col]));
    }
    assert.ok(moved > 1e-3, `the heatmap did not change between step 40 and step 0 (largest change ${moved})`);
    // the thumbnails' scores are the checkpoint's too
    const scores = await page.$$eval('[data-testid="model-head"]', (els) => els.map((e) => Number(e.dataset.previousToken)));
    assert.deepEqual(scores, atZero.heads.map((h) => h.previous_token));

    // step 20, then back to the end
    await slide(page, 1);
    await page.waitForFunction(() => window.attnlab.state.modelHead && window.attnlab.state.modelHead.step === 20);
    await settled(page);
    assert.equal(await page.textContent('[data-testid="training-step-value"]'), 'step 20');
    await screenshot(page, 'training-run');
    assertNoErrors(page);
    await page.close();
  });

test('a run started from the page: its log grows, Cancel keeps its last step, it opens in the Model panel; a short run to its end',
  { skip: SKIP }, async () => {
    const page = await browser.newPage({ height: 1600 });
    await page.click('[data-testid="training-new"] summary');
    // a long run (3000 steps), to be cancelled
    const long = { layers: 2, heads: 2, 'd-model': 64, context: 64, vocab: 28, steps: 3000, batch: 16, 'log-every': 10, 'checkpoint-every': 1000 };
    for (const [k, v] of Object.entries(long)) await page.fill(`[data-testid="training-${k}"]`, String(v));
    await page.click('[data-testid="training-start"]');
    await page.waitForFunction(() => { const v = window.attnlab.state.training.view; return v && v.run === 'run-1'; });
    assert.equal(await page.isDisabled('[data-testid="training-start"]'), true, 'one run at a time: Start is off while it trains');
    // the log grows on the page: the curves follow it point for point
    const seen = [];
    for (const want of [2, 4]) {
      await page.waitForFunction((n) => window.attnlab.state.training.view.log.length >= n, want);
      seen.push(await page.evaluate(() => ({
        entries: window.attnlab.state.training.view.log.length,
        state: window.attnlab.state.training.view.state,
        points: Number(document.querySelector('[data-testid="training-line-loss_second_half"]').dataset.points),
        heads: document.querySelectorAll('[data-testid^="training-score-induction-"]').length,
      })));
    }
    for (const s of seen) {
      assert.equal(s.points, s.entries);
      assert.equal(s.heads, 4);
    }
    assert.ok(seen[1].entries > seen[0].entries, `the log did not grow: ${JSON.stringify(seen)}`);
    assert.equal(seen[0].state, 'running');

    await page.click('[data-testid="training-cancel"]');
    await page.waitForFunction(() => window.attnlab.state.training.view.state === 'cancelled');
    await settled(page);
    const cancelled = trainJson(path.join(runs, 'run-1'));
    const last = cancelled.log[cancelled.log.length - 1].step;
    assert.ok(last < 3000, `the run was not cancelled (last step ${last})`);
    const view = await page.evaluate(() => window.attnlab.state.training.view);
    assert.equal(view.checkpoints[view.checkpoints.length - 1], last, 'the step it stopped at is a checkpoint');
    assert.equal(view.final, true);
    assert.deepEqual(view.log.map((e) => e.step), cancelled.log.map((e) => e.step));
    expectLinesOf(await chartLines(page), cancelled.log);
    assert.match(await page.textContent('[data-testid="training-summary"]'), new RegExp(`^run-1: cancelled · step ${last} of 3000`));
    assert.equal(await page.isDisabled('[data-testid="training-start"]'), false);

    // open it: the Model panel runs run-1's final model, and the slider walks its checkpoints
    await page.click('[data-testid="training-open"]');
    await page.waitForFunction(() => {
      const m = window.attnlab.state.model;
      return m.info && m.info.run === 'run-1' && m.run && m.runKey && JSON.parse(m.runKey).run === 'run-1';
    });
    await settled(page);
    assert.match(await page.textContent('[data-testid="model-shape"]'), /^run-1: gpt2: 2 layers × 2 heads, d_model 64, .*, 64 positions, vocabulary 28$/);
    assert.equal(await page.getAttribute('[data-testid="training-step"]', 'max'), String(view.checkpoints.length - 1));
    assert.equal(await page.isDisabled('[data-testid="training-step"]'), view.checkpoints.length < 2);
    const ids = await page.evaluate(() => window.attnlab.state.model.run.ids);
    const opened = await postApi(browser.url, '/api/model/run', { ids, run: 'run-1' });
    const heads = await page.$$eval('[data-testid="model-head"]', (els) => els.map((e) => [e.dataset.headRef, Number(e.dataset.induction)]));
    assert.deepEqual(heads, opened.heads.map((h) => [`${h.layer}.${h.head}`, h.induction]));

    // a short Llama-style run (two query heads sharing one KV head), followed to its end;
    // KV heads is a Llama-style setting, off for GPT-2
    assert.equal(await page.isDisabled('[data-testid="training-kv-heads"]'), true, 'GPT-2 has one KV head per query head');
    await page.selectOption('[data-testid="training-arch"]', 'llama');
    assert.equal(await page.isDisabled('[data-testid="training-kv-heads"]'), false);
    const short = { 'kv-heads': 1, 'd-model': 16, context: 16, vocab: 12, steps: 30, batch: 4, 'log-every': 10, 'checkpoint-every': 20 };
    for (const [k, v] of Object.entries(short)) await page.fill(`[data-testid="training-${k}"]`, String(v));
    await page.click('[data-testid="training-start"]');
    await page.waitForFunction(() => { const v = window.attnlab.state.training.view; return v && v.run === 'run-2' && v.state === 'done'; });
    await settled(page);
    const done = trainJson(path.join(runs, 'run-2'));
    assert.deepEqual(done.log.map((e) => e.step), [0, 10, 20, 30]);
    assert.equal(done.settings.d_model, 16);
    assert.equal(done.settings.arch, 'llama');
    assert.equal(done.settings.kv_heads, 1);
    assert.equal(done.settings.heads, 2);
    expectLinesOf(await chartLines(page), done.log);
    assert.deepEqual(await page.evaluate(() => window.attnlab.state.training.view.checkpoints), [0, 20, 30]);
    // a bad setting is the server's refusal, naming it
    await page.fill('[data-testid="training-layers"]', '9');
    await page.click('[data-testid="training-start"]');
    await page.waitForSelector('[data-testid="training-status"][data-state="error"]');
    assert.match(await page.textContent('[data-testid="training-status"]'), /^layers: 9 is not a whole number from 1 to 4/);
    // Chromium logs that one refusal (a 400) as a console error: it is the only one
    const refusals = page.errors.filter((e) => /status of 400/.test(e));
    assert.equal(refusals.length, 1, page.errors.join('\n'));
    page.errors = page.errors.filter((e) => !refusals.includes(e));
    await screenshot(page, 'training-started-here');
    assertNoErrors(page);
    await page.close();
  });
