// @ts-check
// The page's own engine: the server's attention code (src/core/attention.cpp, through
// src/report/input_document.cpp) compiled to WebAssembly, attnlab.wasm. Given the input
// document of the last trace the server sent (docs/api.md, "attention_input"), with another
// temperature or causal mask, it returns the trace the server would: same code, same
// packed reply. The page uses it for the temperature slider and the causal toggle, which
// then need no round trip; anything else still goes to the server (traces.js). Runs in
// node too (tests/e2e/engine.test.js).

import { pack, unpack } from './packed.js';

const ENOSYS = 52; // WASI's "not supported"

/**
 * What attnlab.wasm exports (src/wasm/engine.cpp).
 * @typedef {object} EngineExports
 * @property {WebAssembly.Memory} memory
 * @property {WebAssembly.Global} __stack_pointer
 * @property {() => void} _initialize
 * @property {(size: number) => number} attnlab_alloc
 * @property {(ptr: number) => void} attnlab_free
 * @property {(ptr: number, size: number) => number} attnlab_attend
 * @property {() => number} attnlab_result_size
 * @property {() => number} attnlab_error
 */

/** @type {EngineExports | null} */
let exports_ = null;
let lastError = '';

// The engine reads no files and prints nothing: every WASI call but proc_exit is refused.
const wasi = new Proxy({}, {
  get: (_, name) => (name === 'proc_exit' ? (/** @type {number} */ code) => { throw new Error(`the engine exited with ${code}`); } : () => ENOSYS),
});

/**
 * source: the URL of attnlab.wasm (the page) or its bytes (tests). Resolves to whether the
 * engine is ready; a page without it keeps asking the server.
 * @param {string | ArrayBuffer} source
 * @returns {Promise<boolean>}
 */
export async function load(source) {
  try {
    const bytes = typeof source === 'string' ? await (await fetch(source)).arrayBuffer() : source;
    const module = await WebAssembly.compile(bytes);
    const instance = await WebAssembly.instantiate(module, { wasi_snapshot_preview1: wasi });
    exports_ = /** @type {EngineExports} */ (/** @type {unknown} */ (instance.exports));
    exports_._initialize();
    return true;
  } catch (e) {
    exports_ = null;
    lastError = e instanceof Error ? e.message : String(e);
    return false;
  }
}

export const ready = () => exports_ !== null;

/**
 * The NUL-terminated string at ptr in the engine's memory.
 * @param {EngineExports} ex
 * @param {number} ptr
 */
function readString(ex, ptr) {
  const bytes = new Uint8Array(ex.memory.buffer, ptr);
  return new TextDecoder().decode(bytes.subarray(0, bytes.indexOf(0)));
}

/**
 * The trace of an input document, as the server's packed reply unpacked. Throws an Error
 * naming what is wrong when the engine refuses the document: the refusal traps, and the
 * stack pointer it left mid-call is put back, so the engine keeps working.
 * @param {unknown} doc
 * @returns {import('./types.js').Trace}
 */
export function attend(doc) {
  const ex = exports_;
  if (!ex) throw new Error(`the page's engine is not loaded${lastError ? `: ${lastError}` : ''}`);
  const input = new Uint8Array(pack(doc));
  const ptr = ex.attnlab_alloc(input.length);
  new Uint8Array(ex.memory.buffer, ptr, input.length).set(input);
  const stack = ex.__stack_pointer.value;
  let out;
  try {
    out = ex.attnlab_attend(ptr, input.length);
  } catch (e) {
    ex.__stack_pointer.value = stack;
    throw new Error(`the page's engine: ${readString(ex, ex.attnlab_error()) || (e instanceof Error ? e.message : String(e))}`);
  } finally {
    ex.attnlab_free(ptr);
  }
  const size = ex.attnlab_result_size();
  return unpack(ex.memory.buffer.slice(out, out + size));
}
