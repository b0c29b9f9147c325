// The page's WebAssembly engine (web/engine.js loading attnlab.wasm from the server) in
// node, without a browser: from a trace's input document, with another temperature or
// causal mask, it must give the trace the server gives for those options: the same fields,
// masked cells (null) in the same places, every number within 1e-12 (relative above 1).
// It is the same C++; what differs is the C library under it: glibc's exp (its FMA variant
// on this CPU) and WASI libc's round a few results differently in the last bit. A refused
// document names the field and leaves the engine working.
//
//   ATTNLAB_URL=http://127.0.0.1:8080 node --test tests/e2e/engine.test.js
// (without ATTNLAB_URL it starts build/attnlab serve itself, as the browser tests do)
'use strict';

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { pathToFileURL } = require('node:url');
const { serverUrl, postAttention } = require('./helpers.js');

/** web/engine.js, an ES module (web/package.json says so to node), imported in before(). */
let engine = null;
let URL_ = '';
let server = null;

const post = (body) => postAttention(URL_, body);

// The reply without what only the server adds.
function traceFields(reply) {
  const t = structuredClone(reply);
  for (const key of ['scenario_json', 'intervention', 'attention_input']) delete t[key];
  for (const h of t.heads) delete h.random_seed;
  return t;
}

const TOL = 1e-12;

// Walks both; fails at the first difference; counts the numbers and the bit-equal ones.
function assertSame(actual, expected, where = '', count = { numbers: 0, equal: 0 }) {
  if (typeof expected === 'number') {
    assert.equal(typeof actual, 'number', `${where}: engine ${actual} vs server ${expected}`);
    assert.ok(Math.abs(actual - expected) <= TOL * Math.max(1, Math.abs(expected)), `${where}: engine ${actual} vs server ${expected}`);
    count.numbers++;
    if (actual === expected) count.equal++;
  } else if (expected === null || typeof expected !== 'object') {
    assert.equal(actual, expected, where);
  } else {
    assert.equal(typeof actual, 'object', where);
    const keys = Object.keys(expected);
    assert.deepEqual(Object.keys(actual).sort(), keys.slice().sort(), `${where}: fields`);
    for (const k of keys) assertSame(actual[k], expected[k], `${where}/${k}`, count);
  }
  return count;
}

after(async () => { if (server) await server.stop(); });

before(async () => {
  engine = await import(pathToFileURL(path.join(__dirname, '../../web/engine.js')).href);
  server = await serverUrl();
  URL_ = server.url;
  const health = await (await fetch(URL_ + '/api/health')).json();
  assert.equal(health.page_engine, true, 'the server has no attnlab.wasm: install clang-14 and the WASI libraries (scripts/setup.sh) and rebuild');
  const bytes = await (await fetch(URL_ + '/attnlab.wasm')).arrayBuffer();
  assert.equal(await engine.load(bytes), true);
});

test('the engine recomputes the server\'s trace at other temperatures and masks', async (t) => {
  const cases = [
    ['three-tokens', {}, { temperature: 0.1 }],
    ['multi-head', {}, { temperature: 2.7, causal: true }],
    ['previous-token', { sentence: 'a cat sat on the warm mat today' }, { causal: true }],
    ['random-head', { add_random_heads: [{ seed: 11 }], window: 3 }, { temperature: 0.45 }],
    ['cross-attention', {}, { temperature: 1.9 }],
  ];
  const count = { numbers: 0, equal: 0 };
  for (const [scenario, setup, change] of cases) {
    const first = await post({ scenario, options: setup, attention_input: true });
    const doc = { ...first.attention_input, ...change };
    const expected = traceFields(await post({ scenario, options: { ...setup, ...change } }));
    assertSame(engine.attend(doc), expected, `${scenario} ${JSON.stringify(change)}`, count);
  }
  assert.ok(count.numbers > 1000, `compared ${count.numbers} numbers`);
  t.diagnostic(`${count.equal} of ${count.numbers} numbers bit-equal to the server's, the rest within ${TOL}`);
});

test('detail_heads gives the lean trace the API gives', async () => {
  const setup = { add_random_heads: [{ seed: 3 }, { seed: 4 }] };
  const first = await post({ scenario: 'multi-head', options: setup, attention_input: true });
  const lean = engine.attend({ ...first.attention_input, temperature: 0.6, detail_heads: [2] });
  const expected = traceFields(await post({ scenario: 'multi-head', options: { ...setup, temperature: 0.6 }, detail: 'weights', detail_heads: [2] }));
  assertSame(lean, expected);
  assert.equal(lean.heads[0].scores, undefined);
  assert.ok(Array.isArray(lean.heads[2].scores));
});

test('a refused document names the field, and the engine works again afterwards', async () => {
  const doc = (await post({ scenario: 'three-tokens', attention_input: true })).attention_input;
  assert.throws(() => engine.attend({ ...doc, temperature: -1 }), /temperature: -1 is not a number > 0/);
  assert.throws(() => engine.attend({ ...doc, mask_tokens: [9] }), /mask_tokens: key 9 does not exist/);
  assert.equal(engine.ready(), true);
  for (let k = 0; k < 2000; k++) assert.throws(() => engine.attend({ ...doc, temperature: 0 })); // no stack lost
  const t = engine.attend(doc);
  assert.equal(t.heads[0].weights[2].length, 3);
});
