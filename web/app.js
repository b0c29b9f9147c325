// attnlab's page: state, the JSON API (docs/api.md), controls, keyboard, exports and the
// guided path. The page renders what the engine computed: every weight, score and output
// comes from POST api/attention, or for a change of temperature or causal mask from the
// same engine compiled to WebAssembly (web/engine.js); nothing here computes attention.
(function (A) {
  'use strict';
  const R = A.render;
  const { formatNumber } = A.fmt;
  const $ = (id) => document.getElementById(id);

  const T_MIN = 0.1, T_MAX = 3, SLIDER_MAX = 1000;
  const sliderToT = (x) => Number((T_MIN * Math.pow(T_MAX / T_MIN, x / SLIDER_MAX)).toPrecision(3));
  const tToSlider = (t) => Math.max(0, Math.min(SLIDER_MAX, Math.round(SLIDER_MAX * Math.log(t / T_MIN) / Math.log(T_MAX / T_MIN))));

  // Everything the page asks the engine for, plus what is selected.
  const S = {
    scenarios: [],
    name: null,        // bundled scenario name
    base: null,        // the bundled scenario file (GET api/scenarios/NAME)
    causal: false,
    temperature: 1,
    sentence: null,    // null: the scenario's own tokens
    maskTokens: [],    // key indices hidden by the user
    removeHeads: [],   // indices of the scenario's own heads
    addHeads: [],      // [{seed}]
    // interventions (docs/interventions.md); indices are the baseline's tokens and heads
    ablate: [],        // [{head, kind}]
    scale: [],         // [{head, factor}]
    replace: [],       // [{index, word}]
    permute: null,     // new order as baseline indices, or null
    follow: null,      // a baseline token the query should follow into the next trace
    apiTrace: null,    // the last trace the API answered for requestBody() (not the benchmark's)
    query: 0,
    head: 0,
    view: 'heatmap',
    scaleMode: 'absolute', // or 'head': colours run from 0 to the head's largest weight
    trace: null,
    lastRequest: null,
    layout: null,      // the heatmap's last layout, for hit tests
  };

  // ---- talking to the server ----------------------------------------------------------
  let pendingCount = 0;
  function setPending(delta) {
    pendingCount += delta;
    document.documentElement.dataset.pending = String(pendingCount);
  }
  async function busy(fn) {
    setPending(+1);
    try { return await fn(); } finally { setPending(-1); }
  }

  // exact: integers above 2^53 stay exact (BigInt), for the cost and KV numbers.
  // packed: ask POST api/attention for its packed reply (docs/api.md, "encoding": "packed"):
  // the same trace with its matrices as raw doubles, so that neither side prints or parses
  // them as text. A JSON reply (an error, or a server that does not pack) is read as JSON.
  async function api(path, body, { exact = false, packed = false } = {}) {
    const sent = packed ? Object.assign({}, body, { encoding: 'packed' }) : body;
    const init = body === undefined ? {} : { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(sent) };
    const res = await fetch(path, init);
    if (res.ok && (res.headers.get('Content-Type') || '').startsWith('application/octet-stream')) return A.packed.unpack(await res.arrayBuffer());
    let data = null;
    try {
      const text = await res.text();
      data = exact ? A.fmt.parseExact(text) : JSON.parse(text);
    } catch (e) { /* reported below */ }
    if (!res.ok || data === null) throw new Error(data && data.error ? data.error : `${path}: the server answered ${res.status}`);
    return data;
  }

  // The options of POST api/attention and api/probe: the set-up, then the interventions.
  function requestOptions() {
    const options = { causal: S.causal, temperature: S.temperature };
    if (S.sentence !== null) options.sentence = S.sentence;
    if (S.maskTokens.length) options.mask_tokens = S.maskTokens.slice().sort((a, b) => a - b);
    if (S.removeHeads.length) options.remove_heads = S.removeHeads.slice().sort((a, b) => a - b);
    if (S.addHeads.length) options.add_random_heads = S.addHeads.map((h) => ({ seed: h.seed }));
    if (S.replace.length) options.replace_tokens = S.replace.map((r) => ({ index: r.index, word: r.word }));
    if (S.ablate.length) options.ablate_heads = S.ablate.map((a) => ({ head: a.head, kind: a.kind }));
    if (S.scale.length) options.scale_heads = S.scale.map((a) => ({ head: a.head, factor: a.factor }));
    if (S.permute) options.permute = S.permute.slice();
    return options;
  }

  // Lean traces: above LEAN_CELLS score cells (all heads), only the shown head comes with
  // every intermediate (docs/api.md, "detail": "weights"); the others carry their weights
  // and outputs, which is all the heatmaps need. Switching to such a head fetches its
  // intermediates then.
  const LEAN_CELLS = 4096;
  function expectedShape() {
    if (!S.base) return null;
    const n = S.sentence !== null ? S.sentence.split(/\s+/).filter(Boolean).length : S.base.tokens.length;
    const m = S.base.source ? S.base.source.tokens.length : n;
    const H = S.base.heads.length - S.removeHeads.length + S.addHeads.length;
    return { n, m, H };
  }
  function wantsLean() {
    const shape = expectedShape();
    return !!shape && shape.n * shape.m * shape.H > LEAN_CELLS;
  }

  function requestBody() {
    const body = { scenario: S.name, options: requestOptions() };
    if (wantsLean()) {
      body.detail = 'weights';
      body.detail_heads = [Math.max(0, Math.min(S.head, expectedShape().H - 1))];
    }
    return body;
  }

  // ---- the page's engine (web/engine.js) --------------------------------------------------
  // The server's attention code compiled to WebAssembly. A trace starts at the server, which
  // also sends the attention problem behind it ("attention_input", docs/api.md); a change of
  // temperature or causal mask alone is then recomputed here from that problem, by the same
  // code, without a round trip. Interventions always go to the server: their report
  // compares two runs the server makes.
  const SET_HERE = ['temperature', 'causal'];
  const INTERVENTIONS = ['mask_tokens', 'ablate_heads', 'scale_heads', 'replace_tokens', 'permute'];
  let pageEngine = false;     // the server has attnlab.wasm to give
  let engineInputs = null;    // {key, trace, input}: the last server trace that came with its problem
  function setupKey(body) {
    const options = { ...body.options };
    for (const k of SET_HERE) delete options[k];
    return JSON.stringify([body.scenario, options]);
  }
  const hasInterventions = (body) => INTERVENTIONS.some((k) => k in body.options);

  // The trace of `body` from the page's engine, or null when only the server can answer.
  function traceHere(body) {
    if (!A.engine.ready() || !engineInputs || hasInterventions(body) || setupKey(body) !== engineInputs.key) return null;
    const base = engineInputs.trace;
    const doc = { ...engineInputs.input, temperature: body.options.temperature, causal: body.options.causal };
    if (body.detail_heads) doc.detail_heads = body.detail_heads;
    let trace;
    try {
      trace = A.engine.attend(doc);
    } catch (e) {
      return null; // the server will answer, and say what is wrong
    }
    // what the server adds to the engine's trace
    trace.scenario_json = { ...base.scenario_json, temperature: doc.temperature, causal: doc.causal };
    trace.intervention = null;
    trace.heads.forEach((head, k) => { head.random_seed = base.heads[k].random_seed; });
    return trace;
  }

  // POST api/attention's answer to `body`: from the page's engine when it can, else the server.
  async function traceFor(body) {
    const here = traceHere(body);
    document.documentElement.dataset.computed = here ? 'page' : 'server';
    if (here) return here;
    const ask = pageEngine && !hasInterventions(body) ? { ...body, attention_input: true } : body;
    const trace = await api('api/attention', ask, { packed: true });
    if (trace.attention_input) { // the engine's, not part of the trace the page shows or exports
      engineInputs = { key: setupKey(body), trace, input: trace.attention_input };
      delete trace.attention_input;
      warmEngine();
    }
    return trace;
  }

  // V8 compiles WebAssembly fully only after it has run a while: on a 64-token, 8-head
  // trace the engine took 7 ms a run at first and 3 ms after about 60 runs, so the first
  // slider steps were twice as slow as the rest. Once a trace that large arrives, the
  // engine runs it up to WARM_RUNS times, only while the browser is idle; once per page.
  const WARM_RUNS = 60;
  let warmRuns = 0;
  function warmEngine() {
    const t = engineInputs && engineInputs.trace;
    if (!t || !A.engine.ready() || warmRuns >= WARM_RUNS || !window.requestIdleCallback) return;
    if (t.tokens.length * t.source_tokens.length * t.heads.length <= LEAN_CELLS) return;
    const doc = { ...engineInputs.input, detail_heads: [0] };
    window.requestIdleCallback((deadline) => {
      try {
        while (warmRuns < WARM_RUNS && deadline.timeRemaining() > 10) {
          A.engine.attend(doc);
          warmRuns++;
        }
      } catch (e) {
        warmRuns = WARM_RUNS; // a refused document: the slider will find out, through the server
        return;
      }
      warmEngine();
    });
  }

  // A head of a lean trace lacks its intermediates (queries ... logits).
  const hasDetail = (head) => Array.isArray(head.logits);

  // Masked cells are the same in every head (causal, window, hidden keys: the scenario's),
  // so lean heads take the null pattern of a head that has its logits.
  function prepareTrace(trace) {
    if (trace.heads.every(hasDetail)) return trace;
    const full = trace.heads.find(hasDetail);
    const mask = full ? full.logits.map((row) => row.map((x) => (x === null ? null : 0))) : null;
    for (const head of trace.heads) if (!hasDetail(head) && mask) head.mask = mask;
    trace.lean = true;
    return trace;
  }

  // Brings in the intermediates of head h of a lean trace (the same request, that head in
  // full): at once from the page's engine when it can, else from the server, after which
  // the views of that head are redrawn.
  let detailJob = null;
  function fetchHeadDetail(h) {
    const t = S.trace;
    if (!t || !t.lean || hasDetail(t.heads[h]) || detailJob === h) return null;
    const body = Object.assign({}, S.lastRequest, { detail: 'weights', detail_heads: [h] });
    const here = traceHere(body);
    if (here && here.heads.length === t.heads.length) {
      t.heads[h] = here.heads[h];
      return null;
    }
    detailJob = h;
    return busy(async () => {
      try {
        const reply = await traceFor(body);
        if (S.trace !== t || reply.heads.length !== t.heads.length) return; // a newer trace came meanwhile
        t.heads[h] = reply.heads[h];
        if (h === S.head) renderHeadViews();
      } catch (e) {
        showError(e.message);
      } finally {
        if (detailJob === h) detailJob = null; // a request for another head may be out now
      }
    });
  }

  function clearInterventions() {
    S.maskTokens = [];
    S.ablate = [];
    S.scale = [];
    S.replace = [];
    S.permute = null;
  }

  // Rows of the trace and the baseline's token indices (a permutation moves tokens).
  function baselineOf(row) {
    const iv = S.trace && S.trace.intervention;
    if (!iv) return row;
    const b = iv.after_row.indexOf(row);
    return b < 0 ? row : b;
  }
  function rowOf(b) {
    const iv = S.trace && S.trace.intervention;
    return iv && b < iv.after_row.length ? iv.after_row[b] : b;
  }

  // Coalescing recompute: while a request is out, further calls only mark the state dirty,
  // and one more request goes out when it returns (a dragged slider never queues up).
  let running = null, dirty = false;
  function compute() {
    dirty = true;
    if (running) return running;
    running = busy(async () => {
      try {
        while (dirty) {
          dirty = false;
          const body = requestBody();
          try {
            const trace = await traceFor(body);
            if (!dirty) { S.lastRequest = body; applyTrace(prepareTrace(trace)); }
          } catch (e) {
            if (!dirty) showError(e.message);
          }
        }
      } finally {
        running = null;
      }
    });
    return running;
  }

  function showError(message) {
    const el = $('error');
    el.textContent = message;
    el.hidden = false;
  }
  function clearError() {
    $('error').hidden = true;
    $('error').textContent = '';
  }

  async function loadScenario(name, { query } = {}) {
    return busy(async () => {
      const base = await api('api/scenarios/' + encodeURIComponent(name));
      S.name = name;
      S.base = base;
      S.causal = !!base.causal;
      S.temperature = typeof base.temperature === 'number' ? base.temperature : 1;
      S.sentence = null;
      clearInterventions();
      S.removeHeads = [];
      S.addHeads = [];
      S.head = 0;
      S.query = query !== undefined ? query : (Number.isInteger(base.query) ? base.query : base.tokens.length - 1);
      $('scenario-select').value = name;
      $('scenario-desc').textContent = base.description || '';
      $('sentence-input').value = base.tokens.join(' ');
      S.trace = null;
      syncControls();
      await compute();
    });
  }

  // ---- applying a trace -----------------------------------------------------------------
  function isCross() {
    return !!(S.base && S.base.source);
  }

  function headSources() {
    const list = [];
    const count = S.base ? S.base.heads.length : 0;
    for (let i = 0; i < count; i++) if (!S.removeHeads.includes(i)) list.push({ kind: 'scenario', index: i });
    S.addHeads.forEach((h, k) => list.push({ kind: 'added', k, seed: h.seed }));
    return list;
  }

  function headSeed(trace, h) {
    const head = trace.heads[h];
    if (head.random_seed !== undefined && head.random_seed !== null) return head.random_seed;
    const m = /^random \(seed (\d+)\)$/.exec(head.name || '');
    return m ? Number(m[1]) : null;
  }

  function stripKey(t) {
    return t.tokens.join('\u0000') + '\u0001' + (t.mask_tokens || []).join(',');
  }

  function applyTrace(trace) {
    const tokensChanged = !S.trace || stripKey(S.trace) !== stripKey(trace);
    S.trace = trace;
    S.apiTrace = trace;
    if (S.follow !== null) { S.query = rowOf(S.follow); S.follow = null; }
    S.query = Math.max(0, Math.min(trace.tokens.length - 1, S.query));
    S.head = Math.max(0, Math.min(trace.heads.length - 1, S.head));
    clearError();
    renderAll(tokensChanged);
    if (A.panels) A.panels.onTrace();
    document.documentElement.dataset.ready = 'true';
  }

  function precision() {
    const sj = S.trace && S.trace.scenario_json;
    if (sj && Number.isInteger(sj.precision)) return Math.min(12, sj.precision);
    if (S.base && Number.isInteger(S.base.precision)) return Math.min(12, S.base.precision);
    return 2;
  }

  // ---- rendering --------------------------------------------------------------------------
  function renderAll(tokensChanged) {
    const t = S.trace;
    if (!t) return;
    if (tokensChanged !== false) renderTokens();
    renderSummary();
    renderThumbs();
    renderHeadViews();
    syncControls();
  }

  function renderTokens() {
    const t = S.trace;
    const strip = $('token-strip');
    const hidden = new Set(t.mask_tokens || []);
    let html = '';
    t.tokens.forEach((tok, i) => {
      const cls = 'tok' + (i === S.query ? ' selected' : '') + (!isCross() && hidden.has(i) ? ' hidden-key' : '');
      html += `<span role="option" id="tok-${i}" class="${cls}" data-index="${i}" aria-selected="${i === S.query}">` +
        `<span class="tok-i">${i}</span>${R.escapeHtml(tok)}</span>`;
    });
    strip.innerHTML = html;
    strip.setAttribute('aria-activedescendant', `tok-${S.query}`);
  }

  function renderSummary() {
    const t = S.trace;
    const n = t.tokens.length, m = t.source_tokens.length, H = t.heads.length;
    const parts = [];
    parts.push(isCross() ? `${n} queries → ${m} source tokens (${t.source_tokens.join(' ')})` : `${n} tokens`);
    parts.push(`${H} head${H === 1 ? '' : 's'}`);
    parts.push(`positions ${t.positions}`);
    parts.push(t.causal ? 'causal mask' : 'no causal mask');
    if (t.window !== null && t.window !== undefined) parts.push(`window ${t.window}`);
    if (t.mask_tokens && t.mask_tokens.length) parts.push(`hidden keys ${t.mask_tokens.join(', ')}`);
    parts.push(`T = ${formatNumber(t.temperature, 2)}`);
    $('trace-summary').textContent = parts.join(' · ');
  }

  // Thumbnails are about 100 px; whole pixels per cell when the grid is small.
  function thumbSize(n, m) {
    const k = Math.max(n, m);
    return k > 50 ? 100 : Math.floor(100 / k) * k;
  }

  function renderThumbs() {
    const t = S.trace;
    const box = $('head-thumbs');
    const sources = headSources();
    if (box.children.length !== t.heads.length) {
      box.textContent = '';
      for (let h = 0; h < t.heads.length; h++) {
        const b = document.createElement('button');
        b.type = 'button';
        b.className = 'thumb';
        b.dataset.head = String(h);
        b.dataset.testid = 'head-thumb';
        b.appendChild(document.createElement('canvas'));
        const cap = document.createElement('span');
        cap.className = 'thumb-cap';
        b.appendChild(cap);
        box.appendChild(b);
      }
    }
    for (let h = 0; h < t.heads.length; h++) {
      const b = box.children[h];
      const seed = headSeed(t, h);
      const src = sources[h];
      const sel = h === S.head;
      b.classList.toggle('selected', sel);
      b.setAttribute('aria-pressed', String(sel));
      b.dataset.seed = seed === null ? '' : String(seed);
      b.setAttribute('aria-label', `Head ${h}: ${t.heads[h].name}${seed !== null ? `, random seed ${seed}` : ''}`);
      const name = R.escapeHtml(t.heads[h].name);
      const named = seed !== null && name.includes(`seed ${seed}`);
      const caption = (h < 9 ? `<kbd>${h + 1}</kbd> ` : '') + `head ${h} · ` +
        (named ? name.replace(`seed ${seed}`, `<span class="seed">seed ${seed}</span>`) : name) +
        (seed !== null && !named ? ` <span class="seed">seed ${seed}</span>` : '') +
        (src && src.kind === 'added' ? ' <span class="added">(added)</span>' : '');
      if (b.lastChild._html !== caption) { b.lastChild.innerHTML = caption; b.lastChild._html = caption; }
    }
    drawThumbMarkers();
    $('remove-head').disabled = t.heads.length <= 1;
    $('restore-heads').disabled = !S.removeHeads.length && !S.addHeads.length;
  }

  function scaleMax(h) {
    return S.scaleMode === 'head' && S.trace ? R.headMax(S.trace.heads[h]) : 1;
  }

  function renderLegend() {
    const max = scaleMax(S.head);
    const ticks = $('legend-ticks').children;
    for (let k = 0; k < ticks.length; k++) ticks[k].textContent = max === 1 ? String(k / 4) : formatNumber(max * k / 4, 2);
  }

  // The views' width, kept up to date by a ResizeObserver so that drawing never has to
  // read the layout in the middle of a render.
  let cachedWidth = 0;
  function viewWidth() {
    if (!cachedWidth) cachedWidth = document.querySelector('.view-main').clientWidth;
    return Math.max(200, cachedWidth);
  }

  // Views that depend on the head (and the query).
  function renderHeadViews() {
    const t = S.trace;
    $('view-head-name').textContent = `${S.head} “${t.heads[S.head].name}”`;
    $('view-head-count').textContent = `(${S.head + 1} of ${t.heads.length})`;
    R.updateReadouts($('readouts'), t, S.head);
    renderLegend();
    scheduleTable();
    renderQueryViews();
  }

  // The weights table (the Table view) holds n × m cells: tens of milliseconds of HTML for
  // a 64-token head, so it is built only while the Table view is shown (and on request,
  // tableNow(), which the browser tests use to read the cells); otherwise it is marked stale.
  let tableStale = true;
  function buildTable() {
    const el = $('weights-table');
    el.innerHTML = R.weightsTableHtml(S.trace, S.head);
    el.dataset.head = String(S.head);
    tableStale = false;
  }
  function scheduleTable() {
    tableStale = true;
    if (S.view === 'table') buildTable();
  }
  function tableNow() {
    if (tableStale && S.trace) buildTable();
  }

  // Views that depend on the query: cheap, redrawn on every arrow key.
  function renderQueryViews() {
    const t = S.trace;
    if (!t) return;
    const width = viewWidth();
    S.layout = R.drawHeatmap($('heatmap'), t, S.head, { width, maxHeight: 640, query: S.query, scaleMax: scaleMax(S.head) });
    $('heatmap').dataset.head = String(S.head);
    $('heatmap').dataset.query = String(S.query);
    if (S.view === 'arcs') R.drawArcs($('arcs'), t, S.head, S.query, width);
    if (!hasDetail(t.heads[S.head])) fetchHeadDetail(S.head);
    if (hasDetail(t.heads[S.head])) {
      R.updateMaths($('maths'), t, S.head, S.query, precision());
      $('maths').dataset.head = String(S.head);
      $('maths').dataset.query = String(S.query);
    } else {
      R.mathsLoading($('maths'), t, S.head);
      delete $('maths').dataset.head;
    }
    // selection marks
    const strip = $('token-strip');
    const prev = strip.querySelector('.tok.selected');
    if (prev) { prev.classList.remove('selected'); prev.setAttribute('aria-selected', 'false'); }
    const cur = $('tok-' + S.query);
    if (cur) { cur.classList.add('selected'); cur.setAttribute('aria-selected', 'true'); }
    strip.setAttribute('aria-activedescendant', `tok-${S.query}`);
    strip.dataset.query = String(S.query);
    const rows = $('readouts');
    const oldRow = rows.querySelector('.ro-row.selected');
    if (oldRow) oldRow.classList.remove('selected');
    const row = rows.querySelector(`.ro-row[data-row="${S.query}"]`);
    if (row) {
      row.classList.add('selected');
      scrollRowIntoView(rows, row);
    }
    const hide = $('hide-token');
    const hidden = S.maskTokens.includes(baselineOf(S.query)) || (t.mask_tokens || []).includes(S.query);
    hide.disabled = isCross();
    hide.setAttribute('aria-pressed', String(hidden));
    hide.textContent = hidden ? `Show token ${S.query} as a key again` : `Hide token ${S.query} as a key`;
    const st = R.rowStats(t.heads[S.head], S.query);
    $('announce').textContent = `Query ${S.query} ${t.tokens[S.query]}, head ${S.head}: ` +
      (st.fully ? 'every key masked' : `largest weight ${formatNumber(st.max, 2)} on ${t.source_tokens[st.arg]}`);
  }

  // Keeps the selected readout row visible inside its own scroll box (not the page), in
  // the next frame so that reading the layout does not force an extra one now.
  let scrollRaf = 0;
  function scrollRowIntoView(box, row) {
    cancelAnimationFrame(scrollRaf);
    scrollRaf = requestAnimationFrame(() => {
      const head = box.querySelector('.ro-head');
      const pad = head ? head.offsetHeight : 0;
      const top = row.offsetTop, bottom = top + row.offsetHeight;
      if (top - pad < box.scrollTop) box.scrollTop = Math.max(0, top - pad);
      else if (bottom > box.scrollTop + box.clientHeight) box.scrollTop = bottom - box.clientHeight;
    });
  }

  function syncControls() {
    $('causal-toggle').checked = S.causal;
    $('causal-toggle').disabled = isCross();
    $('causal-note').hidden = !isCross();
    const slider = $('temperature');
    if (document.activeElement !== slider || Math.abs(sliderToT(Number(slider.value)) - S.temperature) > 1e-9) {
      slider.value = String(tToSlider(S.temperature));
    }
    $('temperature-value').textContent = String(S.temperature);
    slider.setAttribute('aria-valuetext', `T = ${S.temperature}`);
  }

  // ---- actions ------------------------------------------------------------------------------
  function setQuery(i) {
    if (!S.trace) return;
    const n = S.trace.tokens.length;
    const q = Math.max(0, Math.min(n - 1, i));
    if (q === S.query) return;
    S.query = q;
    renderQueryViews();
    drawThumbMarkers();
    if (A.panels) A.panels.onQuery();
  }

  // The thumbnails with the query marked (their images are redrawn only for a new trace).
  function drawThumbMarkers() {
    const t = S.trace;
    const canvases = Array.from($('head-thumbs').children, (b) => b.firstChild);
    R.drawThumbs(canvases, t, thumbSize(t.tokens.length, t.source_tokens.length), S.query, t.heads.map((_, h) => scaleMax(h)));
  }

  function setHead(h) {
    if (!S.trace) return;
    const k = Math.max(0, Math.min(S.trace.heads.length - 1, h));
    if (k === S.head) return;
    S.head = k;
    const box = $('head-thumbs');
    for (let i = 0; i < box.children.length; i++) {
      box.children[i].classList.toggle('selected', i === k);
      box.children[i].setAttribute('aria-pressed', String(i === k));
    }
    renderHeadViews();
    if (A.panels) A.panels.onHead();
  }

  function setTemperature(t) {
    S.temperature = t;
    syncControls();
    return compute();
  }

  function addRandomHead(seed) {
    if (!Number.isInteger(seed) || seed < 0) {
      showError(`seed: expected a whole number ≥ 0 but got "${$('seed-input').value}"`);
      return Promise.resolve();
    }
    S.addHeads.push({ seed });
    $('seed-input').value = String(seed + 1);
    S.head = headSources().length - 1; // show the new head
    return compute();
  }

  function removeSelectedHead() {
    if (!S.trace || S.trace.heads.length <= 1) return Promise.resolve();
    const src = headSources()[S.head];
    if (!src) return Promise.resolve();
    if (src.kind === 'scenario') S.removeHeads.push(src.index);
    else S.addHeads.splice(src.k, 1);
    // head interventions follow their heads: the removed one's go, later ones move up
    const gone = S.head;
    const shift = (list) => list.filter((a) => a.head !== gone).map((a) => ({ ...a, head: a.head > gone ? a.head - 1 : a.head }));
    S.ablate = shift(S.ablate);
    S.scale = shift(S.scale);
    S.head = Math.max(0, S.head - 1);
    return compute();
  }

  function toggleHideToken() {
    if (!S.trace || isCross()) return Promise.resolve();
    const i = baselineOf(S.query);
    const k = S.maskTokens.indexOf(i);
    if (k >= 0) S.maskTokens.splice(k, 1);
    else S.maskTokens.push(i);
    return compute();
  }

  function applySentence(text) {
    const words = text.trim().split(/\s+/).filter(Boolean);
    if (!words.length) { showError('sentence: type at least one word'); return Promise.resolve(); }
    const own = S.base.tokens.join(' ');
    S.sentence = words.join(' ') === own ? null : words.join(' ');
    clearInterventions(); // their token indices belonged to the old sentence
    S.query = words.length - 1;
    return compute();
  }

  function download(blob, filename) {
    const url = URL.createObjectURL(blob);
    const a = document.createElement('a');
    a.href = url;
    a.download = filename;
    document.body.appendChild(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 30000);
  }

  function exportBase() {
    const name = (S.trace.scenario || S.name || 'scenario').replace(/[^A-Za-z0-9_-]+/g, '-');
    return `attnlab-${name}-head${S.head}`;
  }
  function exportTitle() {
    const t = S.trace;
    return `${t.scenario} · head ${S.head} "${t.heads[S.head].name}" · T = ${formatNumber(t.temperature, 2)}${t.causal ? ' · causal' : ''}`;
  }

  function exportPng() {
    const t = S.trace;
    if (!t) return;
    const canvas = document.createElement('canvas');
    R.drawHeatmap(canvas, t, S.head, { width: Math.max(viewWidth(), Math.min(1600, 160 + t.source_tokens.length * 48)), query: S.query, scaleMax: scaleMax(S.head) });
    canvas.toBlob((blob) => { if (blob) download(blob, exportBase() + '.png'); }, 'image/png');
  }
  function exportSvg() {
    if (!S.trace) return;
    const svg = R.exportSvg(S.trace, S.head, S.query, exportTitle(), scaleMax(S.head));
    download(new Blob([svg], { type: 'image/svg+xml' }), exportBase() + '.svg');
  }
  async function exportJson() {
    if (!S.trace) return;
    const name = (S.trace.scenario || 'scenario').replace(/[^A-Za-z0-9_-]+/g, '-');
    let trace = S.trace;
    if (trace.lean && S.lastRequest) { // the export carries every intermediate
      const body = Object.assign({}, S.lastRequest);
      delete body.detail;
      delete body.detail_heads;
      try { trace = await busy(() => api('api/attention', body)); } catch (e) { showError(e.message); return; }
    }
    download(new Blob([JSON.stringify(trace, null, 1)], { type: 'application/json' }), `attnlab-${name}-trace.json`);
  }

  function setView(view) {
    S.view = view;
    for (const tab of document.querySelectorAll('[role="tab"][data-view]')) {
      const on = tab.dataset.view === view;
      tab.setAttribute('aria-selected', String(on));
      tab.tabIndex = on ? 0 : -1;
      $('view-' + tab.dataset.view).hidden = !on;
    }
    if (view === 'table' && S.trace) scheduleTable();
    renderQueryViews();
  }

  function markGuide(step) {
    for (const li of document.querySelectorAll('.guide-steps li')) li.classList.toggle('active', li.dataset.step === String(step));
  }

  // ---- events -----------------------------------------------------------------------------
  function isTyping(el) {
    if (!el) return false;
    const tag = el.tagName;
    if (tag === 'INPUT') return !['checkbox', 'radio', 'button', 'submit', 'reset'].includes(el.type);
    return tag === 'SELECT' || tag === 'TEXTAREA' || el.isContentEditable;
  }

  function onKey(e) {
    if (e.altKey || e.ctrlKey || e.metaKey || !S.trace) return;
    if (isTyping(e.target)) return;
    let handled = true;
    switch (e.key) {
      case 'ArrowLeft': setQuery(S.query - 1); break;
      case 'ArrowRight': setQuery(S.query + 1); break;
      case 'ArrowUp': setHead(S.head - 1); break;
      case 'ArrowDown': setHead(S.head + 1); break;
      case 'Home': setQuery(0); break;
      case 'End': setQuery(S.trace.tokens.length - 1); break;
      default:
        if (/^[1-9]$/.test(e.key) && !e.shiftKey) setHead(Number(e.key) - 1);
        else handled = false;
    }
    if (handled) e.preventDefault();
  }

  function bind() {
    document.addEventListener('keydown', onKey);
    $('scenario-select').addEventListener('change', (e) => { markGuide(0); loadScenario(e.target.value); });
    $('token-strip').addEventListener('click', (e) => {
      const tok = e.target.closest('.tok');
      if (tok) setQuery(Number(tok.dataset.index));
    });
    $('head-thumbs').addEventListener('click', (e) => {
      const b = e.target.closest('.thumb');
      if (b) setHead(Number(b.dataset.head));
    });
    $('causal-toggle').addEventListener('change', (e) => { S.causal = e.target.checked; compute(); });
    $('temperature').addEventListener('input', (e) => {
      const t = sliderToT(Number(e.target.value));
      if (t === S.temperature) return;
      S.temperature = t;
      $('temperature-value').textContent = String(t);
      e.target.setAttribute('aria-valuetext', `T = ${t}`);
      compute();
    });
    for (const b of document.querySelectorAll('[data-temp]')) b.addEventListener('click', () => setTemperature(Number(b.dataset.temp)));
    $('add-head').addEventListener('click', () => addRandomHead(Number($('seed-input').value === '' ? NaN : $('seed-input').value)));
    $('remove-head').addEventListener('click', () => removeSelectedHead());
    $('restore-heads').addEventListener('click', () => {
      S.removeHeads = []; S.addHeads = []; S.head = 0;
      S.ablate = []; S.scale = []; // their head indices no longer hold
      compute();
    });
    $('hide-token').addEventListener('click', () => toggleHideToken());
    $('scale-mode').addEventListener('change', (e) => {
      S.scaleMode = e.target.value;
      if (S.trace) { renderThumbs(); renderLegend(); renderQueryViews(); }
    });
    $('sentence-form').addEventListener('submit', (e) => { e.preventDefault(); applySentence($('sentence-input').value); });
    $('sentence-reset').addEventListener('click', () => {
      $('sentence-input').value = S.base.tokens.join(' ');
      S.sentence = null;
      clearInterventions();
      compute();
    });
    for (const tab of document.querySelectorAll('[role="tab"][data-view]')) tab.addEventListener('click', () => setView(tab.dataset.view));
    $('export-png').addEventListener('click', exportPng);
    $('export-svg').addEventListener('click', exportSvg);
    $('export-json').addEventListener('click', exportJson);

    const heat = $('heatmap');
    const cellAt = (e) => {
      if (!S.layout) return null;
      const r = heat.getBoundingClientRect();
      return R.hitHeatmap(S.layout, e.clientX - r.left, e.clientY - r.top);
    };
    heat.addEventListener('mousemove', (e) => {
      const c = cellAt(e);
      const out = $('hover-readout');
      if (!c || !S.trace) { out.textContent = 'Hover or click a cell.'; return; }
      const head = S.trace.heads[S.head];
      const masked = R.maskGrid(head)[c.row][c.col] === null;
      out.textContent = `query ${c.row} “${S.trace.tokens[c.row]}” → key ${c.col} “${S.trace.source_tokens[c.col]}”: ` +
        (masked ? 'masked (logit −∞, weight exactly 0)' : `weight ${head.weights[c.row][c.col].toPrecision(6)}` +
          (hasDetail(head) ? `, logit ${formatNumber(head.logits[c.row][c.col], 2)}` : ''));
    });
    heat.addEventListener('click', (e) => { const c = cellAt(e); if (c) setQuery(c.row); });

    // guided path
    $('guide-1').addEventListener('click', async () => {
      markGuide(1);
      await loadScenario('previous-token', { query: 1 });
      $('token-strip').focus();
    });
    $('guide-2').addEventListener('click', async () => {
      markGuide(2);
      if (!S.base || isCross()) await loadScenario('previous-token');
      S.causal = true;
      await compute();
      $('causal-toggle').focus();
    });
    $('guide-3a').addEventListener('click', () => { markGuide(3); setTemperature(0.1); });
    $('guide-3b').addEventListener('click', () => { markGuide(3); setTemperature(3); });
    $('guide-4').addEventListener('click', async () => {
      markGuide(4);
      if (!S.base) await loadScenario('previous-token');
      const v = Number($('seed-input').value);
      await addRandomHead(Number.isInteger(v) && v >= 0 ? v : 1);
    });

    // links to a panel move the focus there too (keyboard users land where they read)
    for (const a of document.querySelectorAll('a.jump[data-jump]')) {
      a.addEventListener('click', (e) => {
        const target = $(a.dataset.jump);
        if (!target) return;
        e.preventDefault();
        target.scrollIntoView({ block: 'start' });
        target.focus({ preventScroll: true });
        history.replaceState(null, '', '#' + a.dataset.jump);
      });
    }

    new ResizeObserver((entries) => {
      const w = Math.floor(entries[entries.length - 1].contentRect.width);
      if (w === cachedWidth) return;
      cachedWidth = w;
      if (S.trace) renderQueryViews();
    }).observe(document.querySelector('.view-main'));
  }

  function initLegend() {
    const stops = A.colour.stops.map((c, k) => `${c} ${(100 * k / (A.colour.stops.length - 1)).toFixed(1)}%`).join(', ');
    $('legend-gradient').style.background = `linear-gradient(to right, ${stops})`;
  }

  async function init() {
    setPending(0);
    initLegend();
    bind();
    if (A.panels) A.panels.init(A.app);
    setView('heatmap');
    try {
      await busy(async () => {
        const [health, list] = await Promise.all([api('api/health'), api('api/scenarios')]);
        $('server-status').textContent = `engine ${health.version}`;
        pageEngine = health.page_engine === true;
        if (pageEngine) {
          busy(async () => { // counted as pending, so tests know when it is ready
            if (!(await A.engine.load('attnlab.wasm'))) return;
            $('server-status').textContent += ' · recomputes here (WebAssembly)';
            warmEngine();
          });
        }
        S.scenarios = list.scenarios;
        const sel = $('scenario-select');
        sel.textContent = '';
        for (const s of list.scenarios) {
          const o = document.createElement('option');
          o.value = s.name;
          o.textContent = s.name;
          o.title = s.description || '';
          sel.appendChild(o);
        }
        const first = list.scenarios.find((s) => s.default) || list.scenarios[0];
        if (first) await loadScenario(first.name);
      });
    } catch (e) {
      showError(`Could not reach the attnlab server: ${e.message}`);
      $('server-status').textContent = 'server unreachable';
    }
  }

  // For the render benchmark (tests/e2e/bench-render.js) and for debugging in the console.
  A.app = {
    state: S,
    api,
    busy,
    compute,
    loadScenario,
    showError,
    baselineOf,
    rowOf,
    isCross,
    precision,
    clearInterventions,
    requestOptions,
    requestBody,
    wantsLean,
    renderAllForBenchmark(trace) {
      S.trace = prepareTrace(trace);
      S.query = Math.min(S.query, trace.tokens.length - 1);
      S.head = Math.min(S.head, trace.heads.length - 1);
      renderAll(true);
    },
    setQuery,
    setHead,
    tableNow,
    setTemperature,
    applySentence,
    addRandomHead,
    sliderToT,
    tToSlider,
  };

  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', init);
  else init();
})(window.Attn = window.Attn || {});
