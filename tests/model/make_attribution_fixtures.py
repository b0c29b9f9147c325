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

The verdict's measures at the last position, for logit(target) - logit(contrast): the heads' weights;
value norms |sum_h a_h[p, j] f_h(x_j)| (f_h(x_j) = v_h[j] W_O_h, the head's unweighted write); rollout
(the product over layers of 0.5 mean_h A + 0.5 I); ALTI (the product over layers of C, C[i, j] =
max(0, |y_i|_1 - |y_i - T_i(x_j)|_1) rows normalised, y_i the stream after the attention, T_i(x_j) source
j's share of it with the residual x_i on the diagonal); gradient x input by central differences at the
input embeddings, and m at integrated gradients' baseline (every token's embedding replaced by the
vocabulary's mean, positions kept); and the interventions rerun: key j hidden from every query (but one with no other
key), each head's output zeroed or set to its mean over the positions. And patching each head's output
and each MLP's from a clean run into a corrupted one (the third token changed).

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


def causal_mask(n, window=None, hidden_key=None):
    """Which keys j each query i sees: j <= i (and within the window); a hidden key j by no query,
    except one left with no other key."""
    i, j = np.arange(n)[:, None], np.arange(n)[None, :]
    mask = (j <= i) & ((i - j) < window if window else True)
    if hidden_key is not None:
        alone = mask.sum(-1) == 1
        mask[:, hidden_key] &= (np.arange(n) == hidden_key) & alone
    return mask


def intervene(out, l, h, ablate):
    """A head's output rows (prob @ ov) [n, d] after an ablation: {(l, h): "zero" | "mean" | rows [n, d]}."""
    kind = (ablate or {}).get((l, h))
    if isinstance(kind, np.ndarray):  # patched: another run's rows
        return kind
    if kind == "zero":
        return np.zeros_like(out)
    if kind == "mean":  # z_h replaced by its mean over positions; linear through W_O
        return np.tile(out.mean(0), (out.shape[0], 1))
    return out


def gpt2_parts(cfg, w, ids, x0=None, hidden_key=None, ablate=None, mlp_patch=None):
    """Every layer's per-head outputs [H, n, d], biases [n, d], MLP outputs; the final stream; the lens rows.
    x0 replaces the input embeddings; hidden_key and ablate are the interventions (causal_mask, intervene)."""
    n, d, H = len(ids), cfg["n_embd"], cfg["n_head"]
    hd = d // H
    embedding, position = w["wte.weight"][ids], w["wpe.weight"][:n]
    x = embedding + position if x0 is None else x0
    streams, layers = [x], []
    for l in range(cfg["n_layer"]):
        p = f"h.{l}."
        a, _, _ = layer_norm(x, w[p + "ln_1.weight"], w[p + "ln_1.bias"], cfg["layer_norm_epsilon"])
        qkv = a @ w[p + "attn.c_attn.weight"] + w[p + "attn.c_attn.bias"]
        q, k, v = qkv[:, :d], qkv[:, d:2 * d], qkv[:, 2 * d:]
        W_O = w[p + "attn.c_proj.weight"]
        mask = causal_mask(n, hidden_key=hidden_key)
        heads, sources, weights, ovs = [], [], [], []
        for h in range(H):
            s = slice(h * hd, (h + 1) * hd)
            prob = softmax_rows(np.where(mask, q[:, s] @ k[:, s].T / math.sqrt(hd), -np.inf))
            ov = v[:, s] @ W_O[s]  # [n, d]: what each source writes through this head, unweighted
            heads.append(intervene(prob @ ov, l, h, ablate))
            sources.append(prob[:, :, None] * ov[None, :, :])  # [n, n, d]
            weights.append(prob)
            ovs.append(ov)
        bias = np.tile(w[p + "attn.c_proj.bias"], (n, 1))
        x_in = x
        x = x + sum(heads) + bias
        m, _, _ = layer_norm(x, w[p + "ln_2.weight"], w[p + "ln_2.bias"], cfg["layer_norm_epsilon"])
        hidden = m @ w[p + "mlp.c_fc.weight"] + w[p + "mlp.c_fc.bias"]
        act = 0.5 * hidden * (1 + np.tanh(math.sqrt(2 / math.pi) * (hidden + 0.044715 * hidden ** 3)))
        mlp = act @ w[p + "mlp.c_proj.weight"] + w[p + "mlp.c_proj.bias"]
        mlp = (mlp_patch or {}).get(l, mlp)
        x = x + mlp
        streams.append(x)
        layers.append({"heads": heads, "sources": sources, "bias": bias, "mlp": mlp, "probs": weights, "ov": ovs,
                       "factor": np.ones((n, d)), "x_in": x_in, "y": x_in + sum(heads) + bias, "z_out": heads})
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


def llama_parts(cfg, w, ids, x0=None, hidden_key=None, ablate=None, mlp_patch=None):
    n, d, H, Hkv = len(ids), cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd = cfg.get("head_dim") or d // H
    gemma = cfg["model_type"] == "gemma3_text"
    eps = cfg["rms_norm_eps"]
    g = (lambda t: 1 + t) if gemma else (lambda t: t)
    embedding = w["model.embed_tokens.weight"][ids] * (math.sqrt(d) if gemma else 1.0)
    x = embedding if x0 is None else x0
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
        mask = causal_mask(n, window, hidden_key)
        W_O = w[p + "self_attn.o_proj.weight"].T  # [H·hd, d]
        heads, sources = [], []
        o = np.zeros((n, d))
        per_head_ov = []
        for h in range(H):
            kv = h // (H // Hkv)
            prob = softmax_rows(np.where(mask, q[:, h] @ k[:, kv].T * scale, -np.inf))
            ov = v[:, kv] @ W_O[h * hd:(h + 1) * hd]
            out = intervene(prob @ ov, l, h, ablate)
            per_head_ov.append((prob, ov, out))
            o = o + out
        if gemma:  # the sandwich norm, its 1 / rms frozen: linear in each head's share
            _, rstd_post = rms_norm(o, 1.0, eps)
            factor = rstd_post * g(w[p + "post_attention_layernorm.weight"])  # [n, d]
        else:
            factor = np.ones((n, d))
        for prob, ov, out in per_head_ov:
            heads.append(out * factor)
            sources.append(prob[:, :, None] * ov[None, :, :] * factor[:, None, :])
        x_in = x
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
        mlp = (mlp_patch or {}).get(l, mlp)
        x = x + mlp
        streams.append(x)
        layers.append({"heads": heads, "sources": sources, "bias": None, "mlp": mlp,
                       "probs": [prob for prob, _, _ in per_head_ov], "ov": [ov for _, ov, _ in per_head_ov],
                       "factor": factor, "x_in": x_in, "y": x_in + sum(heads), "z_out": [o for _, _, o in per_head_ov]})
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
    out["verdict"] = verdict(cfg, w, ids, target, contrast)
    corrupt = list(ids)
    corrupt[2] = (ids[2] + 5) % cfg["vocab_size"]
    out["patching"] = component_patching(cfg, w, ids, corrupt, target, contrast)
    return out


def verdict(cfg, w, ids, target, contrast):
    """Context mixing, the gradient and the interventions at the last position, for m = logit(target) -
    logit(contrast) (contrast None: the target's logit)."""
    parts = gpt2_parts if cfg["model_type"] == "gpt2" else llama_parts
    n, p = len(ids), len(ids) - 1

    def metric(**interventions):
        _, _, streams, U, final_norm, _ = parts(cfg, w, ids, **interventions)
        z = final_norm(streams[-1][p:p + 1]) @ U.T
        return z[0, target] - (z[0, contrast] if contrast is not None else 0)

    _, layers, streams, _, _, _ = parts(cfg, w, ids)
    m = metric()
    L, H = len(layers), len(layers[0]["probs"])
    attention, value_norms, rolled, alti, attention_map = [], [], np.eye(n), np.eye(n), np.zeros((n, n))
    for layer in layers:
        probs, ov = np.array(layer["probs"]), np.array(layer["ov"])  # [H, n, n], [H, n, d]
        attention.append(probs[:, p].tolist())
        # T[i, j] = sum_h a_h[i, j] f_h(x_j) (sandwich-scaled at row i): what source j puts in row i
        T = np.einsum("hij,hjd->ijd", probs, ov) * layer["factor"][:, None, :]
        value_norms.append(np.linalg.norm(T[p], axis=-1).tolist())
        T = T + np.eye(n)[:, :, None] * layer["x_in"][:, None, :]  # the residual: x_i is row i's own
        y = layer["y"]
        C = np.maximum(0, np.abs(y).sum(-1)[:, None] - np.abs(y[:, None, :] - T).sum(-1))
        C = C / C.sum(-1, keepdims=True)
        attention_map += probs.mean(0) / len(layers)
        A = 0.5 * probs.mean(0) + 0.5 * np.eye(n)
        A = A / A.sum(-1, keepdims=True)
        rolled, alti = A @ rolled, C @ alti
    x0 = streams[0]
    # Integrated gradients' baseline: each token's embedding replaced by the vocabulary's mean.
    if cfg["model_type"] == "gpt2":
        baseline = w["wte.weight"].mean(0) + w["wpe.weight"][:n]
    else:
        table = w["model.embed_tokens.weight"]
        scale = math.sqrt(cfg["hidden_size"]) if cfg["model_type"] == "gemma3_text" else 1.0
        baseline = np.tile(table.mean(0) * scale, (n, 1))
    gradient = np.zeros_like(x0)  # central differences, float64
    for j in range(n):
        for k in range(x0.shape[1]):
            e = np.zeros_like(x0)
            e[j, k] = 1e-5
            gradient[j, k] = (metric(x0=x0 + e) - metric(x0=x0 - e)) / 2e-5
    return {"metric": float(m), "attention": attention, "value_norms": value_norms,
            "rollout": rolled[p].tolist(), "alti": alti[p].tolist(), "attention_map": attention_map.tolist(),
            "rollout_map": rolled.tolist(), "alti_map": alti.tolist(),
            "grad_x_input": (gradient * x0).sum(-1).tolist(), "metric_at_baseline": float(metric(x0=baseline)),
            "erasure": [float(metric(hidden_key=j) - m) for j in range(n)],
            "zero_ablation": [float(metric(ablate={(l, h): "zero"}) - m) for l in range(L) for h in range(H)],
            "mean_ablation": [float(metric(ablate={(l, h): "mean"}) - m) for l in range(L) for h in range(H)]}


def component_patching(cfg, w, clean, corrupt, target, contrast):
    """The corrupted run with one head's output (before W_O's sum is normed, where it is) or one MLP's taken
    from the clean run: the share of m(clean) - m(corrupt) it restores, m = logit(target) - logit(contrast)."""
    parts = gpt2_parts if cfg["model_type"] == "gpt2" else llama_parts
    p = len(clean) - 1

    def run(ids, **patches):
        _, layers, streams, U, final_norm, _ = parts(cfg, w, ids, **patches)
        z = final_norm(streams[-1][p:p + 1]) @ U.T
        return z[0, target] - z[0, contrast], layers

    m_clean, layers = run(clean)
    m_corrupt, _ = run(corrupt)
    share = lambda m: float((m - m_corrupt) / (m_clean - m_corrupt))
    H = len(layers[0]["z_out"])
    heads = [share(run(corrupt, ablate={(l, h): layers[l]["z_out"][h]})[0]) for l in range(len(layers)) for h in range(H)]
    mlps = [share(run(corrupt, mlp_patch={l: layers[l]["mlp"]})[0]) for l in range(len(layers))]
    return {"clean": clean, "corrupt": corrupt, "target": target, "contrast": contrast, "heads": heads, "mlps": mlps}


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
