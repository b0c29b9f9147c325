"""A long context against an independent NumPy forward (float64, written from transformers'
modeling_llama.py): a small Llama-style model of 4,096 positions made here, run on 3,000
tokens by `attnlab model run --sparse`, which keeps no n × n weights. The last position's
logits, for the last query of every head its sparse row (the keys it weighs most, its sink
weight, its entropy in bits), and every head's detector scores over the 3,000 rows equal
NumPy's."""
import json
import math

import numpy as np

from make_gpt2_fixtures import write_safetensors
from test_evict import MaskedLlama


def make_llama(folder, positions=4096):
    d, layers, heads, kv, hd, ffn, vocab = 32, 2, 2, 1, 16, 64, 50
    cfg = {"model_type": "llama", "hidden_size": d, "intermediate_size": ffn, "num_hidden_layers": layers,
           "num_attention_heads": heads, "num_key_value_heads": kv, "head_dim": hd, "max_position_embeddings": positions,
           "vocab_size": vocab, "tie_word_embeddings": True, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
           "rope_scaling": None}
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(cfg))
    r = np.random.RandomState(11)
    t = {"model.embed_tokens.weight": r.normal(0, 0.5, (vocab, d)), "model.norm.weight": 1 + r.normal(0, 0.1, d)}
    for l in range(layers):
        p = f"model.layers.{l}."
        t[p + "input_layernorm.weight"] = 1 + r.normal(0, 0.1, d)
        t[p + "post_attention_layernorm.weight"] = 1 + r.normal(0, 0.1, d)
        t[p + "self_attn.q_proj.weight"] = r.normal(0, 0.4, (heads * hd, d))
        t[p + "self_attn.k_proj.weight"] = r.normal(0, 0.4, (kv * hd, d))
        t[p + "self_attn.v_proj.weight"] = r.normal(0, 0.3, (kv * hd, d))
        t[p + "self_attn.o_proj.weight"] = r.normal(0, 0.2, (d, heads * hd))
        t[p + "mlp.gate_proj.weight"] = r.normal(0, 0.2, (ffn, d))
        t[p + "mlp.up_proj.weight"] = r.normal(0, 0.2, (ffn, d))
        t[p + "mlp.down_proj.weight"] = r.normal(0, 0.2, (d, ffn))
    write_safetensors(folder / "model.safetensors", t, "F32", "")
    return folder


def test_three_thousand_tokens_against_numpy(tmp_path, cli):
    folder = make_llama(tmp_path / "long-llama")
    ids = [int(i) for i in np.random.RandomState(5).randint(0, 50, 3000)]
    got = cli("model", "run", folder, "--ids", ",".join(map(str, ids)), "--sparse", "4", "--json")
    assert got["weights"] is None
    n = len(ids)
    logits, weights = MaskedLlama(folder).forward(ids, np.tril(np.ones((n, n), bool)))
    assert np.allclose(got["last_logits"], logits[-1], atol=2e-3)
    for layer in range(2):
        for head in range(2):
            row = weights[layer, head, -1]
            order = np.argsort(-row, kind="stable")[:4]
            assert np.allclose(got["sparse"]["weights"][layer][head][-1], row[order], atol=2e-5)
            assert np.allclose(row[got["sparse"]["keys"][layer][head][-1]], row[order], atol=2e-5)
            assert math.isclose(got["sparse"]["sink"][layer][head][-1], row[0], abs_tol=2e-5)
            entropy = -np.sum(row[row > 0] * np.log2(row[row > 0]))
            assert math.isclose(got["sparse"]["entropy"][layer][head][-1], entropy, abs_tol=2e-3)
    # The head detectors from the same pass, against their definitions on NumPy's weights: the
    # mean over the rows that have a pattern key of the row's weight on those keys.
    a = np.array(ids)
    i, j = np.indices((n, n))
    seen = np.array([a[k] in a[:k] for k in range(n)])
    patterns = {"previous_token": (j + 1 == i, i >= 1), "sink": ((j == 0) & (i >= 1), i >= 1),
                "duplicate_token": ((j < i) & (a[j] == a[i]), seen[i]),
                "induction": ((j >= 1) & (j <= i) & (a[np.maximum(j - 1, 0)] == a[i]), seen[i])}
    for k, head_scores in enumerate(got["heads"]):
        w = weights[head_scores["layer"], head_scores["head"]]
        for name, (on, has) in patterns.items():
            rows = has[:, 0]
            expected = (w * on).sum(axis=1)[rows].mean()
            assert math.isclose(head_scores[name], expected, abs_tol=1e-5), (k, name)
    # One head at any length (`model map`): the whole head pooled into 64 × 64 cells of 47
    # tokens, each cell the largest weight its queries give its keys (NaN-free: null where the
    # queries see none), and a window of 40 × 40 weights across a diagonal, against NumPy's.
    for layer, head in [(0, 1), (1, 0)]:
        w = weights[layer, head]
        pooled = cli("model", "map", folder, "--ids", ",".join(map(str, ids)), "--head", f"{layer}.{head}",
                     "--cells", "64", "--json")
        tile = pooled["tile"]
        assert tile == 47 and len(pooled["weights"]) == 64
        visible = i >= j
        for a in range(64):
            for b in range(64):
                block = (slice(a * tile, (a + 1) * tile), slice(b * tile, (b + 1) * tile))
                if not visible[block].any():
                    assert pooled["weights"][a][b] is None
                    continue
                expected = w[block][visible[block]].max()
                assert math.isclose(pooled["weights"][a][b], expected, abs_tol=2e-5), (layer, head, a, b)
                q, k = pooled["query"][a][b], pooled["key"][a][b]
                assert q // tile == a and k // tile == b and math.isclose(w[q, k], expected, abs_tol=2e-5)
        window = cli("model", "map", folder, "--ids", ",".join(map(str, ids)), "--head", f"{layer}.{head}",
                     "--cells", "40", "--query", "2500", "--key", "2480", "--json")
        cells = np.array([[np.nan if x is None else x for x in row] for row in window["weights"]])
        part = w[2500:2540, 2480:2520]
        assert np.array_equal(np.isnan(cells), ~visible[2500:2540, 2480:2520])
        assert np.allclose(cells[~np.isnan(cells)], part[visible[2500:2540, 2480:2520]], atol=2e-5)
