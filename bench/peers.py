#!/usr/bin/env python3
"""attnlab's tiled kernel beside the peers a user would otherwise pick, on the same shapes,
in the same session: attnlab's reference kernel (the whole grid materialised) and PyTorch's
softmax(Q·Kᵀ/√d)·V written with matmuls (Debian's python3-torch, OpenBLAS, 2 threads).

Run:  /usr/bin/python3 bench/peers.py [--attnlab build/attnlab] [--quick] [--repeats 5]

It prints one row per case: each kernel's median time, GFLOP/s (4·n·m·d per head, halved
when causal) and the speed-up of attnlab's tiled kernel over each peer. A peer that cannot
run a case (its n×n grid would not fit in memory) says so instead of a time.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import time

torch = None  # imported in main(), after OPENBLAS_CORETYPE is settled (OpenBLAS reads it when it loads)
MEMORY_LIMIT = 12 * 2**30  # bytes a peer may use for its grids before we call a case out of reach


def flops(n, heads, d, causal):
    return 4.0 * n * n * d * heads * (0.5 if causal else 1.0)


def torch_attention(q, k, v, causal):
    scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    if causal:
        n = q.shape[-2]
        scores = scores + torch.triu(torch.full((n, n), float("-inf")), diagonal=1)
    return torch.matmul(torch.softmax(scores, dim=-1), v)


def time_torch(n, heads, d, causal, repeats):
    grid_bytes = 2 * heads * n * n * 4  # scores and probabilities, f32
    if grid_bytes > MEMORY_LIMIT:
        return None, f"its {heads}×{n}×{n} grid needs {grid_bytes / 2**30:.0f} GiB"
    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.rand(heads, n, d, generator=g) * 2 - 1 for _ in range(3))
    with torch.no_grad():
        torch_attention(q, k, v, causal)  # warm-up
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            torch_attention(q, k, v, causal)
            times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2], ""


def time_attnlab(binary, n, heads, d, causal, kernel, repeats):
    command = [binary, "bench", "--json", "--n", str(n), "--heads", str(heads), "--d-k", str(d),
               "--kernel", kernel, "--repeats", str(repeats)] + (["--causal"] if causal else [])
    result = json.loads(subprocess.run(command, check=True, capture_output=True, text=True).stdout)
    case = result["results"][0]
    return (case["median_seconds"] if case["ran"] else None), case["skipped_because"], result["machine"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--attnlab", default=os.path.join(os.path.dirname(__file__), "..", "build", "attnlab"))
    parser.add_argument("--quick", action="store_true", help="two small cases")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    # PyTorch gets the same OpenBLAS kernels attnlab runs with. Debian's OpenBLAS falls back to
    # generic SSE3 kernels on CPUs it does not know; the attnlab command then restarts itself
    # with OPENBLAS_CORETYPE set to fitting ones (SkylakeX with AVX-512, Haswell with AVX2) and
    # reports the kernels it ran ("blas_core"). A value the user set stands, for both.
    ours = json.loads(subprocess.run([args.attnlab, "bench", "--json", "--n", "64", "--heads", "1", "--d-k", "8",
                                      "--repeats", "1"], check=True, capture_output=True, text=True).stdout)
    os.environ.setdefault("OPENBLAS_CORETYPE", ours["blas_core"])
    global torch
    import torch as imported
    torch = imported
    torch.set_num_threads(2)

    cases = [(1024, 16, 128, False), (2048, 16, 128, True)] if args.quick else [
        (1024, 16, 128, False), (2048, 16, 128, False), (4096, 16, 128, False), (4096, 16, 128, True),
        (8192, 16, 128, False), (8192, 16, 128, True), (4096, 32, 64, False), (131072, 1, 128, True)]
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; attnlab {args.attnlab}")
    header = f"{'case':<28}{'tiled ms':>10}{'GFLOP/s':>9}{'torch ms':>10}{'tiled vs torch':>16}{'reference ms':>14}{'tiled vs ref':>14}"
    print(header)
    for n, heads, d, causal in cases:
        name = f"n={n} H={heads} d={d}{' causal' if causal else ''}"
        tiled, _, machine = time_attnlab(args.attnlab, n, heads, d, causal, "tiled", args.repeats)
        peer, peer_note = time_torch(n, heads, d, causal, args.repeats)
        ref, ref_note = (None, "slow; run only up to n=1024")
        if n <= 1024:
            ref, ref_note, _ = time_attnlab(args.attnlab, n, heads, d, causal, "reference", 1)
        gflops = flops(n, heads, d, causal) / tiled / 1e9
        peer_text = f"{peer * 1e3:10.1f}{peer / tiled:15.1f}×" if peer else f"{'—':>10}{'cannot run':>16}"
        ref_text = f"{ref * 1e3:14.1f}{ref / tiled:13.1f}×" if ref else f"{'—':>14}{'—':>14}"
        print(f"{name:<28}{tiled * 1e3:10.1f}{gflops:9.1f}{peer_text}{ref_text}")
        if not peer:
            print(f"{'':<28}torch: {peer_note}")
    print(f"machine (measured by attnlab bench): {json.dumps(machine)}")


if __name__ == "__main__":
    sys.exit(main())
