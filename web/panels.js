// attnlab's page: the interventions panel, "What drove this output?" (the probe) and the
// cost panel (the n² grid and the KV cache). Every number these panels show comes from
// the API — POST api/attention's `intervention`, api/probe, api/cost and api/kv
// (docs/api.md) — so it equals what `attnlab run`, `probe`, `cost` and `kv` print; this
// file formats and draws them and recomputes nothing.
(function (A) {
  'use strict';
  const { formatNumber, formatVector, formatCount, formatBytes, formatCountBytes } = A.fmt;
  const esc = (s) => A.render.escapeHtml(s);
  const $ = (id) => document.getElementById(id);
  let X = null; // the app (A.app), set by init
  let S = null; // its state

  // One request at a time per panel: while one is out, further triggers only mark the
  // panel dirty and one more goes out when it returns. `run(stale)` does the work; stale()
  // says a newer trigger came in meanwhile (its result would be out of date).
  function coalesced(run) {
    let running = null, dirty = false;
    return function trigger() {
      dirty = true;
      if (running) return running;
      running = X.busy(async () => {
        try {
          while (dirty) {
            dirty = false;
            await run(() => dirty);
          }
        } finally {
          running = null;
        }
      });
      return running;
    };
  }

  // Only traces the API answered for the page's own request drive the panels.
  function liveTrace() {
    return S.trace && S.trace === S.apiTrace ? S.trace : null;
  }

  function baselineTokens(t) {
    return t.intervention ? t.intervention.tokens : t.tokens;
  }
  // The keys a knock-out can hide: the source tokens in cross-attention.
  function keyTokens(t) {
    return X.isCross() ? t.source_tokens : baselineTokens(t);
  }

  function fillSelect(sel, items, key) {
    if (sel.dataset.key === key) return;
    const keep = sel.value;
    sel.textContent = '';
    for (const [value, text] of items) {
      const o = document.createElement('option');
      o.value = String(value);
      o.textContent = text;
      sel.appendChild(o);
    }
    sel.dataset.key = key;
    if ([...sel.options].some((o) => o.value === keep)) sel.value = keep;
  }

  // Follows the page's selection unless the user is working in that control.
  function follow(sel, value) {
    if (document.activeElement === sel) return;
    if ([...sel.options].some((o) => o.value === String(value))) sel.value = String(value);
  }

  const truncate = (s, max) => (s.length > max ? s.slice(0, max - 1) + '…' : s);
  function shortVector(v, p, max = 6) {
    const shown = formatVector(v.slice(0, max), p);
    return v.length > max ? `${shown} … (${v.length})` : shown;
  }
  const signed = (x, p) => {
    const s = formatNumber(x, p);
    return x > 0 && /[1-9]/.test(s) ? '+' + s : s;
  };

  // A bar for a measure: its length is |value| against the column's largest |value|.
  function bar(value, max, cls) {
    const w = max > 0 ? Math.min(100, (100 * Math.abs(value)) / max) : 0;
    return `<span class="bar ${cls || ''}${value < 0 ? ' neg' : ''}" style="--w:${w.toFixed(1)}%" aria-hidden="true"></span>`;
  }

  // ======================================================================================
  // Interventions
  // ======================================================================================
  function interventionItems() {
    const t = S.trace;
    const toks = t ? baselineTokens(t) : [];
    const keys = t ? keyTokens(t) : [];
    const heads = t ? t.heads : [];
    const tok = (i) => `${i} “${toks[i] !== undefined ? toks[i] : '?'}”`;
    const key = (j) => `${j} “${keys[j] !== undefined ? keys[j] : '?'}”`;
    const head = (h) => `head ${h}${heads[h] ? ` “${heads[h].name}”` : ''}`;
    const items = [];
    S.replace.forEach((r, k) => items.push({ text: `replace ${tok(r.index)} by “${r.word}”`, remove: () => S.replace.splice(k, 1) }));
    S.maskTokens.forEach((j, k) => items.push({ text: `knock out key ${key(j)}`, remove: () => S.maskTokens.splice(k, 1) }));
    S.ablate.forEach((a, k) => items.push({ text: `ablate ${head(a.head)}: ${a.kind}`, remove: () => S.ablate.splice(k, 1) }));
    S.scale.forEach((a, k) => items.push({ text: `scale ${head(a.head)} × ${a.factor}`, remove: () => S.scale.splice(k, 1) }));
    if (S.permute) items.push({ text: `permute: new order ${S.permute.join(',')}`, remove: () => { S.permute = null; } });
    return items;
  }

  let chipActions = [];
  function renderInterventionControls() {
    const t = liveTrace();
    if (!t) return;
    const toks = baselineTokens(t);
    const tokItems = toks.map((w, i) => [i, `${i} ${truncate(w, 14)}`]);
    const tokKey = toks.join('\u0000');
    const keys = keyTokens(t);
    fillSelect($('int-knock-token'), keys.map((w, j) => [j, `${j} ${truncate(w, 14)}`]), keys.join('\u0000') + (X.isCross() ? '|source' : ''));
    fillSelect($('int-replace-token'), tokItems, tokKey);
    fillSelect($('int-move-to'), t.tokens.map((w, i) => [i, `position ${i}`]), String(t.tokens.length));
    const headItems = t.heads.map((h, k) => [k, `${k} ${truncate(h.name, 18)}`]);
    const headKey = t.heads.map((h) => h.name).join('\u0000');
    fillSelect($('int-ablate-head'), headItems, headKey);
    fillSelect($('int-scale-head'), headItems, headKey);
    syncInterventionSelection();

    const items = interventionItems();
    chipActions = items.map((it) => it.remove);
    $('int-list').innerHTML = items.length
      ? items.map((it, k) => `<li><button type="button" class="chip" data-chip="${k}" aria-label="Remove: ${esc(it.text)}">${esc(it.text)} <span aria-hidden="true">×</span></button></li>`).join('')
      : '<li class="hint">none: the outputs are the baseline\'s</li>';
    $('int-reset').disabled = !items.length;
    const iv = t.intervention;
    $('int-engine').textContent = iv ? `The engine applied, in this order: ${iv.applied.join('; ')}.` : '';
    renderInterventionResult(t);
  }

  function syncInterventionSelection() {
    if (!liveTrace()) return;
    const b = X.baselineOf(S.query);
    if (!X.isCross()) follow($('int-knock-token'), b);
    follow($('int-replace-token'), b);
    follow($('int-ablate-head'), S.head);
    follow($('int-scale-head'), S.head);
    $('int-move').textContent = `Move token ${S.query} “${truncate(S.trace.tokens[S.query], 12)}” to`;
    const rows = $('int-result').querySelectorAll('tr[data-token]');
    for (const r of rows) r.classList.toggle('selected', Number(r.dataset.token) === b);
  }

  function renderInterventionResult(t) {
    const box = $('int-result');
    const iv = t.intervention;
    const p = X.precision();
    if (!iv) {
      box.innerHTML = '<p class="hint">No intervention: pick one above (or hide a token from the controls) and the engine ' +
        'runs the scenario again; each token\'s output before and after, and the difference Δ = after − before, appear here.</p>';
      box.dataset.state = 'none';
      return;
    }
    let maxNorm = 0, arg = -1;
    iv.delta_norm.forEach((x, i) => { if (x > maxNorm) { maxNorm = x; arg = i; } });
    const allZero = iv.after.every((v) => v.every((x) => x === 0));
    const b = X.baselineOf(S.query);
    const rows = iv.tokens.map((tok, i) => {
      const row = iv.after_row[i];
      const after = iv.tokens_after[row];
      const label = `${i} ${esc(truncate(tok, 12))}${after !== tok ? ` → ${esc(truncate(after, 12))}` : ''}${row !== i ? ` <span class="hint">(row ${row})</span>` : ''}`;
      return `<tr data-token="${i}" data-testid="int-row-${i}" data-delta-norm="${iv.delta_norm[i]}"` +
        ` data-before="${esc(JSON.stringify(iv.before[i]))}" data-after="${esc(JSON.stringify(iv.after[i]))}"${i === b ? ' class="selected"' : ''}>` +
        `<th scope="row">${label}</th>` +
        `<td class="num norm">${formatNumber(iv.delta_norm[i], Math.max(p, 3))} ${bar(iv.delta_norm[i], maxNorm, 'delta')}</td>` +
        `<td class="vec">${shortVector(iv.delta[i], p)}</td>` +
        `<td class="vec">${shortVector(iv.before[i], p)}</td><td class="vec">${shortVector(iv.after[i], p)}</td></tr>`;
    }).join('');
    let summary;
    if (allZero) summary = 'Every output is 0 after the intervention: nothing of the layer\'s output is left.';
    else if (maxNorm === 0) summary = 'No output moved: ‖Δ‖ = 0 for every token.';
    else summary = `Largest change: token ${arg} “${esc(iv.tokens[arg])}”, ‖Δ‖ = ${formatNumber(maxNorm, Math.max(p, 3))}.`;
    box.innerHTML = `<p class="int-summary" data-testid="int-summary" data-all-zero="${allZero}">${summary}</p>` +
      '<div class="table-scroll int-scroll"><table class="data-table int-table"><thead><tr><th scope="col">token (baseline)</th>' +
      '<th scope="col">‖Δ‖</th><th scope="col">Δ = after − before</th><th scope="col">output before</th><th scope="col">output after</th></tr></thead>' +
      `<tbody>${rows}</tbody></table></div>`;
    box.dataset.state = 'done';
  }

  function intervene(mutate) {
    const t = liveTrace();
    if (!t) return Promise.resolve();
    S.follow = X.baselineOf(S.query); // the query stays on its token wherever it moves
    mutate(t);
    return X.compute();
  }

  function currentOrder(t) {
    return S.permute ? S.permute.slice() : baselineTokens(t).map((_, i) => i);
  }
  function setOrder(order) {
    S.permute = order.every((v, i) => v === i) ? null : order;
  }

  function bindInterventions() {
    $('int-knock').addEventListener('click', () => intervene(() => {
      const j = Number($('int-knock-token').value);
      if (!S.maskTokens.includes(j)) S.maskTokens.push(j);
    }));
    const ablate = (heads) => intervene(() => {
      const kind = $('int-ablate-kind').value;
      S.ablate = S.ablate.filter((a) => !heads.includes(a.head)).concat(heads.map((h) => ({ head: h, kind })));
    });
    $('int-ablate').addEventListener('click', () => ablate([Number($('int-ablate-head').value)]));
    $('int-ablate-all').addEventListener('click', () => { const t = liveTrace(); if (t) ablate(t.heads.map((_, h) => h)); });
    $('int-scale').addEventListener('click', () => {
      const raw = $('int-scale-factor').value.trim();
      const f = Number(raw);
      if (raw === '' || !Number.isFinite(f)) { X.showError(`scale factor: expected a number but got "${raw}"`); return; }
      intervene(() => {
        const h = Number($('int-scale-head').value);
        S.scale = S.scale.filter((a) => a.head !== h).concat([{ head: h, factor: f }]);
      });
    });
    const replace = () => {
      const word = $('int-replace-word').value.trim();
      if (!word || /\s/.test(word)) { X.showError(`replace: type one word (no spaces), not "${word}"`); return; }
      intervene(() => {
        const j = Number($('int-replace-token').value);
        S.replace = S.replace.filter((r) => r.index !== j).concat([{ index: j, word }]);
      });
    };
    $('int-replace').addEventListener('click', replace);
    $('int-replace-word').addEventListener('keydown', (e) => { if (e.key === 'Enter') { e.preventDefault(); replace(); } });
    $('int-reverse').addEventListener('click', () => intervene((t) => setOrder(currentOrder(t).reverse())));
    $('int-move').addEventListener('click', () => intervene((t) => {
      const order = currentOrder(t);
      const [moved] = order.splice(S.query, 1);
      order.splice(Number($('int-move-to').value), 0, moved);
      setOrder(order);
    }));
    $('int-list').addEventListener('click', (e) => {
      const b = e.target.closest('[data-chip]');
      if (!b) return;
      const remove = chipActions[Number(b.dataset.chip)];
      if (!remove) return;
      intervene(() => remove());
      $('int-reset').focus(); // the chip is about to disappear
    });
    $('int-reset').addEventListener('click', () => intervene(() => X.clearInterventions()));
  }

  // ======================================================================================
  // The probe: what drove this output?
  // ======================================================================================
  const PROBE_MAX_KEYS = 512, PROBE_MAX_CELLS = 2 ** 25; // the API's limits (docs/api.md)
  let lastProbe = null;

  function probeBody() {
    const t = S.trace;
    const body = { scenario: S.name, options: X.requestOptions(), query: X.baselineOf(S.query), head: S.head };
    const readout = $('probe-readout').value;
    if (readout) body.readout = readout;
    const eps = Number($('probe-epsilon').value);
    if ($('probe-epsilon').value.trim() !== '' && Number.isFinite(eps) && eps >= 0) body.epsilon = eps;
    body._key = JSON.stringify([body, t.tokens.length]);
    return body;
  }

  function probeRefusal(t) {
    const n = t.tokens.length, m = t.source_tokens.length, H = t.heads.length;
    if (m > PROBE_MAX_KEYS) return `The probe runs the scenario once per key token and stops at ${PROBE_MAX_KEYS} keys; this one has ${m}.`;
    if ((m + 1) * n * m * H > PROBE_MAX_CELLS) return 'The probe runs the scenario once per key token and stops at 2²⁵ score cells over those runs; use fewer tokens or heads.';
    return null;
  }

  const runProbe = coalesced(async (stale) => {
    const t = liveTrace();
    if (!t) return;
    const section = $('probe-section');
    const refusal = probeRefusal(t);
    if (refusal) {
      lastProbe = null;
      section.dataset.state = 'refused';
      $('probe-summary').textContent = refusal;
      for (const id of ['probe-table', 'probe-tau', 'probe-verdict', 'probe-cf']) $(id).textContent = '';
      return;
    }
    const body = probeBody();
    const key = body._key;
    delete body._key;
    if (lastProbe && lastProbe.key === key) return;
    let reply;
    try {
      reply = await X.api('api/probe', body);
    } catch (e) {
      if (stale()) return;
      section.dataset.state = 'error';
      $('probe-summary').innerHTML = `<span class="error">${esc(e.message)}</span>`;
      return;
    }
    if (stale() || liveTrace() !== t) return;
    lastProbe = { key, reply };
    renderProbe(reply);
  });

  // The probe reruns the scenario once per key token: tens of milliseconds at 64 tokens ×
  // 8 heads. It starts once the trace, query and head have been still for PROBE_QUIET_MS,
  // so that a dragged slider or a held arrow key does not wait behind probes of states
  // already gone. The wait counts as pending work (data-pending), as a request does.
  const PROBE_QUIET_MS = 150;
  let probeWait = null;
  function probeSoon() {
    if (probeWait) clearTimeout(probeWait.timer);
    else X.busy(() => new Promise((resolve) => { probeWait = { resolve }; }));
    probeWait.timer = setTimeout(() => {
      const wait = probeWait;
      probeWait = null;
      runProbe();
      wait.resolve();
    }, PROBE_QUIET_MS);
  }

  function renderProbe(r) {
    const section = $('probe-section');
    section.dataset.query = String(r.query);
    section.dataset.scenario = String(r.scenario);
    section.dataset.state = 'done';
    const p = X.precision();
    const ro = r.readout;
    $('probe-summary').innerHTML = `Query ${r.query} <q>${esc(r.query_token)}</q> · readout <b>${esc(ro.description)}</b>: ` +
      `output (${formatVector(r.output, p)}) → <b data-testid="probe-value" data-value="${r.value}">${formatNumber(r.value, 4)}</b>` +
      (r.decision !== null && r.decision !== undefined ? `, decision <b data-testid="probe-decision">${esc(r.decision)}</b>` : ', no decision to flip (a norm)');

    // per key token, side by side
    const ss = r.serrano_smith || {};
    const H = r.heads.length;
    const maxOf = (f) => r.tokens.reduce((m, x) => Math.max(m, Math.abs(f(x))), 0);
    const mW = maxOf((x) => x.weight), mV = maxOf((x) => x.value_weighted), mE = maxOf((x) => x.erasure), mG = maxOf((x) => x.grad_x_input);
    const headCols = H > 1 && H <= 4;
    let html = '<table class="data-table probe-grid"><thead><tr><th scope="col">key j</th>';
    if (headCols) r.heads.forEach((name, h) => { html += `<th scope="col" title="${esc(name)}">a<sub>ij</sub> head ${h}</th>`; });
    html += `<th scope="col">weight a<sub>ij</sub>${H > 1 ? ' (mean)' : ''}</th><th scope="col">weight·‖v<sub>j</sub>‖</th>` +
      '<th scope="col">erasure Δ</th><th scope="col">readout without j</th><th scope="col">gradient × input</th></tr></thead><tbody>';
    for (const x of r.tokens) {
      const marks = [];
      if (x.index === ss.top_weight) marks.push('<span class="mark mark-w" title="highest weight">★ top weight</span>');
      if (x.index === ss.top_erasure) marks.push('<span class="mark mark-e" title="largest |erasure|">◆ top erasure</span>');
      const cls = [!x.visible ? 'hidden-key' : '', x.flips ? 'flips' : '', x.index === ss.top_weight ? 'top-weight' : ''].filter(Boolean).join(' ');
      html += `<tr data-testid="probe-row-${x.index}" data-index="${x.index}" data-weight="${x.weight}" data-erasure="${x.erasure}"` +
        ` data-flips="${x.flips}" data-visible="${x.visible}"${cls ? ` class="${cls}"` : ''}>` +
        `<th scope="row">${x.index} ${esc(truncate(x.token, 12))} ${marks.join(' ')}</th>`;
      if (headCols) x.weights.forEach((w) => { html += `<td class="num">${formatNumber(w, 2)}</td>`; });
      if (!x.visible) {
        html += '<td class="num" colspan="5">hidden from this query: every measure is 0</td></tr>';
        continue;
      }
      const without = r.decision !== null && r.decision !== undefined
        ? `${formatNumber(x.readout_without, 3)} (${esc(x.decision_without)}${x.flips ? ', <b>flips</b>' : ''})`
        : formatNumber(x.readout_without, 3);
      html += `<td class="num">${formatNumber(x.weight, 2)} ${bar(x.weight, mW, 'w')}</td>` +
        `<td class="num">${formatNumber(x.value_weighted, 2)} ${bar(x.value_weighted, mV, 'v')}</td>` +
        `<td class="num">${signed(x.erasure, 3)} ${bar(x.erasure, mE, 'e')}</td>` +
        `<td class="num">${without}</td>` +
        `<td class="num">${signed(x.grad_x_input, 3)} ${bar(x.grad_x_input, mG, 'g')}</td></tr>`;
    }
    $('probe-table').innerHTML = html + '</tbody></table>';

    const tau = r.kendall_tau || {};
    const tv = (v) => (v === null || v === undefined ? 'undefined' : formatNumber(v, 2));
    $('probe-tau').innerHTML = '<span class="label">Kendall τ</span> between the weights and ' +
      `weight·‖v‖ <b data-testid="tau-value-weighted">${tv(tau.value_weighted)}</b>, ` +
      `|erasure| <b data-testid="tau-erasure">${tv(tau.erasure)}</b>, ` +
      `|gradient × input| <b data-testid="tau-grad">${tv(tau.grad_x_input)}</b> ` +
      '<span class="hint">(1: the same order, −1: the reverse)</span>';

    const v = $('probe-verdict');
    v.dataset.agree = String(!!ss.weights_agree);
    v.dataset.topWeight = String(ss.top_weight);
    v.dataset.topErasure = String(ss.top_erasure);
    v.dataset.topFlips = String(!!ss.top_flips);
    v.dataset.othersFlipping = JSON.stringify(ss.others_flipping || []);
    // the headline only where the test is decisive: one side's knock-out flips, the other's not
    const others = (ss.others_flipping || []).length;
    let headline = '', tone = '';
    if (!ss.has_decision) headline = 'Serrano & Smith\'s test needs a decision to flip (a class, or the sign of a coordinate or direction).';
    else if (ss.top_flips && !others) { headline = 'Here the largest weight points at what the decision rests on.'; tone = ' agree'; }
    else if (!ss.top_flips && others) { headline = 'Here the largest weight misleads: another token\'s removal flips the decision, its own does not.'; tone = ' mislead'; }
    v.className = 'verdict' + tone;
    v.innerHTML = (headline ? `<b>${esc(headline)}</b> ` : '') + `<span class="verdict-text">${esc(ss.verdict || '')}</span>`;

    renderCounterfactual(r);
  }

  function renderCounterfactual(r) {
    const cf = r.counterfactual;
    const box = $('probe-cf');
    if (!cf) { box.textContent = ''; return; }
    const name = r.heads[cf.head] !== undefined ? r.heads[cf.head] : '';
    let html = `<h3>Jain &amp; Wallace's counterfactual <span class="hint">(head ${cf.head} <q>${esc(name)}</q>: the most different weights ` +
      `that keep the readout within ε = ${formatNumber(cf.epsilon, 3)})</span></h3>` +
      '<div class="table-scroll cf-scroll"><table class="data-table cf-table"><thead><tr><th scope="col">key</th><th scope="col">the head\'s weights</th><th scope="col">counterfactual</th></tr></thead><tbody>';
    r.source_tokens.forEach((tok, j) => {
      html += `<tr data-testid="cf-row-${j}" data-original="${cf.original[j]}" data-found="${cf.found[j]}"><th scope="row">${j} ${esc(truncate(tok, 12))}</th>` +
        `<td class="num">${formatNumber(cf.original[j], 2)} ${bar(cf.original[j], 1, 'w')}</td>` +
        `<td class="num">${formatNumber(cf.found[j], 2)} ${bar(cf.found[j], 1, 'cf')}</td></tr>`;
    });
    html += '</tbody></table></div>';
    const dec = cf.decision_before !== null && cf.decision_before !== undefined ? `, decision ${esc(cf.decision_before)} → ${esc(cf.decision_after)}` : '';
    html += `<p class="probe-line" data-testid="cf-summary" data-divergence="${cf.divergence}">Jensen–Shannon divergence ` +
      `<b>${formatNumber(cf.divergence, 3)}</b> bits (0: the same, 1: disjoint); readout ${formatNumber(cf.readout_before, 4)} → ` +
      `${formatNumber(cf.readout_after, 4)}${dec}.` +
      (cf.exact ? ' The readout is linear and every pair of keys was tried: this is the largest divergence there is.' : '') +
      (cf.note ? ` <span class="hint">${esc(cf.note)}</span>` : '') + '</p>';
    box.innerHTML = html;
  }

  function resetProbeControls() {
    const base = S.base;
    const t = liveTrace();
    const sel = $('probe-readout');
    const items = [['', base && base.readout ? 'default: the predicted class\'s probability' : 'default: ‖output‖']];
    if (base && base.readout && Array.isArray(base.readout.labels)) for (const l of base.readout.labels) items.push([`class:${l}`, `p(${l})`]);
    items.push(['norm', '‖output‖']);
    const dOut = t && t.output && t.output[0] ? t.output[0].length : 0;
    for (let c = 0; c < Math.min(dOut, 16); c++) items.push([`coordinate:${c}`, `coordinate ${c}`]);
    const fresh = sel.dataset.scenario !== S.name;
    fillSelect(sel, items, `${S.name}|${dOut}`);
    if (fresh) { sel.value = ''; sel.dataset.scenario = S.name; }
  }

  function bindProbe() {
    $('probe-readout').addEventListener('change', () => runProbe());
    $('probe-epsilon').addEventListener('change', () => runProbe());
    const load = async (name) => {
      await X.loadScenario(name);
      const section = $('probe-section');
      section.scrollIntoView({ block: 'start' });
      section.focus({ preventScroll: true });
    };
    $('probe-mislead').addEventListener('click', () => load('weights-mislead'));
    $('probe-agree').addEventListener('click', () => load('weights-agree'));
  }

  // ======================================================================================
  // Cost: the n² grid and the KV cache
  // ======================================================================================
  // The model presets of `attnlab kv --model` (docs/api.md, POST /api/kv). The API has no
  // list endpoint; tests/e2e/panels.test.js checks this list against the server's.
  const KV_TABLE_CONTEXTS = [4096, 32768, 131072]; // the CLI's default --context
  const C = { n: 100000, kvModel: 'llama-3-8b', kvDtype: 'f16', kvContext: 8192, measured: null, measuring: false };

  // n slider: 0..600 -> 10^(x/100), two significant digits (1 to 1,000,000)
  const sliderToN = (x) => {
    const v = Math.pow(10, x / 100);
    const mag = Math.pow(10, Math.max(0, Math.floor(Math.log10(v)) - 1));
    return Math.max(1, Math.round(v / mag) * mag);
  };
  const nToSlider = (n) => Math.max(0, Math.min(600, Math.round((100 * Math.log10(Math.max(1, n))) / 5) * 5));
  // context slider: k = 0..24 -> 256, 384, 512, 768, ... 1,048,576 (powers of two and 1.5×)
  const sliderToContext = (k) => (k % 2 === 0 ? 2 ** (8 + k / 2) : 3 * 2 ** (7 + (k - 1) / 2));
  const contextToSlider = (c) => {
    let best = 0;
    for (let k = 0; k <= 24; k++) if (Math.abs(Math.log(sliderToContext(k) / c)) < Math.abs(Math.log(sliderToContext(best) / c))) best = k;
    return best;
  };

  function positiveInt(id, what) {
    const raw = $(id).value.trim();
    if (!/^\d+$/.test(raw) || Number(raw) < 1 || !Number.isSafeInteger(Number(raw))) throw new Error(`${what}: expected a whole number ≥ 1 but got "${raw}"`);
    return Number(raw);
  }

  function costError(message) {
    const el = $('cost-error');
    el.hidden = !message;
    el.textContent = message || '';
  }

  function scenarioLength(t) {
    return t ? t.tokens.length : null;
  }

  function costBody() {
    const body = {
      d_model: positiveInt('cost-dmodel', 'd_model'),
      heads: positiveInt('cost-heads', 'heads'),
      layers: positiveInt('cost-layers', 'layers'),
      dtype: $('cost-dtype').value,
      window: positiveInt('cost-window', 'window'),
    };
    if (body.d_model % body.heads !== 0) {
      throw new Error(`heads: ${body.heads} heads do not divide d_model ${body.d_model} into equal heads (d_k = d_model / heads); change one of them`);
    }
    const n = scenarioLength(liveTrace());
    const tokens = [];
    if (n !== null) tokens.push(n);
    if (!tokens.includes(C.n)) tokens.push(C.n);
    return { tokens, ...body };
  }

  let lastCostKey = null;
  const runCost = coalesced(async (stale) => {
    let body;
    try { body = costBody(); } catch (e) { costError(e.message); return; }
    const key = JSON.stringify(body);
    if (key === lastCostKey) return;
    let reply;
    try {
      reply = await X.api('api/cost', body, { exact: true });
    } catch (e) {
      if (!stale()) costError(e.message);
      return;
    }
    if (stale()) return;
    lastCostKey = key;
    costError(null);
    renderCost(body, reply);
  });

  function renderCost(body, r) {
    const sh = r.shape;
    $('cost-cli').textContent = `attnlab cost --tokens ${body.tokens.join(',')} --d-model ${sh.d_model} --heads ${sh.heads} ` +
      `--layers ${sh.layers} --dtype ${sh.dtype} --window ${sh.window}`;
    const t = liveTrace();
    const nScenario = scenarioLength(t);
    const cards = [];
    const byN = new Map(r.rows.map((row) => [Number(row.n), row]));
    const card = (which, row, title) => {
      const cell = (field, text) => `<td class="num" data-testid="cost-${which}-${field}" data-value="${row[field]}">${text || formatCount(row[field])}</td>`;
      return `<div class="cost-card" data-testid="cost-${which}" data-n="${row.n}"><h4>${title}</h4>` +
        '<div class="table-scroll"><table class="data-table cost-table"><thead><tr><th scope="col"></th><th scope="col">dense n²</th>' +
        `<th scope="col">causal</th><th scope="col">window w = ${formatCount(sh.window)}</th>` +
        `<th scope="col">strided (Child), l = ${formatCount(row.strided_stride)}</th></tr></thead><tbody>` +
        `<tr><th scope="row">cells in one head's grid</th>${cell('dense_cells')}${cell('causal_cells')}${cell('window_cells')}${cell('strided_cells')}</tr>` +
        `<tr><th scope="row">FLOPs, one layer (${formatCount(sh.heads)} heads)</th>${cell('flops_layer_dense')}${cell('flops_layer_causal')}${cell('flops_layer_window')}${cell('flops_layer_strided')}</tr>` +
        `<tr><th scope="row">FLOPs, all ${formatCount(sh.layers)} layers</th>${cell('flops_model_dense')}${cell('flops_model_causal')}<td class="num muted">—</td><td class="num muted">—</td></tr>` +
        '</tbody></table></div>' +
        `<p class="cost-bytes">One materialised dense grid in ${esc(sh.dtype)}: <span data-testid="cost-${which}-grid_bytes_head" data-value="${row.grid_bytes_head}">${formatCountBytes(row.grid_bytes_head)}</span> per head, ` +
        `<span data-testid="cost-${which}-grid_bytes_layer" data-value="${row.grid_bytes_layer}">${formatCountBytes(row.grid_bytes_layer)}</span> per layer (${formatCount(sh.heads)} heads).</p></div>`;
    };
    if (nScenario !== null && byN.has(nScenario)) {
      const m = t.source_tokens.length;
      const cross = X.isCross() ? ` <span class="hint">(cross-attention: this heatmap is ${t.tokens.length} × ${m}; the counts are for n queries against n keys)</span>` : '';
      cards.push(card('scenario', byN.get(nScenario), `This scenario: n = ${formatCount(nScenario)} tokens, ${formatCount(byN.get(nScenario).dense_cells)} dot products per head${cross}`));
    }
    if (byN.has(C.n)) cards.push(card('slider', byN.get(C.n), `Context n = ${formatCount(C.n)} tokens`));
    $('cost-tables').innerHTML = cards.join('');
    $('cost-tables').dataset.key = JSON.stringify(body);
  }

  function setCostN(n) {
    C.n = Math.max(1, Math.min(1000000000, Math.round(n)));
    $('cost-n').value = String(nToSlider(C.n));
    $('cost-n-value').textContent = formatCount(C.n);
    $('cost-n').setAttribute('aria-valuetext', `n = ${formatCount(C.n)} tokens`);
    if (document.activeElement !== $('cost-n-input')) $('cost-n-input').value = String(C.n);
    return runCost();
  }

  // ---- KV cache -------------------------------------------------------------------------
  function kvContexts() {
    const set = new Set(KV_TABLE_CONTEXTS);
    for (let e = 10; e <= 20; e++) set.add(2 ** e); // the chart: 1K to 1M
    set.add(C.kvContext);
    return [...set].sort((a, b) => a - b);
  }

  function kvBody() {
    const body = { model: C.kvModel, dtype: C.kvDtype, context: kvContexts() };
    const budget = $('kv-budget').value.trim();
    if (budget) body.budget = /^\d+$/.test(budget) ? Number(budget) : budget;
    return body;
  }

  let lastKv = null;
  const runKv = coalesced(async (stale) => {
    const body = kvBody();
    const key = JSON.stringify(body);
    if (lastKv && lastKv.key === key) { renderKv(lastKv.reply); return; } // the same numbers, another selected context
    let reply;
    try {
      reply = await X.api('api/kv', body, { exact: true });
    } catch (e) {
      if (!stale()) costError(e.message);
      return;
    }
    if (stale()) return;
    costError(null);
    lastKv = { key, reply };
    renderKv(reply);
  });

  function renderKv(r) {
    const m = r.model;
    const dt = esc(r.dtype);
    const lines = [];
    lines.push(`<p><b>${esc(m.name)}</b>${m.source ? ` (${esc(m.source)})` : ''}: ${formatCount(m.layers)} layers, ${formatCount(m.heads)} query heads sharing ` +
      `${formatCount(m.kv_heads)} KV heads, d<sub>head</sub> ${formatCount(m.head_dim)}; KV cache in ${dt}</p>`);
    lines.push(`<p class="formula" data-testid="kv-formula" data-value="${r.bytes_per_token}">KV cache = 2 × L × H<sub>kv</sub> × d<sub>head</sub> × context × bytes = ` +
      `2 × ${m.layers} × ${m.kv_heads} × ${m.head_dim} × context × ${r.dtype_bytes} = <b>${formatCount(r.bytes_per_token)} bytes (${formatBytes(r.bytes_per_token)})</b> per token</p>`);
    if (r.weight_bytes !== null && m.parameters !== null) {
      lines.push(`<p class="formula" data-testid="kv-weights" data-value="${r.weight_bytes}">weights: ${formatCount(m.parameters)} parameters × ${r.dtype_bytes} bytes (${dt}) = ` +
        `<b>${formatCount(r.weight_bytes)} bytes (${formatBytes(r.weight_bytes)})</b></p>`);
    }
    if (r.crossover_context !== null) lines.push(`<p data-testid="kv-crossover" data-value="${r.crossover_context}">The cache outgrows the weights from <b>${formatCount(r.crossover_context)}</b> tokens on.</p>`);
    if (m.note) lines.push(`<p class="hint">${esc(m.note)}</p>`);
    if (r.budget) {
      const b = r.budget;
      lines.push(b.weights_fit
        ? `<p data-testid="kv-budget-line" data-value="${b.max_context}">Budget ${formatBytes(b.budget_bytes)}: the weights take ${formatBytes(r.weight_bytes)}, leaving ${formatBytes(b.left_for_cache)} for the cache: the longest context that fits is <b>${formatCount(b.max_context)}</b> tokens.</p>`
        : `<p data-testid="kv-budget-line" data-value="0">Budget ${formatBytes(b.budget_bytes)}: the weights alone (${formatBytes(r.weight_bytes)}) do not fit.</p>`);
    }
    $('kv-text').innerHTML = lines.join('');

    const shown = new Set(KV_TABLE_CONTEXTS.concat([C.kvContext]));
    let rows = '';
    for (const row of r.rows) {
      const ctx = Number(row.context);
      if (!shown.has(ctx)) continue;
      rows += `<tr data-testid="kv-row-${ctx}" data-cache="${row.cache_bytes}"${ctx === C.kvContext ? ' class="selected"' : ''}>` +
        `<th scope="row">${formatCount(row.context)}</th><td class="num">${formatCountBytes(row.cache_bytes)}</td>` +
        `<td class="num">${row.cache_over_weights === null ? '—' : formatNumber(row.cache_over_weights, 2)}</td>` +
        `<td class="num">${r.weight_bytes === null ? '—' : formatBytes(row.total_bytes)}</td>` +
        `<td>${row.cache_exceeds_weights ? 'the cache is larger than the weights' : ''}</td></tr>`;
    }
    $('kv-table').innerHTML = '<table class="data-table kv-rows"><thead><tr><th scope="col">context</th><th scope="col">KV cache</th>' +
      '<th scope="col">cache ÷ weights</th><th scope="col">cache + weights</th><th scope="col"></th></tr></thead>' +
      `<tbody>${rows}</tbody></table>`;
    drawKvChart(r);
    renderMeasured(r);
  }

  // Log-log chart: the formula line (the API's rows), the weights line, and on request the
  // measured points. Positions are drawing; every label is an API number.
  function drawKvChart(r) {
    const W = 720, H = 300, L = 78, R = 16, T = 16, B = 40;
    const pts = r.rows.map((row) => ({ x: Number(row.context), y: Number(row.cache_bytes), row }));
    const meas = C.measured && C.measured.key === measureKey() ? C.measured.reply.measured : null;
    const ys = pts.map((p) => p.y);
    if (r.weight_bytes !== null) ys.push(Number(r.weight_bytes));
    if (meas) for (const p of meas.points) ys.push(Number(p.formula_bytes), Number(p.allocator_bytes), Math.max(1, Number(p.rss_bytes)));
    const xs = pts.map((p) => p.x).concat(meas ? meas.points.map((p) => Number(p.context)) : []);
    const x0 = Math.log2(Math.min(...xs)) - 0.25, x1 = Math.log2(Math.max(...xs)) + 0.25;
    const y0 = Math.floor(Math.log2(Math.min(...ys))) - 0.5, y1 = Math.ceil(Math.log2(Math.max(...ys))) + 0.5;
    const px = (x) => L + ((Math.log2(x) - x0) / Math.max(1e-9, x1 - x0)) * (W - L - R);
    const py = (y) => T + (1 - (Math.log2(Math.max(1, y)) - y0) / Math.max(1e-9, y1 - y0)) * (H - T - B);
    const out = [`<svg class="chart" viewBox="0 0 ${W} ${H}" role="img" aria-label="KV cache bytes against context, log-log: the formula, the weights and any measured points" data-testid="kv-svg">`];
    // grid: x at powers of ten, y at powers of two (every other one when crowded)
    for (let e = Math.ceil(Math.log10(2 ** x0) - 1e-9); 10 ** e <= 2 ** x1 * (1 + 1e-9); e++) {
      const x = px(10 ** e);
      const label = e >= 6 ? `${10 ** (e - 6)}M` : e >= 3 ? `${10 ** (e - 3)}k` : String(10 ** e);
      out.push(`<line class="grid" x1="${x}" x2="${x}" y1="${T}" y2="${H - B}"/><text class="tick" x="${x}" y="${H - B + 14}" text-anchor="middle">${label}</text>`);
    }
    const span = y1 - y0;
    const stepY = span > 16 ? 4 : span > 8 ? 2 : 1;
    for (let e = Math.ceil(y0); e <= Math.floor(y1); e++) {
      if (e % stepY !== 0) continue;
      const y = py(2 ** e);
      out.push(`<line class="grid" x1="${L}" x2="${W - R}" y1="${y}" y2="${y}"/><text class="tick" x="${L - 6}" y="${y + 4}" text-anchor="end">${formatBytes(2n ** BigInt(e))}</text>`);
    }
    out.push(`<rect class="frame" x="${L}" y="${T}" width="${W - L - R}" height="${H - T - B}"/>`);
    out.push(`<text class="axis" x="${(L + W - R) / 2}" y="${H - 6}" text-anchor="middle">context (tokens)</text>`);
    out.push(`<text class="axis" transform="translate(14,${(T + H - B) / 2}) rotate(-90)" text-anchor="middle">bytes</text>`);
    if (r.weight_bytes !== null) {
      const y = py(Number(r.weight_bytes));
      out.push(`<line class="weights-line" x1="${L}" x2="${W - R}" y1="${y}" y2="${y}" data-testid="kv-weights-line" data-value="${r.weight_bytes}"/>` +
        `<text class="chart-label" x="${L + 6}" y="${y - 5}">weights ${formatBytes(r.weight_bytes)} (${esc(r.dtype)})</text>`);
    }
    if (r.crossover_context !== null && Number(r.crossover_context) >= 2 ** x0 && Number(r.crossover_context) <= 2 ** x1) {
      const x = px(Number(r.crossover_context));
      out.push(`<line class="cross-line" x1="${x}" x2="${x}" y1="${T}" y2="${H - B}"/><text class="chart-label" x="${x - 4}" y="${T + 12}" text-anchor="end">cache = weights at ${formatCount(r.crossover_context)}</text>`);
    }
    if (r.budget && r.budget.weights_fit) {
      const mc = Number(r.budget.max_context);
      if (mc >= 2 ** x0 && mc <= 2 ** x1) {
        const x = px(mc);
        out.push(`<line class="budget-line" x1="${x}" x2="${x}" y1="${T}" y2="${H - B}"/><text class="chart-label" x="${x + 4}" y="${H - B - 8}">budget: ${formatCount(mc)}</text>`);
      }
    }
    out.push(`<polyline class="formula-line" points="${pts.map((p) => `${px(p.x).toFixed(1)},${py(p.y).toFixed(1)}`).join(' ')}"/>`);
    for (const p of pts) {
      const sel = p.x === C.kvContext;
      out.push(`<circle class="formula-pt${sel ? ' selected' : ''}" cx="${px(p.x).toFixed(1)}" cy="${py(p.y).toFixed(1)}" r="${sel ? 5.5 : 3}"` +
        ` data-context="${p.row.context}" data-bytes="${p.row.cache_bytes}"><title>${formatCount(p.row.context)} tokens: ${formatCountBytes(p.row.cache_bytes)}</title></circle>`);
    }
    const selRow = r.rows.find((row) => Number(row.context) === C.kvContext);
    if (selRow) {
      const x = px(C.kvContext), y = py(Number(selRow.cache_bytes));
      const anchor = x > W - 200 ? 'end' : 'start';
      out.push(`<text class="chart-label sel-label" x="${x + (anchor === 'end' ? -9 : 9)}" y="${y + 16}" text-anchor="${anchor}" data-testid="kv-chart-selected">${formatCount(C.kvContext)} tokens: ${formatBytes(selRow.cache_bytes)}</text>`);
    }
    if (meas) {
      const partial = meas.layers !== m0(r);
      if (partial) out.push(`<polyline class="measured-formula" points="${meas.points.map((p) => `${px(Number(p.context)).toFixed(1)},${py(Number(p.formula_bytes)).toFixed(1)}`).join(' ')}"/>`);
      for (const p of meas.points) {
        const x = px(Number(p.context));
        out.push(`<rect class="measured-pt" x="${(x - 4).toFixed(1)}" y="${(py(Number(p.allocator_bytes)) - 4).toFixed(1)}" width="8" height="8" data-context="${p.context}" data-bytes="${p.allocator_bytes}"><title>measured, malloc: ${formatCountBytes(p.allocator_bytes)}</title></rect>`);
        if (Number(p.rss_bytes) > 0) out.push(`<path class="measured-rss" d="M${(x - 5).toFixed(1)},${(py(Number(p.rss_bytes)) + 4).toFixed(1)} l5,-9 l5,9 z"><title>measured, resident: ${formatCountBytes(p.rss_bytes)}</title></path>`);
      }
    }
    out.push('</svg>');
    const legend = ['<span class="key formula-key"></span>KV cache, the formula'];
    if (r.weight_bytes !== null) legend.push('<span class="key weights-key"></span>the weights');
    if (r.crossover_context !== null) legend.push('<span class="key cross-key"></span>where the cache overtakes them');
    if (meas) {
      legend.push(`<span class="key measured-key"></span>measured (malloc), ${meas.layers} of ${m0(r)} layers`);
      legend.push('<span class="key rss-key"></span>measured (resident memory)');
      if (meas.layers !== m0(r)) legend.push(`<span class="key mformula-key"></span>the formula for ${meas.layers} layers`);
    }
    $('kv-chart').innerHTML = out.join('') + `<p class="chart-legend">${legend.map((x) => `<span>${x}</span>`).join('')}</p>`;
  }
  const m0 = (r) => r.model.layers;

  function measureKey() {
    return JSON.stringify([C.kvModel, C.kvDtype]);
  }

  function renderMeasured(r) {
    const box = $('kv-measured');
    const m = C.measured && C.measured.key === measureKey() ? C.measured.reply.measured : null;
    if (!m) { box.innerHTML = ''; return; }
    const dur = (s) => (s >= 1 ? `${formatNumber(s, 2)} s` : s >= 1e-3 ? `${formatNumber(s * 1e3, 2)} ms` : `${formatNumber(s * 1e6, 2)} µs`);
    let rows = '';
    for (const p of m.points) {
      rows += `<tr data-testid="kv-measured-${p.context}" data-formula="${p.formula_bytes}" data-cache="${p.cache_bytes}" data-allocator="${p.allocator_bytes}">` +
        `<th scope="row">${formatCount(p.context)}</th><td class="num">${formatBytes(p.formula_bytes)}</td><td class="num">${formatBytes(p.cache_bytes)}</td>` +
        `<td class="num">${formatBytes(p.allocator_bytes)}</td><td class="num">${formatBytes(p.rss_bytes)}</td><td class="num">${dur(p.decode_seconds)}</td></tr>`;
    }
    box.innerHTML = `<p>Measured on the server: ${esc(r.model.name)} decoded with random weights (d<sub>model</sub> ${formatCount(m.d_model)}) in ` +
      `${m.layers} of its ${r.model.layers} layers, KV cache in ${esc(r.dtype)}. The server measures while it serves: its resident memory is noisier than the CLI's.</p>` +
      `<table class="data-table"><thead><tr><th scope="col">context</th><th scope="col">formula (${m.layers} layer${m.layers === 1 ? '' : 's'})</th>` +
      '<th scope="col">KVCache::bytes</th><th scope="col">malloc in use</th><th scope="col">resident (RSS)</th><th scope="col">decode step</th></tr></thead>' +
      `<tbody>${rows}</tbody></table>`;
  }

  async function measureKv() {
    if (C.measuring) return;
    C.measuring = true;
    const button = $('kv-measure');
    button.disabled = true;
    const key = measureKey();
    const body = { model: C.kvModel, dtype: C.kvDtype, context: [C.kvContext], measure: true };
    $('kv-measure-status').textContent = `decoding ${C.kvModel} to ${formatCount(C.kvContext)} tokens on the server…`;
    try {
      await X.busy(async () => {
        try {
          const reply = await X.api('api/kv', body, { exact: true });
          C.measured = { key, reply };
          const m = reply.measured;
          $('kv-measure-status').textContent = `measured ${m.points.length} context lengths in ${m.layers} layer${m.layers === 1 ? '' : 's'}`;
          $('kv-measure-status').dataset.points = String(m.points.length);
          if (lastKv) renderKv(lastKv.reply);
        } catch (e) {
          $('kv-measure-status').textContent = e.message;
        }
      });
    } finally {
      C.measuring = false;
      button.disabled = false;
    }
  }

  function setKvContext(c) {
    C.kvContext = Math.max(1, Math.round(c));
    $('kv-context').value = String(contextToSlider(C.kvContext));
    $('kv-context-value').textContent = formatCount(C.kvContext);
    $('kv-context').setAttribute('aria-valuetext', `${formatCount(C.kvContext)} tokens`);
    if (document.activeElement !== $('kv-context-input')) $('kv-context-input').value = String(C.kvContext);
    return runKv();
  }

  function bindCost() {
    const model = $('kv-model');
    X.busy(async () => { // the server's presets (GET api/models), as `attnlab kv` knows them
      try {
        const { models } = await X.api('api/models');
        for (const m of models) {
          const o = document.createElement('option');
          o.value = o.textContent = m.name;
          o.title = `${m.layers} layers, ${m.kv_heads} KV heads of ${m.head_dim} (${m.source})`;
          model.appendChild(o);
        }
        model.value = C.kvModel;
      } catch (e) {
        costError(`The model presets could not be loaded: ${e.message}`);
      }
    });
    $('kv-dtype').value = C.kvDtype;
    for (const id of ['cost-dmodel', 'cost-heads', 'cost-layers', 'cost-dtype', 'cost-window']) $(id).addEventListener('change', () => runCost());
    $('cost-n').addEventListener('input', (e) => setCostN(sliderToN(Number(e.target.value))));
    $('cost-n-input').addEventListener('change', (e) => {
      const raw = e.target.value.trim();
      if (!/^\d+$/.test(raw) || Number(raw) < 1) { costError(`n: expected a whole number ≥ 1 but got "${raw}"`); return; }
      setCostN(Number(raw));
    });
    for (const b of document.querySelectorAll('[data-cost-n]')) b.addEventListener('click', () => setCostN(Number(b.dataset.costN)));
    model.addEventListener('change', () => { C.kvModel = model.value; runKv(); });
    $('kv-dtype').addEventListener('change', (e) => { C.kvDtype = e.target.value; runKv(); });
    $('kv-context').addEventListener('input', (e) => setKvContext(sliderToContext(Number(e.target.value))));
    $('kv-context-input').addEventListener('change', (e) => {
      const raw = e.target.value.trim();
      if (!/^\d+$/.test(raw) || Number(raw) < 1) { costError(`context: expected a whole number ≥ 1 but got "${raw}"`); return; }
      setKvContext(Number(raw));
    });
    $('kv-budget').addEventListener('change', () => runKv());
    $('kv-measure').addEventListener('click', () => measureKv());
    $('cost-n-value').textContent = formatCount(C.n);
    $('cost-n').value = String(nToSlider(C.n));
    $('cost-n-input').value = String(C.n);
    $('kv-context').value = String(contextToSlider(C.kvContext));
    $('kv-context-value').textContent = formatCount(C.kvContext);
    $('kv-context-input').value = String(C.kvContext);
  }

  // ======================================================================================
  let costStarted = false;
  A.panels = {
    init(app) {
      X = app;
      S = app.state;
      bindInterventions();
      bindProbe();
      bindCost();
    },
    // A new trace from the API: every panel follows.
    onTrace() {
      if (!liveTrace()) return;
      renderInterventionControls();
      resetProbeControls();
      probeSoon();
      runCost();
      if (!costStarted) { costStarted = true; runKv(); }
    },
    onQuery() {
      if (!liveTrace()) return;
      syncInterventionSelection();
      probeSoon();
    },
    onHead() {
      if (!liveTrace()) return;
      syncInterventionSelection();
      probeSoon();
    },
    // for tests and the console
    cost: C,
    setCostN,
    setKvContext,
    sliderToN,
    sliderToContext,
  };
})(window.Attn = window.Attn || {});
