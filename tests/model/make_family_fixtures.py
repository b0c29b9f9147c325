#!/usr/bin/env python3
"""Writes tiny Llama / SmolLM / Qwen2 / Qwen3 / Mistral / Gemma3 checkpoints and what an independent forward gives.

A forward of our own, in NumPy (float64), written from the models' definitions (Hugging Face transformers'
modeling_llama.py, modeling_qwen2.py, modeling_qwen3.py, modeling_mistral.py, modeling_gemma3.py,
modeling_rope_utils.py and masking_utils.py were read for the conventions) rather than from attnlab's C++.
The safetensors files are written by hand (8-byte little-endian header length, JSON header padded with
spaces to a multiple of 8, raw little-endian data), so no library of attnlab's or Hugging Face's is involved.
Every expected value is computed from the weights AS STORED (after rounding to F16 / BF16).

The maths, for a sequence x_0..x_{n-1} of token ids at positions 0..n-1:

  h = E[ids]                                  E = model.embed_tokens.weight [V, d]
      (Gemma3: h = E[ids] * sqrt(hidden_size); HF casts that scale to the weights' dtype, F32 here, we keep
      float64: the difference is ~4e-8 relative.)
  per layer i (weights under model.layers.{i}.):
    a = RMSNorm(h; input_layernorm)           RMSNorm(x; w) = x / sqrt(mean(x^2) + eps) * w
                                              (Gemma3: * (1 + w); its norm weights are stored zero-centred)
    q = a Wq^T (+ bq),  k = a Wk^T (+ bk),  v = a Wv^T (+ bv)     weights stored [out, in]
        q: [n, H, hd], k, v: [n, Hkv, hd]; biases only for Qwen2 (q/k/v, not o_proj)
    Qwen3 / Gemma3: q = RMSNorm(q; self_attn.q_norm) and k = RMSNorm(k; self_attn.k_norm), over hd for each
        head separately, BEFORE the rotary embedding (Gemma3's q_norm/k_norm are (1 + w) norms too).
    RoPE, split-half ("rotate_half") convention over the whole head (rot = hd):
        inv_freq_m = theta^(-2m/hd), m = 0..hd/2-1, angle_{p,m} = p * inv_freq_m,
        cos/sin = [cos(angle), cos(angle)] / [sin(angle), sin(angle)] (the hd/2 frequencies repeated),
        rope(x) = x * cos + rotate_half(x) * sin,  rotate_half([x1, x2]) = [-x2, x1],
        i.e. coordinate m and m + hd/2 form a pair rotated by angle_{p,m}.
      rope_scaling "linear": inv_freq /= factor.
      rope_scaling "llama3" (factor f, low_freq_factor lo, high_freq_factor hi, original_max_position_embeddings
        L): wavelen = 2 pi / inv_freq; wavelen < L/hi: unchanged; wavelen > L/lo: inv_freq / f; otherwise
        (L/hi <= wavelen <= L/lo) s = (L / wavelen - lo) / (hi - lo), inv_freq = (1 - s) inv_freq / f + s inv_freq.
    query head j reads kv head j // (H / Hkv)
    scores = q_j k^T * scale, scale = 1/sqrt(hd) (Gemma3: query_pre_attn_scalar ** -0.5)
    key t visible to query s iff t <= s and, on a sliding-window layer, s - t < sliding_window
      (masking_utils.sliding_window_overlay: `kv_idx > q_idx - sliding_window`: a query sees the last
      sliding_window tokens INCLUDING itself; the older _update_causal_mask masked
      `arange <= cache_position - sliding_window`, the same set)
    P = softmax over visible keys (masked entries exactly 0);  z = concat_j P_j v_{kv(j)};  o = z Wo^T
    Llama/Qwen/Mistral: h = h + o;  m = RMSNorm(h; post_attention_layernorm)  (the norm BEFORE the MLP)
                        h = h + down(act(gate(m)) * up(m)),  act = SiLU
    Gemma3:             h = h + RMSNorm(o; post_attention_layernorm)   (a norm on the attention OUTPUT)
                        m = RMSNorm(h; pre_feedforward_layernorm)
                        h = h + RMSNorm(down(gelu_tanh(gate(m)) * up(m)); post_feedforward_layernorm)
  logits = RMSNorm(h; model.norm) @ lm_head.weight^T, or @ E^T when tie_word_embeddings (no lm_head tensor).
  Gemma3 layers: layer i is sliding ("sliding_attention", rope theta = rope_local_base_freq, no rope_scaling)
  when (i + 1) % sliding_window_pattern != 0, else global ("full_attention", rope_theta and rope_scaling).
  Both `layer_types` and `sliding_window_pattern` are written into its config.

Each fixture directory holds config.json, the weights (model.safetensors, or shards plus
model.safetensors.index.json) and expected.json: {"ids": [...], "logits": [n][V], "attention": [L][H][n][n],
"block_inputs": [L][n][d]} (block_inputs = each layer's input_layernorm output, what its heads read).
Run with Debian's NumPy:  /usr/bin/python3 tests/model/make_family_fixtures.py
"""
import json
import math
import pathlib
import struct

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent / "fixtures"
IDS = [3, 17, 5, 3, 17, 5, 39, 0, 22, 3]
VOCAB = 48

COMMON = {"vocab_size": VOCAB, "max_position_embeddings": 64, "attention_dropout": 0.0, "initializer_range": 0.02,
          "use_cache": True, "bos_token_id": 1, "eos_token_id": 2, "transformers_version": "4.57.1"}

CONFIGS = {
    # rope_theta 100 with head_dim 8 gives wavelengths 2*pi*{1, 3.16, 10, 31.6} = 6.3, 19.9, 62.8, 199;
    # original_max_position_embeddings 32, low 1, high 4: boundaries 32 and 8, so the first frequency is kept,
    # the second is smoothed and the last two are divided by the factor: all three llama3 branches are used.
    "llama-f32": dict(COMMON, architectures=["LlamaForCausalLM"], model_type="llama", hidden_size=32,
                      intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                      head_dim=8, hidden_act="silu", rms_norm_eps=1e-5, rope_theta=100.0,
                      rope_scaling={"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                    "original_max_position_embeddings": 32, "rope_type": "llama3"},
                      attention_bias=False, mlp_bias=False, pretraining_tp=1, tie_word_embeddings=False,
                      torch_dtype="float32"),
    "smollm-bf16": dict(COMMON, architectures=["LlamaForCausalLM"], model_type="llama", hidden_size=32,
                        intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=1,
                        head_dim=8, hidden_act="silu", rms_norm_eps=1e-5, rope_theta=10000.0, rope_scaling=None,
                        attention_bias=False, mlp_bias=False, pretraining_tp=1, tie_word_embeddings=True,
                        torch_dtype="bfloat16"),
    "qwen2-f16": dict(COMMON, architectures=["Qwen2ForCausalLM"], model_type="qwen2", hidden_size=32,
                      intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                      hidden_act="silu", rms_norm_eps=1e-6, rope_theta=1000000.0, rope_scaling=None,
                      use_sliding_window=False, sliding_window=None, max_window_layers=2,
                      layer_types=["full_attention", "full_attention"], tie_word_embeddings=True,
                      torch_dtype="float16"),
    "qwen3-f32-sharded": dict(COMMON, architectures=["Qwen3ForCausalLM"], model_type="qwen3", hidden_size=16,
                              intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
                              num_key_value_heads=2, head_dim=8, hidden_act="silu", rms_norm_eps=1e-6,
                              rope_theta=10000.0, rope_scaling={"factor": 2.0, "rope_type": "linear"},
                              attention_bias=False, use_sliding_window=False, sliding_window=None,
                              max_window_layers=2, layer_types=["full_attention", "full_attention"],
                              tie_word_embeddings=False, torch_dtype="float32"),
    "mistral-f32": dict(COMMON, architectures=["MistralForCausalLM"], model_type="mistral", hidden_size=32,
                        intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                        head_dim=8, hidden_act="silu", rms_norm_eps=1e-5, rope_theta=10000.0, rope_scaling=None,
                        sliding_window=4, tie_word_embeddings=False, torch_dtype="float32"),
    # head_dim 8 while hidden/H = 12 and H*hd = 16 != 24; query_pre_attn_scalar 12 != head_dim; the global
    # layer carries a linear rope_scaling (as Gemma 3 4B does) which must NOT reach the local layers.
    "gemma3-f32": dict(COMMON, architectures=["Gemma3ForCausalLM"], model_type="gemma3_text", hidden_size=24,
                       intermediate_size=48, num_hidden_layers=3, num_attention_heads=2, num_key_value_heads=1,
                       head_dim=8, hidden_activation="gelu_pytorch_tanh", rms_norm_eps=1e-6,
                       rope_theta=1000000.0, rope_local_base_freq=10000.0,
                       rope_scaling={"factor": 8.0, "rope_type": "linear"}, query_pre_attn_scalar=12,
                       sliding_window=4, sliding_window_pattern=3,
                       layer_types=["sliding_attention", "sliding_attention", "full_attention"],
                       final_logit_softcapping=None, attn_logit_softcapping=None, attention_bias=False,
                       cache_implementation="hybrid", pad_token_id=0, tie_word_embeddings=True,
                       torch_dtype="float32"),
}

# name -> (file dtype, seed, shards: None, or the layer index the second shard starts at)
CASES = [("llama-f32", "F32", 11, None), ("smollm-bf16", "BF16", 12, None), ("qwen2-f16", "F16", 13, None),
         ("qwen3-f32-sharded", "F32", 14, 1), ("mistral-f32", "F32", 15, None), ("gemma3-f32", "F32", 16, None)]


def is_gemma(cfg):
    return cfg["model_type"] == "gemma3_text"


def head_dim(cfg):
    return cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]


def weights(cfg, seed):
    """Random weights under HF's names (ordered so the first layers come first, as in HF's shards)."""
    rng = np.random.RandomState(seed)
    d, inner, v = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    heads, kv, hd = cfg["num_attention_heads"], cfg["num_key_value_heads"], head_dim(cfg)
    gemma = is_gemma(cfg)
    # Gemma's RMSNorm multiplies by (1 + w), so its weights are drawn around 0, the others' around 1.
    norm = (lambda n: rng.normal(0, 0.1, n)) if gemma else (lambda n: 1 + rng.normal(0, 0.1, n))
    # score std ~ sigma^2 * d for un-normed q/k; q_norm/k_norm models are normed per head anyway
    qk = 0.25 if d >= 32 else 0.35
    w = {"model.embed_tokens.weight": rng.normal(0, 0.2 if gemma else 0.5, (v, d))}
    for layer in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{layer}."
        w[p + "input_layernorm.weight"] = norm(d)
        w[p + "self_attn.q_proj.weight"] = rng.normal(0, qk, (heads * hd, d))
        w[p + "self_attn.k_proj.weight"] = rng.normal(0, qk, (kv * hd, d))
        w[p + "self_attn.v_proj.weight"] = rng.normal(0, 0.3, (kv * hd, d))
        if cfg["model_type"] == "qwen2":
            w[p + "self_attn.q_proj.bias"] = rng.normal(0, 0.1, heads * hd)
            w[p + "self_attn.k_proj.bias"] = rng.normal(0, 0.1, kv * hd)
            w[p + "self_attn.v_proj.bias"] = rng.normal(0, 0.1, kv * hd)
        if cfg["model_type"] in ("qwen3", "gemma3_text"):
            w[p + "self_attn.q_norm.weight"] = norm(hd)
            w[p + "self_attn.k_norm.weight"] = norm(hd)
        w[p + "self_attn.o_proj.weight"] = rng.normal(0, 0.2, (d, heads * hd))
        w[p + "post_attention_layernorm.weight"] = norm(d)
        if gemma:
            w[p + "pre_feedforward_layernorm.weight"] = norm(d)
            w[p + "post_feedforward_layernorm.weight"] = norm(d)
        w[p + "mlp.gate_proj.weight"] = rng.normal(0, 0.2, (inner, d))
        w[p + "mlp.up_proj.weight"] = rng.normal(0, 0.2, (inner, d))
        w[p + "mlp.down_proj.weight"] = rng.normal(0, 0.1, (d, inner))
    w["model.norm.weight"] = norm(d)
    if not cfg["tie_word_embeddings"]:
        w["lm_head.weight"] = rng.normal(0, 0.3, (v, d))
    return w


def to_bf16_bits(x32):
    """float32 -> bf16 bits, round to nearest even (NaN-free inputs)."""
    bits = x32.view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return rounded.astype(np.uint16)


def stored(values, dtype):
    """The values as the file stores them: (bytes, the float64 values a reader gets back)."""
    x32 = np.ascontiguousarray(values, dtype=np.float32)
    if dtype == "F32":
        return x32.astype("<f4").tobytes(), x32.astype(np.float64)
    if dtype == "F16":
        x16 = x32.astype(np.float16)
        assert np.all(np.isfinite(x16))
        return x16.astype("<f2").tobytes(), x16.astype(np.float64)
    bits = to_bf16_bits(x32)
    back = (bits.astype(np.uint32) << 16).view(np.float32)
    return bits.astype("<u2").tobytes(), back.astype(np.float64)


def write_safetensors(path, tensors, dtype):
    """Writes one file; returns (the values as stored, the data's size in bytes)."""
    header, blobs, offset, read_back = {"__metadata__": {"format": "pt"}}, [], 0, {}
    for name, values in tensors.items():
        data, back = stored(np.asarray(values), dtype)
        header[name] = {"dtype": dtype, "shape": list(np.shape(values)), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
        read_back[name] = back
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))
    return read_back, offset


def write_weights(folder, w, dtype, split_layer):
    for old in list(folder.glob("model*.safetensors")) + list(folder.glob("model.safetensors.index.json")):
        old.unlink()
    if split_layer is None:
        return write_safetensors(folder / "model.safetensors", w, dtype)[0]
    first = {k: x for k, x in w.items()
             if k == "model.embed_tokens.weight" or (k.startswith("model.layers.") and int(k.split(".")[2]) < split_layer)}
    second = {k: x for k, x in w.items() if k not in first}
    names = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    read_back, total, weight_map = {}, 0, {}
    for name, part in zip(names, (first, second)):
        back, size = write_safetensors(folder / name, part, dtype)
        read_back.update(back)
        total += size
        weight_map.update({k: name for k in part})
    index = {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index, indent=2) + "\n")
    return read_back


def rms_norm(x, w, eps, plus_one):
    y = x / np.sqrt((x ** 2).mean(axis=-1, keepdims=True) + eps)
    return y * ((1 + w) if plus_one else w)


def silu(x):
    return x / (1 + np.exp(-x))


def gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def inv_freq(theta, rot, scaling):
    base = 1.0 / theta ** (np.arange(0, rot, 2, dtype=np.float64) / rot)
    kind = None if scaling is None else scaling.get("rope_type", scaling.get("type"))
    if kind in (None, "default"):
        return base
    if kind == "linear":
        return base / scaling["factor"]
    if kind == "llama3":
        f, lo, hi = scaling["factor"], scaling["low_freq_factor"], scaling["high_freq_factor"]
        old = scaling["original_max_position_embeddings"]
        wavelen = 2 * math.pi / base
        smooth = (old / wavelen - lo) / (hi - lo)
        return np.where(wavelen < old / hi, base,
                        np.where(wavelen > old / lo, base / f, (1 - smooth) * base / f + smooth * base))
    raise ValueError(kind)


def rope(x, freqs):
    """x: [n, heads, hd]; positions 0..n-1; split-half convention."""
    n, half = x.shape[0], x.shape[-1] // 2
    angle = np.arange(n, dtype=np.float64)[:, None] * freqs[None, :]
    cos = np.concatenate([np.cos(angle)] * 2, axis=-1)[:, None, :]
    sin = np.concatenate([np.sin(angle)] * 2, axis=-1)[:, None, :]
    rotated_half = np.concatenate([-x[..., half:], x[..., :half]], axis=-1)
    return x * cos + rotated_half * sin


def layer_plan(cfg):
    """Per layer: (sliding window or None, inverse frequencies)."""
    hd, plan = head_dim(cfg), []
    for layer in range(cfg["num_hidden_layers"]):
        if is_gemma(cfg):
            sliding = cfg["layer_types"][layer] == "sliding_attention"
            assert sliding == bool((layer + 1) % cfg["sliding_window_pattern"])
            if sliding:
                plan.append((cfg["sliding_window"], inv_freq(cfg["rope_local_base_freq"], hd, None)))
            else:
                plan.append((None, inv_freq(cfg["rope_theta"], hd, cfg["rope_scaling"])))
        else:
            window = cfg.get("sliding_window") if cfg["model_type"] == "mistral" else None
            plan.append((window, inv_freq(cfg["rope_theta"], hd, cfg["rope_scaling"])))
    return plan


def visible(n, window):
    i, j = np.arange(n)[:, None], np.arange(n)[None, :]
    ok = j <= i
    if window is not None:
        ok &= (i - j) < window
    return ok


def forward(cfg, w, ids):
    gemma = is_gemma(cfg)
    d, heads, kv, hd = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"], head_dim(cfg)
    eps, n, group = cfg["rms_norm_eps"], len(ids), heads // kv
    scale = cfg["query_pre_attn_scalar"] ** -0.5 if gemma else hd ** -0.5
    act = gelu_tanh if gemma else silu
    x = w["model.embed_tokens.weight"][ids] * (math.sqrt(d) if gemma else 1.0)
    attention, block_inputs = [], []
    for layer, (window, freqs) in enumerate(layer_plan(cfg)):
        p = f"model.layers.{layer}."
        a = rms_norm(x, w[p + "input_layernorm.weight"], eps, gemma)
        block_inputs.append(a)
        q = a @ w[p + "self_attn.q_proj.weight"].T + w.get(p + "self_attn.q_proj.bias", 0.0)
        k = a @ w[p + "self_attn.k_proj.weight"].T + w.get(p + "self_attn.k_proj.bias", 0.0)
        v = a @ w[p + "self_attn.v_proj.weight"].T + w.get(p + "self_attn.v_proj.bias", 0.0)
        q, k, v = q.reshape(n, heads, hd), k.reshape(n, kv, hd), v.reshape(n, kv, hd)
        if p + "self_attn.q_norm.weight" in w:
            q = rms_norm(q, w[p + "self_attn.q_norm.weight"], eps, gemma)
            k = rms_norm(k, w[p + "self_attn.k_norm.weight"], eps, gemma)
        q, k = rope(q, freqs), rope(k, freqs)
        ok = visible(n, window)
        z, layer_weights = np.zeros((n, heads * hd)), []
        for head in range(heads):
            g = head // group
            scores = np.where(ok, q[:, head] @ k[:, g].T * scale, -np.inf)
            e = np.exp(scores - scores.max(axis=1, keepdims=True))
            prob = e / e.sum(axis=1, keepdims=True)
            layer_weights.append(prob)
            z[:, head * hd:(head + 1) * hd] = prob @ v[:, g]
        attention.append(layer_weights)
        o = z @ w[p + "self_attn.o_proj.weight"].T
        if gemma:
            x = x + rms_norm(o, w[p + "post_attention_layernorm.weight"], eps, True)
            m = rms_norm(x, w[p + "pre_feedforward_layernorm.weight"], eps, True)
        else:
            x = x + o
            m = rms_norm(x, w[p + "post_attention_layernorm.weight"], eps, False)
        mlp = (act(m @ w[p + "mlp.gate_proj.weight"].T) * (m @ w[p + "mlp.up_proj.weight"].T)) @ w[p + "mlp.down_proj.weight"].T
        if gemma:
            mlp = rms_norm(mlp, w[p + "post_feedforward_layernorm.weight"], eps, True)
        x = x + mlp
    head_w = w["model.embed_tokens.weight"] if cfg["tie_word_embeddings"] else w["lm_head.weight"]
    logits = rms_norm(x, w["model.norm.weight"], eps, gemma) @ head_w.T
    return logits, attention, block_inputs


def check_attention(name, cfg, attention):
    n = len(IDS)
    row_max = []
    for layer, (window, _) in enumerate(layer_plan(cfg)):
        ok = visible(n, window)
        for prob in attention[layer]:
            assert np.allclose(prob.sum(axis=1), 1.0, atol=1e-12), name
            assert np.all(prob[~ok] == 0.0), name
            assert np.all(prob[ok] > 0.0), name
            row_max.extend(prob.max(axis=1)[1:])
        if window is not None:
            assert window < n and not ok[n - 1, n - 1 - window] and ok[n - 1, n - window], name
    row_max = np.array(row_max)
    # neither uniform nor one-hot
    assert 0.3 < row_max.mean() < 0.9 and row_max.max() < 0.999, (name, row_max.mean(), row_max.max())
    return row_max.mean()


def check_llama_second_way(cfg, w, attention, block_inputs):
    """Layer 0, query head 3 (kv head 1) of llama-f32 again: scalar llama3 frequencies, explicit 2x2 rotations."""
    hd, heads, kv, n = head_dim(cfg), cfg["num_attention_heads"], cfg["num_key_value_heads"], len(IDS)
    half, sc = hd // 2, cfg["rope_scaling"]
    freqs, branches = [], set()
    for m in range(half):
        f0 = cfg["rope_theta"] ** (-2.0 * m / hd)
        wl = 2 * math.pi / f0
        if wl < sc["original_max_position_embeddings"] / sc["high_freq_factor"]:
            freqs.append(f0)
            branches.add("kept")
        elif wl > sc["original_max_position_embeddings"] / sc["low_freq_factor"]:
            freqs.append(f0 / sc["factor"])
            branches.add("divided")
        else:
            s = (sc["original_max_position_embeddings"] / wl - sc["low_freq_factor"]) / (
                sc["high_freq_factor"] - sc["low_freq_factor"])
            freqs.append((1 - s) * f0 / sc["factor"] + s * f0)
            branches.add("smoothed")
    assert branches == {"kept", "divided", "smoothed"}, branches
    assert np.allclose(freqs, inv_freq(cfg["rope_theta"], hd, sc), rtol=1e-14)

    def rotation(pos):
        r = np.zeros((hd, hd))
        for m in range(half):
            c, s = math.cos(pos * freqs[m]), math.sin(pos * freqs[m])
            r[m, m], r[m, m + half], r[m + half, m], r[m + half, m + half] = c, -s, s, c
        return r

    for pos in range(5):
        r = rotation(pos)
        assert np.allclose(r @ r.T, np.eye(hd), atol=1e-14)
    rng = np.random.RandomState(7)
    qv, kv_ = rng.normal(size=hd), rng.normal(size=hd)
    for i, j, shift in [(5, 2, 4), (9, 9, -7), (3, 0, 11), (0, 6, 2)]:
        a = (rotation(i) @ qv) @ (rotation(j) @ kv_)
        b = (rotation(i + shift) @ qv) @ (rotation(j + shift) @ kv_)
        assert abs(a - b) < 1e-12, (i, j, shift)

    head, g = 3, 3 // (heads // kv)
    a = block_inputs[0]
    wq = w["model.layers.0.self_attn.q_proj.weight"][head * hd:(head + 1) * hd]
    wk = w["model.layers.0.self_attn.k_proj.weight"][g * hd:(g + 1) * hd]
    qs = [rotation(i) @ (wq @ a[i]) for i in range(n)]
    ks = [rotation(j) @ (wk @ a[j]) for j in range(n)]
    expect = np.zeros((n, n))
    for i in range(n):
        row = [math.exp(float(qs[i] @ ks[j]) / math.sqrt(hd)) for j in range(i + 1)]
        total = sum(row)
        expect[i, :i + 1] = [r / total for r in row]
    assert np.allclose(expect, attention[0][head], atol=1e-12, rtol=0)
    plain = inv_freq(cfg["rope_theta"], hd, None)
    return int(np.sum(~np.isclose(plain, freqs)))


def main():
    for name, dtype, seed, split in CASES:
        cfg = CONFIGS[name]
        folder = HERE / name
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
        read_back = write_weights(folder, weights(cfg, seed), dtype, split)
        logits, attention, block_inputs = forward(cfg, read_back, IDS)
        sharpness = check_attention(name, cfg, attention)
        note = ""
        if name == "llama-f32":
            changed = check_llama_second_way(cfg, read_back, attention, block_inputs)
            note = f", llama3 scaling changes {changed} of {head_dim(cfg) // 2} frequencies, second way agrees"
        expected = {"ids": IDS, "logits": logits.tolist(),
                    "attention": [[p.tolist() for p in layer] for layer in attention],
                    "block_inputs": [a.tolist() for a in block_inputs]}
        (folder / "expected.json").write_text(json.dumps(expected))
        print(f"wrote {folder.name} ({dtype}, {len(read_back)} tensors, mean row max {sharpness:.3f}{note})")


if __name__ == "__main__":
    main()
