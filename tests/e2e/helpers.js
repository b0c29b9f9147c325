// Shared set-up for the browser tests: the server's URL, Debian's Chromium through
// playwright-core with a fresh profile, console-error capture, screenshots.
//
// ATTNLAB_URL is the base URL of the server under test (CTest starts `attnlab serve` and
// sets it). When it is unset, the tests start `attnlab serve --port 0` themselves, from
// ATTNLAB_BIN or this checkout's build/attnlab, and stop it afterwards.
'use strict';

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawn } = require('node:child_process');
const assert = require('node:assert/strict');
const { chromium } = require('playwright-core');

const ARTIFACTS = path.join(__dirname, 'artifacts');
// ATTNLAB_E2E_WIDTH runs every page at another width (e.g. 800: the narrow layout); its
// screenshots get a -wNNN suffix.
const WIDTH = Number(process.env.ATTNLAB_E2E_WIDTH) || 1280;
const SUFFIX = process.env.ATTNLAB_E2E_WIDTH ? `-w${WIDTH}` : '';
const CHROMIUM = process.env.ATTNLAB_CHROMIUM || '/usr/bin/chromium';
const CHROMIUM_ARGS = ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync'];

const BIN = process.env.ATTNLAB_BIN || path.join(__dirname, '..', '..', 'build', 'attnlab');

// serveArgs (e.g. ['--model', DIR]): always a server of the test's own, started with them.
async function serverUrl(serveArgs = null) {
  if (process.env.ATTNLAB_URL && !serveArgs) return { url: process.env.ATTNLAB_URL.replace(/\/+$/, ''), stop: async () => {} };
  if (!fs.existsSync(BIN)) throw new Error(`${BIN} not found: build attnlab (scripts/setup.sh) or set ATTNLAB_URL to a running server`);
  const server = spawn(BIN, ['serve', '--port', '0', ...(serveArgs || [])], { stdio: ['ignore', 'pipe', 'inherit'] });
  const url = await new Promise((resolve, reject) => {
    let out = '';
    server.stdout.on('data', (chunk) => {
      out += chunk;
      const line = out.split('\n')[0];
      if (out.includes('\n')) (line.startsWith('http://') ? resolve(line.trim().replace(/\/+$/, '')) : reject(new Error(`attnlab serve said: ${line}`)));
    });
    server.on('exit', (code) => reject(new Error(`attnlab serve exited with ${code}`)));
  });
  console.log(`# ATTNLAB_URL is not set: started ${BIN} serve at ${url}`);
  return { url, stop: () => new Promise((r) => { server.once('exit', r); server.kill('SIGTERM'); }) };
}

// One browser for a test file: {context, url, newPage, close}. serveArgs: as serverUrl's.
async function openBrowser({ serveArgs = null } = {}) {
  if (!fs.existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} not found: install Debian's chromium (apt-get install -y chromium) or set ATTNLAB_CHROMIUM`);
  fs.mkdirSync(ARTIFACTS, { recursive: true });
  const server = await serverUrl(serveArgs);
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'attnlab-e2e-profile-'));
  const downloads = fs.mkdtempSync(path.join(os.tmpdir(), 'attnlab-e2e-downloads-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: CHROMIUM_ARGS,
    viewport: { width: 1280, height: 800 },
    acceptDownloads: true,
    downloadsPath: downloads,
  });
  // Pages get a console-error log; tests assert it stays empty.
  // hash: the URL's fragment (without '#'), e.g. 'text=...' (the model panel's first input).
  async function newPage({ width = WIDTH, height = 800, hash = '' } = {}) {
    const page = await context.newPage();
    await page.setViewportSize({ width, height });
    page.errors = [];
    page.on('console', (msg) => { if (msg.type() === 'error') page.errors.push(`console: ${msg.text()}`); });
    page.on('pageerror', (err) => page.errors.push(`pageerror: ${err.stack || err.message}`));
    page.on('requestfailed', (req) => page.errors.push(`requestfailed: ${req.url()} ${req.failure() && req.failure().errorText}`));
    await page.goto(server.url + '/' + (hash ? `#${hash}` : ''));
    await settled(page);
    return page;
  }
  async function close() {
    await context.close();
    await server.stop();
    fs.rmSync(profile, { recursive: true, force: true });
    fs.rmSync(downloads, { recursive: true, force: true });
  }
  return { context, url: server.url, newPage, close };
}

// Waits until the page has rendered a trace and no request is out.
async function settled(page) {
  await page.waitForFunction(() => document.documentElement.dataset.ready === 'true' &&
    document.documentElement.dataset.pending === '0', null, { timeout: 15000 });
}

async function screenshot(page, name) {
  const file = path.join(ARTIFACTS, `${name}${SUFFIX}.png`);
  await page.screenshot({ path: file, fullPage: true });
  return file;
}

async function postAttention(url, body) {
  const res = await fetch(url + '/api/attention', {
    method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body),
  });
  const data = await res.json();
  if (!res.ok) throw new Error(`POST /api/attention ${res.status}: ${data.error}`);
  return data;
}

// The heatmap's cells as the page exposes them: [{row, col, weight, masked}].
async function heatmapCells(page) {
  await settled(page);
  await page.evaluate(() => window.attnlab.tableNow()); // built on demand off the Table view
  const head = await page.getAttribute('[data-testid="heatmap"]', 'data-head');
  const tableHead = await page.getAttribute('[data-testid="weights-table"]', 'data-head');
  if (head !== tableHead) throw new Error(`the weights table shows head ${tableHead} but the heatmap head ${head}`);
  return page.$$eval('[data-testid="weights-table"] td[data-row]', (tds) => tds.map((td) => ({
    row: Number(td.dataset.row), col: Number(td.dataset.col),
    weight: Number(td.dataset.weight), masked: td.dataset.masked === 'true',
  })));
}

// The maths panel's weights, by key index.
async function mathsWeights(page) {
  return page.$$eval('[data-testid^="math-weight-"]', (els) => els.map((el) => ({
    j: Number(el.dataset.testid.slice('math-weight-'.length)), value: Number(el.dataset.value),
  })));
}

async function selectScenario(page, name) {
  await page.selectOption('[data-testid="scenario-select"]', name);
  await page.waitForFunction((n) => window.attnlab.state.trace && window.attnlab.state.trace.scenario === n, name);
  await settled(page);
}

// POST to the API from the test; integers above 2^53 stay exact as strings of digits
// (the cost and KV counts; node's JSON.parse would round them).
async function postApi(url, pathName, body, { expectStatus = 200 } = {}) {
  const res = await fetch(url + pathName, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
  const text = await res.text();
  const data = JSON.parse(text.replace(/([:[,]\s*)(-?\d{16,})(?=\s*[,\]}])/g, '$1"$2"'));
  if (res.status !== expectStatus) throw new Error(`POST ${pathName} ${res.status}: ${data.error}`);
  return data;
}

// Fails the test when the page logged a console error, an uncaught exception or a failed request.
function assertNoErrors(page) {
  assert.deepEqual(page.errors, [], `the page logged errors:\n${page.errors.join('\n')}`);
}

module.exports = { assertNoErrors, BIN, openBrowser, settled, screenshot, postAttention, postApi, heatmapCells, mathsWeights, selectScenario, ARTIFACTS, WIDTH, serverUrl };
