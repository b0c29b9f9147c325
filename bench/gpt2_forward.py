#!/usr/bin/env python3
"""attnlab's GPT-2 forward pass beside plain PyTorch on the same checkpoint, in one script.

Writes a GPT-2-small-shaped checkpoint (12 layers, 12 heads, 768 wide, 1024 positions,
vocabulary 50,257; seeded random weights, F32) in Hugging Face's layout, then times the
forward over N tokens (default 1024) in:
  - PyTorch (Debian's python3-torch, OpenBLAS, 2 threads, no grad): the model written with
    matmuls and a masked softmax(Q·Kᵀ/√d)·V, weights read from the same model.safetensors;
  - attnlab (`attnlab bench --model DIR --tokens N --json`): OpenBLAS GEMMs and the tiled
    attention kernel, which also reports the machine's f32 peak measured in the same run;
    then, where the CPU has bf16 units, again with `--bf16` (oneDNN's bf16 products, on AMX
    tiles where there are some), as a share of that unit's peak.
Both take the median of their timed runs after a warm-up. The logits of the two are
compared on the same tokens, so the timing is of the same computation.

Run:  /usr/bin/python3 bench/gpt2_forward.py [--attnlab build/attnlab] [--tokens 1024] [--repeats 3] [--dir DIR]
"""
import argparse
import json
import math
import os
import pathlib
import struct
import subprocess
import sys
import tempfile
import time

import numpy as np

torch = None  # imported in main(), after OPENBLAS_CORETYPE is settled (OpenBLAS reads it when it loads)
CONFIG = {"n_layer": 12, "n_head": 12, "n_embd": 768, "n_positions": 1024, "vocab_size": 50257, "n_inner": None,
          "layer_norm_epsilon": 1e-5, "activation_function": "gelu_new", "model_type": "gpt2"}


def share_of(percent, peak):
    """'57% of the bf16 peak', or that no peak was measured for it (percent None)."""
    return f"{percent:.0f}% of {peak}" if percent is not None else f"no {peak} measured"


def write_checkpoint(folder):
    rng = np.random.default_rng(0)
    d, v, p = CONFIG["n_embd"], CONFIG["vocab_size"], CONFIG["n_positions"]
    shapes = {"wte.weight": (v, d), "wpe.weight": (p, d)}
    for layer in range(CONFIG["n_layer"]):
        h = f"h.{layer}."
        shapes.update({h + "ln_1.weight": (d,), h + "ln_1.bias": (d,), h + "attn.c_attn.weight": (d, 3 * d),
                       h + "attn.c_attn.bias": (3 * d,), h + "attn.c_proj.weight": (d, d), h + "attn.c_proj.bias": (d,),
                       h + "ln_2.weight": (d,), h + "ln_2.bias": (d,), h + "mlp.c_fc.weight": (d, 4 * d),
                       h + "mlp.c_fc.bias": (4 * d,), h + "mlp.c_proj.weight": (4 * d, d), h + "mlp.c_proj.bias": (d,)})
    shapes.update({"ln_f.weight": (d,), "ln_f.bias": (d,)})
    header, offset = {}, 0
    for name, shape in shapes.items():
        size = int(np.prod(shape)) * 4
        header["transformer." + name] = {"dtype": "F32", "shape": list(shape), "data_offsets": [offset, offset + size]}
        offset += size
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(folder / "model.safetensors", "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for name, shape in shapes.items():
            scale = 1.0 if name.endswith("ln_1.weight") or name.endswith("ln_2.weight") or name == "ln_f.weight" else 0.02
            values = rng.standard_normal(shape, dtype=np.float32) * scale
            if scale == 1.0:
                values = 1 + 0.1 * values
            f.write(values.astype(np.float32).tobytes())
    (folder / "config.json").write_text(json.dumps(CONFIG))


def read_weights(folder):
    raw = (folder / "model.safetensors").read_bytes()
    (length,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + length])
    data = memoryview(raw)[8 + length:]
    weights = {}
    for name, entry in header.items():
        begin, end = entry["data_offsets"]
        array = np.frombuffer(data[begin:end], dtype=np.float32).reshape(entry["shape"])
        weights[name.removeprefix("transformer.")] = torch.from_numpy(array.copy())
    return weights


def gelu_new(x):
    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def torch_forward(w, ids):
    with torch.no_grad():
        return forward_without_grad(w, ids)


def forward_without_grad(w, ids):
    d, heads = CONFIG["n_embd"], CONFIG["n_head"]
    n, dh = len(ids), d // heads
    x = w["wte.weight"][ids] + w["wpe.weight"][:n]
    mask = torch.triu(torch.full((n, n), float("-inf")), diagonal=1)
    ln = torch.nn.functional.layer_norm
    for layer in range(CONFIG["n_layer"]):
        h = f"h.{layer}."
        a = ln(x, (d,), w[h + "ln_1.weight"], w[h + "ln_1.bias"], 1e-5)
        qkv = a @ w[h + "attn.c_attn.weight"] + w[h + "attn.c_attn.bias"]
        q, k, v = (t.reshape(n, heads, dh).transpose(0, 1) for t in qkv.split(d, dim=1))
        scores = q @ k.transpose(-1, -2) / math.sqrt(dh) + mask
        z = (torch.softmax(scores, dim=-1) @ v).transpose(0, 1).reshape(n, d)
        x = x + z @ w[h + "attn.c_proj.weight"] + w[h + "attn.c_proj.bias"]
        m = ln(x, (d,), w[h + "ln_2.weight"], w[h + "ln_2.bias"], 1e-5)
        x = x + gelu_new(m @ w[h + "mlp.c_fc.weight"] + w[h + "mlp.c_fc.bias"]) @ w[h + "mlp.c_proj.weight"] \
            + w[h + "mlp.c_proj.bias"]
    return ln(x, (d,), w["ln_f.weight"], w["ln_f.bias"], 1e-5) @ w["wte.weight"].T


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--attnlab", default="build/attnlab")
    parser.add_argument("--tokens", type=int, default=1024)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--dir", help="where to write the checkpoint (default: a temporary folder)")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    args = parser.parse_args()
    folder = pathlib.Path(args.dir or tempfile.mkdtemp(prefix="attnlab-gpt2-small-"))
    folder.mkdir(parents=True, exist_ok=True)
    if not (folder / "model.safetensors").exists():
        print(f"writing a GPT-2-small-shaped checkpoint (random weights) to {folder} ...", flush=True,
              file=sys.stderr if args.json else sys.stdout)
        write_checkpoint(folder)

    out = subprocess.run([args.attnlab, "bench", "--model", str(folder), "--tokens", str(args.tokens), "--repeats",
                          str(args.repeats), "--json"], check=True, capture_output=True, text=True).stdout
    ours = json.loads(out)
    # Again with the products in bf16, where the CPU has bf16 units (AVX-512 BF16 or AMX tiles).
    m = ours["machine"]
    bf16 = None
    if m["bf16_peak_gflops"] > 0 or m.get("amx_bf16_peak_gflops", 0) > 0:
        bf16 = json.loads(subprocess.run([args.attnlab, "bench", "--model", str(folder), "--tokens", str(args.tokens),
                                          "--repeats", str(args.repeats), "--bf16", "--json"], check=True,
                                         capture_output=True, text=True).stdout)
    # PyTorch gets the same OpenBLAS kernels attnlab ran with (Debian's OpenBLAS falls back to
    # generic SSE3 kernels on CPUs it does not know; attnlab picks fitting ones itself).
    os.environ.setdefault("OPENBLAS_CORETYPE", ours["blas_core"])
    global torch
    import torch as imported
    torch = imported
    torch.set_num_threads(2)

    ids = torch.from_numpy(np.random.default_rng(1).integers(0, CONFIG["vocab_size"], args.tokens))
    weights = read_weights(folder)
    torch_forward(weights, ids)  # warm-up
    times = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        logits = torch_forward(weights, ids)
        times.append(time.perf_counter() - start)
    torch_seconds = sorted(times)[len(times) // 2]

    # The same computation: attnlab's last-position logits against PyTorch's.
    run = subprocess.run([args.attnlab, "model", "run", str(folder), "--ids", ",".join(map(str, ids[:64].tolist())),
                          "--json", "--top-k", "1"], check=True, capture_output=True, text=True).stdout
    ours_logits = np.array(json.loads(run)["last_logits"])
    theirs = torch_forward(weights, ids[:64])[-1].numpy()
    gap = float(np.max(np.abs(ours_logits - theirs)))

    flops = ours["flops"]
    peak = ours["machine"]["f32_peak_gflops"]
    if args.json:
        print(json.dumps({"tokens": args.tokens, "blas_core": ours["blas_core"], "machine": ours["machine"],
                          "flops": flops, "attnlab_seconds": ours["median_seconds"],
                          "attnlab_percent_of_peak": ours["percent_of_peak"], "torch_seconds": torch_seconds,
                          "torch_percent_of_peak": 100 * flops / torch_seconds / 1e9 / peak,
                          "largest_logit_difference": gap,
                          "attnlab_bf16_seconds": bf16["median_seconds"] if bf16 else None,
                          "attnlab_bf16_percent_of_bf16_peak": bf16["percent_of_bf16_peak"] if bf16 else None,
                          "bf16_isa": bf16["bf16_isa"] if bf16 else "none"}))
        return
    print(f"GPT-2-small shape, {args.tokens} tokens, f32, 2 threads, OpenBLAS kernels {ours['blas_core']} for both; "
          f"f32 peak measured in this run: {peak:.0f} GFLOP/s")
    print(f"  PyTorch {torch.__version__}: {torch_seconds:.3f} s ({args.tokens / torch_seconds:.0f} tokens/s, "
          f"{flops / torch_seconds / 1e9:.0f} GFLOP/s, {100 * flops / torch_seconds / 1e9 / peak:.0f}% of peak)")
    print(f"  attnlab:       {ours['median_seconds']:.3f} s ({ours['tokens_per_second']:.0f} tokens/s, "
          f"{ours['gflops']:.0f} GFLOP/s, {ours['percent_of_peak']:.0f}% of peak)")
    print(f"  attnlab is {torch_seconds / ours['median_seconds']:.2f}× PyTorch; largest |logit difference| on 64 "
          f"tokens: {gap:.2e}")
    if bf16:
        print(f"  attnlab, bf16 products on {bf16['bf16_isa']}: {bf16['median_seconds']:.3f} s "
              f"({share_of(bf16['percent_of_bf16_peak'], 'the bf16 peak')}), {torch_seconds / bf16['median_seconds']:.2f}× "
              f"PyTorch's f32")


if __name__ == "__main__":
    main()
