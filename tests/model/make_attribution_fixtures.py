#!/usr/bin/env python3
"""Direct logit attribution and the logit lens on the tiny GPT-2, Llama and Gemma 3 fixtures, in NumPy.

An implementation of our own (float64), from the measures' definitions rather than attnlab's C++; the
weights are read from the fixtures' model.safetensors with a reader written here (8-byte header length,
JSON header, raw little-endian data), and the forward is written again below from the families'
reference code (transformers' modeling_gpt2.py, modeling_llama.py, modeling_gemma3.py).

The residual stream after the last block is a sum of parts, each what one component wrote into it:

  x_L = embedding + position (GPT-2's wpe) + sum over layers of (sum over heads of head_h + b_O + mlp)

  head_h[p] = z_h[p] . W_O[rows of head h]        z_h[p] = sum_j a_h[p, j] v_h[j]
  (Gemma 3: the attention's output is RMS-normed before it joins the stream; with that norm's
  1 / rms frozen from the real run it is linear, and head_h[p] = (z_h[p] . W_O_h) * g_post / rms_post[p].)

The final norm with its scale (and LayerNorm's mean) frozen from the real run is linear too:
  logit_t = norm_f(x_L[p]) . u_t = sum over parts of part . r + beta . u_t,
  r = rstd[p] * (g (.) u_t - mean(g (.) u_t))   (LayerNorm: the mean removed; RMSNorm: r = rstd * g (.) u_t)
so each part's contribution is part . r, and they add up to the logit the model computed. A head's
contribution per source token j is a_h[p, j] * (v_h[j] . W_O_h) . r (the OV path); they add up to the head's.
With a contrast token c, u = u_t - u_c throughout.

The logit lens: the stream after the embedding and after each block, at every position, through the
final norm (its own statistics, not frozen) and the unembedding: the top token, its probability, and the
target's probability and rank (1 + the number of tokens with a larger logit).

Writes tests/model/fixtures/attribution/<fixture>.json. Run with Debian's NumPy:
  /usr/bin/python3 tests/model/make_attribution_fixtures.py
"""
import json
import math
import pathlib
import struct

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent / "fixtures"
CASES = {"tiny-f32": [3, 17, 5, 3, 17, 29, 8, 3], "llama-f32": [1, 7, 19, 4, 7, 19, 33, 2, 11],
         "gemma3-f32": [2, 9, 14, 30, 9, 14, 5, 21]}


def read_safetensors(folder):
    tensors = {}
    for path in sorted(folder.glob("*.safetensors")):
        raw = path.read_bytes()
        n = struct.unpack("<Q", raw[:8])[0]
        header = json.loads(raw[8:8 + n])
        for name, info in header.items():
            if name == "__metadata__":
                continue
            begin, end = info["data_offsets"]
            data = raw[8 + n + begin:8 + n + end]
            if info["dtype"] == "F32":
                x = np.frombuffer(data, "<f4").astype(np.float64)
            elif info["dtype"] == "F16":
                x = np.frombuffer(data, "<f2").astype(np.float64)
            else:  # BF16: the high half of an f32
                x = (np.frombuffer(data, "<u2").astype(np.uint32) << 16).view("<f4").astype(np.float64)
            tensors[name.removeprefix("transformer.")] = x.reshape(info["shape"])
    return tensors


def layer_norm(x, g, b, eps):
    mu = x.mean(-1, keepdims=True)
    rstd = 1 / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + eps)
    return (x - mu) * rstd * g + b, mu, rstd


def rms_norm(x, g, eps):
    rstd = 1 / np.sqrt((x ** 2).mean(-1, keepdims=True) + eps)
    return x * rstd * g, rstd


def softmax_rows(s):
    e = np.exp(s - s.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def rope(x, freqs):  # x [n, heads, hd], split halves
    n, half = x.shape[0], x.shape[-1] // 2
    angle = np.arange(n)[:, None] * freqs[None, :]
    c, s = np.cos(angle)[:, None, :], np.sin(angle)[:, None, :]
    x1, x2 = x[..., :half], x[..., half:]
    return np.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], -1)


def frequencies(cfg, layer):
    hd = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
    gemma = cfg["model_type"] == "gemma3_text"
    sliding = gemma and cfg["layer_types"][layer] == "sliding_attention"
    theta = cfg["rope_local_base_freq"] if sliding else cfg["rope_theta"]
    f = theta ** (-np.arange(0, hd, 2) / hd)
    scaling = None if sliding else cfg.get("rope_scaling")
    if scaling and scaling.get("rope_type", scaling.get("type")) == "llama3":
        factor, lo, hi = scaling["factor"], scaling["low_freq_factor"], scaling["high_freq_factor"]
        old = scaling["original_max_position_embeddings"]
        wave = 2 * math.pi / f
        smooth = (old / wave - lo) / (hi - lo)
        f = np.where(wave < old / hi, f, np.where(wave > old / lo, f / factor, (1 - smooth) * f / factor + smooth * f))
    elif scaling and scaling.get("rope_type", scaling.get("type")) == "linear":
        f = f / scaling["factor"]
    window = cfg["sliding_window"] if sliding or cfg["model_type"] == "mistral" else None
    return f, window


def gpt2_parts(cfg, w, ids):
    """Every layer's per-head outputs [H, n, d], biases [n, d], MLP outputs; the final stream; the lens rows."""
    n, d, H = len(ids), cfg["n_embd"], cfg["n_head"]
    hd = d // H
    embedding, position = w["wte.weight"][ids], w["wpe.weight"][:n]
    x = embedding + position
    streams, layers = [x], []
    for l in range(cfg["n_layer"]):
        p = f"h.{l}."
        a, _, _ = layer_norm(x, w[p + "ln_1.weight"], w[p + "ln_1.bias"], cfg["layer_norm_epsilon"])
        qkv = a @ w[p + "attn.c_attn.weight"] + w[p + "attn.c_attn.bias"]
        q, k, v = qkv[:, :d], qkv[:, d:2 * d], qkv[:, 2 * d:]
        W_O = w[p + "attn.c_proj.weight"]
        mask = np.tril(np.ones((n, n), bool))
        heads, sources, weights = [], [], []
        for h in range(H):
            s = slice(h * hd, (h + 1) * hd)
            prob = softmax_rows(np.where(mask, q[:, s] @ k[:, s].T / math.sqrt(hd), -np.inf))
            ov = v[:, s] @ W_O[s]  # [n, d]: what each source writes through this head, unweighted
            heads.append(prob @ ov)
            sources.append(prob[:, :, None] * ov[None, :, :])  # [n, n, d]
            weights.append(prob)
        bias = np.tile(w[p + "attn.c_proj.bias"], (n, 1))
        x = x + sum(heads) + bias
        m, _, _ = layer_norm(x, w[p + "ln_2.weight"], w[p + "ln_2.bias"], cfg["layer_norm_epsilon"])
        hidden = m @ w[p + "mlp.c_fc.weight"] + w[p + "mlp.c_fc.bias"]
        act = 0.5 * hidden * (1 + np.tanh(math.sqrt(2 / math.pi) * (hidden + 0.044715 * hidden ** 3)))
        mlp = act @ w[p + "mlp.c_proj.weight"] + w[p + "mlp.c_proj.bias"]
        x = x + mlp
        streams.append(x)
        layers.append({"heads": heads, "sources": sources, "bias": bias, "mlp": mlp})
    U = w["wte.weight"]
    first = {"embedding": embedding, "position": position}

    def final_norm(rows):
        y, mu, rstd = layer_norm(rows, w["ln_f.weight"], w["ln_f.bias"], cfg["layer_norm_epsilon"])
        return y

    def direction(x_row, u):
        _, _, rstd = layer_norm(x_row[None], w["ln_f.weight"], w["ln_f.bias"], cfg["layer_norm_epsilon"])
        gu = w["ln_f.weight"] * u
        return rstd[0, 0] * (gu - gu.mean()), w["ln_f.bias"] @ u

    return first, layers, streams, U, final_norm, direction


def llama_parts(cfg, w, ids):
    n, d, H, Hkv = len(ids), cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd = cfg.get("head_dim") or d // H
    gemma = cfg["model_type"] == "gemma3_text"
    eps = cfg["rms_norm_eps"]
    g = (lambda t: 1 + t) if gemma else (lambda t: t)
    embedding = w["model.embed_tokens.weight"][ids] * (math.sqrt(d) if gemma else 1.0)
    x = embedding
    scale = cfg["query_pre_attn_scalar"] ** -0.5 if gemma else hd ** -0.5
    streams, layers = [x], []
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        a, _ = rms_norm(x, g(w[p + "input_layernorm.weight"]), eps)
        q = (a @ w[p + "self_attn.q_proj.weight"].T).reshape(n, H, hd)
        k = (a @ w[p + "self_attn.k_proj.weight"].T).reshape(n, Hkv, hd)
        v = (a @ w[p + "self_attn.v_proj.weight"].T).reshape(n, Hkv, hd)
        if p + "self_attn.q_norm.weight" in w:
            q, _ = rms_norm(q, g(w[p + "self_attn.q_norm.weight"]), eps)
            k, _ = rms_norm(k, g(w[p + "self_attn.k_norm.weight"]), eps)
        freqs, window = frequencies(cfg, l)
        q, k = rope(q, freqs), rope(k, freqs)
        i, j = np.arange(n)[:, None], np.arange(n)[None, :]
        mask = (j <= i) & ((i - j) < window if window else True)
        W_O = w[p + "self_attn.o_proj.weight"].T  # [H·hd, d]
        heads, sources = [], []
        o = np.zeros((n, d))
        per_head_ov = []
        for h in range(H):
            kv = h // (H // Hkv)
            prob = softmax_rows(np.where(mask, q[:, h] @ k[:, kv].T * scale, -np.inf))
            ov = v[:, kv] @ W_O[h * hd:(h + 1) * hd]
            per_head_ov.append((prob, ov))
            o = o + prob @ ov
        if gemma:  # the sandwich norm, its 1 / rms frozen: linear in each head's share
            _, rstd_post = rms_norm(o, 1.0, eps)
            factor = rstd_post * g(w[p + "post_attention_layernorm.weight"])  # [n, d]
        else:
            factor = np.ones((n, d))
        for prob, ov in per_head_ov:
            heads.append((prob @ ov) * factor)
            sources.append(prob[:, :, None] * ov[None, :, :] * factor[:, None, :])
        x = x + sum(heads)
        m, _ = rms_norm(x, g(w[p + ("pre_feedforward_layernorm.weight" if gemma else "post_attention_layernorm.weight")]), eps)
        gate, up = m @ w[p + "mlp.gate_proj.weight"].T, m @ w[p + "mlp.up_proj.weight"].T
        if gemma:
            act = 0.5 * gate * (1 + np.tanh(math.sqrt(2 / math.pi) * (gate + 0.044715 * gate ** 3)))
        else:
            act = gate / (1 + np.exp(-gate))
        mlp = (act * up) @ w[p + "mlp.down_proj.weight"].T
        if gemma:
            mlp, _ = rms_norm(mlp, g(w[p + "post_feedforward_layernorm.weight"]), eps)
        x = x + mlp
        streams.append(x)
        layers.append({"heads": heads, "sources": sources, "bias": None, "mlp": mlp})
    U = w["model.embed_tokens.weight"] if cfg["tie_word_embeddings"] else w["lm_head.weight"]
    gf = g(w["model.norm.weight"])

    def final_norm(rows):
        return rms_norm(rows, gf, eps)[0]

    def direction(x_row, u):
        _, rstd = rms_norm(x_row[None], gf, eps)
        return rstd[0, 0] * gf * u, 0.0

    return {"embedding": embedding}, layers, streams, U, final_norm, direction


def attribution(name, ids):
    folder = HERE / name
    cfg = json.loads((folder / "config.json").read_text())
    w = read_safetensors(folder)
    first, layers, streams, U, final_norm, direction = (gpt2_parts if cfg["model_type"] == "gpt2" else llama_parts)(
        cfg, w, ids)
    n, p = len(ids), len(ids) - 1
    logits = final_norm(streams[-1]) @ U.T
    order = np.argsort(-logits[p], kind="stable")
    target, contrast = int(order[0]), int(order[1])
    out = {"ids": ids, "position": p, "target": target, "contrast": contrast, "cases": []}
    for c in (None, contrast):
        u = U[target] - (U[c] if c is not None else 0)
        r, final_bias = direction(streams[-1][p], u)
        logit = logits[p, target] - (logits[p, c] if c is not None else 0)
        parts = [{"kind": kind, "layer": None, "head": None, "logit": float(v[p] @ r)} for kind, v in first.items()]
        heads, sources = [], []
        for l, layer in enumerate(layers):
            for h, head in enumerate(layer["heads"]):
                parts.append({"kind": "head", "layer": l, "head": h, "logit": float(head[p] @ r)})
                heads.append(float(head[p] @ r))
                sources.append([float(s @ r) for s in layer["sources"][h][p]])
            if layer["bias"] is not None:
                parts.append({"kind": "attention_bias", "layer": l, "head": None, "logit": float(layer["bias"][p] @ r)})
            parts.append({"kind": "mlp", "layer": l, "head": None, "logit": float(layer["mlp"][p] @ r)})
        if cfg["model_type"] == "gpt2":
            parts.append({"kind": "final_bias", "layer": None, "head": None, "logit": float(final_bias)})
        total = sum(part["logit"] for part in parts)
        assert abs(total - logit) < 1e-9 * max(1, abs(logit)), (name, total, logit)
        out["cases"].append({"contrast": c, "logit": float(logit), "parts": parts, "heads": heads, "sources": sources})
    lens = []
    for x in streams:
        z = final_norm(x) @ U.T
        prob = np.exp(z - z.max(-1, keepdims=True))
        prob /= prob.sum(-1, keepdims=True)
        row = []
        for i in range(n):
            top = int(np.argmax(z[i]))
            row.append({"top": top, "top_probability": float(prob[i, top]),
                        "target_probability": float(prob[i, target]),
                        "target_rank": int(1 + (z[i] > z[i, target]).sum())})
        lens.append(row)
    out["lens"] = lens
    assert np.allclose(final_norm(streams[-1]) @ U.T, logits)
    return out


def main():
    (HERE / "attribution").mkdir(exist_ok=True)
    for name, ids in CASES.items():
        result = attribution(name, ids)
        (HERE / "attribution" / f"{name}.json").write_text(json.dumps(result) + "\n")
        top = max(result["cases"][0]["parts"], key=lambda part: abs(part["logit"]))
        print(f"wrote attribution/{name}.json: target {result['target']}, logit {result['cases'][0]['logit']:.4f}, "
              f"largest part {top['kind']} {top['layer']}.{top['head']} ({top['logit']:.4f})")


if __name__ == "__main__":
    main()
