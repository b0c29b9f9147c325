"""`model qk` (a head's score taken apart) against an independent NumPy implementation written
from the formulas of docs/circuits.md and transformers' modeling files: a forward pass over the
fixtures that records what every head and MLP writes into the residual stream, then each
stream part pushed alone through the head's input norm (its scale frozen at the whole
stream's), W_Q or W_K and the bias, QK-norm (frozen) and the rotation. GPT-2 (LayerNorm,
learned positions, biases), Llama (GQA, Llama 3 rope scaling), Qwen2 (q/k/v biases), Qwen3
(QK-norm) and Gemma 3 (four norms, 1 + w, its query scalar, sliding windows)."""
import json
import math
import pathlib
import sys

import numpy as np
import pytest

import attnlab
from conftest import ROOT

FIXTURES = ROOT / "tests" / "model" / "fixtures"
sys.path.insert(0, str(ROOT / "tests" / "model"))
from make_family_fixtures import gelu_tanh, layer_plan, silu  # noqa: E402  (the fixtures' own maths)


def read_folder(folder: pathlib.Path):
    """Every tensor of a folder's safetensors files as float64 (F32, F16, BF16)."""
    out = {}
    for path in sorted(folder.glob("*.safetensors")):
        data = path.read_bytes()
        size = int.from_bytes(data[:8], "little")
        for name, t in json.loads(data[8:8 + size]).items():
            if name == "__metadata__":
                continue
            begin, end = t["data_offsets"]
            raw = data[8 + size + begin:8 + size + end]
            if t["dtype"] == "BF16":
                values = (np.frombuffer(raw, np.uint16).astype(np.uint32) << 16).view(np.float32)
            else:
                values = np.frombuffer(raw, {"F32": np.float32, "F16": np.float16}[t["dtype"]])
            out[name.removeprefix("transformer.")] = values.reshape(t["shape"]).astype(np.float64)
    return out


def rotate(x, position, freqs):
    """One vector rotated as at `position`, split halves (the fixtures' convention)."""
    half = len(freqs)
    angle = position * freqs
    a, b = x[:half].copy(), x[half:2 * half].copy()
    out = x.copy()
    out[:half] = a * np.cos(angle) - b * np.sin(angle)
    out[half:2 * half] = a * np.sin(angle) + b * np.cos(angle)
    return out


class Llama:
    """The Llama-style families: a forward that keeps each part of the stream."""

    def __init__(self, folder):
        self.cfg = json.loads((folder / "config.json").read_text())
        self.w = read_folder(folder)
        c = self.cfg
        self.gemma = c["model_type"] == "gemma3_text"
        self.heads, self.kv = c["num_attention_heads"], c["num_key_value_heads"]
        self.hd = c.get("head_dim") or c["hidden_size"] // self.heads
        self.eps = c["rms_norm_eps"]
        self.scale = c["query_pre_attn_scalar"] ** -0.5 if self.gemma else self.hd ** -0.5
        self.plan = layer_plan(c)
        self.layers = c["num_hidden_layers"]

    def norm(self, x, weight, rstd=None):
        """RMSNorm over the last axis, its 1/rms given (frozen) or computed."""
        if rstd is None:
            rstd = 1 / np.sqrt((x ** 2).mean(axis=-1, keepdims=True) + self.eps)
        return x * rstd * ((1 + weight) if self.gemma else weight)

    def project(self, layer, a, which):
        p = f"model.layers.{layer}.self_attn.{which}_proj."
        return a @ self.w[p + "weight"].T + self.w.get(p + "bias", 0.0)

    def forward(self, ids):
        """Every part of the stream at every position: {name: [n, d]}, in stream order, per layer."""
        w, n = self.w, len(ids)
        d = self.cfg["hidden_size"]
        parts = [("embedding", w["model.embed_tokens.weight"][ids] * (math.sqrt(d) if self.gemma else 1.0))]
        x = parts[0][1].copy()
        self.inputs, self.weights = [], []
        for layer, (window, freqs) in enumerate(self.plan):
            p = f"model.layers.{layer}."
            self.inputs.append(list(parts))
            a = self.norm(x, w[p + "input_layernorm.weight"])
            q = self.project(layer, a, "q").reshape(n, self.heads, self.hd)
            k = self.project(layer, a, "k").reshape(n, self.kv, self.hd)
            v = self.project(layer, a, "v").reshape(n, self.kv, self.hd)
            if p + "self_attn.q_norm.weight" in w:
                q = self.norm(q, w[p + "self_attn.q_norm.weight"])
                k = self.norm(k, w[p + "self_attn.k_norm.weight"])
            q = np.stack([np.stack([rotate(q[i, h], i, freqs) for h in range(self.heads)]) for i in range(n)])
            k = np.stack([np.stack([rotate(k[i, g], i, freqs) for g in range(self.kv)]) for i in range(n)])
            i_, j_ = np.arange(n)[:, None], np.arange(n)[None, :]
            ok = (j_ <= i_) & ((i_ - j_) < window if window else True)
            o_proj = w[p + "self_attn.o_proj.weight"]
            outs, layer_weights = [], []
            for h in range(self.heads):
                g = h // (self.heads // self.kv)
                scores = np.where(ok, q[:, h] @ k[:, g].T * self.scale, -np.inf)
                e = np.exp(scores - scores.max(axis=1, keepdims=True))
                prob = e / e.sum(axis=1, keepdims=True)
                layer_weights.append(prob)
                outs.append((prob @ v[:, g]) @ o_proj[:, h * self.hd:(h + 1) * self.hd].T)
            self.weights.append((q, k, layer_weights))
            o = sum(outs)
            if self.gemma:  # the attention's output normed again: each head's share, that norm frozen
                rstd = 1 / np.sqrt((o ** 2).mean(axis=-1, keepdims=True) + self.eps)
                outs = [self.norm(out, w[p + "post_attention_layernorm.weight"], rstd) for out in outs]
            parts += [(f"{layer}.{h}", outs[h]) for h in range(self.heads)]
            x = x + sum(outs)
            m = self.norm(x, w[p + ("pre_feedforward_layernorm.weight" if self.gemma else "post_attention_layernorm.weight")])
            act = gelu_tanh if self.gemma else silu
            mlp = (act(m @ w[p + "mlp.gate_proj.weight"].T) * (m @ w[p + "mlp.up_proj.weight"].T)) @ w[p + "mlp.down_proj.weight"].T
            if self.gemma:
                mlp = self.norm(mlp, w[p + "post_feedforward_layernorm.weight"])
            parts.append((f"mlp {layer}", mlp))
            x = x + mlp

    def sides(self, layer, head, position, which):
        """Each part at `position` through the head's input norm, W_Q or W_K (+ bias as "bias"), QK-norm, rotation."""
        w, p = self.w, f"model.layers.{layer}."
        parts = [(name, value[position]) for name, value in self.inputs[layer]]
        total = sum(v for _, v in parts)
        rstd = 1 / np.sqrt((total ** 2).mean() + self.eps)
        g = head if which == "q" else head // (self.heads // self.kv)
        weight = w[p + f"self_attn.{which}_proj.weight"][g * self.hd:(g + 1) * self.hd]
        projected = [(name, self.norm(v, w[p + "input_layernorm.weight"], rstd) @ weight.T) for name, v in parts]
        bias = w.get(p + f"self_attn.{which}_proj.bias")
        projected.append(("bias", bias[g * self.hd:(g + 1) * self.hd] if bias is not None else np.zeros(self.hd)))
        if p + f"self_attn.{which}_norm.weight" in w:
            whole = sum(v for _, v in projected)
            qk_rstd = 1 / np.sqrt((whole ** 2).mean() + self.eps)
            projected = [(name, self.norm(v, w[p + f"self_attn.{which}_norm.weight"], qk_rstd)) for name, v in projected]
        freqs = self.plan[layer][1]
        return projected, [(name, rotate(v, position, freqs)) for name, v in projected]

    def score(self, layer, head, i, j):
        q, k, _ = self.weights[layer]
        return q[i, head] @ k[j, head // (self.heads // self.kv)] * self.scale


class Gpt2(Llama):
    """GPT-2: LayerNorm with biases, learned positions, c_attn's q | k | v, output biases."""

    def __init__(self, folder):
        self.cfg = json.loads((folder / "config.json").read_text())
        self.w = read_folder(folder)
        self.heads = self.kv = self.cfg["n_head"]
        self.d = self.cfg["n_embd"]
        self.hd = self.d // self.heads
        self.eps = self.cfg["layer_norm_epsilon"]
        self.scale = self.hd ** -0.5
        self.layers = self.cfg["n_layer"]

    def layer_norm(self, x, layer, mean, rstd):
        return (x - mean) * rstd * self.w[f"h.{layer}.ln_1.weight"]

    def forward(self, ids):
        w, n, d = self.w, len(ids), self.d
        parts = [("embedding", w["wte.weight"][ids]), ("positions", w["wpe.weight"][:n])]
        x = parts[0][1] + parts[1][1]
        self.inputs, self.weights = [], []
        for layer in range(self.layers):
            p = f"h.{layer}."
            self.inputs.append(list(parts))
            mu, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
            a = (x - mu) / np.sqrt(var + self.eps) * w[p + "ln_1.weight"] + w[p + "ln_1.bias"]
            qkv = a @ w[p + "attn.c_attn.weight"] + w[p + "attn.c_attn.bias"]
            q, k, v = (qkv[:, s * d:(s + 1) * d].reshape(n, self.heads, self.hd) for s in range(3))
            mask = np.tril(np.ones((n, n), bool))
            outs, layer_weights = [], []
            for h in range(self.heads):
                scores = np.where(mask, q[:, h] @ k[:, h].T * self.scale, -np.inf)
                e = np.exp(scores - scores.max(axis=1, keepdims=True))
                prob = e / e.sum(axis=1, keepdims=True)
                layer_weights.append(prob)
                outs.append((prob @ v[:, h]) @ w[p + "attn.c_proj.weight"][h * self.hd:(h + 1) * self.hd])
            self.weights.append((q, k, layer_weights))
            parts += [(f"{layer}.{h}", outs[h]) for h in range(self.heads)]
            parts.append(("bias", np.broadcast_to(w[p + "attn.c_proj.bias"], (n, d))))
            x = x + sum(outs) + w[p + "attn.c_proj.bias"]
            mu, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
            m = (x - mu) / np.sqrt(var + self.eps) * w[p + "ln_2.weight"] + w[p + "ln_2.bias"]
            h1 = m @ w[p + "mlp.c_fc.weight"] + w[p + "mlp.c_fc.bias"]
            mlp = gelu_tanh(h1) @ w[p + "mlp.c_proj.weight"] + w[p + "mlp.c_proj.bias"]
            parts.append((f"mlp {layer}", mlp))
            x = x + mlp

    def sides(self, layer, head, position, which):
        w, p, d = self.w, f"h.{layer}.", self.d
        named = {}
        for name, value in self.inputs[layer]:  # the output biases of every earlier layer are one part
            named[name] = named.get(name, 0) + value[position]
        total = sum(named.values())
        mean, rstd = total.mean(), 1 / np.sqrt(total.var() + self.eps)
        s = 0 if which == "q" else 1
        weight = w[p + "attn.c_attn.weight"][:, s * d + head * self.hd:s * d + (head + 1) * self.hd]
        bias = w[p + "attn.c_attn.bias"][s * d + head * self.hd:s * d + (head + 1) * self.hd]
        projected = []
        for name, v in named.items():
            normed = (v - v.mean()) * rstd * w[p + "ln_1.weight"]
            if name == "bias":
                normed = normed + w[p + "ln_1.bias"]
            projected.append((name, normed @ weight + (bias if name == "bias" else 0)))
        if "bias" not in named:
            projected.append(("bias", w[p + "ln_1.bias"] @ weight + bias))
        return projected, projected

    def score(self, layer, head, i, j):
        q, k, _ = self.weights[layer]
        return q[i, head] @ k[j, head] * self.scale


CASES = [
    ("tiny-f32", Gpt2, [3, 17, 5, 9, 3, 17, 5, 9, 22], "1.2", 8, None),
    ("llama-f32", Llama, [1, 5, 9, 2, 5, 9, 30, 4], "1.3", 7, 2),
    ("qwen2-f16", Llama, [1, 5, 9, 2, 5, 9, 30, 4], "1.1", 6, None),
    ("qwen3-f32-sharded", Llama, [1, 5, 9, 2, 5, 9, 30, 4], "1.0", 7, 4),
    ("gemma3-f32", Llama, [2, 7, 11, 3, 7, 11, 20, 5], "2.1", 7, 1),
]


@pytest.mark.parametrize("fixture, kind, ids, head, query, key", CASES, ids=[c[0] for c in CASES])
def test_the_score_taken_apart_is_numpys(fixture, kind, ids, head, query, key):
    oracle = kind(FIXTURES / fixture)
    oracle.forward(np.array(ids))
    layer, h = map(int, head.split("."))
    m = attnlab.load(FIXTURES / fixture)
    got = m.qk(ids, head=head, query=query, key=key, top=0)
    if key is None:  # the key the head weighs most
        key = int(np.argmax(oracle.weights[layer][2][h][query]))
    assert (got["query"], got["key"]) == (query, key)
    want = oracle.score(layer, h, query, key)
    assert got["score"] == pytest.approx(want, abs=2e-4)
    assert got["weight"] == pytest.approx(oracle.weights[layer][2][h][query, key], abs=1e-5)
    q_unrot, q_rot = oracle.sides(layer, h, query, "q")
    k_unrot, k_rot = oracle.sides(layer, h, key, "k")
    expected = {(a, b): (qa @ kb * oracle.scale, qu @ ku * oracle.scale)
                for (a, qa), (_, qu) in zip(q_rot, q_unrot) for (b, kb), (_, ku) in zip(k_rot, k_unrot)}
    pairs = {(p["query_side"], p["key_side"]): (p["score"], p["unrotated"]) for p in got["parts"]}
    assert set(pairs) == set(expected), "the same parts on both sides"
    for names, (score, unrotated) in expected.items():
        assert pairs[names][0] == pytest.approx(score, abs=2e-4), names
        assert pairs[names][1] == pytest.approx(unrotated, abs=2e-4), names
    assert sum(s for s, _ in expected.values()) == pytest.approx(want, abs=2e-4), "NumPy's parts add up"
    assert sum(p["score"] for p in got["parts"]) == pytest.approx(got["score"], abs=2e-4), "attnlab's parts add up"
    assert sum(s["score"] for s in got["query_sides"]) == pytest.approx(got["score"], abs=2e-4)
    assert got["rotary"] == (kind is Llama)


def test_the_top_pairs_and_the_rest_add_up_and_bad_requests_name_the_field(cli):
    tiny = FIXTURES / "tiny-f32"
    m = attnlab.load(tiny)
    ids = [3, 17, 5, 9, 3, 17, 5, 9, 22]
    got = m.qk(ids, head="1.2")
    assert len(got["parts"]) == 21 and got["parts"][-1]["query_side"] == "rest"
    assert sum(p["score"] for p in got["parts"]) == pytest.approx(got["score"], abs=1e-4)
    assert got == cli("model", "qk", tiny, "--ids", ",".join(map(str, ids)), "--head", "1.2", "--json")
    for kwargs, message in [(dict(head="2.0"), "^head: head 2.0 does not exist"),
                            (dict(head="1.2", query=9), "^query: 9 is past the last token"),
                            (dict(head="1.2", query=3, key=5), "^key: 5 is after the query 3"),
                            (dict(head=["1.2", "0.1"]), "^head: 2 heads; give at most 1")]:
        with pytest.raises(ValueError, match=message):
            m.qk(ids, **kwargs)
