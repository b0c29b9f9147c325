// @ts-check
// The packed reply of POST api/attention ("encoding": "packed", docs/api.md): a JSON
// header whose matrices are references {"f64": OFFSET, "shape": [ROWS, COLS]} into the
// doubles that follow it. unpack gives the same object the JSON encoding gives: lists of
// rows of numbers, with null where a value is not finite (masked logits). pack writes the
// same layout, for what the page hands its engine (engine.js).

const MAGIC = 'ATLP';
const VERSION = 1;
const FIXED = 16; // magic, version, header bytes, value count

/**
 * @param {unknown} x
 * @returns {x is {f64: number, shape: [number, number]}}
 */
function isReference(x) {
  return x !== null && typeof x === 'object' && !Array.isArray(x) && 'f64' in x && 'shape' in x && Object.keys(x).length === 2;
}

/**
 * Replaces every reference inside x by its rows of numbers (in place; returns x).
 * @param {any} x
 * @param {Float64Array} values
 * @returns {any}
 */
function expand(x, values) {
  if (isReference(x)) {
    const [rows, cols] = x.shape;
    if (x.f64 + rows * cols > values.length) throw new Error(`packed reply: a matrix reaches past the ${values.length} values`);
    const out = new Array(rows);
    for (let i = 0, k = x.f64; i < rows; i++) {
      const row = new Array(cols);
      for (let j = 0; j < cols; j++, k++) {
        const v = values[k];
        row[j] = Number.isFinite(v) ? v : null;
      }
      out[i] = row;
    }
    return out;
  }
  if (Array.isArray(x)) {
    for (let k = 0; k < x.length; k++) x[k] = expand(x[k], values);
  } else if (x !== null && typeof x === 'object') {
    for (const key of Object.keys(x)) x[key] = expand(x[key], values);
  }
  return x;
}

/**
 * ArrayBuffer -> the reply as plain objects; throws an Error naming what is wrong.
 * @param {ArrayBuffer} buffer
 * @returns {any}
 */
export function unpack(buffer) {
  if (buffer.byteLength < FIXED) throw new Error(`packed reply: ${buffer.byteLength} bytes is too short`);
  const head = new DataView(buffer, 0, FIXED);
  const magic = String.fromCharCode(head.getUint8(0), head.getUint8(1), head.getUint8(2), head.getUint8(3));
  if (magic !== MAGIC) throw new Error(`packed reply: starts with "${magic}", not "${MAGIC}"`);
  const version = head.getUint32(4, true), headerBytes = head.getUint32(8, true), count = head.getUint32(12, true);
  if (version !== VERSION) throw new Error(`packed reply: version ${version}, this page reads ${VERSION}`);
  if (buffer.byteLength !== FIXED + headerBytes + 8 * count) throw new Error('packed reply: its length does not match its header');
  const header = JSON.parse(new TextDecoder().decode(new Uint8Array(buffer, FIXED, headerBytes)));
  return expand(header, new Float64Array(buffer, FIXED + headerBytes, count));
}

/**
 * A matrix: a non-empty list of lists of numbers, all of one length.
 * @param {unknown} x
 * @returns {x is number[][]}
 */
function isMatrix(x) {
  if (!Array.isArray(x) || !x.length || !Array.isArray(x[0])) return false;
  const cols = x[0].length;
  return x.every((row) => Array.isArray(row) && row.length === cols && row.every((v) => typeof v === 'number'));
}

/**
 * The inverse of unpack: every matrix of `doc` goes as doubles after the JSON header.
 * @param {unknown} doc
 * @returns {ArrayBuffer}
 */
export function pack(doc) {
  /** @type {number[][][]} */
  const matrices = [];
  let count = 0;
  const text = JSON.stringify(doc, (key, x) => {
    if (!isMatrix(x)) return x;
    const ref = { f64: count, shape: [x.length, x[0].length] };
    matrices.push(x);
    count += x.length * x[0].length;
    return ref;
  });
  const header = new TextEncoder().encode(text);
  const headerBytes = Math.ceil(header.length / 8) * 8;
  const buffer = new ArrayBuffer(FIXED + headerBytes + 8 * count);
  const bytes = new Uint8Array(buffer);
  for (let k = 0; k < 4; k++) bytes[k] = MAGIC.charCodeAt(k);
  const fixed = new DataView(buffer, 0, FIXED);
  fixed.setUint32(4, VERSION, true);
  fixed.setUint32(8, headerBytes, true);
  fixed.setUint32(12, count, true);
  bytes.set(header, FIXED);
  bytes.fill(0x20, FIXED + header.length, FIXED + headerBytes); // spaces
  const values = new Float64Array(buffer, FIXED + headerBytes, count);
  let k = 0;
  for (const m of matrices) for (const row of m) for (const v of row) values[k++] = v;
  return buffer;
}
