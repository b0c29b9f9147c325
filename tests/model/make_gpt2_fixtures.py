#!/usr/bin/env python3
"""Writes tiny GPT-2 checkpoints and what an independent forward pass gives on them.

An implementation of GPT-2's forward of our own, in NumPy (float64), written from the
model's definition rather than from attnlab's C++: token + position embeddings; per block
LN -> causal multi-head attention (c_attn split Q | K | V, heads of d / n_head) -> c_proj
-> residual -> LN -> MLP with the tanh GELU -> residual; ln_f; logits against the tied wte.
The safetensors files are written by hand (8-byte length, JSON header, raw data), so no
library of attnlab's or Hugging Face's is involved.

Each fixture directory holds config.json, model.safetensors and expected.json:
{"ids": [...], "logits": [[...]], "attention": [[[[...]]]], "block_inputs": [[[...]]]}.
Run with Debian's NumPy:  /usr/bin/python3 tests/model/make_gpt2_fixtures.py
"""
import json
import math
import pathlib
import struct

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent / "fixtures"
CONFIG = {"n_layer": 2, "n_head": 4, "n_embd": 16, "n_positions": 16, "vocab_size": 40, "n_inner": None,
          "layer_norm_epsilon": 1e-5, "activation_function": "gelu_new", "model_type": "gpt2"}
IDS = [3, 17, 5, 3, 17, 5, 39, 0, 22, 3]


def weights(seed):
    rng = np.random.RandomState(seed)
    d, inner, v, p = CONFIG["n_embd"], 4 * CONFIG["n_embd"], CONFIG["vocab_size"], CONFIG["n_positions"]
    w = {"wte.weight": rng.normal(0, 0.5, (v, d)), "wpe.weight": rng.normal(0, 0.2, (p, d))}
    for layer in range(CONFIG["n_layer"]):
        h = f"h.{layer}."
        w[h + "ln_1.weight"] = 1 + rng.normal(0, 0.1, d)
        w[h + "ln_1.bias"] = rng.normal(0, 0.1, d)
        w[h + "attn.c_attn.weight"] = rng.normal(0, 0.4, (d, 3 * d))
        w[h + "attn.c_attn.bias"] = rng.normal(0, 0.1, 3 * d)
        w[h + "attn.c_proj.weight"] = rng.normal(0, 0.2, (d, d))
        w[h + "attn.c_proj.bias"] = rng.normal(0, 0.1, d)
        w[h + "ln_2.weight"] = 1 + rng.normal(0, 0.1, d)
        w[h + "ln_2.bias"] = rng.normal(0, 0.1, d)
        w[h + "mlp.c_fc.weight"] = rng.normal(0, 0.2, (d, inner))
        w[h + "mlp.c_fc.bias"] = rng.normal(0, 0.1, inner)
        w[h + "mlp.c_proj.weight"] = rng.normal(0, 0.1, (inner, d))
        w[h + "mlp.c_proj.bias"] = rng.normal(0, 0.1, d)
    w["ln_f.weight"] = 1 + rng.normal(0, 0.1, d)
    w["ln_f.bias"] = rng.normal(0, 0.1, d)
    return w


def to_bf16_bits(x32):
    """float32 -> bf16 bits, round to nearest even (NaN-free inputs)."""
    bits = x32.view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return rounded.astype(np.uint16)


def stored(values, dtype):
    """The values as the file stores them: (bytes, the float64 values a reader gets back)."""
    x32 = values.astype(np.float32)
    if dtype == "F32":
        return x32.tobytes(), x32.astype(np.float64)
    if dtype == "F16":
        x16 = x32.astype(np.float16)
        return x16.tobytes(), x16.astype(np.float64)
    bits = to_bf16_bits(x32)
    back = (bits.astype(np.uint32) << 16).view(np.float32)
    return bits.tobytes(), back.astype(np.float64)


def write_safetensors(path, tensors, dtype, prefix):
    header, blobs, offset, read_back = {"__metadata__": {"format": "pt"}}, [], 0, {}
    for name, values in tensors.items():
        data, back = stored(np.asarray(values), dtype)
        header[prefix + name] = {"dtype": dtype, "shape": list(np.shape(values)), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
        read_back[name] = back
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))
    return read_back


def layer_norm(x, gamma, beta, eps):
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


def gelu_new(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def forward(w, ids):
    d, heads = CONFIG["n_embd"], CONFIG["n_head"]
    dh, n, eps = d // heads, len(ids), CONFIG["layer_norm_epsilon"]
    x = w["wte.weight"][ids] + w["wpe.weight"][:n]
    attention, block_inputs = [], []
    causal = np.tril(np.ones((n, n), dtype=bool))
    for layer in range(CONFIG["n_layer"]):
        h = f"h.{layer}."
        a = layer_norm(x, w[h + "ln_1.weight"], w[h + "ln_1.bias"], eps)
        block_inputs.append(a)
        qkv = a @ w[h + "attn.c_attn.weight"] + w[h + "attn.c_attn.bias"]
        q, k, v = qkv[:, :d], qkv[:, d:2 * d], qkv[:, 2 * d:]
        z, layer_weights = np.zeros((n, d)), []
        for head in range(heads):
            cols = slice(head * dh, (head + 1) * dh)
            scores = q[:, cols] @ k[:, cols].T / math.sqrt(dh)
            scores = np.where(causal, scores, -np.inf)
            e = np.exp(scores - scores.max(axis=1, keepdims=True))
            p = e / e.sum(axis=1, keepdims=True)
            layer_weights.append(p)
            z[:, cols] = p @ v[:, cols]
        attention.append(layer_weights)
        x = x + z @ w[h + "attn.c_proj.weight"] + w[h + "attn.c_proj.bias"]
        m = layer_norm(x, w[h + "ln_2.weight"], w[h + "ln_2.bias"], eps)
        x = x + gelu_new(m @ w[h + "mlp.c_fc.weight"] + w[h + "mlp.c_fc.bias"]) @ w[h + "mlp.c_proj.weight"] \
            + w[h + "mlp.c_proj.bias"]
    logits = layer_norm(x, w["ln_f.weight"], w["ln_f.bias"], eps) @ w["wte.weight"].T
    return logits, attention, block_inputs


def main():
    cases = [("tiny-f32", "F32", "transformer.", 1), ("tiny-f16-no-prefix", "F16", "", 2), ("tiny-bf16", "BF16", "transformer.", 3)]
    for name, dtype, prefix, seed in cases:
        folder = HERE / name
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "config.json").write_text(json.dumps(CONFIG, indent=2) + "\n")
        read_back = write_safetensors(folder / "model.safetensors", weights(seed), dtype, prefix)
        logits, attention, block_inputs = forward(read_back, IDS)
        expected = {"ids": IDS, "logits": logits.tolist(),
                    "attention": [[p.tolist() for p in layer] for layer in attention],
                    "block_inputs": [a.tolist() for a in block_inputs]}
        (folder / "expected.json").write_text(json.dumps(expected))
        print(f"wrote {folder} ({dtype}, prefix {prefix!r})")


if __name__ == "__main__":
    main()
