#!/usr/bin/env python3
"""The README's headline table: attnlab beside llama.cpp and PyTorch on the same weights.

Runs, in one session and with the same 2 threads, the three peer benchmarks and prints
their figures in one Markdown table, each of attnlab's as a share of the peak or read
bandwidth `attnlab bench` measured in that run, and as ratios to the peers:

  - bench/gpt2_forward.py: GPT-2 small's forward over 1024 tokens (f32, random weights),
    attnlab against PyTorch's (Debian's python3-torch) on the same checkpoint;
  - bench/llama_cpp_peer.js: Llama-architecture GGUF files at the size people run, TinyLlama-
    1.1B's shape (22 layers, d_model 2048, 32 query heads sharing 4 KV heads, FFN 5632,
    vocabulary 32000; seeded weights) in F32, F16, Q8_0 and Q4_K: prompt processing (256 tokens)
    and generation (16 tokens after a prompt of 64, and of 1024); and, the small end, of
    GPT-2 small's size in F32, F16, Q8_0 and Q4_K (prompt 512, generation after 64); each
    against llama.cpp (npm's node-llama-cpp, installed by the test command into build/peers)
    on the same file;
  - bench/train_step.py: whole training steps against PyTorch's autograd.

Run from the repository: /usr/bin/python3 bench/headline.py [--attnlab build/attnlab]
[--repeats 3] [--json]. It needs python3-torch and build/peers (scripts/test.sh installs
the latter). Nothing here is a test: the figures are measurements, never asserted.
"""
import argparse
import json
import os
import pathlib
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parent

from gpt2_forward import share_of  # noqa: E402 (beside this script)


def run_json(command):
    print("running " + " ".join(command[:2]) + " ...", file=sys.stderr, flush=True)
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--attnlab", default="build/attnlab")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--shape", default="tinyllama-1.1b", help="the large files' shape (llama_cpp_peer.js --shape)")
    args = parser.parse_args()
    python = sys.executable
    forward = run_json([python, str(HERE / "gpt2_forward.py"), "--attnlab", args.attnlab, "--repeats",
                        str(args.repeats), "--json"])
    peer = ["node", str(HERE / "llama_cpp_peer.js"), "--attnlab", args.attnlab, "--repeats", str(args.repeats), "--json"]
    large = ["--shape", args.shape, "--types", "F32,F16,Q8_0,Q4_K", "--prompt", "256", "--generate", "16"]
    peers = {(args.shape, context): run_json(peer + large + ["--context", str(context)]) for context in (64, 1024)}
    peers[("gpt2-small", 64)] = run_json(peer + ["--context", "64"])
    training = run_json([python, str(HERE / "train_step.py"), "--attnlab", args.attnlab, "--steps", "10",
                         "--repeats", str(args.repeats), "--json"])
    if args.json:
        print(json.dumps({"forward": forward, "llama_cpp": {f"{shape} after {context}": result
                                                            for (shape, context), result in peers.items()},
                          "training": training}, indent=2))
        return

    m = forward["machine"]
    amx = f"{m['amx_bf16_peak_gflops']:.0f} GFLOP/s" if m.get("amx_bf16_peak_gflops") else "none"
    int8 = f"{m['int8_peak_gops']:.0f} GOP/s" if m.get("int8_peak_gops") else "none"
    amx_int8 = f"{m['amx_int8_peak_gops']:.0f} GOP/s" if m.get("amx_int8_peak_gops") else "none"
    print(f"machine: {m['isa']}, {m['threads']} threads, f32 peak {m['f32_peak_gflops']:.0f} GFLOP/s, bf16 peak "
          f"{m['bf16_peak_gflops']:.0f} GFLOP/s, AMX bf16 peak {amx}, int8 (VNNI) peak {int8}, AMX int8 peak "
          f"{amx_int8}, read "
          f"{m['read_gbps']:.1f} GB/s (measured by attnlab bench in the forward's run); OpenBLAS kernels "
          f"{forward['blas_core']}; medians of {args.repeats} runs\n")
    print("| what | attnlab | share of this machine | llama.cpp | PyTorch | attnlab ÷ peer |")
    print("|---|---|---|---|---|---|")
    f = forward
    print(f"| GPT-2 small forward, {f['tokens']} tokens, f32 | {f['attnlab_seconds']:.3f} s | "
          f"{f['attnlab_percent_of_peak']:.0f}% of f32 peak | | {f['torch_seconds']:.3f} s "
          f"({f['torch_percent_of_peak']:.0f}%) | {f['torch_seconds'] / f['attnlab_seconds']:.2f}× PyTorch |")
    if f.get("attnlab_bf16_seconds"):
        print(f"| GPT-2 small forward, {f['tokens']} tokens, bf16 products ({f['bf16_isa']}) | "
              f"{f['attnlab_bf16_seconds']:.3f} s | {share_of(f['attnlab_bf16_percent_of_bf16_peak'], 'bf16 peak')} | | "
              f"{f['torch_seconds']:.3f} s | {f['torch_seconds'] / f['attnlab_bf16_seconds']:.2f}× PyTorch |")
    print_llama_cpp_rows(peers)
    for r in training["rows"]:
        s = r["shape"]
        name = (f"training step, L{s['layers']} H{s['heads']} d{s['d_model']} context {s['context']} batch "
                f"{s['batch']}{' attention-only' if s['attention_only'] else ''}")
        print(f"| {name} | {1e3 * r['attnlab_seconds']:.1f} ms | {r['attnlab_percent_of_peak']:.0f}% of f32 peak | | "
              f"{1e3 * r['torch_seconds']:.1f} ms | {r['torch_seconds'] / r['attnlab_seconds']:.2f}× PyTorch |")


def print_llama_cpp_rows(peers):
    """The rows beside llama.cpp: each shape's machine line, its prompts (and their bf16
    products, where the CPU has bf16 units) after a context of 64, and its generation."""
    def row(what, ours, share, theirs, ratio):
        print(f"| {what} | {ours} | {share} | {theirs} | | {ratio:.2f}× llama.cpp |")

    for (shape, context), result in peers.items():
        m = result["rows"][0]["attnlab"]["machine"]
        print(f"| ({shape}: f32 peak {m['f32_peak_gflops']:.0f} GFLOP/s, read {m['read_gbps']:.1f} GB/s in "
              f"this run) | | | | | |")
        for r in result["rows"] if context == 64 else []:
            a, t = r["attnlab"], r["llama_cpp"]
            row(f"prompt {result['prompt']} tokens, {shape} {r['file']} GGUF", f"{a['prompt_tokens_per_second']:.0f} tok/s",
                f"{a['prompt_percent_of_f32_peak']:.0f}% of f32 peak{int8_share(a)}",
                f"{t['prompt_tokens_per_second']:.0f} tok/s", r["prompt_ratio"])
            if a["prompt_bf16_tokens_per_second"] > 0:
                row(f"prompt {result['prompt']} tokens, {shape} {r['file']} GGUF, bf16 products ({a['bf16_isa']})",
                    f"{a['prompt_bf16_tokens_per_second']:.0f} tok/s",
                    share_of(a["prompt_bf16_percent_of_bf16_peak"], "bf16 peak"),
                    f"{t['prompt_tokens_per_second']:.0f} tok/s", r["prompt_bf16_ratio"])
        for r in result["rows"]:
            a, t = r["attnlab"], r["llama_cpp"]
            row(f"generation after {context} tokens, {shape} {r['file']}", f"{a['generate_tokens_per_second']:.1f} tok/s",
                f"{a['generate_percent_of_read_bandwidth']:.0f}% of read bandwidth",
                f"{t['generate_tokens_per_second']:.1f} tok/s", r["generate_ratio"])


def int8_share(attnlab):
    """A quantized prompt's share of the int8 peak, where its products ran as int8 dot products
    (and of the AMX bf16 peak, where they ran on those tiles)."""
    share, tiles = attnlab.get("prompt_percent_of_int8_peak"), attnlab.get("prompt_percent_of_amx_bf16_peak")
    if tiles is not None:
        return f", {tiles:.0f}% of AMX bf16 peak ({share:.0f}% of int8 peak)"
    return "" if share is None else f", {share:.0f}% of int8 peak"


if __name__ == "__main__":
    os.chdir(HERE.parent)
    main()
