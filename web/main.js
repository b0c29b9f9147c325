// @ts-check
// attnlab's page, wired: the entry point index.html loads (<script type="module">).
//
//   state.js       the one store: update(patch), then its subscribers see the new state:
//   sync(state)    first asks for what the new state needs: a trace (from the page's
//                  engine at once when it can, else from the server), a lean head's
//                  intermediates, the probe, the cost and KV numbers; answers come back
//                  through update();
//   render(state)  then every view and panel draws itself from the state (each skips what
//                  has not changed, remembering what it drew in WeakMaps);
//   controls.js and the panels' bind*: DOM events -> update(), never a render call.
//
// It also starts the page (the scenarios, the engine) and installs window.attnlab, the
// test hook (below).

import * as actions from './actions.js';
import { api, busy, messageOf, startPendingCount } from './api.js';
import { bindControls } from './controls.js';
import { setAttr } from './dom.js';
import * as engine from './engine.js';
import { unpack } from './packed.js';
import { bindCost, renderCost, syncCost } from './panel-cost.js';
import { bindInterventions, renderInterventions } from './panel-interventions.js';
import { bindKv, loadModels, renderKv, syncKv } from './panel-kv.js';
import { bindAttribution, renderAttribution } from './panel-attribution.js';
import { bindWhy, renderWhy } from './panel-why.js';
import { bindCircuits, renderCircuits } from './panel-circuits.js';
import { bindEvict, renderEvict } from './panel-evict.js';
import { bindSurvey, renderSurvey } from './panel-survey.js';
import { bindGenerate, renderGenerate } from './panel-generate.js';
import { bindKvReport, renderKvReport } from './panel-kv-report.js';
import { loadOperations } from './options.js';
import { bindModel, loadModel, modelMapShown, renderModel, syncModel } from './panel-model.js';
import { bindProbe, renderProbe, syncProbe } from './panel-probe.js';
import { bindTraining, loadTraining, renderTraining } from './panel-training.js';
import { clamp, maskGrid } from './selectors.js';
import { getState, subscribe, update } from './state.js';
import * as traces from './traces.js';
import { renderArcs } from './view-arcs.js';
import { renderControls } from './view-controls.js';
import { heatmapShown, renderHeatmap, renderHoverReadout, renderLegend } from './view-heatmap.js';
import { bindMaths, renderMaths } from './view-maths.js';
import { renderReadouts } from './view-readouts.js';
import { renderTable } from './view-table.js';
import { renderThumbnails } from './view-thumbnails.js';
import { renderTokens } from './view-tokens.js';

/** @typedef {import('./types.js').State} State */

/**
 * The state as the views see it: the query and head within the trace shown. (A new head
 * or sentence is selected before its trace arrives; the views show the old trace until then.)
 * @param {State} s
 * @returns {State}
 */
function inView(s) {
  const t = s.trace;
  if (!t) return s;
  const query = clamp(s.query, 0, t.tokens.length - 1), head = clamp(s.head, 0, t.heads.length - 1);
  return query === s.query && head === s.head ? s : { ...s, query, head };
}

/**
 * The whole page from the state.
 * @param {State} state
 */
function render(state) {
  const s = inView(state);
  renderControls(s);
  renderModel(s);
  renderAttribution(s);
  renderWhy(s);
  renderCircuits(s);
  renderGenerate(s);
  renderKvReport(s);
  renderEvict(s);
  renderSurvey(s);
  renderTraining(s);
  renderTokens(s);
  renderThumbnails(s);
  renderReadouts(s);
  renderLegend(s);
  renderTable(s);
  renderHeatmap(s);
  renderHoverReadout(s);
  renderArcs(s);
  renderMaths(s);
  renderInterventions(s);
  renderProbe(s);
  renderCost(s);
  renderKv(s);
  // the browser tests start once a trace is shown (tests/e2e/helpers.js, settled)
  if (s.trace) setAttr(document.documentElement, 'data-ready', 'true');
  if (s.computedBy) setAttr(document.documentElement, 'data-computed', s.computedBy);
}

/**
 * What the new state needs from the server or the page's engine.
 * @param {State} s
 */
function sync(s) {
  traces.sync(s);
  syncProbe(s);
  syncCost(s);
  syncKv(s);
  syncModel(s);
}

/**
 * The server's defaults (GET api/defaults) where the page's state has none yet: the cost
 * panel's shape, the KV table's contexts and the probe's ε, as a request without them would
 * get (each operation's one description, docs/operations.md).
 * @param {{cost: {d_model: number, heads: number, layers: number, dtype: string, window: number}, kv: {context: number[]}, probe: {epsilon: number}}} d
 */
function applyDefaults(d) {
  const s = getState();
  const fill = (/** @type {string} */ now, /** @type {number | string} */ server) => (now === '' ? String(server) : now);
  update({
    cost: { ...s.cost, dModel: fill(s.cost.dModel, d.cost.d_model), heads: fill(s.cost.heads, d.cost.heads),
      layers: fill(s.cost.layers, d.cost.layers), dtype: fill(s.cost.dtype, d.cost.dtype), window: fill(s.cost.window, d.cost.window) },
    kv: { ...s.kv, tableContexts: s.kv.tableContexts.length ? s.kv.tableContexts : d.kv.context },
    probe: { ...s.probe, epsilon: fill(s.probe.epsilon, d.probe.epsilon) },
  });
}

/** The scenarios, the server's version, the page's engine; then the default scenario. */
async function start() {
  try {
    await busy(async () => {
      const [health, list, defaults] = await Promise.all([api('api/health'), api('api/scenarios'), api('api/defaults')]);
      update({ serverStatus: `engine ${health.version}`, scenarios: list.scenarios });
      applyDefaults(defaults);
      if (health.page_engine === true) {
        traces.setPageEngine(true);
        busy(async () => { // counted as pending, so tests know when it is ready
          if (!(await engine.load('attnlab.wasm'))) return;
          update({ serverStatus: getState().serverStatus + ' · recomputes here (WebAssembly)' });
          traces.warmEngine();
        });
      }
      /** @type {import('./types.js').ScenarioInfo[]} */
      const scenarios = list.scenarios;
      const first = scenarios.find((s) => s.default) || scenarios[0];
      if (first) await traces.loadScenario(first.name);
    });
  } catch (e) {
    update({ error: `Could not reach the attnlab server: ${messageOf(e)}`, serverStatus: 'server unreachable' });
  }
}

// The test hook: what tests/e2e/ (helpers.js, bench-render.js) read and drive, and a
// handle for the console. `state` is the store's current state (read-only); the rest are
// the state changes the controls make (actions.js), plus:
//   tableNow()             builds the weights table even while the Table view is hidden;
//   requestBody()          the body of POST api/attention for the current state;
//   showTrace(trace)       shows a trace fetched by the caller (the benchmark's), as a reply
//                          would be shown but without driving the panels;
//   maskGrid(head), unpack(buffer)   selectors.js and packed.js, for reading traces.
const hook = {
  get state() { return getState(); },
  update,
  loadScenario: traces.loadScenario,
  loadModelHead: traces.loadModelHead,
  setQuery: actions.setQuery,
  setHead: actions.setHead,
  setTemperature: actions.setTemperature,
  applySentence: actions.applySentence,
  addRandomHead: actions.addRandomHead,
  tableNow: () => renderTable(getState(), true),
  heatmapShown,
  modelMapShown,
  requestBody: () => traces.requestBody(getState()),
  /** @param {import('./types.js').Trace} trace */
  showTrace(trace) {
    const s = getState();
    const t = traces.prepareTrace(trace);
    update({ trace: t, headDetail: {}, query: clamp(s.query, 0, t.tokens.length - 1), head: clamp(s.head, 0, t.heads.length - 1) });
  },
  maskGrid,
  unpack,
};

function init() {
  startPendingCount();
  subscribe(sync); // first: what the engine answers at once is rendered in the same pass
  subscribe(render);
  bindControls();
  bindInterventions();
  bindProbe();
  bindCost();
  bindKv();
  bindModel();
  bindAttribution();
  bindWhy();
  bindCircuits();
  bindGenerate();
  bindKvReport();
  bindEvict();
  bindSurvey();
  bindTraining();
  bindMaths();
  loadModels();
  loadModel();
  loadOperations();
  loadTraining();
  update({});
  Object.defineProperty(window, 'attnlab', { value: hook, configurable: true });
  start();
}

init();
