// @ts-check
// The Training panel (docs/training.md, "In the lab"): a training run's curves and its
// checkpoints, and a run trained on the server from here.
//
//   - The curves: the loss (the training batch's, and the in-context loss on held-out
//     [BOS, r, r] sequences: the first copy, which only chance predicts, against the
//     repeat), and every head's previous-token and induction scores over the steps, one line
//     per head, so that the phase change where an induction head forms can be seen.
//   - The step slider: each checkpoint (checkpoints/step-N) in turn becomes the Model
//     panel's model, so its heads' heatmaps, the maths and the ablations are at that step.
//   - A new run: the settings within the server's limits, Start, its log growing as the
//     server writes it (GET api/training?since=K, polled), Cancel (it stops at its next
//     step and keeps a checkpoint of that step), and "Open in the Model panel".
//
// The run shown is the --model directory's when it is a training run, else the last run
// started here. Every number is the server's; positions on the charts are drawing.

import { api, busy, messageOf } from './api.js';
import { $, byId, setAttr, setFlag, setHtml, setText, setValue } from './dom.js';
import { formatNumber } from './format.js';
import { html } from './html.js';
import { openModel, setModelStep } from './panel-model.js';
import { getState, update } from './state.js';

/**
 * @typedef {import('./types.js').State} State
 * @typedef {import('./types.js').TrainingState} TrainingState
 * @typedef {import('./types.js').TrainingView} TrainingView
 * @typedef {import('./types.js').TrainingJobInfo} TrainingJobInfo
 * @typedef {import('./types.js').TrainLogEntry} TrainLogEntry
 */

/** The new run's settings, in the order the form shows them: [name, label]. */
export const SETTINGS = /** @type {const} */ ([
  ['layers', 'layers'], ['heads', 'heads'], ['kv_heads', 'KV heads'], ['d_model', 'd_model'], ['context', 'context'], ['vocab', 'vocabulary'],
  ['steps', 'steps'], ['prev_token_steps', 'previous-token phase (steps)'], ['batch', 'batch'], ['lr', 'learning rate'], ['warmup', 'warm-up'], ['log_every', 'log every'],
  ['checkpoint_every', 'checkpoint every'], ['seed', 'seed'],
]);

/** How often a running run's log is asked for, in ms. */
const POLL_MS = 300;

/** The state's training part, patched. @param {Partial<TrainingState>} patch */
function patchTraining(patch) {
  update({ training: { ...getState().training, ...patch } });
}

// ---- asking ----------------------------------------------------------------------------------

/** GET api/training/job and GET api/training at start: the limits, and the run to show. */
export async function loadTraining() {
  try {
    /** @type {TrainingJobInfo} */
    const job = await busy(() => api('api/training/job'));
    /** @type {Record<string, string>} */
    const form = {};
    for (const [name] of SETTINGS) form[name] = String(job.defaults[name] ?? '');
    patchTraining({ job, form, attnOnly: job.defaults.attn_only === true, arch: job.defaults.arch === 'llama' ? 'llama' : 'gpt2' });
    if (job.job && job.job.state === 'running') {
      byId('training-new', HTMLDetailsElement).open = true;
      follow(job.job.run); // a run this server is training: follow it
      return;
    }
    /** @type {TrainingView} */
    const view = await busy(() => api('api/training'));
    if (view.training) patchTraining({ view });
  } catch (e) {
    patchTraining({ status: 'error', message: `training: ${messageOf(e)}` });
  }
}

/** The run being followed (a newer follow() ends an older one's loop). */
let following = /** @type {string | null} */ (null);

/**
 * Follows run `name`: its log from the last entry held on, every POLL_MS while it trains;
 * then what ran last, once more.
 * @param {string} name
 */
export function follow(name) {
  following = name;
  const step = async () => {
    if (following !== name) return;
    try {
      const held = getState().training.view;
      const mine = held && held.run === name ? held : null;
      const since = mine && mine.log ? mine.log.length : 0;
      /** @type {TrainingView} */
      const reply = await busy(() => api(`api/training?run=${encodeURIComponent(name)}&since=${since}`));
      if (following !== name) return;
      const now = getState().training.view;
      const kept = now && now.run === name && now.log ? now.log.slice(0, since) : [];
      const view = { ...reply, log: kept.concat(reply.log || []) };
      if (reply.state === 'running') {
        patchTraining({ view });
        setTimeout(step, POLL_MS);
        return;
      }
      following = null;
      /** @type {TrainingJobInfo} */
      const job = await busy(() => api('api/training/job'));
      const s = getState().training;
      patchTraining({ view, job, status: s.status === 'cancelling' ? 'idle' : s.status, message: s.status === 'error' ? s.message : '' });
    } catch (e) {
      if (following === name) following = null;
      patchTraining({ status: 'error', message: messageOf(e) });
    }
  };
  step();
}

/** POST api/training/start with the form's settings; then follow the run. */
async function startRun() {
  const t = getState().training;
  /** @type {Record<string, number | boolean | string>} */
  const body = { arch: t.arch };
  for (const [name, label] of SETTINGS) {
    if (name === 'kv_heads' && t.arch !== 'llama') continue;  // GPT-2 has one KV head per query head
    const text = (t.form[name] || '').trim();
    if (text === '') continue;
    const x = Number(text);
    if (!Number.isFinite(x)) {
      patchTraining({ status: 'error', message: `${label}: "${text.slice(0, 12)}" is not a number` });
      return;
    }
    body[name] = x;
  }
  body.attn_only = t.attnOnly;
  patchTraining({ status: 'starting', message: '' });
  try {
    /** @type {{run: string, dir: string, state: string, settings: Record<string, number | boolean | string>}} */
    const started = await busy(() => api('api/training/start', body));
    /** @type {TrainingView} */
    const view = {
      training: true, run: started.run, name: started.run, state: 'running', settings: started.settings,
      log: [], since: 0, log_count: 0, checkpoints: [], final: false, error: null,
    };
    patchTraining({ view, status: 'idle', message: `training ${started.run} in ${started.dir}` });
    follow(started.run);
  } catch (e) {
    patchTraining({ status: 'error', message: messageOf(e) });
  }
}

/** POST api/training/cancel: the run stops at its next step (the poll sees it end). */
async function cancelRun() {
  patchTraining({ status: 'cancelling', message: '' });
  try {
    await busy(() => api('api/training/cancel', {}));
  } catch (e) {
    patchTraining({ status: 'error', message: messageOf(e) });
  }
}

/**
 * Whether the Model panel shows this run (so the slider moves its checkpoint).
 * @param {State} s
 * @param {TrainingView} view
 */
function tied(s, view) {
  const info = s.model.info;
  return !!info && info.loaded && s.model.source.run === view.run;
}

/**
 * The checkpoint the Model panel is at: its step, or the last checkpoint for the final model.
 * @param {State} s
 * @param {number[]} checkpoints
 */
function currentStep(s, checkpoints) {
  const step = s.model.source.step;
  return step === null ? checkpoints[checkpoints.length - 1] : step;
}

// ---- showing ---------------------------------------------------------------------------------

const CHART = { W: 400, H: 230, L: 46, R: 12, T: 14, B: 34 }; // size and margins, in SVG units

/** Eight colours for the heads' lines, told apart in print too (dashed from the ninth on). */
const HEAD_COLOURS = ['#1c7ed6', '#e8590c', '#2b8a3e', '#c2255c', '#7048e8', '#0c8599', '#a07800', '#495057'];

/**
 * A chart's scales: steps across, values up.
 * @param {number} maxStep
 * @param {number} y0
 * @param {number} y1
 */
function scales(maxStep, y0, y1) {
  const { W, H, L, R, T, B } = CHART;
  return {
    /** @param {number} step */
    px: (step) => L + (step / Math.max(1, maxStep)) * (W - L - R),
    /** @param {number} y */
    py: (y) => T + (1 - (y - y0) / Math.max(1e-9, y1 - y0)) * (H - T - B),
  };
}

/**
 * Round tick values from lo to hi (about `count` of them).
 * @param {number} lo
 * @param {number} hi
 * @param {number} count
 */
function ticks(lo, hi, count) {
  const raw = (hi - lo) / Math.max(1, count);
  const p = 10 ** Math.floor(Math.log10(Math.max(raw, 1e-12)));
  const unit = [1, 2, 5, 10].map((m) => m * p).find((u) => u >= raw) || raw;
  const out = [];
  for (let v = Math.ceil(lo / unit) * unit; v <= hi + 1e-9; v += unit) out.push(Number(v.toPrecision(12)));
  return out;
}

/**
 * The frame, the grid and the axes' labels.
 * @param {ReturnType<typeof scales>} S
 * @param {number} maxStep
 * @param {number} y0
 * @param {number} y1
 * @param {string} yTitle
 */
function axes(S, maxStep, y0, y1, yTitle) {
  const { W, H, L, R, T, B } = CHART;
  const out = [];
  for (const x of ticks(0, maxStep, 5)) {
    out.push(html`<line class="grid" x1="${S.px(x)}" x2="${S.px(x)}" y1="${T}" y2="${H - B}"/>\
<text class="tick" x="${S.px(x)}" y="${H - B + 13}" text-anchor="middle">${x}</text>`);
  }
  for (const y of ticks(y0, y1, 4)) {
    out.push(html`<line class="grid" x1="${L}" x2="${W - R}" y1="${S.py(y)}" y2="${S.py(y)}"/>\
<text class="tick" x="${L - 5}" y="${S.py(y) + 4}" text-anchor="end">${formatNumber(y, y1 - y0 < 2 ? 1 : 0)}</text>`);
  }
  out.push(html`<rect class="frame" x="${L}" y="${T}" width="${W - L - R}" height="${H - T - B}"/>`);
  out.push(html`<text class="axis" x="${(L + W - R) / 2}" y="${H - 4}" text-anchor="middle">step</text>`);
  out.push(html`<text class="axis" transform="translate(12,${(T + H - B) / 2}) rotate(-90)" text-anchor="middle">${yTitle}</text>`);
  return out;
}

/**
 * A line through the entries' values (entries without one are left out), carrying its
 * steps and values for whoever reads the page.
 * @param {ReturnType<typeof scales>} S
 * @param {{step: number, value: number | null}[]} points
 * @param {string} testid
 * @param {string} cls
 * @param {string} style
 * @param {string} title
 */
function line(S, points, testid, cls, style, title) {
  const kept = points.filter((p) => p.value !== null && Number.isFinite(p.value));
  const xy = kept.map((p) => `${S.px(p.step).toFixed(1)},${S.py(/** @type {number} */ (p.value)).toFixed(1)}`).join(' ');
  return html`<polyline class="${cls}" style="${style}" points="${xy}" data-testid="${testid}" data-points="${kept.length}" \
data-steps="${kept.map((p) => p.step).join(' ')}" data-values="${kept.map((p) => p.value).join(' ')}"><title>${title}</title></polyline>`;
}

/**
 * The step marker: where the Model panel's checkpoint is.
 * @param {ReturnType<typeof scales>} S
 * @param {number | null} step
 */
function marker(S, step) {
  if (step === null) return html``;
  const { H, T, B } = CHART;
  return html`<line class="step-marker" x1="${S.px(step)}" x2="${S.px(step)}" y1="${T}" y2="${H - B}" data-step="${step}"/>`;
}

/**
 * Where the induction task's second phase begins (docs/training.md: layer 0 alone learns
 * until then, the later layers after): a dotted line, labelled; nothing for one phase.
 * @param {{ px: (step: number) => number }} S
 * @param {number} at
 * @param {number} layers
 */
function phaseMarker(S, at, layers) {
  if (!at) return html``;
  const { H, T, B } = CHART;
  return html`<line class="phase-marker" x1="${S.px(at)}" x2="${S.px(at)}" y1="${T}" y2="${H - B}" data-step="${at}"/><text class="phase-label" x="${S.px(at) + 3}" y="${T + 10}">${layers > 2 ? 'layers 1+ learn' : 'layer 1 learns'}</text>`;
}

/**
 * The loss chart: the training batch's loss, the first copy's (chance) and the repeat's
 * (in-context), with chance, ln(vocabulary − 1), as a dashed line.
 * @param {TrainLogEntry[]} log
 * @param {number} maxStep
 * @param {number} vocab
 * @param {number | null} step
 * @param {number} phase   the step the second phase begins at (0: none)
 * @param {number} layers
 */
function lossChart(log, maxStep, vocab, step, phase, layers) {
  const chance = Math.log(Math.max(2, vocab - 1));
  const values = log.flatMap((e) => [e.loss, e.loss_held_out, e.loss_first_half, e.loss_second_half]).filter((x) => x !== null && Number.isFinite(x));
  const y1 = Math.max(chance, ...values.map(Number)) * 1.08, y0 = 0;
  const S = scales(maxStep, y0, y1);
  const series = /** @type {const} */ ([
    ['loss', 'training batch', 'loss-batch'],
    ['loss_held_out', 'held out', 'loss-held-out'],
    ['loss_first_half', 'first copy (chance)', 'loss-first'],
    ['loss_second_half', 'the repeat (in-context)', 'loss-second'],
  ]);
  const lines = series.map(([key, label, cls]) =>
    line(S, log.map((e) => ({ step: e.step, value: e[key] ?? null })), `training-line-${key}`, `train-line ${cls}`, '', label));
  const { L, R, W } = CHART;
  return html`<figure class="train-chart"><figcaption>Loss (nats)</figcaption>\
<svg class="chart" viewBox="0 0 ${CHART.W} ${CHART.H}" role="img" aria-label="Loss against step: the training batch, held-out sequences, the first copy and the repeat" data-testid="training-loss-chart">\
${axes(S, maxStep, y0, y1, 'nats')}<line class="chance-line" x1="${L}" x2="${W - R}" y1="${S.py(chance)}" y2="${S.py(chance)}" data-value="${chance}"/>\
${phaseMarker(S, phase, layers)}${lines}${marker(S, step)}</svg>\
<p class="chart-legend">${series.map(([, label, cls]) => html`<span><span class="key ${cls}-key"></span>${label}</span>`)}\
<span><span class="key chance-key"></span>chance, ln ${vocab - 1}</span></p></figure>`;
}

/**
 * One detector's scores over the steps, a line per head.
 * @param {TrainLogEntry[]} log
 * @param {number} maxStep
 * @param {'previous_token' | 'induction'} key
 * @param {string} title
 * @param {number | null} step
 * @param {number} phase   the step the second phase begins at (0: none)
 * @param {number} layers
 */
function scoreChart(log, maxStep, key, title, step, phase, layers) {
  const S = scales(maxStep, 0, 1);
  const heads = log.length ? log[log.length - 1].heads : [];
  const perLayer = heads.reduce((m, h) => Math.max(m, h.head + 1), 1);
  const lines = heads.map((h, k) => {
    const name = `${h.layer}.${h.head}`;
    const colour = HEAD_COLOURS[k % HEAD_COLOURS.length];
    const dash = k >= HEAD_COLOURS.length ? 'stroke-dasharray: 5 3;' : '';
    const points = log.map((e) => {
      const found = e.heads.find((x) => x.layer === h.layer && x.head === h.head);
      return { step: e.step, value: found ? found[key] : null };
    });
    return line(S, points, `training-score-${key}-${name}`, 'train-line head-line', `stroke: ${colour}; ${dash}`, `head ${name}`);
  });
  const legend = heads.map((h, k) => html`<span data-testid="training-legend-${key}-${h.layer}.${h.head}">\
<span class="key" style="border-color: ${HEAD_COLOURS[k % HEAD_COLOURS.length]}"></span>${h.layer}.${h.head}</span>`);
  return html`<figure class="train-chart"><figcaption>${title} score, per head (layer.head; ${perLayer} per layer)</figcaption>\
<svg class="chart" viewBox="0 0 ${CHART.W} ${CHART.H}" role="img" aria-label="${title} score of each head against step" data-testid="training-${key}-chart">\
${axes(S, maxStep, 0, 1, 'score')}${phaseMarker(S, phase, layers)}${lines}${marker(S, step)}</svg><p class="chart-legend">${legend}</p></figure>`;
}

/** @type {WeakMap<HTMLElement, unknown[]>} what each part shows (rendered again only when it changes) */
const shown = new WeakMap();

/**
 * True when `el` already shows `key`; remembers it otherwise.
 * @param {HTMLElement} el
 * @param {unknown[]} key
 */
function same(el, key) {
  const last = shown.get(el);
  if (last && last.length === key.length && last.every((x, k) => x === key[k])) return true;
  shown.set(el, key);
  return false;
}

/** @param {number} seconds */
const duration = (seconds) => (seconds < 60 ? `${formatNumber(seconds, 1)} s` : `${Math.floor(seconds / 60)} min ${Math.round(seconds % 60)} s`);

/**
 * One line on the run: its name, state, step and latest losses.
 * @param {TrainingView} v
 */
function summary(v) {
  const log = v.log || [];
  const last = log.length ? log[log.length - 1] : null;
  const steps = v.settings ? Number(v.settings.steps) : 0;
  const state = v.state === 'running' ? (v.cancelling ? 'cancelling' : 'training') : v.state;
  const parts = [`${v.name}: ${state}`, last ? `step ${last.step} of ${steps}` : `0 of ${steps} steps`];
  if (last) {
    if (last.loss_second_half !== null && last.loss_first_half !== null) {
      parts.push(`in-context loss ${formatNumber(last.loss_second_half, 3)} (first copy ${formatNumber(last.loss_first_half, 3)})`);
    }
    parts.push(duration(last.seconds));
  }
  if (v.error) parts.push(`error: ${v.error}`);
  return parts.join(' · ');
}

/** @param {State} s */
export function renderTraining(s) {
  const t = s.training;
  const v = t.view;
  const running = !!(t.job && t.job.busy) || (!!v && v.state === 'running');
  // the run shown
  const runEl = $('training-run');
  setFlag(runEl, 'hidden', !v || !v.training);
  if (v && v.training) {
    setText($('training-summary'), summary(v));
    setAttr(runEl, 'data-state', v.state || '');
    setAttr(runEl, 'data-run', v.run === null ? '' : v.run);
    const log = v.log || [];
    const checkpoints = v.checkpoints || [];
    const isTied = tied(s, v);
    const step = isTied && checkpoints.length ? currentStep(s, checkpoints) : null;
    const slider = byId('training-step', HTMLInputElement);
    const index = step === null ? checkpoints.length - 1 : checkpoints.indexOf(step);
    setFlag(slider, 'disabled', !isTied || checkpoints.length < 2);
    setAttr(slider, 'max', String(Math.max(0, checkpoints.length - 1)));
    setValue(slider, String(Math.max(0, index)));
    const label = step === null ? (checkpoints.length ? `${checkpoints.length} checkpoints` : 'no checkpoint yet')
      : `step ${step}${step === checkpoints[checkpoints.length - 1] && v.final ? ' (the final model)' : ''}`;
    setText($('training-step-value'), label);
    setAttr(slider, 'aria-valuetext', label);
    setAttr(slider, 'data-step', step === null ? null : String(step));
    const open = byId('training-open', HTMLButtonElement);
    setFlag(open, 'hidden', isTied);
    setFlag(open, 'disabled', !v.final && !checkpoints.length);
    setText($('training-step-hint'), isTied
      ? 'Each position is a checkpoint: the Model panel (its heads, the heatmap, the maths) shows the model at that step.'
      : 'Open the run in the Model panel to walk its checkpoints.');
    const charts = $('training-charts');
    if (!same(charts, [log, step, v.settings])) {
      const maxStep = Math.max(v.settings ? Number(v.settings.steps) : 0, log.length ? log[log.length - 1].step : 0, 1);
      const vocab = v.settings ? Number(v.settings.vocab) : 2;
      const phase = v.settings ? Number(v.settings.prev_token_steps ?? 0) : 0;  // 0: one phase
      const at = phase > 0 && phase < maxStep ? phase : 0;
      const layers = v.settings ? Number(v.settings.layers) : 2;
      setHtml(charts, log.length ? html`${lossChart(log, maxStep, vocab, step, at, layers)}\
${scoreChart(log, maxStep, 'previous_token', 'Previous-token', step, at, layers)}\
${scoreChart(log, maxStep, 'induction', 'Induction', step, at, layers)}`
        : html`<p class="hint">No log entry yet.</p>`);
    }
  }
  // the new run's form
  const limits = t.job ? t.job.limits : null;
  for (const [name] of SETTINGS) {
    const input = byId(`training-${name.replaceAll('_', '-')}`, HTMLInputElement);
    setValue(input, t.form[name] ?? '');
    const range = limits ? limits[name] : null;
    if (Array.isArray(range)) {
      setAttr(input, 'min', String(range[0]));
      if (name !== 'lr') setAttr(input, 'max', String(range[1]));
    }
  }
  setFlag(byId('training-attn-only', HTMLInputElement), 'checked', t.attnOnly);
  setValue(byId('training-arch', HTMLSelectElement), t.arch);
  setFlag(byId('training-kv-heads', HTMLInputElement), 'disabled', t.arch !== 'llama');
  setFlag(byId('training-start', HTMLButtonElement), 'disabled', running || t.status === 'starting' || !t.job);
  setFlag(byId('training-cancel', HTMLButtonElement), 'disabled', !running || t.status === 'cancelling' || !!(v && v.cancelling));
  if (t.job) {
    setText($('training-limits'), `Runs go to ${t.job.runs_dir}/run-N. The server's limits: ${SETTINGS.filter(([n]) => Array.isArray(limits && limits[n]))
      .map(([n, label]) => `${label} ${/** @type {number[]} */ (limits && limits[n]).join('–')}`).join(', ')}; at most ${limits && limits.log_entries} log entries and ${limits && limits.checkpoints} checkpoints; one run at a time.`);
  }
  const status = $('training-status');
  setText(status, t.status === 'starting' ? 'starting…' : t.status === 'cancelling' ? 'cancelling: the run stops at its next step…' : t.message);
  status.classList.toggle('error', t.status === 'error');
  setAttr(status, 'data-state', t.status);
}

// ---- input -----------------------------------------------------------------------------------

export function bindTraining() {
  for (const [name] of SETTINGS) {
    const input = byId(`training-${name.replaceAll('_', '-')}`, HTMLInputElement);
    input.addEventListener('input', () => {
      const t = getState().training;
      patchTraining({ form: { ...t.form, [name]: input.value } });
    });
  }
  const attnOnly = byId('training-attn-only', HTMLInputElement);
  attnOnly.addEventListener('change', () => patchTraining({ attnOnly: attnOnly.checked }));
  const arch = byId('training-arch', HTMLSelectElement);
  arch.addEventListener('change', () => patchTraining({ arch: arch.value === 'llama' ? 'llama' : 'gpt2' }));
  $('training-form').addEventListener('submit', (e) => {
    e.preventDefault();
    startRun();
  });
  $('training-cancel').addEventListener('click', () => { cancelRun(); });
  const slider = byId('training-step', HTMLInputElement);
  slider.addEventListener('input', () => {
    const v = getState().training.view;
    if (!v || !v.checkpoints) return;
    const step = v.checkpoints[Number(slider.value)];
    if (step !== undefined) setModelStep(step);
  });
  $('training-open').addEventListener('click', () => {
    const v = getState().training.view;
    if (!v) return;
    const checkpoints = v.checkpoints || [];
    // the final model when it is written, else the last checkpoint
    openModel({ run: v.run, step: v.final ? null : checkpoints[checkpoints.length - 1] ?? null })
      .catch((e) => patchTraining({ status: 'error', message: messageOf(e) }));
  });
}
