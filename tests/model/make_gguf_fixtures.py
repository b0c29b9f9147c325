#!/usr/bin/env python3
"""GGUF test files and their expected values, written by an independent implementation.

Writes tests/model/fixtures/gguf/:
  - types.gguf: GGUF v3 with a metadata value of every type (arrays of strings and an array
    of arrays included) and one tensor of each type attnlab reads (F32, F16, BF16, Q8_0,
    Q4_0, Q4_K, Q5_K, Q6_K), 2 rows of 512 values each, the blocks seeded random bytes with
    finite f16 scales;
  - types-v2.gguf: the same in version 2 with a 64-byte alignment;
  - types.expected.json: the metadata and each tensor's values dequantized here in NumPy, from
    ggml's block definitions (ggml-common.h, dequantize_row_* in ggml-quants.c), written as
    the maths of each block: f32 steps in the order ggml takes them.

Run from the repository root:  /usr/bin/python3 tests/model/make_gguf_fixtures.py
"""
import json
import pathlib
import struct

import numpy as np

OUT = pathlib.Path(__file__).parent / "fixtures" / "gguf"

GGML = {"F32": (0, 1, 4), "F16": (1, 1, 2), "Q4_0": (2, 32, 18), "Q8_0": (8, 32, 34), "Q4_K": (12, 256, 144),
        "Q5_K": (13, 256, 176), "Q6_K": (14, 256, 210), "BF16": (30, 1, 2)}  # type: (number, block values, block bytes)


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
    where = {"Q8_0": [0], "Q4_0": [0], "Q4_K": [0, 2], "Q5_K": [0, 2], "Q6_K": [208]}[type_name]
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


if __name__ == "__main__":
    main()
