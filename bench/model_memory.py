#!/usr/bin/env python3
"""What a loaded model takes in memory, beside its checkpoint's size, in one script.

Writes seeded random checkpoints in Hugging Face's layout, of the shapes users load:
  - GPT-2 small (12 layers, 768 wide, vocabulary 50,257; 124 M parameters) in F32 and in BF16;
  - SmolLM2-135M's shape (model_type llama: 30 layers, 576 wide, 9 query heads sharing 3 KV
    heads, SwiGLU 1536, vocabulary 49,152, tied) in BF16, as it is published;
then runs `attnlab bench --model DIR --tokens N --json` on each, which reports the process's
peak resident memory from just before loading to the end of its forward passes, the files'
bytes and the forward's own buffers (logits, each layer's input, one block's temporaries).
The goal: resident ≤ file + 10% + buffers, i.e. the weights are read where the mapped file
holds them, not copied and not widened (a 16-bit checkpoint stays 16-bit in memory).
`--f32` also runs each BF16 model widened to f32, for the comparison.

Run:  /usr/bin/python3 bench/model_memory.py [--attnlab build/attnlab] [--tokens 256] [--dir DIR]
"""
import argparse
import json
import pathlib
import struct
import subprocess
import tempfile

import numpy as np


def bf16_bytes(values):
    """float32 values as bfloat16 bytes, rounded to nearest even."""
    bits = values.astype(np.float32).view(np.uint32)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return rounded.astype(np.uint16).tobytes()


def write_safetensors(path, tensors, dtype):
    """tensors: (name, shape, scale) in file order; values seeded normal × scale (1 + 0.1·normal for norms)."""
    rng = np.random.default_rng(0)
    width = 4 if dtype == "F32" else 2
    header, offset = {}, 0
    for name, shape, _ in tensors:
        size = int(np.prod(shape)) * width
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + size]}
        offset += size
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for name, shape, scale in tensors:
            values = rng.standard_normal(shape, dtype=np.float32)
            values = 1 + 0.1 * values if scale is None else values * scale
            f.write(values.astype(np.float32).tobytes() if dtype == "F32" else bf16_bytes(values))


def gpt2_small(folder, dtype):
    d, v, p, layers = 768, 50257, 1024, 12
    tensors = [("wte.weight", (v, d), 0.02), ("wpe.weight", (p, d), 0.02)]
    for l in range(layers):
        h = f"h.{l}."
        tensors += [(h + "ln_1.weight", (d,), None), (h + "ln_1.bias", (d,), 0.02),
                    (h + "attn.c_attn.weight", (d, 3 * d), 0.02), (h + "attn.c_attn.bias", (3 * d,), 0.02),
                    (h + "attn.c_proj.weight", (d, d), 0.02), (h + "attn.c_proj.bias", (d,), 0.02),
                    (h + "ln_2.weight", (d,), None), (h + "ln_2.bias", (d,), 0.02),
                    (h + "mlp.c_fc.weight", (d, 4 * d), 0.02), (h + "mlp.c_fc.bias", (4 * d,), 0.02),
                    (h + "mlp.c_proj.weight", (4 * d, d), 0.02), (h + "mlp.c_proj.bias", (d,), 0.02)]
    tensors += [("ln_f.weight", (d,), None), ("ln_f.bias", (d,), 0.02)]
    folder.mkdir(parents=True, exist_ok=True)
    write_safetensors(folder / "model.safetensors", tensors, dtype)
    (folder / "config.json").write_text(json.dumps(
        {"model_type": "gpt2", "n_layer": layers, "n_head": 12, "n_embd": d, "n_positions": p, "vocab_size": v,
         "n_inner": None, "layer_norm_epsilon": 1e-5, "activation_function": "gelu_new"}))


def smollm2_135m(folder, dtype):
    d, v, layers, heads, kv, inner, hd = 576, 49152, 30, 9, 3, 1536, 64
    tensors = [("model.embed_tokens.weight", (v, d), 0.02)]
    for l in range(layers):
        p = f"model.layers.{l}."
        tensors += [(p + "input_layernorm.weight", (d,), None),
                    (p + "self_attn.q_proj.weight", (heads * hd, d), 0.02),
                    (p + "self_attn.k_proj.weight", (kv * hd, d), 0.02),
                    (p + "self_attn.v_proj.weight", (kv * hd, d), 0.02),
                    (p + "self_attn.o_proj.weight", (d, heads * hd), 0.02),
                    (p + "post_attention_layernorm.weight", (d,), None),
                    (p + "mlp.gate_proj.weight", (inner, d), 0.02), (p + "mlp.up_proj.weight", (inner, d), 0.02),
                    (p + "mlp.down_proj.weight", (d, inner), 0.02)]
    tensors += [("model.norm.weight", (d,), None)]
    folder.mkdir(parents=True, exist_ok=True)
    write_safetensors(folder / "model.safetensors", tensors, dtype)
    (folder / "config.json").write_text(json.dumps(
        {"model_type": "llama", "num_hidden_layers": layers, "num_attention_heads": heads,
         "num_key_value_heads": kv, "hidden_size": d, "intermediate_size": inner, "max_position_embeddings": 8192,
         "vocab_size": v, "rms_norm_eps": 1e-5, "rope_theta": 100000.0, "hidden_act": "silu",
         "tie_word_embeddings": True}))


def run(attnlab, folder, tokens, widen):
    command = [attnlab, "bench", "--model", str(folder), "--tokens", str(tokens), "--repeats", "1", "--json"]
    if widen:
        command.append("--f32")
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--attnlab", default="build/attnlab")
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--dir", help="where to write the checkpoints (default: a temporary folder)")
    parser.add_argument("--f32", action="store_true", help="also run each BF16 model widened to f32")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as temporary:
        root = pathlib.Path(args.dir or temporary)
        cases = [("GPT-2 small, F32", gpt2_small, "F32"), ("GPT-2 small, BF16", gpt2_small, "BF16"),
                 ("SmolLM2-135M shape, BF16", smollm2_135m, "BF16")]
        mib = 1 << 20
        print(f"{'model':28} {'as':>10} {'file':>9} {'weights':>9} {'buffers':>9} {'resident':>9} "
              f"{'goal':>9}  goal met")
        failed = False
        for label, write, dtype in cases:
            folder = root / label.split(",")[0].replace(" ", "-").lower() / dtype.lower()
            if not (folder / "model.safetensors").exists():
                write(folder, dtype)
            for widen in ([False, True] if args.f32 and dtype != "F32" else [False]):
                m = run(args.attnlab, folder, args.tokens, widen)["memory"]
                failed |= not m["goal_met"] and not widen
                print(f"{label:28} {'f32' if widen else m['stored_dtype']:>10} {m['file_bytes'] / mib:8.0f}M "
                      f"{m['weight_bytes'] / mib:8.0f}M {m['buffer_bytes'] / mib:8.0f}M "
                      f"{m['resident_peak_bytes'] / mib:8.0f}M {m['goal_bytes'] / mib:8.0f}M  "
                      f"{'yes' if m['goal_met'] else 'no'}{' (widened: not the goal)' if widen else ''}")
        return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
