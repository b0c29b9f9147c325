// The maths panel's rotary score against the offset (web/view-maths.js rotaryScore), checked
// against rotating both vectors to their positions and taking the dot product, for split-half
// and interleaved pairs and a partially rotated head. Node only, no browser.
'use strict';

const { test } = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { pathToFileURL } = require('node:url');

// Rotates x in place to position `pos`: pair (a, b) of frequency f by the angle pos·f.
function rotate(x, rope, pos) {
  const out = x.slice(), half = rope.frequencies.length, split = rope.pairs === 'split-half';
  rope.frequencies.forEach((f, a) => {
    const i1 = split ? a : 2 * a, i2 = split ? a + half : 2 * a + 1;
    const c = Math.cos(pos * f), s = Math.sin(pos * f);
    out[i1] = x[i1] * c - x[i2] * s;
    out[i2] = x[i2] * c + x[i1] * s;
  });
  return out;
}

test('the score of two rotated vectors depends on their offset alone, as rotaryScore computes it', async () => {
  const { rotaryScore } = await import(pathToFileURL(path.join(__dirname, '..', '..', 'web', 'rope.js')).href);
  let seed = 7;
  const random = () => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648) * 2 - 1;
  for (const rope of [{ pairs: 'split-half', frequencies: [1, 0.1, 0.01] }, { pairs: 'interleaved', frequencies: [0.7, 0.05, 0.002] },
    { pairs: 'split-half', frequencies: [0.9, 0.03] }]) {  // the last rotates 4 of 6 columns
    const q = Array.from({ length: 6 }, random), k = Array.from({ length: 6 }, random);
    for (const [i, j] of [[0, 0], [5, 2], [9, 0], [12, 11]]) {
      const qi = rotate(q, rope, i), kj = rotate(k, rope, j);
      const want = qi.reduce((sum, x, c) => sum + x * kj[c], 0);
      assert.ok(Math.abs(rotaryScore(rope, q, k, i - j) - want) <= 1e-12, `${rope.pairs} ${i},${j}`);
    }
  }
});
