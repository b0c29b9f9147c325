// The page's own engine: the server's attention code (src/core/attention.cpp, through
// src/report/input_document.cpp) compiled to WebAssembly, attnlab.wasm. Given the input
// document of the last trace the server sent (docs/api.md, "attention_input"), with another
// temperature or causal mask, it returns the trace the server would: same code, same
// packed reply. The page uses it for the temperature slider and the causal toggle, which
// then need no round trip; anything else still goes to the server.
(function (A) {
  'use strict';

  const ENOSYS = 52; // WASI's "not supported"
  let instance = null, lastError = '';

  // The engine reads no files and prints nothing: every WASI call but proc_exit is refused.
  const wasi = new Proxy({}, {
    get: (_, name) => (name === 'proc_exit' ? (code) => { throw new Error(`the engine exited with ${code}`); } : () => ENOSYS),
  });

  // source: the URL of attnlab.wasm (the page) or its bytes (tests). Resolves to whether the
  // engine is ready; a page without it keeps asking the server.
  async function load(source) {
    try {
      const bytes = typeof source === 'string' ? await (await fetch(source)).arrayBuffer() : source;
      const module = await WebAssembly.compile(bytes);
      instance = await WebAssembly.instantiate(module, { wasi_snapshot_preview1: wasi });
      instance.exports._initialize();
      return true;
    } catch (e) {
      instance = null;
      lastError = e.message;
      return false;
    }
  }

  function readString(ptr) {
    const bytes = new Uint8Array(instance.exports.memory.buffer, ptr);
    return new TextDecoder().decode(bytes.subarray(0, bytes.indexOf(0)));
  }

  // The trace of an input document, as the server's packed reply unpacked. Throws an Error
  // naming what is wrong when the engine refuses the document: the refusal traps, and the
  // stack pointer it left mid-call is put back, so the engine keeps working.
  function attend(doc) {
    if (!instance) throw new Error(`the page's engine is not loaded${lastError ? `: ${lastError}` : ''}`);
    const ex = instance.exports;
    const input = new Uint8Array(A.packed.pack(doc));
    const ptr = ex.attnlab_alloc(input.length);
    new Uint8Array(ex.memory.buffer, ptr, input.length).set(input);
    const stack = ex.__stack_pointer.value;
    let out;
    try {
      out = ex.attnlab_attend(ptr, input.length);
    } catch (e) {
      ex.__stack_pointer.value = stack;
      throw new Error(`the page's engine: ${readString(ex.attnlab_error()) || e.message}`);
    } finally {
      ex.attnlab_free(ptr);
    }
    const size = ex.attnlab_result_size();
    return A.packed.unpack(ex.memory.buffer.slice(out, out + size));
  }

  A.engine = { load, attend, ready: () => instance !== null };
})(typeof window !== 'undefined' ? (window.Attn = window.Attn || {}) : (globalThis.Attn = globalThis.Attn || {}));
