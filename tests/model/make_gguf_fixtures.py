#!/usr/bin/env python3
"""GGUF test files and their expected values, written by an independent implementation.

Writes tests/model/fixtures/gguf/:
  - types.gguf: GGUF v3 with a metadata value of every type (arrays of strings and an array
    of arrays included) and one tensor of each type attnlab reads (F32, F16, BF16, Q8_0,
    Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, Q4_K, Q5_K, Q6_K), 2 rows of 512 values each, the blocks seeded random bytes with
    finite f16 scales;
  - types-v2.gguf: the same in version 2 with a 64-byte alignment;
  - types.expected.json: the metadata and each tensor's values dequantized here in NumPy, from
    ggml's block definitions (ggml-common.h, dequantize_row_* in ggml-quants.c), written as
    the maths of each block: f32 steps in the order ggml takes them.

  - llama-q8_0-dequantized.gguf: llama-q8_0.gguf's values dequantized by NumPy, as F32;
  - llama-f32.gguf, llama-q8_0.gguf, qwen2-f16.gguf, qwen3-f32.gguf, gemma3-f32.gguf, mistral-f32.gguf: the family fixtures
    (tests/model/fixtures/llama-f32, ...) converted as llama.cpp's convert_hf_to_gguf.py
    converts them: metadata under the architecture's keys, tensors renamed (blk.N.attn_q,
    token_embd, output, ...), a llama model's q and k rows reordered so that each head's
    rotary pairs are adjacent, Llama 3's RoPE scaling as rope_freqs, Gemma's norm weights as
    1 + w (llama.cpp applies them as they are) with its window and layer pattern, and Q8_0 quantized by
    a NumPy quantizer of the same rule as ggml's reference (d = max|x| / 127, q = round(x / d)).

Run from the repository root:  /usr/bin/python3 tests/model/make_gguf_fixtures.py
"""
import json
import pathlib
import struct

import numpy as np

OUT = pathlib.Path(__file__).parent / "fixtures" / "gguf"

GGML = {"F32": (0, 1, 4), "F16": (1, 1, 2), "Q4_0": (2, 32, 18), "Q4_1": (3, 32, 20), "Q5_0": (6, 32, 22),
        "Q5_1": (7, 32, 24), "Q8_0": (8, 32, 34), "Q4_K": (12, 256, 144), "Q5_K": (13, 256, 176),
        "Q6_K": (14, 256, 210), "IQ4_NL": (20, 32, 18), "BF16": (30, 1, 2)}  # type: (number, block values, block bytes)


# ---- writing -------------------------------------------------------------------------------

def gguf_string(s):
    b = s.encode() if isinstance(s, str) else bytes(s)
    return struct.pack("<Q", len(b)) + b


VALUE = {"u8": (0, "<B"), "i8": (1, "<b"), "u16": (2, "<H"), "i16": (3, "<h"), "u32": (4, "<I"), "i32": (5, "<i"),
         "f32": (6, "<f"), "bool": (7, "<?"), "string": (8, None), "array": (9, None), "u64": (10, "<Q"),
         "i64": (11, "<q"), "f64": (12, "<d")}


def encode_value(kind, value):
    """(type number, bytes) of a value; kind is a type name or ("array", element kind)."""
    if isinstance(kind, tuple):
        element = kind[1]
        number = VALUE["array"][0] if isinstance(element, tuple) else VALUE[element][0]
        body = b"".join(encode_value(element, v)[1] for v in value)
        return VALUE["array"][0], struct.pack("<IQ", number, len(value)) + body
    if kind == "string":
        return VALUE["string"][0], gguf_string(value)
    return VALUE[kind][0], struct.pack(VALUE[kind][1], value)


def write_gguf(path, metadata, tensors, version=3, alignment=32):
    """metadata: [(key, kind, value)]; tensors: [(name, dims (fastest first), type name, bytes)]."""
    out = bytearray(b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(metadata)))
    for key, kind, value in metadata:
        number, body = encode_value(kind, value)
        out += gguf_string(key) + struct.pack("<I", number) + body
    offset, offsets = 0, []
    for name, dims, type_name, data in tensors:
        offsets.append(offset)
        out += gguf_string(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
        out += struct.pack("<IQ", GGML[type_name][0], offset)
        offset += (len(data) + alignment - 1) // alignment * alignment
    out += b"\0" * ((alignment - len(out) % alignment) % alignment)
    for (_, _, _, data), at in zip(tensors, offsets):
        out += data + b"\0" * ((alignment - len(data) % alignment) % alignment)
    path.write_bytes(bytes(out))


# ---- dequantizing, from ggml's block definitions --------------------------------------------

def f16(raw):
    return np.frombuffer(raw, dtype="<f2").astype(np.float32)


def scale_min_k4(s, j):
    if j < 4:
        return np.float32(s[j] & 63), np.float32(s[j + 4] & 63)
    return (np.float32((s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4)),
            np.float32((s[j + 4] >> 4) | ((s[j] >> 6) << 4)))


def dequantize_block(type_name, b):
    b = np.frombuffer(b, dtype=np.uint8)
    if type_name == "Q8_0":
        d = f16(b[0:2].tobytes())[0]
        return b[2:34].view(np.int8).astype(np.float32) * d
    if type_name == "Q4_0":
        d = f16(b[0:2].tobytes())[0]
        qs = b[2:18]
        return np.concatenate([((qs & 0xF).astype(np.int32) - 8).astype(np.float32) * d,
                               ((qs >> 4).astype(np.int32) - 8).astype(np.float32) * d])
    if type_name == "Q4_1":  # y = d * q + m
        d, m = f16(b[0:2].tobytes())[0], f16(b[2:4].tobytes())[0]
        qs = b[4:20]
        return np.concatenate([(qs & 0xF).astype(np.float32) * d + m, (qs >> 4).astype(np.float32) * d + m])
    if type_name in ("Q5_0", "Q5_1"):  # the fifth bit of value j is bit j of the 32-bit qh
        one = type_name == "Q5_1"
        d = f16(b[0:2].tobytes())[0]
        m = f16(b[2:4].tobytes())[0] if one else np.float32(0)
        at = 4 if one else 2
        qh = int.from_bytes(b[at:at + 4].tobytes(), "little")
        qs = b[at + 4:at + 20].astype(np.int32)
        fifth = np.array([(qh >> j) & 1 for j in range(32)], dtype=np.int32) << 4
        q = np.concatenate([(qs & 0xF) | fifth[:16], (qs >> 4) | fifth[16:]]) - (0 if one else 16)
        return (q.astype(np.float32) * d + m).astype(np.float32)
    if type_name == "IQ4_NL":  # y = d * grid[q], ggml's kvalues_iq4nl
        grid = np.array([-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113], dtype=np.float32)
        d = f16(b[0:2].tobytes())[0]
        qs = b[2:18]
        return np.concatenate([grid[qs & 0xF] * d, grid[qs >> 4] * d])
    if type_name in ("Q4_K", "Q5_K"):
        d, dmin = f16(b[0:2].tobytes())[0], f16(b[2:4].tobytes())[0]
        scales = b[4:16]
        five = type_name == "Q5_K"
        qh = b[16:48] if five else None
        ql = b[48:176] if five else b[16:144]
        y = []
        for chunk in range(4):
            q = ql[chunk * 32:(chunk + 1) * 32]
            for half, nib in ((0, q & 0xF), (1, q >> 4)):
                sc, m = scale_min_k4(scales, 2 * chunk + half)
                value = nib.astype(np.float32)
                if five:
                    value = value + np.where((qh >> (2 * chunk + half)) & 1, np.float32(16), np.float32(0))
                y.append((d * sc) * value - dmin * m)
        return np.concatenate(y).astype(np.float32)
    if type_name == "Q6_K":
        ql, qh, sc = b[0:128], b[128:192], b[192:208].view(np.int8)
        d = f16(b[208:210].tobytes())[0]
        y = np.zeros(256, dtype=np.float32)
        for half in range(2):
            l = np.arange(32)
            h = qh[half * 32 + l].astype(np.int32)
            a, c = ql[half * 64 + l].astype(np.int32), ql[half * 64 + 32 + l].astype(np.int32)
            q = [(a & 0xF) | ((h & 3) << 4), (c & 0xF) | (((h >> 2) & 3) << 4), (a >> 4) | (((h >> 4) & 3) << 4),
                 (c >> 4) | (((h >> 6) & 3) << 4)]
            for k in range(4):
                s = sc[half * 8 + l // 16 + 2 * k].astype(np.float32)
                y[half * 128 + 32 * k + l] = (d * s) * (q[k] - 32).astype(np.float32)
        return y
    raise ValueError(type_name)


def dequantize(type_name, raw):
    _, per_block, block_bytes = GGML[type_name]
    if type_name == "F32":
        return np.frombuffer(raw, dtype="<f4")
    if type_name == "F16":
        return f16(raw)
    if type_name == "BF16":
        return (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
    return np.concatenate([dequantize_block(type_name, raw[i:i + block_bytes])
                           for i in range(0, len(raw), block_bytes)])


# ---- random blocks with finite scales --------------------------------------------------------

def random_tensor(rng, type_name, count):
    _, per_block, block_bytes = GGML[type_name]
    if type_name == "F32":
        return rng.standard_normal(count).astype("<f4").tobytes()
    if type_name == "F16":
        return rng.standard_normal(count).astype("<f2").tobytes()
    if type_name == "BF16":
        bits = rng.standard_normal(count).astype(np.float32).view(np.uint32) >> 16
        return bits.astype("<u2").tobytes()
    blocks = bytearray(rng.integers(0, 256, size=count // per_block * block_bytes, dtype=np.uint8).tobytes())
    where = {"Q8_0": [0], "Q4_0": [0], "Q4_1": [0, 2], "Q5_0": [0], "Q5_1": [0, 2], "IQ4_NL": [0], "Q4_K": [0, 2],
             "Q5_K": [0, 2], "Q6_K": [208]}[type_name]
    for start in range(0, len(blocks), block_bytes):
        for at in where:  # d (and dmin): a finite f16 of a weight's size
            blocks[start + at:start + at + 2] = np.float16(rng.uniform(0.001, 0.05)).tobytes()
    return bytes(blocks)


METADATA = [
    ("general.architecture", "string", "llama"),
    ("general.name", "string", "attnlab GGUF types"),
    ("test.u8", "u8", 200), ("test.i8", "i8", -100), ("test.u16", "u16", 60000), ("test.i16", "i16", -30000),
    ("test.u32", "u32", 4000000000), ("test.i32", "i32", -2000000000), ("test.u64", "u64", 2 ** 40),
    ("test.i64", "i64", -(2 ** 40)), ("test.f32", "f32", 0.5), ("test.f64", "f64", 0.1), ("test.bool", "bool", True),
    ("test.strings", ("array", "string"), ["a", "b c", "▁token", ""]),
    ("test.nested", ("array", ("array", "i32")), [[1, 2], [], [3]]),
]


# ---- converting a Hugging Face folder -------------------------------------------------------

def read_safetensors(folder):
    tensors = {}
    files = sorted(folder.glob("*.safetensors"))
    for path in files:
        raw = path.read_bytes()
        (length,) = struct.unpack("<Q", raw[:8])
        header = json.loads(raw[8:8 + length])
        for name, entry in header.items():
            if name == "__metadata__":
                continue
            begin, end = entry["data_offsets"]
            dtype = {"F32": "<f4", "F16": "<f2", "BF16": "<u2"}[entry["dtype"]]
            array = np.frombuffer(raw[8 + length + begin:8 + length + end], dtype=dtype)
            if entry["dtype"] == "BF16":
                array = (array.astype(np.uint32) << 16).view(np.float32)
            tensors[name.removeprefix("model.")] = (array.reshape(entry["shape"]).astype(np.float32), entry["dtype"])
    return tensors


def quantize_q8_0(values):
    """ggml's reference rule: per block of 32, d = max|x| / 127 (as f16), q = round(x / d) half away from zero."""
    blocks = values.astype(np.float32).reshape(-1, 32)
    amax = np.abs(blocks).max(axis=1)
    d = amax / 127
    inverse = np.where(d > 0, 1 / np.where(d > 0, d, 1), 0).astype(np.float32)
    scaled = blocks * inverse[:, None]
    q = (np.sign(scaled) * np.floor(np.abs(scaled) + 0.5)).astype(np.int8)
    out = bytearray()
    for k in range(blocks.shape[0]):
        out += np.float16(d[k]).tobytes() + q[k].tobytes()
    return bytes(out)


def stored(values, type_name):
    if type_name == "F32":
        return values.astype("<f4").tobytes()
    if type_name == "F16":
        return values.astype("<f2").tobytes()
    if type_name == "Q8_0":
        return quantize_q8_0(values)
    raise ValueError(type_name)


def permute_rows(w, heads):
    """llama.cpp's reorder of a llama q or k: each head's split-half pairs made adjacent."""
    return w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def llama3_rope_factors(c):
    s = c["rope_scaling"]
    dim = c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"]
    freqs = 1.0 / (c["rope_theta"] ** (np.arange(0, dim, 2, dtype=np.float32) / dim))
    old, low, high, factor = s["original_max_position_embeddings"], s["low_freq_factor"], s["high_freq_factor"], s["factor"]
    out = []
    for f in freqs:
        wavelength = 2 * np.pi / f
        if wavelength < old / high:
            out.append(1.0)
        elif wavelength > old / low:
            out.append(factor)
        else:
            smooth = (old / wavelength - low) / (high - low)
            out.append(1 / ((1 - smooth) / factor + smooth))
    return np.array(out, dtype=np.float32)


def convert(folder, arch, matrix_type, vector_type="F32", dequantized=False):
    """A family fixture as GGUF metadata and tensors (name, dims, type, bytes); with
    `dequantized`, each matrix quantized as matrix_type and then stored dequantized, as F32."""
    c = json.loads((folder / "config.json").read_text())
    w = read_safetensors(folder)
    heads, kv = c["num_attention_heads"], c.get("num_key_value_heads", c["num_attention_heads"])
    metadata = [("general.architecture", "string", arch), ("general.name", "string", folder.name),
                (f"{arch}.block_count", "u32", c["num_hidden_layers"]),
                (f"{arch}.context_length", "u32", c["max_position_embeddings"]),
                (f"{arch}.embedding_length", "u32", c["hidden_size"]),
                (f"{arch}.feed_forward_length", "u32", c["intermediate_size"]),
                (f"{arch}.attention.head_count", "u32", heads), (f"{arch}.attention.head_count_kv", "u32", kv),
                (f"{arch}.attention.layer_norm_rms_epsilon", "f32", c["rms_norm_eps"]),
                (f"{arch}.rope.freq_base", "f32", c.get("rope_theta", 10000.0))]
    if c.get("head_dim"):
        metadata.append((f"{arch}.attention.key_length", "u32", c["head_dim"]))
    if (c.get("rope_scaling") or {}).get("rope_type") == "linear":
        metadata += [(f"{arch}.rope.scaling.type", "string", "linear"),
                     (f"{arch}.rope.scaling.factor", "f32", c["rope_scaling"]["factor"])]
    if arch == "llama" and c.get("sliding_window"):  # Mistral: a window on every layer
        metadata.append((f"{arch}.attention.sliding_window", "u32", c["sliding_window"]))
    gemma = arch == "gemma3"
    if gemma:  # the window, and which layers have it (llama.cpp: every layer but each pattern-th)
        metadata += [(f"{arch}.attention.sliding_window", "u32", c["sliding_window"]),
                     (f"{arch}.attention.sliding_window_pattern", "u32", c["sliding_window_pattern"])]
    tensors = []

    def add(name, values, type_name):
        if gemma and name.endswith("norm.weight"):  # llama.cpp stores Gemma's norms as 1 + w
            values = values + np.float32(1)
        type_name = type_name if values.ndim == 2 else vector_type
        data = stored(values, type_name)
        if dequantized and type_name != "F32":
            data, type_name = dequantize(type_name, data).astype("<f4").tobytes(), "F32"
        tensors.append((name, list(reversed(values.shape)), type_name, data))

    add("token_embd.weight", w["embed_tokens.weight"][0], matrix_type)
    for l in range(c["num_hidden_layers"]):
        p, g = f"layers.{l}.", f"blk.{l}."
        add(g + "attn_norm.weight", w[p + "input_layernorm.weight"][0], "F32")
        for part, name, n in (("q", "attn_q", heads), ("k", "attn_k", kv), ("v", "attn_v", 0)):
            weight = w[p + f"self_attn.{part}_proj.weight"][0]
            if arch == "llama" and n:
                weight = permute_rows(weight, n)
            add(g + name + ".weight", weight, matrix_type)
            if p + f"self_attn.{part}_proj.bias" in w:
                add(g + name + ".bias", w[p + f"self_attn.{part}_proj.bias"][0], "F32")
        for part, name in (("q_norm", "attn_q_norm"), ("k_norm", "attn_k_norm")):
            if p + f"self_attn.{part}.weight" in w:
                add(g + name + ".weight", w[p + f"self_attn.{part}.weight"][0], "F32")
        add(g + "attn_output.weight", w[p + "self_attn.o_proj.weight"][0], matrix_type)
        if gemma:
            add(g + "post_attention_norm.weight", w[p + "post_attention_layernorm.weight"][0], "F32")
            add(g + "ffn_norm.weight", w[p + "pre_feedforward_layernorm.weight"][0], "F32")
            add(g + "post_ffw_norm.weight", w[p + "post_feedforward_layernorm.weight"][0], "F32")
        else:
            add(g + "ffn_norm.weight", w[p + "post_attention_layernorm.weight"][0], "F32")
        for part, name in (("gate_proj", "ffn_gate"), ("up_proj", "ffn_up"), ("down_proj", "ffn_down")):
            add(g + name + ".weight", w[p + f"mlp.{part}.weight"][0], matrix_type)
    add("output_norm.weight", w["norm.weight"][0], "F32")
    if "lm_head.weight" in w:
        add("output.weight", w["lm_head.weight"][0], matrix_type)
    if (c.get("rope_scaling") or {}).get("rope_type") == "llama3":
        add("rope_freqs.weight", llama3_rope_factors(c), "F32")
    return metadata, tensors


# ---- small tokenizers, as llama.cpp's converter writes a tokenizer's metadata ---------------

LETTERS = [chr(c) for c in range(ord("a"), ord("z") + 1)]


def spm_tokenizer(vocab_size):
    """A SentencePiece ("llama") tokenizer of vocab_size tokens: <unk>, <s>, </s>, "▁", the
    letters, then pieces made by merging, each scored below the pieces it is made of."""
    pieces = ["▁t", "he", "▁the", "▁c", "at", "▁cat", "▁s", "▁sat", "▁o", "n", "▁on", "▁m", "▁ma", "▁mat", "in",
              "▁a", "▁in", "er"]
    tokens = ["<unk>", "<s>", "</s>", "▁"] + LETTERS + [p for p in pieces if p not in LETTERS]
    tokens = tokens[:vocab_size] + [f"<unused{i}>" for i in range(vocab_size - len(tokens))]
    types = [2, 3, 3] + [5 if t.startswith("<unused") else 1 for t in tokens[3:]]
    merged = [t for t in tokens[4 + len(LETTERS):] if not t.startswith("<unused")]
    scores = [0.0] * 3 + [-1000.0] * (1 + len(LETTERS)) + [-1.0 - i for i in range(len(merged))]
    scores += [-2000.0] * (len(tokens) - len(scores))
    return [("tokenizer.ggml.model", "string", "llama"), ("tokenizer.ggml.tokens", ("array", "string"), tokens),
            ("tokenizer.ggml.scores", ("array", "f32"), scores), ("tokenizer.ggml.token_type", ("array", "i32"), types),
            ("tokenizer.ggml.bos_token_id", "u32", 1), ("tokenizer.ggml.eos_token_id", "u32", 2),
            ("tokenizer.ggml.unknown_token_id", "u32", 0), ("tokenizer.ggml.add_bos_token", "bool", True)]


def bpe_tokenizer(vocab_size):
    """A byte-level BPE ("gpt2", pre "qwen2") tokenizer of vocab_size tokens: <|endoftext|>,
    "Ġ" (a space), the letters, then what the merges make."""
    merges = ["Ġ t", "h e", "Ġt he", "Ġ c", "a t", "Ġc at", "Ġ s", "Ġs at", "Ġ o", "Ġo n", "Ġ m", "Ġm at", "i n",
              "Ġ a", "Ġ in", "e r", "Ġ i"]
    merges = [m for m in merges if m != "Ġ in"]
    made = [m.replace(" ", "") for m in merges]
    tokens = ["<|endoftext|>", "Ġ"] + LETTERS + made
    tokens = tokens[:vocab_size] + [f"<|unused{i}|>" for i in range(vocab_size - len(tokens))]
    merges = [m for m in merges if m.replace(" ", "") in tokens]
    types = [3] + [1] * (len(tokens) - 1)
    return [("tokenizer.ggml.model", "string", "gpt2"), ("tokenizer.ggml.pre", "string", "qwen2"),
            ("tokenizer.ggml.tokens", ("array", "string"), tokens), ("tokenizer.ggml.merges", ("array", "string"), merges),
            ("tokenizer.ggml.token_type", ("array", "i32"), types), ("tokenizer.ggml.eos_token_id", "u32", 0),
            ("tokenizer.ggml.add_bos_token", "bool", False)]


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(20261202)
    tensors = [(f"t.{name.lower()}", [512, 2], name, random_tensor(rng, name, 1024)) for name in GGML]
    write_gguf(OUT / "types.gguf", METADATA, tensors)
    write_gguf(OUT / "types-v2.gguf", METADATA + [("general.alignment", "u32", 64)], tensors, version=2, alignment=64)
    expected = {
        "metadata": {key: value for key, _, value in METADATA},
        "tensors": {name: {"type": type_name, "dims": dims,
                           "values": [float(x) for x in dequantize(type_name, data)]}
                    for name, dims, type_name, data in tensors},
    }
    (OUT / "types.expected.json").write_text(json.dumps(expected) + "\n")
    families = OUT.parent
    for folder, arch, matrix_type, out in (("llama-f32", "llama", "F32", "llama-f32.gguf"),
                                           ("llama-f32", "llama", "Q8_0", "llama-q8_0.gguf"),
                                           ("qwen2-f16", "qwen2", "F16", "qwen2-f16.gguf"),
                                           ("qwen3-f32-sharded", "qwen3", "F32", "qwen3-f32.gguf"),
                                           ("gemma3-f32", "gemma3", "F32", "gemma3-f32.gguf"),
                                           ("mistral-f32", "llama", "F32", "mistral-f32.gguf")):
        metadata, tensors = convert(families / folder, arch, matrix_type)
        vocab_size = json.loads((families / folder / "config.json").read_text())["vocab_size"]
        if arch == "llama":
            metadata += spm_tokenizer(vocab_size)
        elif arch == "qwen2":
            metadata += bpe_tokenizer(vocab_size)
        write_gguf(OUT / out, metadata, tensors)
    # The Q8_0 model's values, dequantized here, as F32: what its forward must equal exactly.
    metadata, tensors = convert(families / "llama-f32", "llama", "Q8_0", dequantized=True)
    write_gguf(OUT / "llama-q8_0-dequantized.gguf", metadata, tensors)


if __name__ == "__main__":
    main()
