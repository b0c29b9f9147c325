// The page's number formatting (web/format.js) against the CLI's, in node (no browser, no
// server): for the same doubles, the page must write the same strings as
// src/report/explain.cpp (format_number, factor, format_vector, "{:.Nf}") and
// src/analysis/capacity/units.cpp (format_count, format_bytes).
//
// The doubles come from the attnlab binary itself: `attnlab run NAME --json` gives every
// intermediate of a trace at full precision, and `attnlab explain NAME` prints them; the
// test rebuilds the printed lines from the JSON with format.js and looks for them in the
// printout. The counts come from `attnlab cost` and `attnlab kv`: each printed count is
// read back as an exact integer and written again with formatCount / formatBytes.
// A scenario file written here holds exact ties (0.125, 2.5, ...) and -0.001, where
// rounding half to even and "never -0.00" show.
//
// What is meant to differ: a masked logit is -∞; the CLI prints "-inf", the JSON says null
// and the page writes formatNumber(null) = "−∞" (U+2212). The test checks that the CLI's
// "-inf" is formatNumber(-Infinity), and the page's null on its own.
//
//   ATTNLAB_BIN=build/attnlab node --test tests/e2e/format.test.js
// (tests/e2e/run-with-server.sh sets ATTNLAB_BIN; without the binary the comparisons are
// skipped and say so, and only the checks of format.js alone run)
'use strict';

const { test, before } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { execFileSync } = require('node:child_process');
const { pathToFileURL } = require('node:url');

const BIN = process.env.ATTNLAB_BIN || path.join(__dirname, '..', '..', 'build', 'attnlab');
const HAVE_BIN = fs.existsSync(BIN);
const NO_BIN = `${BIN} not found (set ATTNLAB_BIN): the comparison with the CLI was skipped`;

/** web/format.js, an ES module (web/package.json). */
let F = null;
before(async () => {
  F = await import(pathToFileURL(path.join(__dirname, '..', '..', 'web', 'format.js')).href);
});

const cli = (...args) => execFileSync(BIN, args, { encoding: 'utf8', maxBuffer: 64 << 20, stdio: ['ignore', 'pipe', 'pipe'] });
const traceOf = (...args) => JSON.parse(cli('run', ...args, '--json'));

// The cells of an explain grid ("2. Score ...") by row: {i: [text, ...]} (the CLI shows at
// most 24 rows and 12 columns).
function grid(out, title) {
  const lines = out.split('\n');
  const start = lines.findIndex((l) => l.startsWith(title));
  assert.ok(start >= 0, `explain prints "${title}"`);
  const rows = new Map();
  for (let k = start + 2; k < lines.length && lines[k].trim() !== ''; k++) {
    const cols = lines[k].trim().split(/\s{2,}/);
    const m = /^query (\d+) /.exec(cols[0]);
    if (m) rows.set(Number(m[1]), cols.slice(1));
  }
  return rows;
}

// The rows under a heading up to the next blank line: [label, text] split on 2+ spaces.
function block(out, heading) {
  const lines = out.split('\n');
  const start = lines.findIndex((l) => l.startsWith(heading));
  assert.ok(start >= 0, `explain prints "${heading}"`);
  const rows = [];
  for (let k = start + 1; k < lines.length && lines[k].trim() !== ''; k++) rows.push(lines[k].trim().split(/\s{2,}/));
  return rows;
}

// The lines of the "worked in full" block that explain.cpp (work_query) writes from these
// doubles, rebuilt with format.js.
function workedLines(h, i, T, p) {
  const { formatNumber: n, formatFactor, formatVector, formatFixed } = F;
  const m = h.keys.length;
  const lines = [];
  for (let j = 0; j < m && j < 16; j++) {
    const products = h.queries[i].map((q, t) => `${formatFactor(q, p)}×${formatFactor(h.keys[j][t], p)}`);
    if (products.length <= 16) lines.push(`q·k_${j} = ${products.join(' + ')} = ${n(h.scores[i][j], p)}`);
  }
  if (m > 16) return lines; // the CLI cuts longer rows short
  const sqrt = Math.sqrt(h.d_k);
  lines.push(`÷ √d_k = √${h.d_k} ≈ ${n(sqrt, p)}:   ` + h.scores[i].map((x, j) => `${n(x, p)} / ${n(sqrt, p)} = ${n(h.scaled[i][j], p)}`).join(',   '));
  lines.push('÷ T:   ' + h.logits[i].map((x, j) => (x === null ? 'masked: -inf' : `${n(h.scaled[i][j], p)} / ${n(T, p)} = ${n(x, p)}`)).join(',   '));
  if (h.fully_masked[i]) return lines;
  const visible = h.logits[i].map((x, j) => j).filter((j) => h.logits[i][j] !== null);
  const shift = h.shifts[i];
  const power = (j) => (shift === 0 ? n(h.logits[i][j], p) : `(${n(h.logits[i][j], p)} - ${n(shift, p)})`);
  lines.push(h.logits[i].map((x, j) => (x === null ? 'e^-inf = 0' : `e^${power(j)} = ${n(h.exponentials[i][j], p)}`)).join(',   '));
  lines.push(`${visible.map((j) => n(h.exponentials[i][j], p)).join(' + ')} = ${n(h.row_sums[i], p)}`);
  let sum = 0; // as explain.cpp adds it up: the same operations on the same doubles
  for (const e of h.exponentials[i]) sum += e / h.row_sums[i];
  const weights = h.logits[i].map((x, j) => (x === null ? '0 (masked)' : `${n(h.exponentials[i][j], p)} / ${n(h.row_sums[i], p)} = ${n(h.exponentials[i][j] / h.row_sums[i], p)}`));
  lines.push(`${weights.join(',   ')}   (sum ${formatFixed(sum, p)})`);
  lines.push(`${visible.map((j) => `${n(h.weights[i][j], p)}×(${formatVector(h.values[j], p)})`).join(' + ')} = ${formatVector(h.mixed[i], p)}`);
  return lines;
}

// Every number explain prints for one head and query, against format.js on the trace's
// doubles. Returns how many strings were compared.
function compareExplain(args, head, p) {
  const out = cli('explain', ...args, '--head', String(head), '--precision', String(p));
  const trace = traceOf(...args);
  const h = trace.heads[head];
  let count = 0;
  const same = (printed, expected, where) => {
    assert.equal(printed, expected, `${args.join(' ')} head ${head} precision ${p}, ${where}`);
    count++;
  };
  for (const [title, field] of [['2. Score', 'scores'], ['3. Scale', 'scaled'], ['4. Logits', 'logits'], ['5. Softmax', 'weights']]) {
    for (const [i, cells] of grid(out, title)) {
      cells.forEach((text, j) => {
        const x = h[field][i][j];
        // -∞ is null in JSON; the CLI prints the double -inf as formatNumber(-Infinity) does
        same(text, F.formatNumber(x === null ? -Infinity : x, p), `${field}[${i}][${j}]`);
      });
    }
  }
  const worked = /Query (\d+) ".*", worked in full/.exec(out);
  assert.ok(worked, 'explain works a query in full');
  const i = Number(worked[1]);
  for (const line of workedLines(h, i, trace.temperature, p)) {
    assert.ok(out.includes(line), `${args.join(' ')} head ${head} precision ${p}: the CLI prints\n  ${line}\nin\n${out}`);
    count++;
  }
  const top = /largest weight: key (\d+) ".*" \((.+)\)/.exec(out);
  if (top) same(top[2], F.formatNumber(h.weights[i][Number(top[1])], p), 'largest weight');
  block(out, 'Layer output').forEach(([label, text]) => {
    const row = Number(label.split(' ')[0]);
    same(text, F.formatVector(trace.output[row], p), `output[${row}]`);
  });
  return count;
}

test('formatNumber, formatFactor, formatVector, formatFixed write what `attnlab explain` prints for the same doubles', (t) => {
  if (!HAVE_BIN) { t.skip(NO_BIN); return; }
  const names = cli('scenarios').split('\n').map((l) => l.split(/\s+/)[0]).filter(Boolean);
  assert.ok(names.includes('three-tokens') && names.includes('softmax-row'), `the bundled scenarios: ${names.join(', ')}`);
  let count = 0;
  for (const name of names) {
    const trace = traceOf(name);
    for (const p of [0, 1, 2, 3, 4, 6]) {
      for (let head = 0; head < trace.heads.length; head++) count += compareExplain([name], head, p);
    }
    // masked keys (-inf) in the grids and the worked row: a hidden key, a causal mask
    count += compareExplain([name, '--mask-token', '0', '--query', '1'], 0, 3);
    if (trace.tokens.length === trace.source_tokens.length) count += compareExplain([name, '--causal', '--query', '1'], 0, 2);
  }
  // the three-token worked example (docs/worked-example.md) at 4 decimals, by hand
  const worked = cli('explain', 'three-tokens', '--precision', '4');
  assert.match(worked, /e\^2\.1213 = 8\.3421/);
  assert.equal(F.formatNumber(Math.exp(3 / Math.SQRT2), 4), '8.3421');
  t.diagnostic(`${count} strings compared over ${names.length} scenarios`);
});

test('exact ties round half to even and -0.001 prints 0.00, as the CLI', (t) => {
  if (!HAVE_BIN) { t.skip(NO_BIN); return; }
  const embeddings = [[0.125, -0.375], [2.5, 0.0625], [-0.001, 1.5], [-0.25, 1.0625]];
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'attnlab-format-'));
  const file = path.join(dir, 'ties.json');
  fs.writeFileSync(file, JSON.stringify({
    format: 'attnlab-scenario/1', name: 'ties', description: 'exact ties in the inputs and the projections',
    tokens: ['a', 'b', 'c', 'd'], embeddings, positions: 'none',
    heads: [{ name: 'h', w_q: [[1, 0], [1, 1]], w_k: [[1, 1], [0, 1]], w_v: [[0, 1], [1, 0]] }],
    w_o: null, source: null, causal: false, temperature: 1.0,
  }));
  try {
    const trace = traceOf(file);
    const h = trace.heads[0];
    for (const p of [0, 1, 2, 3, 4]) {
      const out = cli('explain', file, '--precision', String(p));
      // "1. Project": token, vector x (the embeddings: positions none), query q, key k, value v
      block(out, '1. Project').slice(1).forEach(([label, x, q, k, v], i) => {
        assert.equal(label, `${i} ${trace.tokens[i]}`);
        assert.deepEqual([x, q, k, v], [embeddings[i], h.queries[i], h.keys[i], h.values[i]].map((row) => F.formatVector(row, p)), `row ${i} at ${p} decimals`);
      });
      compareExplain([file], 0, p);
    }
    // what the file is for, written out
    const out2 = cli('explain', file, '--precision', '2');
    assert.match(out2, /0 a {5}0\.12 -0\.38 /);
    assert.match(out2, /2 c {5}0\.00 1\.50 /);
    assert.equal(F.formatNumber(0.125, 2), '0.12');
    assert.equal(F.formatNumber(-0.375, 2), '-0.38');
    assert.equal(F.formatNumber(2.5, 0), '2');
    assert.equal(F.formatNumber(-0.001, 2), '0.00');
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

// Every "digits" and "digits (bytes)" cell of the CLI's tables, written again from the
// integer it shows.
function compareCounts(out, where) {
  let count = 0;
  for (const line of out.split('\n')) {
    for (const cell of line.trim().split(/\s{2,}/)) {
      const bytes = /^([\d,]+) \((.+)\)$/.exec(cell);
      if (bytes) {
        assert.equal(F.formatCountBytes(BigInt(bytes[1].replace(/,/g, ''))), cell, `${where}: ${line}`);
        count++;
      } else if (/^\d{1,3}(,\d{3})*$/.test(cell)) {
        assert.equal(F.formatCount(BigInt(cell.replace(/,/g, ''))), cell, `${where}: ${line}`);
        count++;
      }
    }
    // "= 262,144 bytes (256 KiB) per token", "= 16,060,522,496 bytes (14.96 GiB)"
    for (const m of line.matchAll(/([\d,]+) bytes \(([\d.]+ (?:B|KiB|MiB|GiB|TiB|PiB|EiB))\)/g)) {
      const n = BigInt(m[1].replace(/,/g, ''));
      assert.equal(F.formatCount(n), m[1], `${where}: ${line}`);
      assert.equal(F.formatBytes(n), m[2], `${where}: ${line}`);
      count++;
    }
  }
  return count;
}

test('formatCount and formatBytes write what `attnlab cost` and `attnlab kv` print for the same integers', (t) => {
  if (!HAVE_BIN) { t.skip(NO_BIN); return; }
  const tokens = '1,3,24,1000,4097,65536,100000,999999,1000000';
  let count = compareCounts(cli('cost', '--tokens', tokens), 'cost');
  count += compareCounts(cli('cost', '--tokens', tokens, '--d-model', '5625', '--heads', '75', '--layers', '75', '--dtype', 'f32'), 'cost (above 2^53)');
  for (const [model, dtype] of [['llama-3-8b', 'f16'], ['llama-3-8b', 'f32'], ['gpt2', 'bf16']]) {
    count += compareCounts(cli('kv', '--model', model, '--dtype', dtype, '--context', '1000,8192,100000,1048576', '--budget', '24GiB'), `kv ${model} ${dtype}`);
  }
  assert.ok(count > 100, `compared ${count} counts`);
  t.diagnostic(`${count} counts and byte sizes compared`);
});

test('format.js alone: the page\'s own cases', (t) => {
  const { formatNumber, formatFactor, formatFixed, formatCount, formatBytes, parseExact, truncate } = F;
  assert.equal(formatNumber(null), '−∞', 'a masked logit (null in JSON) reads −∞ on the page');
  assert.equal(formatNumber(-Infinity, 2), '-inf');
  assert.equal(formatNumber(NaN, 2), 'nan');
  assert.equal(formatNumber(40, 2), '40');
  assert.equal(formatNumber(-0, 2), '0');
  assert.equal(formatNumber(0.005, 2), '0.01', '0.005 is a little above the tie as a double');
  assert.equal(formatNumber(1.0625, 3), '1.062');
  assert.equal(formatNumber(1.1875, 3), '1.188');
  assert.equal(formatFactor(-0.5, 2), '(-0.50)');
  assert.equal(formatFixed(1, 3), '1.000');
  assert.equal(formatFixed(0.125, 2), '0.12');
  assert.equal(formatCount(10000000000), '10,000,000,000');
  assert.equal(formatBytes(1152), '1.12 KiB');
  assert.equal(formatBytes(1073741824n), '1 GiB');
  // JSON.parse's source text (the reviver's third argument) is in Chromium; node 20 lacks it
  if (JSON.parse('1', (key, value, context) => context) !== undefined) {
    const big = parseExact('{"n": 4049991900001687500000, "x": 0.5}');
    assert.deepEqual(big, { n: 4049991900001687500000n, x: 0.5 }, 'an integer above 2^53 stays exact');
  } else {
    t.diagnostic(`this node (${process.version}) gives JSON.parse no source text: parseExact is checked in the browser (panels.test.js)`);
  }
  assert.equal(truncate('extraordinary', 11), 'extraordin…');
});
