// attnlab's page: number formatting and the colour scale. Classic script (no modules,
// no build step); everything hangs off window.Attn.
//
// Numbers are written the way the CLI writes them (src/report/explain.cpp,
// format_number): a whole number without decimals, anything else with `precision`
// decimals (2 unless the scenario says otherwise), exact ties rounded half to even as
// printf does, and never "-0.00".
(function (A) {
  'use strict';

  // "0.125" -> "0.12" (half to even, as the CLI), "-0.001" -> "0.00", "4" -> "4".
  function formatNumber(x, precision) {
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

  // |x| with p decimals; an exact tie (x = ...d5 exactly) goes to the even digit.
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
    let kept = digits;
    if (last % 2 === 1) kept = incrementDigits(digits);
    const intLen = kept.length - p;
    return p === 0 ? kept : kept.slice(0, intLen) + '.' + kept.slice(intLen);
  }

  function incrementDigits(digits) {
    const a = digits.split('');
    let i = a.length - 1;
    while (i >= 0) {
      if (a[i] === '9') { a[i] = '0'; i--; } else { a[i] = String.fromCharCode(a[i].charCodeAt(0) + 1); break; }
    }
    if (i < 0) a.unshift('1');
    return a.join('');
  }

  // A factor inside a written-out product: negative numbers in parentheses, as the CLI.
  function formatFactor(x, p) {
    const s = formatNumber(x, p);
    return s[0] === '-' ? '(' + s + ')' : s;
  }

  function formatVector(v, p) {
    return v.map((x) => formatNumber(x, p)).join(' ');
  }

  // ---- exact integers: counts and bytes as the CLI prints them (src/analysis/units.cpp) ----
  // The API's counts are exact 64-bit integers; JSON.parse would round those above 2^53.
  // parseExact keeps such a literal as a BigInt, read from its source text.
  function parseExact(text) {
    return JSON.parse(text, (key, value, context) => {
      if (typeof value === 'number' && Number.isInteger(value) && !Number.isSafeInteger(value) &&
          context && typeof context.source === 'string' && /^-?\d+$/.test(context.source)) return BigInt(context.source);
      return value;
    });
  }

  // 10000000000 -> "10,000,000,000" (format_count); a number or a BigInt.
  function formatCount(v) {
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

  // 1073741824 -> "1 GiB", 1152 -> "1.12 KiB" (format_bytes: two decimals, ties to even,
  // trailing zeros dropped).
  const BYTE_UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB', 'EiB'];
  function formatBytes(v) {
    const b = typeof v === 'bigint' ? v : BigInt(Math.round(v));
    let u = 0;
    while (u + 1 < BYTE_UNITS.length && b >= (1n << BigInt(10 * (u + 1)))) u++;
    if (u === 0) return `${b} B`;
    const value = Number(b) / Math.pow(2, 10 * u);
    let text = roundHalfEven(value, 2);
    text = text.replace(/0+$/, '').replace(/\.$/, '');
    return `${text} ${BYTE_UNITS[u]}`;
  }

  // "1,073,741,824 (1 GiB)", as the CLI's byte columns.
  function formatCountBytes(v) {
    return `${formatCount(v)} (${formatBytes(v)})`;
  }

  // ---- colour scale: 0 -> very pale blue, 1 -> dark blue (sequential, print-safe) ----
  const STOPS = ['#f7fbff', '#deebf7', '#c6dbef', '#9ecae1', '#6baed6', '#4292c6', '#2171b5', '#08519c', '#08306b'];
  const rgbStops = STOPS.map((h) => [parseInt(h.slice(1, 3), 16), parseInt(h.slice(3, 5), 16), parseInt(h.slice(5, 7), 16)]);
  const LUT_SIZE = 256;
  const LUT_RGB = new Uint8ClampedArray(LUT_SIZE * 3);
  const LUT_CSS = new Array(LUT_SIZE);
  for (let k = 0; k < LUT_SIZE; k++) {
    const t = k / (LUT_SIZE - 1);
    const pos = t * (rgbStops.length - 1);
    const lo = Math.min(rgbStops.length - 2, Math.floor(pos));
    const f = pos - lo;
    for (let c = 0; c < 3; c++) LUT_RGB[k * 3 + c] = Math.round(rgbStops[lo][c] + (rgbStops[lo + 1][c] - rgbStops[lo][c]) * f);
    LUT_CSS[k] = `rgb(${LUT_RGB[k * 3]},${LUT_RGB[k * 3 + 1]},${LUT_RGB[k * 3 + 2]})`;
  }
  function lutIndex(w) {
    if (!(w > 0)) return 0;
    if (w >= 1) return LUT_SIZE - 1;
    return Math.round(w * (LUT_SIZE - 1));
  }

  A.fmt = { formatNumber, formatFactor, formatVector, parseExact, formatCount, formatBytes, formatCountBytes };
  A.colour = {
    stops: STOPS,
    lutRgb: LUT_RGB,
    lutIndex,
    css: (w) => LUT_CSS[lutIndex(w)],
    cssAt: (k) => LUT_CSS[k],
    size: LUT_SIZE,
    textOn: (w) => (w > 0.5 ? '#ffffff' : '#0b1f33'),
    masked: '#5c5c5c',
    maskedInk: '#a8a8a8',
    maskedRgb: [92, 92, 92],
    highlight: '#e8590c',
  };
})(window.Attn = window.Attn || {});
