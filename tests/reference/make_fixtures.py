#!/usr/bin/python3
"""Independent float64 NumPy reference for attnlab scenarios.

Written from docs/scenario-format.md alone (no attnlab code was consulted).
It builds a fixed set of scenarios, computes every intermediate of the
attention trace, checks the results with independent sanity asserts, and
writes tests/reference/fixtures/NAME.json files of the form

    {"scenario": {...a valid attnlab-scenario/1 file...},
     "trace": {"tokens": [...], "source_tokens": [...],
               "heads": [{"name", "d_k", "d_v", "queries", "keys", "values",
                          "scores", "scaled", "logits", "exponentials",
                          "row_sums", "weights", "output", "fully_masked"}],
               "output": [[...]]}}

Hidden logits are written as null (-inf).  Regenerate with

    /usr/bin/python3 tests/reference/make_fixtures.py

The output is deterministic (numpy.random.default_rng(2026) for the data,
attnlab's splitmix64 + Box-Muller for random heads).
"""

import json
import math
import os
import re
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
OUT_DIR = os.path.join(HERE, "fixtures")
FORMAT = "attnlab-scenario/1"
MASK64 = (1 << 64) - 1

# --------------------------------------------------------------------------
# attnlab's generator: splitmix64, uniforms in (0, 1], Box-Muller normals
# --------------------------------------------------------------------------


class SplitMix64:
    def __init__(self, seed):
        self.state = seed & MASK64

    def next(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK64
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        return z ^ (z >> 31)

    def uniform(self):
        # top 53 bits, plus 1, times 2^-53: in (0, 1]
        return ((self.next() >> 11) + 1) * 2.0 ** -53

    def normal(self):
        u1 = self.uniform()
        u2 = self.uniform()
        return math.sqrt(-2.0 * math.log(u1)) * math.cos(2.0 * math.pi * u2)


def random_head_weights(seed, d_in, d_k, d_v):
    """W_Q, W_K, W_V in that order, each row by row, times 1/sqrt(d_in)."""
    g = SplitMix64(seed)
    scale = 1.0 / math.sqrt(d_in)
    mats = []
    for cols in (d_k, d_k, d_v):
        m = [[g.normal() * scale for _ in range(cols)] for _ in range(d_in)]
        mats.append(np.array(m, dtype=np.float64))
    return mats


def check_generator():
    # Published splitmix64 reference outputs for seed 0.
    g = SplitMix64(0)
    assert g.next() == 0xE220A8397B1DCDAF
    assert g.next() == 0x6E789E6AA1B965F4
    assert g.next() == 0x06C45D188009454F
    # uniforms stay in (0, 1]; the extreme draws map to the ends.
    assert ((0 >> 11) + 1) * 2.0 ** -53 > 0.0
    assert ((MASK64 >> 11) + 1) * 2.0 ** -53 == 1.0
    # the normals look standard
    g = SplitMix64(12345)
    xs = np.array([g.normal() for _ in range(20000)])
    assert abs(xs.mean()) < 0.03 and abs(xs.var() - 1.0) < 0.05, (xs.mean(), xs.var())


# --------------------------------------------------------------------------
# Scenario validation (just enough to be sure the fixtures are valid files)
# --------------------------------------------------------------------------

ALLOWED = {"format", "name", "description", "notes", "tokens", "embeddings",
           "positions", "heads", "w_o", "source", "causal", "window",
           "mask_tokens", "temperature", "query"}


def parse_positions(p):
    if p is None or p == "none":
        return ("none", None)
    if isinstance(p, str):
        assert p in ("sinusoidal", "rope"), p
        return (p, None)
    assert isinstance(p, dict)
    kind = p["kind"]
    if kind == "sincos-pair":
        assert set(p) == {"kind", "omega"}
        return (kind, float(p["omega"]))
    assert kind in ("none", "sinusoidal", "rope") and set(p) == {"kind"}, p
    return (kind, None)


def is_matrix(m, rows=None, cols=None):
    assert isinstance(m, list) and len(m) >= 1
    w = len(m[0])
    assert w >= 1
    for r in m:
        assert isinstance(r, list) and len(r) == w
        for x in r:
            assert isinstance(x, (int, float)) and not isinstance(x, bool)
            assert math.isfinite(x)
    if rows is not None:
        assert len(m) == rows, (len(m), rows)
    if cols is not None:
        assert w == cols, (w, cols)
    return len(m), w


def validate(s):
    assert set(s) <= ALLOWED, set(s) - ALLOWED
    assert s["format"] == FORMAT
    assert re.fullmatch(r"[A-Za-z0-9_-]+", s["name"])
    n = len(s["tokens"])
    assert 1 <= n <= 4096 and all(isinstance(t, str) for t in s["tokens"])
    _, d_model = is_matrix(s["embeddings"], rows=n)
    kind, _ = parse_positions(s.get("positions", "none"))
    d_in = d_model + 2 if kind == "sincos-pair" else d_model
    src = s.get("source")
    m = n
    if src is not None:
        assert set(src) == {"tokens", "embeddings"}
        m = len(src["tokens"])
        is_matrix(src["embeddings"], rows=m, cols=d_model)
    assert 1 <= len(s["heads"]) <= 64
    total_dv = 0
    for h in s["heads"]:
        if "random" in h:
            assert set(h) <= {"random", "d_k", "d_v", "name"}
            d_k = h.get("d_k", d_in)
            d_v = h.get("d_v", d_in)
        else:
            assert set(h) <= {"name", "w_q", "w_k", "w_v"}
            _, d_k = is_matrix(h["w_q"], rows=d_in)
            is_matrix(h["w_k"], rows=d_in, cols=d_k)
            _, d_v = is_matrix(h["w_v"], rows=d_in)
        if kind == "rope":
            assert d_k % 2 == 0
        total_dv += d_v
    if s.get("w_o") is not None:
        is_matrix(s["w_o"], rows=total_dv)
    if s.get("causal", False):
        assert m == n
    w = s.get("window")
    assert w is None or (isinstance(w, int) and w >= 1)
    for j in s.get("mask_tokens", []):
        assert isinstance(j, int) and 0 <= j < m
    t = s.get("temperature", 1.0)
    assert t > 0 and math.isfinite(t)


# --------------------------------------------------------------------------
# The reference computation (NumPy, float64)
# --------------------------------------------------------------------------


def sinusoidal_table(count, d_model):
    pe = np.zeros((count, d_model))
    for p in range(count):
        for c in range(d_model):
            two_i = c - (c % 2)
            angle = p / (10000.0 ** (two_i / d_model))
            pe[p, c] = math.sin(angle) if c % 2 == 0 else math.cos(angle)
    return pe


def apply_positions(E, kind, omega):
    E = np.array(E, dtype=np.float64)
    count, d_model = E.shape
    if kind == "sinusoidal":
        return E + sinusoidal_table(count, d_model)
    if kind == "sincos-pair":
        p = np.arange(count, dtype=np.float64)
        extra = np.stack([np.sin(p * omega), np.cos(p * omega)], axis=1)
        return np.concatenate([E, extra], axis=1)
    return E  # none, rope


def rope_rotate(M):
    M = M.copy()
    rows, d_k = M.shape
    for p in range(rows):
        for i in range(d_k // 2):
            theta = p * 10000.0 ** (-2.0 * i / d_k)
            a, b = M[p, 2 * i], M[p, 2 * i + 1]
            c, s = math.cos(theta), math.sin(theta)
            M[p, 2 * i] = a * c - b * s
            M[p, 2 * i + 1] = a * s + b * c
    return M


def visibility(s, n, m):
    vis = np.ones((n, m), dtype=bool)
    causal = s.get("causal", False)
    w = s.get("window")
    for i in range(n):
        for j in range(m):
            if causal and j > i:
                vis[i, j] = False
            if w is not None:
                if causal and j <= i - w:
                    vis[i, j] = False
                if not causal and abs(i - j) >= w:
                    vis[i, j] = False
    for j in s.get("mask_tokens", []):
        vis[:, j] = False
    return vis


def head_matrices(h, d_in):
    if "random" in h:
        d_k = h.get("d_k", d_in)
        d_v = h.get("d_v", d_in)
        return random_head_weights(h["random"], d_in, d_k, d_v)
    return [np.array(h[k], dtype=np.float64) for k in ("w_q", "w_k", "w_v")]


def compute(s):
    kind, omega = parse_positions(s.get("positions", "none"))
    X = apply_positions(s["embeddings"], kind, omega)
    src = s.get("source")
    S = X if src is None else apply_positions(src["embeddings"], kind, omega)
    n, m = X.shape[0], S.shape[0]
    d_in = X.shape[1]
    T = float(s.get("temperature", 1.0))
    vis = visibility(s, n, m)
    heads, outs = [], []
    for idx, h in enumerate(s["heads"]):
        Wq, Wk, Wv = head_matrices(h, d_in)
        Q, K, V = X @ Wq, S @ Wk, S @ Wv
        if kind == "rope":
            Q, K = rope_rotate(Q), rope_rotate(K)
        d_k, d_v = Wq.shape[1], Wv.shape[1]
        scores = Q @ K.T
        scaled = scores / math.sqrt(d_k)
        logits = np.where(vis, scaled / T, -np.inf)
        expo = np.zeros((n, m))
        row_sums = np.zeros(n)
        weights = np.zeros((n, m))
        full = np.zeros(n, dtype=bool)
        shifts = np.zeros(n)
        for i in range(n):
            if not vis[i].any():
                full[i] = True
                continue
            mx = logits[i][vis[i]].max()
            shift = 0.0 if -60.0 <= mx <= 60.0 else mx
            shifts[i] = shift
            expo[i, vis[i]] = np.exp(logits[i, vis[i]] - shift)
            row_sums[i] = expo[i].sum()
            weights[i] = expo[i] / row_sums[i]
        out = weights @ V
        heads.append(dict(name=h.get("name", "head %d" % idx), d_k=d_k, d_v=d_v,
                          Q=Q, K=K, V=V, scores=scores, scaled=scaled,
                          logits=logits, expo=expo, row_sums=row_sums,
                          weights=weights, output=out, full=full,
                          shifts=shifts, vis=vis))
        outs.append(out)
    layer = np.concatenate(outs, axis=1)
    if s.get("w_o") is not None:
        layer = layer @ np.array(s["w_o"], dtype=np.float64)
    return dict(X=X, S=S, heads=heads, output=layer)


# --------------------------------------------------------------------------
# A second, deliberately different implementation (pure Python, math.fsum)
# used only to cross-check the NumPy one.
# --------------------------------------------------------------------------


def py_dot(a, b):
    return math.fsum(x * y for x, y in zip(a, b))


def py_matmul(A, B):
    Bt = list(zip(*B))
    return [[py_dot(r, c) for c in Bt] for r in A]


def py_compute(s):
    kind, omega = parse_positions(s.get("positions", "none"))

    def inputs(E):
        E = [list(map(float, r)) for r in E]
        if kind == "sinusoidal":
            d = len(E[0])
            return [[e + (math.sin(p / 10000.0 ** ((c // 2 * 2) / d)) if c % 2 == 0
                          else math.cos(p / 10000.0 ** ((c // 2 * 2) / d)))
                     for c, e in enumerate(r)] for p, r in enumerate(E)]
        if kind == "sincos-pair":
            return [r + [math.sin(p * omega), math.cos(p * omega)] for p, r in enumerate(E)]
        return E

    X = inputs(s["embeddings"])
    S = X if s.get("source") is None else inputs(s["source"]["embeddings"])
    n, m, d_in = len(X), len(S), len(X[0])
    T = float(s.get("temperature", 1.0))
    causal, w = s.get("causal", False), s.get("window")
    hidden_cols = set(s.get("mask_tokens", []))

    def visible(i, j):
        if j in hidden_cols:
            return False
        if causal:
            return j <= i and (w is None or i - j < w)
        return w is None or abs(i - j) < w

    def rot(M):
        d = len(M[0])
        R = []
        for p, r in enumerate(M):
            r = list(r)
            for i in range(0, d, 2):
                th = p * math.pow(10000.0, -i / d)
                a, b = r[i], r[i + 1]
                r[i], r[i + 1] = a * math.cos(th) - b * math.sin(th), a * math.sin(th) + b * math.cos(th)
            R.append(r)
        return R

    res = []
    concat = [[] for _ in range(n)]
    for h in s["heads"]:
        if "random" in h:
            Wq, Wk, Wv = [M.tolist() for M in random_head_weights(
                h["random"], d_in, h.get("d_k", d_in), h.get("d_v", d_in))]
        else:
            Wq, Wk, Wv = h["w_q"], h["w_k"], h["w_v"]
        Q, K, V = py_matmul(X, Wq), py_matmul(S, Wk), py_matmul(S, Wv)
        if kind == "rope":
            Q, K = rot(Q), rot(K)
        d_k = len(Q[0])
        sc = [[py_dot(q, k) / math.sqrt(d_k) for k in K] for q in Q]
        W = []
        for i in range(n):
            vis = [j for j in range(m) if visible(i, j)]
            row = [0.0] * m
            if vis:
                mx = max(sc[i][j] / T for j in vis)
                e = {j: math.exp(sc[i][j] / T - mx) for j in vis}
                tot = math.fsum(e.values())
                for j in vis:
                    row[j] = e[j] / tot
            W.append(row)
        O = py_matmul(W, V)
        for i in range(n):
            concat[i].extend(O[i])
        res.append((Q, K, V, W, O))
    layer = concat if s.get("w_o") is None else py_matmul(concat, s["w_o"])
    return res, layer


def close(a, b, rel=1e-11, ab=1e-12):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return a.shape == b.shape and bool(np.all(np.abs(a - b) <= ab + rel * np.abs(b)))


# --------------------------------------------------------------------------
# Sanity asserts on one computed scenario
# --------------------------------------------------------------------------


def sanity(s, r):
    n = len(s["tokens"])
    m = n if s.get("source") is None else len(s["source"]["tokens"])
    causal = s.get("causal", False)
    w = s.get("window")
    for h in r["heads"]:
        W, vis = h["weights"], h["vis"]
        for i in range(n):
            if h["full"][i]:
                assert np.all(W[i] == 0.0) and h["row_sums"][i] == 0.0
                assert np.all(h["output"][i] == 0.0)
                assert all(np.isneginf(h["logits"][i]))
            else:
                assert abs(W[i].sum() - 1.0) < 1e-12, W[i].sum()
                assert np.all(W[i] >= 0.0)
                # boundary of the shift rule is not approached
                mx = h["logits"][i][vis[i]].max()
                assert abs(abs(mx) - 60.0) > 1e-3, mx
                # row_sum is the sum of the exponentials; max exponential is
                # exactly 1 after a shift
                assert close(h["row_sums"][i], h["expo"][i].sum())
                if h["shifts"][i] != 0.0:
                    assert h["expo"][i].max() == 1.0
            for j in range(m):
                if not vis[i, j]:
                    assert W[i, j] == 0.0 and h["expo"][i, j] == 0.0
                    assert np.isneginf(h["logits"][i, j])
                else:
                    assert np.isfinite(h["logits"][i, j])
        if causal:
            assert np.all(np.triu(W, 1) == 0.0)
        if w is not None:
            for i in range(n):
                for j in range(m):
                    if abs(i - j) >= w:
                        assert W[i, j] == 0.0
        for j in s.get("mask_tokens", []):
            assert np.all(W[:, j] == 0.0)
        # the weights are the plain softmax of the logits
        for i in range(n):
            if not h["full"][i]:
                l = h["logits"][i][vis[i]]
                e = np.exp(l - l.max())
                assert close(W[i][vis[i]], e / e.sum())
        assert close(h["output"], W @ h["V"])
        assert close(h["scaled"], h["scores"] / math.sqrt(h["d_k"]))
    # cross-check against the pure-Python implementation
    pres, player = py_compute(s)
    for h, (Q, K, V, W, O) in zip(r["heads"], pres):
        assert close(h["Q"], Q, ab=1e-11)
        assert close(h["K"], K, ab=1e-11) and close(h["V"], V, ab=1e-11)
        assert close(h["weights"], W, ab=1e-11), (h["weights"], W)
        assert close(h["output"], O, ab=1e-11)
    assert close(r["output"], player, ab=1e-11)


def check_permutation_equivariance(s):
    """positions none, no masks: permuting tokens only permutes the output."""
    r = compute(s)
    perm = list(range(len(s["tokens"])))[::-1]
    perm = perm[1:] + perm[:1]
    t = dict(s)
    t["tokens"] = [s["tokens"][p] for p in perm]
    t["embeddings"] = [s["embeddings"][p] for p in perm]
    r2 = compute(t)
    assert close(r2["output"], r["output"][perm], ab=1e-12)


def check_rope_relative(s):
    """RoPE scores depend only on relative position: shifting both by 1."""
    r = compute(s)
    kind, _ = parse_positions(s["positions"])
    assert kind == "rope"
    X = r["X"]
    for h_spec, h in zip(s["heads"], r["heads"]):
        Wq, Wk, _ = head_matrices(h_spec, X.shape[1])
        Q0, K0 = X @ Wq, X @ Wk
        # rotation preserves norms
        assert close(np.linalg.norm(h["Q"], axis=1), np.linalg.norm(Q0, axis=1))
        # put the same q at position i+1 and k at j+1: same score
        pad = np.zeros((1, Q0.shape[1]))
        Qs = rope_rotate(np.vstack([pad, Q0]))[1:]
        Ks = rope_rotate(np.vstack([pad, K0]))[1:]
        assert close(Qs @ Ks.T, h["scores"], ab=1e-10)


# --------------------------------------------------------------------------
# Serialization
# --------------------------------------------------------------------------


def f(x):
    x = float(x)
    assert math.isfinite(x)
    return x


def mat(M):
    return [[f(x) for x in row] for row in np.asarray(M)]


def logit_mat(M):
    return [[None if np.isneginf(x) else f(x) for x in row] for row in np.asarray(M)]


def to_text(obj, indent=0):
    """JSON with every list of scalars on one line (matrices one row a line)."""
    pad, inner = " " * indent, " " * (indent + 1)
    if isinstance(obj, dict):
        if not obj:
            return "{}"
        items = ["%s%s: %s" % (inner, json.dumps(k), to_text(v, indent + 1))
                 for k, v in obj.items()]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(obj, list) and any(isinstance(x, (list, dict)) for x in obj):
        items = [inner + to_text(v, indent + 1) for v in obj]
        return "[\n" + ",\n".join(items) + "\n" + pad + "]"
    return json.dumps(obj, allow_nan=False)


def trace_json(s, r):
    toks = s["tokens"]
    src = s.get("source")
    heads = []
    for h in r["heads"]:
        heads.append({
            "name": h["name"], "d_k": int(h["d_k"]), "d_v": int(h["d_v"]),
            "queries": mat(h["Q"]), "keys": mat(h["K"]), "values": mat(h["V"]),
            "scores": mat(h["scores"]), "scaled": mat(h["scaled"]),
            "logits": logit_mat(h["logits"]),
            "exponentials": mat(h["expo"]),
            "row_sums": [f(x) for x in h["row_sums"]],
            "weights": mat(h["weights"]), "output": mat(h["output"]),
            "fully_masked": [bool(x) for x in h["full"]],
        })
    return {"tokens": list(toks),
            "source_tokens": list(toks if src is None else src["tokens"]),
            "heads": heads, "output": mat(r["output"])}


# --------------------------------------------------------------------------
# The fixtures
# --------------------------------------------------------------------------

rng = np.random.default_rng(2026)


def R(rows, cols, scale=1.0):
    """A readable matrix: normal(0, 1) rounded to 4 decimals (times scale)."""
    a = rng.normal(0.0, 1.0, (rows, cols)) * scale
    return [[float("%.4f" % x) for x in row] for row in a]


def toks(n, prefix="t"):
    return ["%s%d" % (prefix, i) for i in range(n)]


def head(name, d_in, d_k, d_v):
    return {"name": name, "w_q": R(d_in, d_k), "w_k": R(d_in, d_k), "w_v": R(d_in, d_v)}


def scenario(name, description, tokens, embeddings, heads, **kw):
    s = {"format": FORMAT, "name": name, "description": description,
         "tokens": tokens, "embeddings": embeddings,
         "positions": kw.pop("positions", "none"), "heads": heads,
         "w_o": kw.pop("w_o", None), "source": kw.pop("source", None),
         "causal": kw.pop("causal", False), "temperature": kw.pop("temperature", 1.0)}
    s.update(kw)
    return s


def build():
    S = []
    # 1
    S.append(scenario("ref01-plain", "One head, no positions, no masks, 4 tokens",
                      toks(4), R(4, 3), [head("h0", 3, 2, 3)]))
    # 2
    S.append(scenario("ref02-multihead-wo",
                      "Three heads with different d_k/d_v (1/2, 3/1, 4/3) and a 6x3 w_o",
                      toks(5), R(5, 4),
                      [head("narrow", 4, 1, 2), head("middle", 4, 3, 1), head("wide", 4, 4, 3)],
                      w_o=R(6, 3)))
    # 3
    S.append(scenario("ref03-causal", "Causal self-attention, 5 tokens",
                      toks(5), R(5, 4), [head("h0", 4, 3, 2)], causal=True))
    # 4: embeddings scaled up so some rows leave [-60, 60] and take the shift
    S.append(scenario("ref04-temperature-0p1",
                      "Temperature 0.1 sharpens; some rows have max logit outside [-60, 60]",
                      toks(4), R(4, 3, scale=2.5), [head("h0", 3, 2, 2)], temperature=0.1))
    # 5
    S.append(scenario("ref05-temperature-3-causal", "Temperature 3 flattens, causal, 6 tokens",
                      toks(6), R(6, 5), [head("h0", 5, 4, 3)], causal=True, temperature=3.0))
    # 6
    S.append(scenario("ref06-window2", "Window 2, not causal: query i sees i-1, i, i+1",
                      toks(6), R(6, 3), [head("h0", 3, 2, 2)], window=2))
    # 7
    S.append(scenario("ref07-window2-causal",
                      "Window 2 with causal: query i sees i-1 and i; two heads",
                      toks(6), R(6, 3), [head("a", 3, 2, 2), head("b", 3, 3, 1)],
                      causal=True, window=2))
    # 8
    S.append(scenario("ref08-mask-tokens", "mask_tokens [0, 2] hidden from every query",
                      toks(5), R(5, 4), [head("h0", 4, 3, 3)], mask_tokens=[0, 2]))
    # 9
    S.append(scenario("ref09-fully-masked-row",
                      "Causal plus mask_tokens [0, 3]: query 0 sees nothing (fully masked); w_o",
                      toks(5), R(5, 3), [head("h0", 3, 2, 2), head("h1", 3, 2, 1)],
                      causal=True, mask_tokens=[0, 3], w_o=R(3, 4)))
    # 10
    S.append(scenario("ref10-cross-attention",
                      "Cross-attention: 3 queries over a 7-token source, two heads, w_o",
                      toks(3, "q"), R(3, 4), [head("h0", 4, 3, 2), head("h1", 4, 2, 2)],
                      source={"tokens": toks(7, "s"), "embeddings": R(7, 4)}, w_o=R(4, 2)))
    # 11
    S.append(scenario("ref11-sinusoidal", "Sinusoidal positions added, d_model 6, two heads",
                      toks(7), R(7, 6), [head("h0", 6, 4, 3), head("h1", 6, 2, 2)],
                      positions="sinusoidal"))
    # 12
    S.append(scenario("ref12-sincos-pair",
                      "sincos-pair positions with omega 0.5: d_in = 3 + 2",
                      toks(6), R(6, 3), [head("h0", 5, 2, 3)],
                      positions={"kind": "sincos-pair", "omega": 0.5}))
    # 13
    S.append(scenario("ref13-rope-causal", "RoPE, causal, 8 tokens, heads with d_k 4 and 6",
                      toks(8), R(8, 6), [head("r4", 6, 4, 3), head("r6", 6, 6, 2)],
                      positions="rope", causal=True))
    # 14
    S.append(scenario("ref14-random-head",
                      "Random head (seed 7, d_k 3, d_v default d_in = 4) plus an explicit head",
                      toks(4), R(4, 4),
                      [{"name": "random-7", "random": 7, "d_k": 3}, head("explicit", 4, 2, 2)]))
    # 15: exact dyadic arithmetic; scaled scores near +-1e4 (logits near +-2e4)
    S.append(scenario("ref15-extreme-scores",
                      "Scaled scores near +-1e4 (T 0.5): every row needs the shift rule",
                      ["a", "b", "c"],
                      [[100, 0], [-100, 200.015625], [100, -0.0078125]],
                      [{"name": "extreme", "w_q": [[1], [0]], "w_k": [[1], [1]],
                        "w_v": [[0.5, 0], [0, 1]]}],
                      temperature=0.5))
    # 16
    S.append(scenario("ref16-cross-sinusoidal-mask",
                      "Cross-attention with sinusoidal positions (each side from 0), odd d_model 5, mask_tokens [1, 4] of the source",
                      toks(4, "q"), R(4, 5), [head("h0", 5, 3, 2)],
                      positions={"kind": "sinusoidal"},
                      source={"tokens": toks(6, "s"), "embeddings": R(6, 5)},
                      mask_tokens=[1, 4]))
    return S


def main():
    check_generator()
    scenarios = build()
    os.makedirs(OUT_DIR, exist_ok=True)
    for s in scenarios:
        validate(s)
        r = compute(s)
        sanity(s, r)
        name = s["name"]
        # fixture-specific checks
        if name == "ref01-plain":
            check_permutation_equivariance(s)
        if name == "ref04-temperature-0p1":
            sh = r["heads"][0]["shifts"]
            assert (sh != 0).any() and (sh == 0).any(), sh
        if name == "ref09-fully-masked-row":
            for h in r["heads"]:
                assert list(h["full"]) == [True, False, False, False, False]
            assert np.all(r["output"][0] == 0.0)
        if name == "ref13-rope-causal":
            check_rope_relative(s)
        if name == "ref15-extreme-scores":
            h = r["heads"][0]
            assert np.all(np.abs(h["scaled"]) > 9000)
            assert np.all(h["shifts"] != 0)
            assert h["scaled"].max() > 0 and h["scaled"].min() < 0
            # without the shift, at least one row underflows to all zero
            with np.errstate(over="ignore"):
                assert any(np.exp(h["logits"][i]).sum() == 0.0 for i in range(3))
        fix = {"scenario": s, "trace": trace_json(s, r)}
        # round-trip: the JSON reproduces the float64 values exactly
        text = to_text(fix)
        back = json.loads(text)
        assert back == json.loads(json.dumps(fix, allow_nan=False))
        assert back["trace"]["output"] == mat(r["output"])
        path = os.path.join(OUT_DIR, name + ".json")
        with open(path, "w") as fh:
            fh.write(text + "\n")
        shifted = sum(int((h["shifts"] != 0).sum()) for h in r["heads"])
        full = sum(int(h["full"].sum()) for h in r["heads"])
        print("%-32s n=%d heads=%d shifted_rows=%d fully_masked_rows=%d"
              % (name, len(s["tokens"]), len(s["heads"]), shifted, full))
    print("wrote %d fixtures to %s" % (len(scenarios), OUT_DIR))


if __name__ == "__main__":
    sys.exit(main())
