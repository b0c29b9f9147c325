#!/usr/bin/env node
// A DEVELOPMENT AND TEST AID, NOT PART OF ATTNLAB. It stands in for `attnlab serve`
// (docs/api.md) until the real C++ server exists, so the page in web/ and the browser
// tests in this folder can be written and run. The real server replaces it: nothing
// here is shipped, and nothing here is a second implementation of attention. Every
// number comes from the attnlab CLI (`attnlab run SCENARIO --json`); the mock only
// serves files and turns the API's options into CLI flags or scenario edits.
//
// What it has to fake (the real server does these in C++; tests/e2e/README.md lists them):
//   - options.sentence: rewrites tokens/embeddings here in JS, with a simple version of
//     the "deterministic word table" of docs/api.md (FNV-1a 64 of the word seeds
//     splitmix64; uniform = ((next >> 11) + 1) · 2^-53, mapped to [-1, 1], 2 decimals).
//   - options.add_random_heads / options.remove_heads: edits the scenario's heads list
//     (the engine still draws the random heads from their seeds).
//   - each head's "random_seed" in the trace (the CLI's trace has none): taken from the
//     effective scenario's head.
//   - "scenario_json": the effective scenario after the options, built here.
//
// Usage: node tests/e2e/mock-server.js [--port 8080] [--host 127.0.0.1] [--api URL]
//   --api URL forwards /api/* to a running `attnlab serve` and serves web/ from this
//   checkout: the page as it is now against the real API, without a rebuild.
//   env ATTNLAB_BIN (default: build/attnlab of this repo). --port 0 picks a free port.
//   The first line printed is the URL, as `attnlab serve` prints it.
'use strict';

const http = require('node:http');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { execFile } = require('node:child_process');

const ROOT = path.resolve(__dirname, '..', '..');
const WEB = path.join(ROOT, 'web');
const SCENARIOS = path.join(ROOT, 'scenarios');
const BIN = process.env.ATTNLAB_BIN || path.join(ROOT, 'build', 'attnlab');
const DEFAULT_SCENARIO = 'three-tokens';
const MAX_BODY = 1 << 20;

const TYPES = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
};

class HttpError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

function sendJson(res, status, value) {
  const body = JSON.stringify(value);
  res.writeHead(status, { 'Content-Type': 'application/json', 'Cache-Control': 'no-store' });
  res.end(body);
}

function readScenarioFile(name) {
  if (!/^[A-Za-z0-9_-]+$/.test(name)) throw new HttpError(404, `unknown scenario "${name}"`);
  const file = path.join(SCENARIOS, `${name}.json`);
  if (!fs.existsSync(file)) throw new HttpError(404, `unknown scenario "${name}"; GET /api/scenarios lists them`);
  return fs.readFileSync(file, 'utf8');
}

function listScenarios() {
  const names = fs.readdirSync(SCENARIOS).filter((f) => f.endsWith('.json')).map((f) => f.slice(0, -5)).sort();
  const list = names.map((name) => {
    const s = JSON.parse(readScenarioFile(name));
    return { name, description: s.description || '', default: name === DEFAULT_SCENARIO };
  });
  list.sort((a, b) => (b.default - a.default) || a.name.localeCompare(b.name));
  return { scenarios: list };
}

// ---- the deterministic word table (a simple stand-in; see the header) -------------
const MASK64 = (1n << 64n) - 1n;
function fnv1a64(text) {
  let h = 0xcbf29ce484222325n;
  for (const byte of Buffer.from(text, 'utf8')) {
    h ^= BigInt(byte);
    h = (h * 0x100000001b3n) & MASK64;
  }
  return h;
}
function splitmix64(seed) {
  let state = seed & MASK64;
  return () => {
    state = (state + 0x9e3779b97f4a7c15n) & MASK64;
    let z = state;
    z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & MASK64;
    z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & MASK64;
    return z ^ (z >> 31n);
  };
}
function wordEmbedding(word, constants, width) {
  const next = splitmix64(fnv1a64(word));
  const row = [];
  for (let c = 0; c < width; c++) {
    const u = Number((next() >> 11n) + 1n) * 2 ** -53; // (0, 1]
    const x = Math.round((2 * u - 1) * 100) / 100;
    row.push(constants[c] !== undefined ? constants[c] : (Object.is(x, -0) ? 0 : x));
  }
  return row;
}

function applySentence(scenario, sentence) {
  if (typeof sentence !== 'string') throw new HttpError(400, 'options.sentence: expected a string of words separated by spaces');
  const words = sentence.split(/\s+/).filter(Boolean);
  if (words.length === 0) throw new HttpError(400, 'options.sentence: has no words; type at least one word');
  if (words.length > 4096) throw new HttpError(400, `options.sentence: ${words.length} words, at most 4096`);
  const width = scenario.embeddings[0].length;
  const constants = {};
  for (let c = 0; c < width; c++) {
    const v = scenario.embeddings[0][c];
    if (scenario.embeddings.every((row) => row[c] === v)) constants[c] = v;
  }
  const known = new Map();
  scenario.tokens.forEach((t, i) => { if (!known.has(t)) known.set(t, scenario.embeddings[i]); });
  scenario.tokens = words;
  scenario.embeddings = words.map((w) => (known.has(w) ? known.get(w).slice() : wordEmbedding(w, constants, width)));
  const n = words.length;
  if (Array.isArray(scenario.mask_tokens)) scenario.mask_tokens = scenario.mask_tokens.filter((j) => j < (scenario.source ? scenario.source.tokens.length : n));
  if (scenario.query !== undefined && scenario.query >= n) delete scenario.query;
}

// Builds the effective scenario object and the CLI flags for a POST /api/attention body.
function prepare(body) {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw new HttpError(400, 'body: expected a JSON object {"scenario": ..., "options": {...}}');
  let scenario;
  if (typeof body.scenario === 'string') scenario = JSON.parse(readScenarioFile(body.scenario));
  else if (body.scenario && typeof body.scenario === 'object') scenario = JSON.parse(JSON.stringify(body.scenario));
  else throw new HttpError(400, 'scenario: expected a bundled scenario name or a scenario object');
  const options = body.options === undefined ? {} : body.options;
  if (options === null || typeof options !== 'object' || Array.isArray(options)) throw new HttpError(400, 'options: expected an object');
  const known = ['causal', 'temperature', 'window', 'mask_tokens', 'permute', 'sentence', 'add_random_heads', 'remove_heads'];
  for (const key of Object.keys(options)) if (!known.includes(key)) throw new HttpError(400, `options.${key}: unknown option; known: ${known.join(', ')}`);

  const flags = [];
  if (options.sentence !== undefined) applySentence(scenario, options.sentence);
  if (options.remove_heads !== undefined) {
    if (!Array.isArray(options.remove_heads) || !options.remove_heads.every((i) => Number.isInteger(i) && i >= 0 && i < scenario.heads.length))
      throw new HttpError(400, `options.remove_heads: expected head indices 0 to ${scenario.heads.length - 1}`);
    scenario.heads = scenario.heads.filter((_, i) => !options.remove_heads.includes(i));
  }
  if (options.add_random_heads !== undefined) {
    if (!Array.isArray(options.add_random_heads)) throw new HttpError(400, 'options.add_random_heads: expected a list of {"seed": N}');
    for (const [k, h] of options.add_random_heads.entries()) {
      if (!h || !Number.isInteger(h.seed) || h.seed < 0) throw new HttpError(400, `options.add_random_heads[${k}].seed: expected an integer >= 0`);
      const head = { random: h.seed };
      if (h.d_k !== undefined) head.d_k = h.d_k;
      if (h.d_v !== undefined) head.d_v = h.d_v;
      scenario.heads.push(head);
    }
  }
  if (Array.isArray(scenario.heads) && scenario.heads.length === 0) throw new HttpError(400, 'options.remove_heads: removes every head; keep at least one');
  if (options.causal !== undefined) {
    if (typeof options.causal !== 'boolean') throw new HttpError(400, 'options.causal: expected true or false');
    flags.push(options.causal ? '--causal' : '--no-causal');
    scenario.causal = options.causal;
  }
  if (options.temperature !== undefined) {
    if (typeof options.temperature !== 'number' || !(options.temperature > 0) || !Number.isFinite(options.temperature))
      throw new HttpError(400, `options.temperature: expected a number > 0 but got ${JSON.stringify(options.temperature)}`);
    flags.push('--temperature', String(options.temperature));
    scenario.temperature = options.temperature;
  }
  if (options.window !== undefined) {
    if (!Number.isInteger(options.window) || options.window < 0) throw new HttpError(400, 'options.window: expected an integer >= 0 (0 removes the window)');
    flags.push('--window', String(options.window));
    scenario.window = options.window === 0 ? null : options.window;
  }
  if (options.mask_tokens !== undefined) {
    if (!Array.isArray(options.mask_tokens) || !options.mask_tokens.every((j) => Number.isInteger(j) && j >= 0))
      throw new HttpError(400, 'options.mask_tokens: expected a list of key indices');
    for (const j of options.mask_tokens) flags.push('--mask-token', String(j));
    scenario.mask_tokens = [...new Set([...(scenario.mask_tokens || []), ...options.mask_tokens])].sort((a, b) => a - b);
  }
  if (options.permute !== undefined) {
    if (!Array.isArray(options.permute)) throw new HttpError(400, 'options.permute: expected the new order as old indices');
    flags.push('--permute', options.permute.join(','));
  }
  return { scenario, flags };
}

function runEngine(scenario, flags) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'attnlab-mock-'));
  const file = path.join(dir, 'scenario.json');
  fs.writeFileSync(file, JSON.stringify(scenario));
  return new Promise((resolve, reject) => {
    execFile(BIN, ['run', file, '--json', ...flags], { maxBuffer: 512 << 20 }, (err, stdout, stderr) => {
      fs.rmSync(dir, { recursive: true, force: true });
      if (err) {
        const message = String(stderr).trim().replace(/^attnlab: /, '') || String(err.message);
        reject(new HttpError(err.code === 2 ? 400 : 500, message));
        return;
      }
      try { resolve(JSON.parse(stdout)); } catch (e) { reject(new HttpError(500, `engine output is not JSON: ${e.message}`)); }
    });
  });
}

async function attention(body) {
  const { scenario, flags } = prepare(body);
  const trace = await runEngine(scenario, flags);
  if (options_permute(body)) {
    // keep scenario_json in the order the trace shows (self-attention only)
    const order = body.options.permute;
    if (!scenario.source) {
      scenario.tokens = order.map((i) => scenario.tokens[i]);
      scenario.embeddings = order.map((i) => scenario.embeddings[i]);
    }
  }
  trace.heads.forEach((h, k) => {
    if (h.random_seed === undefined) {
      const spec = scenario.heads[k];
      h.random_seed = spec && spec.random !== undefined ? spec.random : null;
    }
  });
  trace.scenario_json = scenario;
  return trace;
}
function options_permute(body) {
  return body && body.options && Array.isArray(body.options.permute);
}

function serveStatic(req, res, urlPath) {
  let rel = decodeURIComponent(urlPath);
  if (rel === '/' || rel === '') rel = '/index.html';
  const file = path.normalize(path.join(WEB, rel));
  if (!file.startsWith(WEB + path.sep) || !fs.existsSync(file) || !fs.statSync(file).isFile())
    throw new HttpError(404, `no such file: ${urlPath}`);
  res.writeHead(200, { 'Content-Type': TYPES[path.extname(file)] || 'application/octet-stream', 'Cache-Control': 'no-store' });
  res.end(req.method === 'HEAD' ? undefined : fs.readFileSync(file));
}

function readBody(req) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    let size = 0;
    req.on('data', (c) => {
      size += c.length;
      if (size > MAX_BODY) { reject(new HttpError(413, 'body: over 1 MiB')); req.destroy(); return; }
      chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

// --api URL: forward /api/* to a real `attnlab serve` and serve only web/ from this
// checkout (to try the page as it is now against the real API without rebuilding).
async function proxy(req, res, target) {
  const body = req.method === 'POST' ? await readBody(req) : undefined;
  const upstream = await fetch(target + req.url, { method: req.method, headers: { 'Content-Type': 'application/json' }, body });
  res.writeHead(upstream.status, { 'Content-Type': upstream.headers.get('content-type') || 'application/json', 'Cache-Control': 'no-store' });
  res.end(Buffer.from(await upstream.arrayBuffer()));
}

async function handle(req, res, apiTarget) {
  const url = new URL(req.url, 'http://localhost');
  const p = url.pathname;
  if (apiTarget && p.startsWith('/api/')) return proxy(req, res, apiTarget);
  if (p === '/api/health' && req.method === 'GET') return sendJson(res, 200, { ok: true, version: '0.1.0', mock: true });
  if (p === '/api/scenarios' && req.method === 'GET') return sendJson(res, 200, listScenarios());
  if (p.startsWith('/api/scenarios/') && req.method === 'GET') {
    const text = readScenarioFile(decodeURIComponent(p.slice('/api/scenarios/'.length)));
    res.writeHead(200, { 'Content-Type': 'application/json', 'Cache-Control': 'no-store' });
    return res.end(text);
  }
  if (p === '/api/attention' && req.method === 'POST') {
    const text = await readBody(req);
    let body;
    try { body = JSON.parse(text); } catch (e) { throw new HttpError(400, `body: not JSON (${e.message})`); }
    return sendJson(res, 200, await attention(body));
  }
  if (p.startsWith('/api/')) throw new HttpError(404, `unknown API path ${req.method} ${p}`);
  if (req.method !== 'GET' && req.method !== 'HEAD') throw new HttpError(404, `unknown path ${req.method} ${p}`);
  return serveStatic(req, res, p);
}

function createServer(apiTarget) {
  return http.createServer((req, res) => {
    handle(req, res, apiTarget).catch((err) => {
      const status = err instanceof HttpError ? err.status : 500;
      if (!res.headersSent) sendJson(res, status, { error: err.message });
      else res.end();
    });
  });
}

// Starts the mock; resolves to {server, url}. Used by the tests when ATTNLAB_URL is unset.
function start({ host = '127.0.0.1', port = 0, api = null } = {}) {
  return new Promise((resolve, reject) => {
    const server = createServer(api ? api.replace(/\/+$/, '') : null);
    server.on('error', reject);
    server.listen(port, host, () => resolve({ server, url: `http://${host}:${server.address().port}` }));
  });
}

module.exports = { start };

if (require.main === module) {
  const args = process.argv.slice(2);
  const get = (name, fallback) => { const i = args.indexOf(name); return i >= 0 ? args[i + 1] : fallback; };
  const api = get('--api', null);
  start({ host: get('--host', '127.0.0.1'), port: Number(get('--port', '8080')), api }).then(({ url }) => {
    console.log(url);
    console.log(api ? `(serving web/ from this checkout; /api/ forwarded to ${api})` : `(mock server for development and tests; engine: ${BIN})`);
  });
}
