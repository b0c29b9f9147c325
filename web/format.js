// @ts-check
// Numbers as text, the way the CLI writes them, so that the page and `attnlab explain`,
// `cost` and `kv` print the same digits for the same doubles (tests/e2e/format.test.js
// checks them against the attnlab binary).
//
//   formatNumber, formatFactor, formatVector: src/report/explain.cpp (format_number,
//     factor, format_vector): a whole number without decimals, anything else with
//     `precision` decimals (2 unless the scenario says otherwise), exact ties rounded half
//     to even as the CLI does, and never "-0.00";
//   formatFixed: fmt's "{:.Nf}" (the CLI's "(sum 1.000)"): always N decimals;
//   formatCount, formatBytes: src/analysis/capacity/units.cpp (format_count, format_bytes).
//
// Where the page differs on purpose: a masked logit arrives as null (JSON has no −∞) and
// formatNumber(null) writes "−∞" (U+2212) where the CLI's grids write "-inf"; and
// `truncate` shortens labels for the page only.

/**
 * "0.125" -> "0.12" (half to even, as the CLI), "-0.001" -> "0.00", "4" -> "4".
 * @param {number | null | undefined} x
 * @param {number} [precision]
 * @returns {string}
 */
export function formatNumber(x, precision) {
  const p = precision === undefined ? 2 : precision;
  if (x === null || x === undefined) return '−∞';
  if (Number.isNaN(x)) return 'nan';
  if (!Number.isFinite(x)) return x > 0 ? 'inf' : '-inf';
  if (x === Math.round(x) && Math.abs(x) < 1e15) return (x === 0 ? 0 : x).toFixed(0);
  const negative = x < 0;
  let s = roundHalfEven(Math.abs(x), p);
  if (negative && !/^[0.]*$/.test(s)) s = '-' + s;
  return s;
}

const POW10 = Array.from({ length: 101 }, (_, k) => Math.pow(10, k));

/**
 * |x| with p decimals; an exact tie (x = ...d5 exactly) goes to the even digit. toFixed
 * rounds the double's exact value as the CLI does, except that it breaks ties upwards.
 * @param {number} ax  a finite number ≥ 0
 * @param {number} p
 * @returns {string}
 */
function roundHalfEven(ax, p) {
  const plain = ax.toFixed(p);
  if (ax >= 1e21) return plain;
  const scaled = ax * POW10[p];
  if (Math.abs(scaled - Math.floor(scaled) - 0.5) > 1e-6 * Math.max(1, scaled)) return plain; // not near a tie
  const exact = ax.toFixed(Math.min(100, p + 60)); // the double's decimal expansion
  const dot = exact.indexOf('.');
  const rest = exact.slice(dot + 1 + p);
  if (!/^50*$/.test(rest)) return plain;
  const digits = exact.slice(0, dot) + exact.slice(dot + 1, dot + 1 + p);
  const last = digits.charCodeAt(digits.length - 1) - 48;
  const kept = last % 2 === 1 ? incrementDigits(digits) : digits;
  const intLen = kept.length - p;
  return p === 0 ? kept : kept.slice(0, intLen) + '.' + kept.slice(intLen);
}

/**
 * "129" -> "130", "999" -> "1000".
 * @param {string} digits
 */
function incrementDigits(digits) {
  const a = digits.split('');
  let i = a.length - 1;
  while (i >= 0) {
    if (a[i] === '9') { a[i] = '0'; i--; } else { a[i] = String.fromCharCode(a[i].charCodeAt(0) + 1); break; }
  }
  if (i < 0) a.unshift('1');
  return a.join('');
}

/**
 * x with exactly p decimals, as fmt's "{:.Nf}" (the CLI's "(sum 1.000)"): ties to even,
 * unlike toFixed.
 * @param {number} x
 * @param {number} p
 */
export function formatFixed(x, p) {
  if (!Number.isFinite(x)) return Number.isNaN(x) ? 'nan' : x > 0 ? 'inf' : '-inf';
  const s = roundHalfEven(Math.abs(x), p);
  return x < 0 || Object.is(x, -0) ? '-' + s : s;
}

/**
 * A factor inside a written-out product: negative numbers in parentheses, as the CLI.
 * @param {number} x
 * @param {number} p
 */
export function formatFactor(x, p) {
  const s = formatNumber(x, p);
  return s[0] === '-' ? '(' + s + ')' : s;
}

/**
 * "0.69 0.93": the numbers separated by spaces.
 * @param {readonly number[]} v
 * @param {number} p
 */
export function formatVector(v, p) {
  return v.map((x) => formatNumber(x, p)).join(' ');
}

// ---- exact integers: counts and bytes ------------------------------------------------------
// The API's counts are exact 64-bit integers; JSON.parse would round those above 2^53.

/**
 * JSON.parse, keeping an integer literal above 2^53 as a BigInt read from its source text.
 * @param {string} text
 * @returns {any}
 */
export function parseExact(text) {
  return JSON.parse(text, /** @param {string} key @param {unknown} value @param {{source?: string}} [context] */ (key, value, context) => {
    if (typeof value === 'number' && Number.isInteger(value) && !Number.isSafeInteger(value) &&
        context && typeof context.source === 'string' && /^-?\d+$/.test(context.source)) return BigInt(context.source);
    return value;
  });
}

/**
 * 10000000000 -> "10,000,000,000" (format_count).
 * @param {number | bigint} v
 */
export function formatCount(v) {
  const digits = typeof v === 'bigint' ? v.toString() : BigInt(Math.round(v)).toString();
  const neg = digits[0] === '-';
  const d = neg ? digits.slice(1) : digits;
  let out = '';
  for (let k = 0; k < d.length; k++) {
    if (k > 0 && (d.length - k) % 3 === 0) out += ',';
    out += d[k];
  }
  return neg ? '-' + out : out;
}

const BYTE_UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB', 'EiB'];

/**
 * 1073741824 -> "1 GiB", 1152 -> "1.12 KiB" (format_bytes: two decimals, ties to even,
 * trailing zeros dropped).
 * @param {number | bigint} v
 */
export function formatBytes(v) {
  const b = typeof v === 'bigint' ? v : BigInt(Math.round(v));
  let u = 0;
  while (u + 1 < BYTE_UNITS.length && b >= (1n << BigInt(10 * (u + 1)))) u++;
  if (u === 0) return `${b} B`;
  const value = Number(b) / Math.pow(2, 10 * u);
  const text = roundHalfEven(value, 2).replace(/0+$/, '').replace(/\.$/, '');
  return `${text} ${BYTE_UNITS[u]}`;
}

/**
 * "1,073,741,824 (1 GiB)", as the CLI's byte columns.
 * @param {number | bigint} v
 */
export function formatCountBytes(v) {
  return `${formatCount(v)} (${formatBytes(v)})`;
}

// ---- labels (the page's own; the CLI prints whole tokens) -------------------------------------

/**
 * "extraordinary" -> "extraordin…" at max 11.
 * @param {string} s
 * @param {number} max
 */
export function truncate(s, max) {
  return s.length > max ? s.slice(0, max - 1) + '…' : s;
}
