// @ts-check
// Talking to the server's JSON API (docs/api.md): one fetch helper that reads JSON, exact
// JSON (counts above 2^53 as BigInt) or the packed trace, and the count of work in flight.
//
// The count is written to <html data-pending="N"> on every change: the browser tests wait
// for data-pending="0" (tests/e2e/helpers.js, settled). It is a progress signal, not page
// state, so it lives here and not in the store.

import { parseExact } from './format.js';
import { unpack } from './packed.js';

let pending = 0;

/** @param {number} delta */
function setPending(delta) {
  pending += delta;
  document.documentElement.dataset.pending = String(pending);
}

/**
 * Runs fn, counted as pending work until it settles.
 * @template T
 * @param {() => Promise<T>} fn
 * @returns {Promise<T>}
 */
export async function busy(fn) {
  setPending(+1);
  try {
    return await fn();
  } finally {
    setPending(-1);
  }
}

/**
 * One request at a time, for a panel that asks the server as the state changes: run()
 * starts ask() unless one is out; a run() while one is out only marks it superseded, and
 * one more ask() follows when it returns (so the last state is always asked about, and
 * never more than one request waits). Each ask counts as pending work (data-pending).
 * @param {() => Promise<void>} ask
 */
export function coalesced(ask) {
  /** @type {Promise<unknown> | null} */
  let running = null;
  let dirty = false;
  return {
    run() {
      dirty = true;
      if (running) return;
      running = busy(async () => {
        try {
          while (dirty) {
            dirty = false;
            await ask();
          }
        } finally {
          running = null;
        }
      });
    },
    /** True when a newer run() came in while this ask was out: its reply is stale. */
    superseded: () => dirty,
  };
}

/** Writes data-pending="0" before anything starts. */
export function startPendingCount() {
  setPending(0);
}

/**
 * GET `path` (no body) or POST `body` as JSON; resolves to the reply, or throws an Error
 * with the server's `error` message. A 503 with Retry-After (heavy work while the server's
 * slots for it are taken) is asked again after that many seconds, up to three times.
 *   exact: integers above 2^53 stay exact (BigInt), for the cost and KV numbers;
 *   packed: ask POST api/attention for its packed reply ("encoding": "packed"), the same
 *     trace with its matrices as raw doubles. A JSON reply (an error, or a server that does
 *     not pack) is read as JSON.
 * @param {string} path
 * @param {object} [body]
 * @param {{exact?: boolean, packed?: boolean}} [options]
 * @returns {Promise<any>}
 */
export async function api(path, body, { exact = false, packed = false } = {}) {
  const sent = packed ? { ...body, encoding: 'packed' } : body;
  /** @type {RequestInit} */
  const init = body === undefined ? {} : { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(sent) };
  let res = await fetch(path, init);
  // 503 with Retry-After: the server's heavy-work slots were all taken; ask again a few times.
  for (let attempt = 0; attempt < 3 && res.status === 503 && res.headers.get('Retry-After'); ++attempt) {
    await new Promise((resolve) => setTimeout(resolve, 1000 * Number(res.headers.get('Retry-After'))));
    res = await fetch(path, init);
  }
  if (res.ok && (res.headers.get('Content-Type') || '').startsWith('application/octet-stream')) return unpack(await res.arrayBuffer());
  let data = null;
  try {
    const text = await res.text();
    data = exact ? parseExact(text) : JSON.parse(text);
  } catch (e) { /* reported below */ }
  if (!res.ok || data === null) throw new Error(data && data.error ? data.error : `${path}: the server answered ${res.status}`);
  return data;
}

/**
 * The message of whatever was thrown.
 * @param {unknown} e
 */
export function messageOf(e) {
  return e instanceof Error ? e.message : String(e);
}
