#!/usr/bin/env python3
"""attnlab's training step beside PyTorch autograd on the same shapes, in one script.

For each shape (default: `attnlab train`'s model, attention-only and with MLPs, and a wider
one), times one whole training step (the loss over a batch of sequences, every gradient,
gradient clipping, AdamW) in:
  - attnlab (`attnlab bench --train --json`): the hand-written backward pass, which also
    reports the machine's f32 peak measured in the same run and the step's FLOPs
    (3 × the forward's: 6 × parameters × tokens plus attention);
  - PyTorch (Debian's python3-torch, 2 threads, the same OpenBLAS kernels): a GPT-2 written
    with batched matmuls and a masked softmax, `loss.backward()`, clip_grad_norm_, AdamW.
Both time the median of their runs after a warm-up step. Goal: attnlab at least 2× PyTorch.

Run:  /usr/bin/python3 bench/train_step.py [--attnlab build/attnlab] [--steps 20] [--repeats 5]
"""
import argparse
import json
import math
import os
import subprocess
import time

torch = None  # imported in main(), after OPENBLAS_CORETYPE is settled (OpenBLAS reads it when it loads)

# (layers, heads, d_model, context, vocabulary, batch, attention only)
SHAPES = [(2, 1, 32, 32, 28, 64, True), (2, 1, 32, 32, 28, 64, False), (2, 4, 128, 128, 256, 16, False)]


def make_parameters(layers, d, context, vocab, attention_only):
    g = torch.Generator().manual_seed(0)

    def normal(*shape, std=0.02):
        return (torch.randn(*shape, generator=g) * std).requires_grad_()

    p = {"wte": normal(vocab, d), "wpe": normal(context, d), "lnf_w": torch.ones(d, requires_grad=True),
         "lnf_b": torch.zeros(d, requires_grad=True)}
    for l in range(layers):
        p.update({f"{l}.ln1_w": torch.ones(d, requires_grad=True), f"{l}.ln1_b": torch.zeros(d, requires_grad=True),
                  f"{l}.attn_w": normal(d, 3 * d), f"{l}.attn_b": torch.zeros(3 * d, requires_grad=True),
                  f"{l}.proj_w": normal(d, d), f"{l}.proj_b": torch.zeros(d, requires_grad=True)})
        if not attention_only:
            p.update({f"{l}.ln2_w": torch.ones(d, requires_grad=True), f"{l}.ln2_b": torch.zeros(d, requires_grad=True),
                      f"{l}.fc_w": normal(d, 4 * d), f"{l}.fc_b": torch.zeros(4 * d, requires_grad=True),
                      f"{l}.mlp_w": normal(4 * d, d), f"{l}.mlp_b": torch.zeros(d, requires_grad=True)})
    return p


def loss_of(p, ids, layers, heads, d, attention_only):
    b, n = ids.shape[0], ids.shape[1] - 1
    dh = d // heads
    ln = torch.nn.functional.layer_norm
    x = p["wte"][ids[:, :-1]] + p["wpe"][:n]
    mask = torch.triu(torch.full((n, n), float("-inf")), diagonal=1)
    for l in range(layers):
        a = ln(x, (d,), p[f"{l}.ln1_w"], p[f"{l}.ln1_b"], 1e-5)
        qkv = a @ p[f"{l}.attn_w"] + p[f"{l}.attn_b"]
        q, k, v = (t.reshape(b, n, heads, dh).transpose(1, 2) for t in qkv.split(d, dim=2))
        z = (torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(dh) + mask, dim=-1) @ v).transpose(1, 2).reshape(b, n, d)
        x = x + z @ p[f"{l}.proj_w"] + p[f"{l}.proj_b"]
        if not attention_only:
            m = ln(x, (d,), p[f"{l}.ln2_w"], p[f"{l}.ln2_b"], 1e-5)
            hidden = torch.nn.functional.gelu(m @ p[f"{l}.fc_w"] + p[f"{l}.fc_b"], approximate="tanh")
            x = x + hidden @ p[f"{l}.mlp_w"] + p[f"{l}.mlp_b"]
    logits = ln(x, (d,), p["lnf_w"], p["lnf_b"], 1e-5) @ p["wte"].T
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))


def torch_step_seconds(shape, steps, repeats):
    layers, heads, d, context, vocab, batch, attention_only = shape
    p = make_parameters(layers, d, context, vocab, attention_only)
    params = list(p.values())
    optimiser = torch.optim.AdamW(params, lr=1e-3, weight_decay=0.0)
    ids = torch.randint(0, vocab, (batch, context + 1), generator=torch.Generator().manual_seed(1))

    def step():
        optimiser.zero_grad()
        loss_of(p, ids, layers, heads, d, attention_only).backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimiser.step()

    step()  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(steps):
            step()
        times.append((time.perf_counter() - start) / steps)
    return sorted(times)[len(times) // 2]


def attnlab_step(attnlab, shape, steps, repeats):
    layers, heads, d, context, vocab, batch, attention_only = shape
    command = [attnlab, "bench", "--train", "--layers", str(layers), "--heads", str(heads), "--d-model", str(d),
               "--context", str(context), "--vocab", str(vocab), "--batch", str(batch), "--steps", str(steps),
               "--repeats", str(repeats), "--json"] + (["--attn-only"] if attention_only else [])
    return json.loads(subprocess.run(command, check=True, capture_output=True, text=True).stdout)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--attnlab", default="build/attnlab")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    args = parser.parse_args()
    ours = [attnlab_step(args.attnlab, shape, args.steps, args.repeats) for shape in SHAPES]
    # PyTorch gets the OpenBLAS kernels attnlab ran with (see bench/gpt2_forward.py).
    os.environ.setdefault("OPENBLAS_CORETYPE", ours[0]["blas_core"])
    global torch
    import torch as imported
    torch = imported
    torch.set_num_threads(2)
    peak = ours[0]["machine"]["f32_peak_gflops"]
    if args.json:
        rows = []
        for shape, o in zip(SHAPES, ours):
            theirs = torch_step_seconds(shape, args.steps, args.repeats)
            rows.append({"shape": dict(zip(["layers", "heads", "d_model", "context", "vocab", "batch",
                                             "attention_only"], shape)),
                         "attnlab_seconds": o["step_seconds"], "attnlab_percent_of_peak": o["percent_of_peak"],
                         "torch_seconds": theirs,
                         "torch_percent_of_peak": 100 * o["flops_per_step"] / theirs / 1e9 / peak})
        print(json.dumps({"machine": ours[0]["machine"], "blas_core": ours[0]["blas_core"], "rows": rows}))
        return
    print(f"training step, f32, 2 threads, OpenBLAS kernels {ours[0]['blas_core']} for both; f32 peak measured in "
          f"this run: {peak:.0f} GFLOP/s; FLOPs a step: 3 × the forward's (6 × parameters × tokens + attention)")
    for shape, o in zip(SHAPES, ours):
        layers, heads, d, context, vocab, batch, attention_only = shape
        theirs = torch_step_seconds(shape, args.steps, args.repeats)
        tokens = batch * context
        print(f"  L{layers} H{heads} d{d} context {context} vocabulary {vocab} batch {batch}"
              f"{' attention-only' if attention_only else ''} ({o['parameters']} parameters):")
        print(f"    PyTorch {torch.__version__}: {theirs * 1e3:.2f} ms a step, {tokens / theirs:.0f} tokens/s, "
              f"{100 * o['flops_per_step'] / theirs / 1e9 / peak:.1f}% of peak")
        print(f"    attnlab:       {o['step_seconds'] * 1e3:.2f} ms a step, {o['tokens_per_second']:.0f} tokens/s, "
              f"{o['percent_of_peak']:.1f}% of peak  ->  {theirs / o['step_seconds']:.2f}× PyTorch")


if __name__ == "__main__":
    main()
