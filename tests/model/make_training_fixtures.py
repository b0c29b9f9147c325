#!/usr/bin/env python3
"""Writes what PyTorch's autograd gives for a training loss of the tiny F32 checkpoint.

A GPT-2 forward of our own in PyTorch (float32, written from the model's definition, not
from attnlab's C++): token + position embeddings; per block LN -> causal multi-head
attention (c_attn split Q | K | V) -> c_proj -> residual -> LN -> MLP with the tanh GELU ->
residual; ln_f; logits against the tied wte. The loss is the mean next-token cross-entropy
over every prediction of a batch of sequences of different lengths; autograd gives the
gradient of every parameter. The attention-only variant runs no MLP (and so no ln_2).

Writes fixtures/training/ with expected.json ({"batch", "loss", "loss_attention_only"})
and gradients.safetensors / gradients-attention-only.safetensors (F32, one tensor per
parameter, named as in the checkpoint without "transformer."). The checkpoint is read by hand (8-byte length,
JSON header, raw data), so no library of attnlab's or Hugging Face's is involved.
Run with Debian's PyTorch:  /usr/bin/python3 tests/model/make_training_fixtures.py
"""
import json
import math
import pathlib
import struct

import numpy as np
import torch

FIXTURES = pathlib.Path(__file__).resolve().parent / "fixtures"
BATCH = [[3, 17, 5, 3, 17, 5, 39, 0, 22, 3, 17, 5, 8, 8, 1, 30, 2],
         [39, 11, 12, 13, 11, 12, 13, 4, 9],
         [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 0]]


def read_safetensors(path):
    blob = path.read_bytes()
    (length,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + length])
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        assert info["dtype"] == "F32"
        begin, end = info["data_offsets"]
        data = np.frombuffer(blob[8 + length + begin:8 + length + end], dtype=np.float32).reshape(info["shape"])
        tensors[name.removeprefix("transformer.")] = torch.tensor(data.copy(), requires_grad=True)
    return tensors


def write_safetensors(path, tensors):
    header, blobs, offset = {"__metadata__": {"format": "pt"}}, [], 0
    for name, values in tensors.items():
        data = values.detach().numpy().astype(np.float32).tobytes()
        header[name] = {"dtype": "F32", "shape": list(values.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def layer_norm(x, gamma, beta, eps):
    mean = x.mean(dim=-1, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * gamma + beta


def gelu_new(x):
    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def logits_of(w, config, ids, attention_only):
    d, heads, eps = config["n_embd"], config["n_head"], config["layer_norm_epsilon"]
    dh, n = d // heads, len(ids)
    x = w["wte.weight"][ids] + w["wpe.weight"][:n]
    causal = torch.tril(torch.ones(n, n, dtype=torch.bool))
    for layer in range(config["n_layer"]):
        h = f"h.{layer}."
        a = layer_norm(x, w[h + "ln_1.weight"], w[h + "ln_1.bias"], eps)
        qkv = a @ w[h + "attn.c_attn.weight"] + w[h + "attn.c_attn.bias"]
        q, k, v = qkv[:, :d], qkv[:, d:2 * d], qkv[:, 2 * d:]
        z = []
        for head in range(heads):
            cols = slice(head * dh, (head + 1) * dh)
            scores = (q[:, cols] @ k[:, cols].T / math.sqrt(dh)).masked_fill(~causal, float("-inf"))
            z.append(torch.softmax(scores, dim=1) @ v[:, cols])
        x = x + torch.cat(z, dim=1) @ w[h + "attn.c_proj.weight"] + w[h + "attn.c_proj.bias"]
        if not attention_only:
            m = layer_norm(x, w[h + "ln_2.weight"], w[h + "ln_2.bias"], eps)
            x = x + gelu_new(m @ w[h + "mlp.c_fc.weight"] + w[h + "mlp.c_fc.bias"]) @ w[h + "mlp.c_proj.weight"] \
                + w[h + "mlp.c_proj.bias"]
    return layer_norm(x, w["ln_f.weight"], w["ln_f.bias"], eps) @ w["wte.weight"].T


def loss_and_gradients(config, attention_only):
    w = read_safetensors(FIXTURES / "tiny-f32" / "model.safetensors")
    total, count = torch.zeros(()), 0
    for ids in BATCH:
        logits = logits_of(w, config, torch.tensor(ids[:-1]), attention_only)
        total = total + torch.nn.functional.cross_entropy(logits, torch.tensor(ids[1:]), reduction="sum")
        count += len(ids) - 1
    loss = total / count
    loss.backward()
    return loss.item(), {name: t.grad if t.grad is not None else torch.zeros_like(t) for name, t in w.items()}


def main():
    torch.manual_seed(0)
    config = json.loads((FIXTURES / "tiny-f32" / "config.json").read_text())
    out = FIXTURES / "training"
    out.mkdir(exist_ok=True)
    loss, grads = loss_and_gradients(config, attention_only=False)
    loss_attention_only, grads_attention_only = loss_and_gradients(config, attention_only=True)
    write_safetensors(out / "gradients.safetensors", grads)
    write_safetensors(out / "gradients-attention-only.safetensors", grads_attention_only)
    (out / "expected.json").write_text(json.dumps(
        {"batch": BATCH, "loss": loss, "loss_attention_only": loss_attention_only}, indent=1) + "\n")
    print(f"wrote {out}: loss {loss:.6f}, attention-only {loss_attention_only:.6f}")


if __name__ == "__main__":
    main()
