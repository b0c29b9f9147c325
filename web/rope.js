// @ts-check
// Rotary positions, as the maths panel shows them (web/view-maths.js): no DOM, so that node
// tests it (tests/e2e/rope.test.js).

/**
 * The score q_i·k_j of two rotary vectors given before their rotation (qu, ku) when they sit
 * δ = i − j positions apart: per pair (a, b) of frequency f, (q_a k_a + q_b k_b)·cos(δf) −
 * (q_b k_a − q_a k_b)·sin(δf), plus the unrotated rest's products. It depends on δ alone.
 * @param {{pairs: string, frequencies: number[]}} rope
 * @param {number[]} qu
 * @param {number[]} ku
 * @param {number} delta
 */
export function rotaryScore(rope, qu, ku, delta) {
  const f = rope.frequencies, half = f.length, split = rope.pairs === 'split-half';
  const rotated = new Set();
  let s = 0;
  for (let a = 0; a < half; a++) {
    const i1 = split ? a : 2 * a, i2 = split ? a + half : 2 * a + 1;
    rotated.add(i1);
    rotated.add(i2);
    const c = Math.cos(delta * f[a]), sn = Math.sin(delta * f[a]);
    s += (qu[i1] * ku[i1] + qu[i2] * ku[i2]) * c - (qu[i2] * ku[i1] - qu[i1] * ku[i2]) * sn;
  }
  for (let k = 0; k < qu.length; k++) if (!rotated.has(k)) s += qu[k] * ku[k];
  return s;
}
