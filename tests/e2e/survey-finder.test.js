// Browser test of the head finder `attnlab model survey --html` writes (docs/survey.md): the page
// opened from disk (file://, no server), every head a point placed by the two metrics chosen,
// a click showing the head's distances, tokens and examples as the survey's JSON has them.
//
// It needs the attnlab binary (ATTNLAB_BIN, which run-with-server.sh sets): without it the
// test is skipped, saying so.
'use strict';

const { test } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { execFileSync } = require('node:child_process');
const { openBrowser } = require('./helpers.js');

const SKIP = process.env.ATTNLAB_BIN ? false : 'ATTNLAB_BIN is not set: this test runs a survey itself';
const MODEL = path.join(__dirname, '..', 'model', 'fixtures', 'llama-f32');

test('the head finder opens from disk and shows each head the survey measured', { skip: SKIP }, async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'attnlab-finder-'));
  const corpus = path.join(dir, 'corpus.jsonl'), page_file = path.join(dir, 'finder.html');
  fs.writeFileSync(corpus, Array.from({ length: 6 }, (_, d) =>
    JSON.stringify({ ids: Array.from({ length: 30 + 7 * d }, (_, i) => 1 + ((i * (d + 3)) % 17)) })).join('\n') + '\n');
  const survey = JSON.parse(execFileSync(process.env.ATTNLAB_BIN,
    ['model', 'survey', MODEL, corpus, '--max-tokens', '32', '--html', page_file, '--json'], { encoding: 'utf8' }));
  const browser = await openBrowser();
  try {
    const page = await browser.context.newPage();
    const errors = [];
    page.on('pageerror', (e) => errors.push(e.message));
    page.on('requestfailed', (r) => errors.push(`request ${r.url()}`));
    await page.goto('file://' + page_file);
    assert.match(await page.textContent('[data-testid="finder-summary"]'), new RegExp(`^${survey.documents} documents, ${survey.tokens} tokens, 8 heads`));
    // every head a point; across previous-token, up induction by default
    const points = async () => page.$$eval('circle.head', (els) => els.map((e) => ({
      head: e.dataset.head, x: Number(e.getAttribute('cx')), y: Number(e.getAttribute('cy')) })));
    let dots = await points();
    assert.equal(dots.length, survey.heads.length);
    const order = (list, key) => list.slice().sort((a, b) => a[key] - b[key]).map((p) => p.head);
    const by = (metric) => survey.heads.slice().sort((a, b) => a[metric] - b[metric]).map((h) => h.head);
    assert.deepEqual(order(dots, 'x'), by('previous_token'));
    await page.selectOption('[data-testid="finder-x"]', 'sink');
    dots = await points();
    assert.deepEqual(order(dots, 'x'), by('sink'), 'the points move with the metric chosen');
    assert.deepEqual(order(dots, 'y').reverse(), by('induction'), 'higher is up');
    // a click: the head's numbers, its histogram, its tokens and its examples
    const best = survey.heads.reduce((a, b) => (b.induction > a.induction ? b : a));
    await page.click(`[data-testid="finder-head-${best.head}"]`);
    assert.match(await page.textContent('[data-testid="finder-name"]'), new RegExp(`^Head ${best.head.replace('.', '\\.')}`));
    assert.equal(await page.$$eval('[data-testid="finder-histogram"] rect', (r) => r.length), best.histogram.length);
    const examples = best.examples.top.length + best.examples.tenths.flat().length;
    assert.equal(await page.$$eval('[data-testid="finder-example"]', (e) => e.length), examples);
    const outlined = await page.$eval('[data-testid="finder-example"] .tok.query', (e) => e.textContent);
    assert.equal(outlined, best.examples.top[0].token.replace(/ /g, '␣'));
    const keyTokens = await page.$$eval('[data-testid="finder-key-tokens"] tr td:first-child', (t) => t.map((x) => x.textContent));
    assert.deepEqual(keyTokens, best.top_key_tokens.map((t) => t.token.replace(/ /g, '␣')));
    assert.deepEqual(errors, []);
  } finally {
    await browser.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
