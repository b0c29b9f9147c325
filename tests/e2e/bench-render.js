#!/usr/bin/env node
// Measures the lab's speed on a 64-token, 8-head scenario (not a test: the project's tests
// check correctness, never wall-clock time).
//
//   ATTNLAB_URL=http://127.0.0.1:8080 node tests/e2e/bench-render.js [--screenshots]
//
// The page is driven as a user drives it: the multi-head scenario (3 heads), a sentence of
// 64 words, 5 random heads added: 64 tokens × 8 heads. Then, in the page:
//   recompute  what the temperature slider does: the page's WebAssembly engine recomputes
//              the lean trace (POST api/attention when the server has no engine), then the
//              page renders everything (thumbnails, heatmap, readouts, maths panel) and the
//              browser computes style and layout; from the slider's value to a laid-out page
//              (painting is not included);
//   query      one ← / → step (no request: the trace holds every row), plus layout;
//   head       one ↑ / ↓ step, plus layout;
// and, for a change only the server can make (a new sentence, an intervention), the parts of
// a round trip: the request and its reply as packed bytes, the unpacking, the render; with,
// beside them, the same request as JSON (lean, and with every intermediate of every head) to
// show what the packed encoding saves.
// Without ATTNLAB_URL it starts build/attnlab serve itself (tests/e2e/helpers.js).
'use strict';

const path = require('node:path');
const { openBrowser, settled, ARTIFACTS } = require('./helpers.js');

const WORDS = 'the quick brown fox jumps over the lazy dog while the cat sleeps on a warm mat and dreams of fish'.split(' ');
const SENTENCE = Array.from({ length: 64 }, (_, i) => WORDS[i % WORDS.length]).join(' ');

(async () => {
  const browser = await openBrowser();
  try {
    const page = await browser.newPage();
    const result = await page.evaluate(async (sentence) => {
      const app = window.attnlab; // the page's test hook (web/main.js)
      const flush = () => document.body.offsetHeight; // forces style and layout
      const stats = (xs) => {
        const s = xs.slice().sort((a, b) => a - b);
        return { median: s[Math.floor(s.length / 2)], p95: s[Math.floor(s.length * 0.95)], max: s[s.length - 1], runs: s.length };
      };
      await app.loadScenario('multi-head');
      await app.applySentence(sentence);
      for (let seed = 1; app.state.trace.heads.length < 8; seed++) await app.addRandomHead(seed);
      app.setHead(0);
      const shape = { n: app.state.trace.tokens.length, heads: app.state.trace.heads.length };
      const idle = () => new Promise((r) => setTimeout(r, 50)); // lets the panels' own requests finish

      // The browser compiles the WebAssembly engine fully only once it has run a while (V8
      // starts every function on its baseline compiler); the page runs it in idle time after a
      // large trace arrives (web/traces.js, warmEngine). So: a second of reading the page, the first
      // 10 slider steps timed, a drag of 150, then the 40 steps reported.
      const slider = async (runs, out) => {
        for (let r = 0; r < runs; r++) {
          await idle();
          const t0 = performance.now();
          await app.setTemperature(Number((0.5 + (r % 20) / 10).toFixed(2)));
          flush();
          out.push(performance.now() - t0);
        }
      };
      const firstSteps = [], recompute = [];
      await new Promise((r) => setTimeout(r, 1000));
      await slider(10, firstSteps);
      await slider(150, []);
      await slider(40, recompute);
      const query = [];
      for (let r = 0; r < 126; r++) {
        const t0 = performance.now();
        app.setQuery(r < 63 ? 63 - r - 1 : r - 63 + 1);
        flush();
        query.push(performance.now() - t0);
      }
      const head = [];
      for (let r = 0; r < 40; r++) {
        const t0 = performance.now();
        app.setHead((r + 1) % 8);
        flush();
        head.push(performance.now() - t0);
      }
      app.setHead(0);
      await idle();

      // The parts, and the JSON encoding beside the packed one.
      const body = app.requestBody();
      const parts = async (extra, packed) => {
        const request = [], decode = [], render = [];
        let bytes = 0;
        for (let r = 0; r < 15; r++) {
          await idle();
          const t0 = performance.now();
          const res = await fetch('api/attention', { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ ...body, ...extra }) });
          const reply = packed ? await res.arrayBuffer() : await res.text();
          const t1 = performance.now();
          const trace = packed ? app.unpack(reply) : JSON.parse(reply);
          const t2 = performance.now();
          app.showTrace(trace);
          flush();
          const t3 = performance.now();
          bytes = packed ? reply.byteLength : reply.length;
          request.push(t1 - t0);
          decode.push(t2 - t1);
          render.push(t3 - t2);
        }
        return { bytes, request: stats(request), decode: stats(decode), render: stats(render) };
      };
      const packed = await parts({ encoding: 'packed' }, true);
      const leanJson = await parts({}, false);
      const fullJson = await parts({ detail: 'full', detail_heads: undefined }, false);
      const computed = document.documentElement.dataset.computed;
      return { shape, computed, firstSteps: stats(firstSteps), recompute: stats(recompute), query: stats(query), head: stats(head), packed, leanJson, fullJson };
    }, SENTENCE);
    const f = (s) => `median ${s.median.toFixed(2)} ms, p95 ${s.p95.toFixed(2)} ms, max ${s.max.toFixed(2)} ms (${s.runs} runs)`;
    const r = result;
    console.log(`scenario: multi-head with a ${r.shape.n}-word sentence and random heads: ${r.shape.n} tokens, ${r.shape.heads} heads`);
    console.log(`recompute (slider → ${r.computed === 'page' ? "the page's WebAssembly engine" : 'the server'} → render → layout): ${f(r.recompute)}`);
    console.log(`  its first 10 steps, a second after the trace came:  ${f(r.firstSteps)}`);
    console.log(`query step (← →), render + layout:             ${f(r.query)}`);
    console.log(`head step (↑ ↓), render + layout:              ${f(r.head)}`);
    for (const [name, p] of [['packed, lean (what the page asks)', r.packed], ['JSON, lean', r.leanJson], ['JSON, every intermediate', r.fullJson]]) {
      console.log(`${name}: ${(p.bytes / 1024).toFixed(0)} KiB`);
      console.log(`  request + reply received:    ${f(p.request)}`);
      console.log(`  decode (unpack / JSON.parse): ${f(p.decode)}`);
      console.log(`  render + layout:             ${f(p.render)}`);
    }
    if (process.argv.includes('--screenshots')) {
      await page.screenshot({ path: path.join(ARTIFACTS, 'bench-64x8-1280.png'), fullPage: true });
      await page.click('#tab-arcs');
      await page.screenshot({ path: path.join(ARTIFACTS, 'bench-64x8-arcs.png'), fullPage: false });
      await page.setViewportSize({ width: 800, height: 800 });
      await page.click('#tab-heatmap');
      await page.waitForTimeout(100);
      await page.screenshot({ path: path.join(ARTIFACTS, 'bench-64x8-800.png'), fullPage: true });
    }
    if (page.errors.length) { console.error(page.errors.join('\n')); process.exitCode = 1; }
    await settled(page);
  } finally {
    await browser.close();
  }
})().catch((e) => { console.error(e); process.exit(1); });
