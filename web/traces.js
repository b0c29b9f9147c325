// @ts-check
// Where traces come from. The page renders what the engine computed: every weight, score
// and output comes from POST api/attention, or, for a change of temperature or causal mask
// alone, from the same engine compiled to WebAssembly (engine.js); nothing here computes
// attention.
//
// sync(state) runs after every state change (main.js): when the request the state asks
// for differs from the last one sent, it recomputes; when the shown head of a lean trace
// lacks its intermediates, it brings them in. Answers go into the store with update().

import { api, busy, messageOf } from './api.js';
import * as engine from './engine.js';
import { clamp, detailedHead, hasDetail, rowOf, scenarioOf } from './selectors.js';
import { getState, update } from './state.js';

/**
 * @typedef {import('./types.js').State} State
 * @typedef {import('./types.js').Trace} Trace
 * @typedef {import('./types.js').Head} Head
 * @typedef {import('./types.js').RequestBody} RequestBody
 * @typedef {import('./types.js').RequestOptions} RequestOptions
 */

// ---- the request ------------------------------------------------------------------------

/**
 * The options of POST api/attention and api/probe: the set-up, then the interventions.
 * @param {State} s
 * @returns {RequestOptions}
 */
export function requestOptions(s) {
  /** @type {RequestOptions} */
  const options = { causal: s.causal, temperature: s.temperature };
  if (s.sentence !== null) options.sentence = s.sentence;
  if (s.maskTokens.length) options.mask_tokens = s.maskTokens.slice().sort((a, b) => a - b);
  if (s.removeHeads.length) options.remove_heads = s.removeHeads.slice().sort((a, b) => a - b);
  if (s.addHeads.length) options.add_random_heads = s.addHeads.map((h) => ({ seed: h.seed }));
  if (s.replace.length) options.replace_tokens = s.replace.map((r) => ({ index: r.index, word: r.word }));
  if (s.ablate.length) options.ablate_heads = s.ablate.map((a) => ({ head: a.head, kind: a.kind }));
  if (s.scale.length) options.scale_heads = s.scale.map((a) => ({ head: a.head, factor: a.factor }));
  if (s.permute) options.permute = s.permute.slice();
  return options;
}

// Lean traces: above LEAN_CELLS score cells (all heads), only the shown head comes with
// every intermediate (docs/api.md, "detail": "weights"); the others carry their weights
// and outputs, which is all the heatmaps need. Switching to such a head fetches its
// intermediates then.
const LEAN_CELLS = 4096;

/**
 * The shape of the trace the state asks for: n queries, m keys, H heads.
 * @param {State} s
 */
function expectedShape(s) {
  if (!s.base) return null;
  const n = s.sentence !== null ? s.sentence.split(/\s+/).filter(Boolean).length : s.base.tokens.length;
  const m = s.base.source ? s.base.source.tokens.length : n;
  const H = s.base.heads.length - s.removeHeads.length + s.addHeads.length;
  return { n, m, H };
}

/**
 * The body of POST api/attention for the state: lean when the trace is large.
 * @param {State} s
 * @returns {RequestBody}
 */
export function requestBody(s) {
  /** @type {RequestBody} */
  const body = { scenario: scenarioOf(s), options: requestOptions(s) };
  const shape = expectedShape(s);
  if (shape && shape.n * shape.m * shape.H > LEAN_CELLS) {
    body.detail = 'weights';
    body.detail_heads = [clamp(s.head, 0, shape.H - 1)];
  }
  return body;
}

/**
 * What the state asks the engine for, leaving out which head comes in full: a change of
 * it starts a recompute.
 * @param {State} s
 */
const requestKey = (s) => (s.base ? JSON.stringify([scenarioOf(s), requestOptions(s)]) : null);

// ---- the page's engine --------------------------------------------------------------------
// A trace starts at the server, which also sends the attention problem behind it
// ("attention_input", docs/api.md); a change of temperature or causal mask alone is then
// recomputed here from that problem, by the same code, without a round trip. Interventions
// always go to the server: their report compares two runs the server makes.
const SET_HERE = ['temperature', 'causal'];
const INTERVENTIONS = ['mask_tokens', 'ablate_heads', 'scale_heads', 'replace_tokens', 'permute'];

const pageEngine = {
  available: false,   // the server has attnlab.wasm to give
  /** @type {{key: string, trace: Trace, input: Record<string, unknown>} | null} */
  inputs: null,       // the last server trace that came with its problem
  warmRuns: 0,
};

/** The server says it has the engine (GET api/health, page_engine). @param {boolean} yes */
export function setPageEngine(yes) {
  pageEngine.available = yes;
}

/**
 * The request without what the page's engine can change.
 * @param {RequestBody} body
 */
function setupKey(body) {
  /** @type {Record<string, unknown>} */
  const options = { ...body.options };
  for (const k of SET_HERE) delete options[k];
  return JSON.stringify([body.scenario, options]);
}

/** @param {RequestBody} body */
const hasInterventions = (body) => INTERVENTIONS.some((k) => k in body.options);

/**
 * The trace of `body` from the page's engine, or null when only the server can answer.
 * @param {RequestBody} body
 * @returns {Trace | null}
 */
function traceHere(body) {
  const inputs = pageEngine.inputs;
  if (!engine.ready() || !inputs || hasInterventions(body) || setupKey(body) !== inputs.key) return null;
  const base = inputs.trace;
  /** @type {Record<string, unknown>} */
  const doc = { ...inputs.input, temperature: body.options.temperature, causal: body.options.causal };
  if (body.detail_heads) doc.detail_heads = body.detail_heads;
  let trace;
  try {
    trace = engine.attend(doc);
  } catch (e) {
    return null; // the server will answer, and say what is wrong
  }
  // what the server adds to the engine's trace
  trace.scenario_json = { ...base.scenario_json, temperature: body.options.temperature, causal: body.options.causal };
  trace.intervention = null;
  trace.heads.forEach((head, k) => { head.random_seed = base.heads[k].random_seed; });
  return trace;
}

/**
 * POST api/attention's answer to `body`: from the page's engine when it can, else the server.
 * @param {RequestBody} body
 * @returns {Promise<{trace: Trace, by: 'page' | 'server'}>}
 */
async function traceFor(body) {
  const here = traceHere(body);
  if (here) return { trace: here, by: 'page' };
  const ask = pageEngine.available && !hasInterventions(body) ? { ...body, attention_input: true } : body;
  /** @type {Trace} */
  const trace = await api('api/attention', ask, { packed: true });
  if (trace.attention_input) { // the engine's, not part of the trace the page shows or exports
    pageEngine.inputs = { key: setupKey(body), trace, input: trace.attention_input };
    delete trace.attention_input;
    warmEngine();
  }
  return { trace, by: 'server' };
}

// V8 compiles WebAssembly fully only after it has run a while: on a 64-token, 8-head
// trace the engine took 7 ms a run at first and 3 ms after about 60 runs, so the first
// slider steps were twice as slow as the rest. Once a trace that large arrives, the
// engine runs it up to WARM_RUNS times, only while the browser is idle; once per page.
const WARM_RUNS = 60;

/** Runs the engine in idle time until V8 has compiled it fully (see above). */
export function warmEngine() {
  const inputs = pageEngine.inputs;
  const t = inputs && inputs.trace;
  if (!inputs || !t || !engine.ready() || pageEngine.warmRuns >= WARM_RUNS || !window.requestIdleCallback) return;
  if (t.tokens.length * t.source_tokens.length * t.heads.length <= LEAN_CELLS) return;
  const doc = { ...inputs.input, detail_heads: [0] };
  window.requestIdleCallback((deadline) => {
    try {
      while (pageEngine.warmRuns < WARM_RUNS && deadline.timeRemaining() > 10) {
        engine.attend(doc);
        pageEngine.warmRuns++;
      }
    } catch (e) {
      pageEngine.warmRuns = WARM_RUNS; // a refused document: the slider will find out, through the server
      return;
    }
    warmEngine();
  });
}

// ---- traces into the store -----------------------------------------------------------------

/**
 * Masked cells are the same in every head (causal, window, hidden keys: the scenario's),
 * so lean heads take the null pattern of a head that has its logits. Returns a new trace
 * (marked lean) when some head lacks its intermediates.
 * @param {Trace} trace
 * @returns {Trace}
 */
export function prepareTrace(trace) {
  if (trace.heads.every(hasDetail)) return trace;
  const full = trace.heads.find(hasDetail);
  const mask = full && full.logits ? full.logits.map((row) => row.map((x) => (x === null ? null : 0))) : undefined;
  const heads = trace.heads.map((head) => (hasDetail(head) || !mask ? head : { ...head, mask }));
  return { ...trace, heads, lean: true };
}

/**
 * The state's patch for a trace that answers `body`: the query follows its token, the
 * query and head stay in range, the error goes.
 * @param {State} s
 * @param {Trace} trace
 * @param {RequestBody} body
 * @param {'page' | 'server'} by
 * @returns {Partial<State>}
 */
function tracePatch(s, trace, body, by) {
  const query = s.follow !== null ? rowOf(trace, s.follow) : s.query;
  return {
    trace, apiTrace: trace, headDetail: {}, lastRequest: body, computedBy: by, follow: null, error: null,
    query: clamp(query, 0, trace.tokens.length - 1),
    head: clamp(s.head, 0, trace.heads.length - 1),
  };
}

// Coalescing recompute: while a request is out, further calls only mark the state dirty,
// and one more request goes out when it returns (a dragged slider never queues up).
const jobs = {
  /** @type {Promise<void> | null} */
  running: null,
  dirty: false,
  /** @type {string | null} */
  requested: null,    // requestKey of the last recompute started
  /** @type {number | null} */
  detail: null,       // the head whose intermediates are on their way from the server
};

function compute() {
  jobs.dirty = true;
  if (jobs.running) return jobs.running;
  jobs.running = busy(async () => {
    try {
      while (jobs.dirty) {
        jobs.dirty = false;
        const body = requestBody(getState());
        try {
          const { trace, by } = await traceFor(body);
          if (!jobs.dirty) update(tracePatch(getState(), prepareTrace(trace), body, by));
        } catch (e) {
          if (!jobs.dirty) update({ error: messageOf(e) });
        }
      }
    } finally {
      jobs.running = null;
    }
  });
  return jobs.running;
}

/** Resolves once the trace the state asks for is in the store (or has failed). */
export function computed() {
  return jobs.running || Promise.resolve();
}

/**
 * Brings in the intermediates of the shown head of a lean trace (the same request, that
 * head in full): at once from the page's engine when it can, else from the server.
 * @param {State} s
 */
function syncHeadDetail(s) {
  const t = s.trace;
  const h = s.head;
  if (!t || !t.lean || !s.lastRequest || h >= t.heads.length || detailedHead(s, h) || jobs.detail === h) return;
  /** @type {RequestBody} */
  const body = { ...s.lastRequest, detail: 'weights', detail_heads: [h] };
  const here = traceHere(body);
  if (here && here.heads.length === t.heads.length && hasDetail(here.heads[h])) {
    update({ headDetail: { ...s.headDetail, [h]: here.heads[h] } });
    return;
  }
  jobs.detail = h;
  busy(async () => {
    try {
      const { trace: reply, by } = await traceFor(body);
      const now = getState();
      const head = reply.heads[h];
      if (now.trace !== t || reply.heads.length !== t.heads.length || !hasDetail(head)) return; // a newer trace came meanwhile
      update({ headDetail: { ...now.headDetail, [h]: head }, computedBy: by });
    } catch (e) {
      update({ error: messageOf(e) });
    } finally {
      if (jobs.detail === h) jobs.detail = null; // a request for another head may be out now
    }
  });
}

/**
 * After every state change: recompute when the state asks for another trace; bring in a
 * lean head's intermediates when it is shown.
 * @param {State} s
 */
export function sync(s) {
  const key = requestKey(s);
  if (key !== null && key !== jobs.requested) {
    jobs.requested = key;
    if (jobs.running || !answerHere(s)) compute();
  }
  syncHeadDetail(s);
}

/**
 * The page's engine answers at once, when it can (a temperature or the causal mask) and no
 * request is out (whose answer would come after): the trace goes into the store now, in
 * the same pass as the change that asked for it (state.js), so the page renders once.
 * @param {State} s
 */
function answerHere(s) {
  const body = requestBody(s);
  const trace = traceHere(body);
  if (!trace) return false;
  update(tracePatch(s, prepareTrace(trace), body, 'page'));
  return true;
}

/**
 * Loads a bundled scenario with its own settings; resolves once its trace is in.
 * @param {string} name
 * @param {{query?: number}} [options]  the query to start on (default: the scenario's, else the last token)
 */
export function loadScenario(name, { query } = {}) {
  return busy(async () => {
    /** @type {import('./types.js').ScenarioFile} */
    const base = await api('api/scenarios/' + encodeURIComponent(name));
    const s = getState();
    jobs.requested = null; // a reload of the same scenario computes again
    update({
      name, base, modelHead: null,
      causal: !!base.causal,
      temperature: typeof base.temperature === 'number' ? base.temperature : 1,
      sentence: null, maskTokens: [], ablate: [], scale: [], replace: [], permute: null, removeHeads: [], addHeads: [],
      head: 0,
      query: query !== undefined ? query : (Number.isInteger(base.query) ? /** @type {number} */ (base.query) : base.tokens.length - 1),
      sentenceInput: base.tokens.join(' '),
      trace: null, headDetail: {},
      probe: name === s.name ? s.probe : { ...s.probe, readout: '' },
    });
    await computed();
  });
}

/**
 * Loads head L.H of the server's model on `run`'s tokens (POST api/model/run answered
 * `input`) as the scenario: the views, interventions and probe then work on it as on any
 * other. Resolves once its trace is in.
 * @param {import('./types.js').ModelInput} input
 * @param {import('./types.js').ModelRun} run
 * @param {number} layer
 * @param {number} head
 * @param {number} [query]  the query row shown (default: the last token)
 */
export function loadModelHead(input, run, layer, head, query = run.tokens.length - 1) {
  return busy(async () => {
    const s = getState();
    const modelHead = { ...input, layer, head };
    /** @type {import('./types.js').ScenarioFile} */
    const base = {
      name: `head ${layer}.${head}`,
      description: `Head ${layer}.${head} of the model: its input is block ${layer}'s layer-normed residual stream, causal.`,
      tokens: run.tokens, heads: [{}], causal: true, precision: 3,
    };
    jobs.requested = null;
    update({
      name: null, base, modelHead, causal: true, temperature: 1,
      sentence: null, maskTokens: [], ablate: [], scale: [], replace: [], permute: null, removeHeads: [], addHeads: [],
      head: 0, query, sentenceInput: '', trace: null, headDetail: {},
      probe: { ...s.probe, readout: '' },
    });
    await computed();
  });
}

/**
 * The whole trace of the last request, every intermediate of every head (the export).
 * @param {State} s
 * @returns {Promise<Trace | null>}
 */
export async function fullTrace(s) {
  if (!s.trace) return null;
  if (!s.trace.lean || !s.lastRequest) return s.trace;
  const body = { ...s.lastRequest };
  delete body.detail;
  delete body.detail_heads;
  return busy(() => api('api/attention', body));
}
