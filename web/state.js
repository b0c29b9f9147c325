// @ts-check
// The page's one store. Everything the page shows is a function of one State object
// (types.js): `update(patch)` makes a new State from the old one and the patch, then calls
// every subscriber (main.js: render every view, then start what the new state needs from
// the server) with it. Handlers and panels change the page only through update(); views
// only read. A State is frozen (its top level), so a stray write throws in strict mode
// rather than slipping past the views.
//
// An update made while subscribers run (an effect that answers at once, such as the page's
// engine recomputing a trace) is applied at once, and the pass starts again from the first
// subscriber with the newest state: the subscribers after it see only that one.

/** @typedef {import('./types.js').State} State */

/** @returns {State} */
function initialState() {
  return {
    scenarios: [],
    name: null,
    modelHead: null,
    base: null,
    causal: false,
    temperature: 1,
    sentence: null,
    maskTokens: [],
    removeHeads: [],
    addHeads: [],
    ablate: [],
    scale: [],
    replace: [],
    permute: null,
    follow: null,
    trace: null,
    apiTrace: null,
    headDetail: {},
    lastRequest: null,
    computedBy: null,
    query: 0,
    head: 0,
    view: 'heatmap',
    heatmapZoom: null,
    mathsFull: false,
    mathsByWeight: null,
    scaleMode: 'absolute',
    viewWidth: 0,
    hover: null,
    error: null,
    serverStatus: '',
    sentenceInput: '',
    seedInput: '1',
    guideStep: 0,
    // ε, the cost shape and the KV table's contexts are the server's defaults (GET api/defaults), filled in at start
    probe: { readout: '', epsilon: '', status: 'idle', message: '', reply: null, key: null, force: null },
    cost: { n: 100000, dModel: '', heads: '', layers: '', dtype: '', window: '', reply: null, body: null },
    kv: {
      models: [], model: 'llama-3-8b', dtype: 'f16', context: 8192, tableContexts: [], budget: '', reply: null,
      measured: null, measuring: false, measureStatus: '', measurePoints: null,
    },
    costError: null,
    model: {
      info: null, source: { run: null, step: null }, input: '', request: null, run: null, runKey: null, ablate: [], ablated: null,
      sort: 'head', status: 'idle', message: '', map: null,
    },
    training: { job: null, view: null, form: {}, attnOnly: false, arch: 'gpt2', status: 'idle', message: '' },
    attribution: { quick: null, job: null, status: '', error: false, key: null },
    why: { reply: null, keyInput: '', status: '', error: false, key: null },
    circuits: { reply: null, kind: 'k', status: '', error: false, key: null },
    kvReport: { contexts: '', reply: null, status: '', error: false },
    generation: { prompt: '', tokens: '8', temperature: '0', topK: '0', seed: '0', reply: null, step: 1, status: '', error: false },
    evict: { budgets: '4, 8, 16', policies: ['window', 'sinks', 'h2o', 'random', 'effect'], cache: 'f32', job: null, status: '', error: false },
    survey: { texts: '', job: null, status: '', error: false, finder: null, making: false, asked: null },
    operations: {},
    options: {},
  };
}

/** @type {State} */
let state = Object.freeze(initialState());
/** @type {Array<(s: State) => void>} */
const subscribers = [];
let running = false;
let again = false;

/** The current state (read-only). */
export function getState() {
  return state;
}

/**
 * The new state is the old one with `patch`'s fields; then every subscriber sees it.
 * @param {Partial<State>} patch
 */
export function update(patch) {
  state = Object.freeze({ ...state, ...patch });
  if (running) {
    again = true;
    return;
  }
  running = true;
  try {
    pass: do {
      again = false;
      for (const fn of subscribers) {
        fn(state);
        if (again) continue pass; // a newer state: start the pass again with it
      }
    } while (again);
  } finally {
    running = false;
  }
}

/**
 * Calls fn with every new state.
 * @param {(s: State) => void} fn
 */
export function subscribe(fn) {
  subscribers.push(fn);
}
