#!/usr/bin/env node
// Measures how long the page takes to render a 64-token, 8-head trace (not a test: the
// project's tests check correctness, never wall-clock time).
//
//   ATTNLAB_URL=http://127.0.0.1:8080 node tests/e2e/bench-render.js [--screenshots]
//
// It builds a 64-token scenario with 8 random heads, asks the server for its trace
// (POST api/attention with the scenario inline), then in the page times:
//   full      the whole page for a new trace (token strip, all-heads thumbnails, heatmap,
//             weights table, row readouts, maths panel), plus the forced style/layout;
//   query     one ← / → step (heatmap, maths panel, selection marks), plus layout;
//   head      one ↑ / ↓ step, plus layout;
//   request   a temperature change: request, engine, response body received;
//   parse     JSON.parse of that body (the trace carries every intermediate in full);
//   roundtrip all of it plus the render;
// and the same request, parse and round trip for the lean trace the page asks for at this
// size ("detail": "weights", docs/api.md: only the shown head keeps its intermediates).
// Without ATTNLAB_URL it uses the mock server, whose round trip spawns the CLI and so
// says nothing about the real server's speed.
'use strict';

const path = require('node:path');
const { openBrowser, settled, ARTIFACTS } = require('./helpers.js');

function scenario64() {
  let state = 12345;
  const rand = () => { state = (state * 1103515245 + 12345) % 2147483648; return Math.round((state / 2147483648 * 2 - 1) * 100) / 100; };
  const n = 64, d = 16;
  const tokens = Array.from({ length: n }, (_, i) => `w${i}`);
  const embeddings = tokens.map(() => Array.from({ length: d }, rand));
  const heads = Array.from({ length: 8 }, (_, k) => ({ random: k + 1, d_k: 8, d_v: 8 }));
  return { format: 'attnlab-scenario/1', name: 'bench-64x8', tokens, embeddings, positions: 'none', heads, causal: false, temperature: 1 };
}

(async () => {
  const browser = await openBrowser();
  try {
    const page = await browser.newPage();
    const result = await page.evaluate(async (scenario) => {
      const app = window.Attn.app;
      const post = async (options, extra) => {
        const res = await fetch('api/attention', { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ scenario, options, ...extra }) });
        if (!res.ok) throw new Error((await res.json()).error);
        return res.json();
      };
      const flush = () => document.body.offsetHeight; // forces style and layout
      const stats = (xs) => {
        const s = xs.slice().sort((a, b) => a - b);
        return { median: s[Math.floor(s.length / 2)], p95: s[Math.floor(s.length * 0.95)], max: s[s.length - 1], runs: s.length };
      };
      const trace = await post({});
      app.renderAllForBenchmark(trace);
      flush();
      const full = [];
      for (let r = 0; r < 40; r++) {
        const t0 = performance.now();
        app.renderAllForBenchmark(trace);
        flush();
        full.push(performance.now() - t0);
      }
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
      const timeRequests = async (extra) => {
        const roundtrip = [], engine = [], parse = [], render = [];
        let bytes = 0;
        for (let r = 0; r < 10; r++) {
          const t0 = performance.now();
          const res = await fetch('api/attention', { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ scenario, options: { temperature: 0.5 + r / 10 }, ...extra }) });
          const text = await res.text();
          const t1 = performance.now();
          const t = JSON.parse(text);
          const t2 = performance.now();
          app.renderAllForBenchmark(t);
          flush();
          const t3 = performance.now();
          bytes = text.length;
          engine.push(t1 - t0);
          parse.push(t2 - t1);
          render.push(t3 - t2);
          roundtrip.push(t3 - t0);
        }
        return { bytes, request: stats(engine), parse: stats(parse), render: stats(render), roundtrip: stats(roundtrip) };
      };
      const fullRuns = await timeRequests({});
      app.setHead(0);
      const leanRuns = await timeRequests({ detail: 'weights', detail_heads: [0] });
      app.renderAllForBenchmark(trace);
      flush();
      return {
        n: trace.tokens.length, heads: trace.heads.length, bytes: fullRuns.bytes,
        full: stats(full), query: stats(query), head: stats(head), request: fullRuns.request, parse: fullRuns.parse, roundtrip: fullRuns.roundtrip,
        lean: leanRuns,
      };
    }, scenario64());
    const f = (s) => `median ${s.median.toFixed(2)} ms, p95 ${s.p95.toFixed(2)} ms, max ${s.max.toFixed(2)} ms (${s.runs} runs)`;
    console.log(`trace: ${result.n} tokens, ${result.heads} heads, ${(result.bytes / 1024).toFixed(0)} KiB of JSON`);
    console.log(`render, new trace (everything): ${f(result.full)}`);
    console.log(`render, query step (← →):       ${f(result.query)}`);
    console.log(`render, head step (↑ ↓):        ${f(result.head)}`);
    console.log(`request (server + engine):      ${f(result.request)}${process.env.ATTNLAB_URL ? '' : '   [mock server: spawns the CLI]'}`);
    console.log(`JSON.parse of the trace:        ${f(result.parse)}`);
    console.log(`request + parse + render:       ${f(result.roundtrip)}`);
    const lean = result.lean;
    console.log(`lean trace (detail "weights", head 0 in full, as the page asks at this size): ${(lean.bytes / 1024).toFixed(0)} KiB of JSON`);
    console.log(`  request (server + engine):    ${f(lean.request)}`);
    console.log(`  JSON.parse:                   ${f(lean.parse)}`);
    console.log(`  render, new trace:            ${f(lean.render)}`);
    console.log(`  request + parse + render:     ${f(lean.roundtrip)}`);
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
