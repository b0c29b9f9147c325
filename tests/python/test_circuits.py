"""`model circuits` against NumPy at full size: each head's W_QK and W_OV formed as d × d matrices
from the fixtures' weights (the input norm's centring and γ folded in, Gemma's 1 + γ and its
output norm), their singular values, the composition scores from Frobenius norms of the
products, and the copying score from the eigenvalues of the whole V × V matrix W_E W_OV W_Uᵀ.
attnlab computes all of it through d_k × d_k factors; the two must agree."""
import json

import numpy as np
import pytest

import attnlab
from test_qk import FIXTURES, read_folder


def numpy_circuits(folder):
    cfg = json.loads((folder / "config.json").read_text())
    w = read_folder(folder)
    if cfg["model_type"] == "gpt2":
        d, H, L = cfg["n_embd"], cfg["n_head"], cfg["n_layer"]
        hd, G = d // H, H
        centre = np.eye(d) - 1.0 / d

        def factors(layer, h):
            p = f"h.{layer}."
            fold = centre @ np.diag(w[p + "ln_1.weight"])
            c_attn = w[p + "attn.c_attn.weight"]
            q, k, v = (fold @ c_attn[:, s * d + h * hd:s * d + (h + 1) * hd] for s in range(3))
            return q, k, v, w[p + "attn.c_proj.weight"][h * hd:(h + 1) * hd]

        final = centre @ np.diag(w["ln_f.weight"])
        unembed = w["wte.weight"]
    else:
        d, H, G, L = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["num_hidden_layers"]
        hd = cfg.get("head_dim") or d // H
        gemma = cfg["model_type"] == "gemma3_text"
        gain = (lambda g: 1 + g) if gemma else (lambda g: g)

        def factors(layer, h):
            p = f"model.layers.{layer}."
            fold = np.diag(gain(w[p + "input_layernorm.weight"]))
            g = h // (H // G)
            q = fold @ w[p + "self_attn.q_proj.weight"][h * hd:(h + 1) * hd].T
            k = fold @ w[p + "self_attn.k_proj.weight"][g * hd:(g + 1) * hd].T
            v = fold @ w[p + "self_attn.v_proj.weight"][g * hd:(g + 1) * hd].T
            o = w[p + "self_attn.o_proj.weight"][:, h * hd:(h + 1) * hd].T
            if gemma:
                o = o @ np.diag(gain(w[p + "post_attention_layernorm.weight"]))
            return q, k, v, o

        final = np.diag(gain(w["model.norm.weight"]))
        scale = np.sqrt(d) if gemma else 1.0
        unembed = w["model.embed_tokens.weight"] if cfg.get("tie_word_embeddings") else w["lm_head.weight"]
        embed = w["model.embed_tokens.weight"]
    if cfg["model_type"] == "gpt2":
        embed, scale = w["wte.weight"], 1.0
    qk, ov, token_qk = [], [], []
    for layer in range(L):
        for h in range(H):
            q, k, v, o = factors(layer, h)
            qk.append(q @ k.T)
            ov.append(v @ o)
            token_qk.append((scale * embed) @ qk[-1] @ (scale * embed).T)  # the QK circuit on tokens, V × V
    n = L * H
    comp = {kind: np.full((n, n), np.nan) for kind in "qkv"}
    norm = np.linalg.norm
    for a in range(n):
        for b in range(n):
            if a // H < b // H:
                comp["q"][a, b] = norm(ov[a] @ qk[b]) / (norm(ov[a]) * norm(qk[b]))
                comp["k"][a, b] = norm(ov[a] @ qk[b].T) / (norm(ov[a]) * norm(qk[b]))
                comp["v"][a, b] = norm(ov[a] @ ov[b]) / (norm(ov[a]) * norm(ov[b]))
    copying = []
    for m in ov:
        lam = np.linalg.eigvals(embed @ m @ final @ unembed.T)
        copying.append(lam.real.sum() / np.abs(lam).sum())
    sv = lambda m: np.linalg.svd(m, compute_uv=False)[:hd]  # noqa: E731
    return comp, copying, [sv(m) for m in qk], [sv(m) for m in ov], token_qk


@pytest.mark.parametrize("fixture", ["tiny-f32", "llama-f32", "qwen2-f16", "gemma3-f32"])
def test_every_circuit_and_composition_is_numpys_at_full_size(fixture):
    got = attnlab.load(FIXTURES / fixture).circuits(singular_values=0, token_pairs=5)
    comp, copying, qk_sv, ov_sv, token_qk = numpy_circuits(FIXTURES / fixture)
    for kind in "qkv":
        mine = np.array([[np.nan if x is None else x for x in row] for row in got["composition"][kind]])
        np.testing.assert_array_equal(np.isnan(mine), np.isnan(comp[kind]), f"{kind}: composed pairs")
        np.testing.assert_allclose(mine[~np.isnan(mine)], comp[kind][~np.isnan(comp[kind])], rtol=1e-7, atol=1e-9)
        assert 0 < got["baseline"][kind] < 1
    np.testing.assert_allclose(got["ov_copying"], copying, rtol=1e-6, atol=1e-9)
    for mine, want in zip(got["qk_singular_values"], qk_sv):
        np.testing.assert_allclose(mine, want, rtol=1e-7, atol=1e-9)
    for mine, want in zip(got["ov_singular_values"], ov_sv):
        np.testing.assert_allclose(mine, want, rtol=1e-7, atol=1e-9)
    for mine, whole in zip(got["qk_token_pairs"], token_qk):  # the 5 largest entries of the V × V matrix
        largest = np.sort(whole.ravel())[::-1][:5]
        np.testing.assert_allclose([p["score"] for p in mine], largest, rtol=1e-7, atol=1e-9)
        for p in mine:
            assert whole[p["query"], p["key"]] == pytest.approx(p["score"], rel=1e-7)


def test_the_commands_json_is_pythons_and_the_baseline_is_seeded(cli):
    tiny = FIXTURES / "tiny-f32"
    m = attnlab.load(tiny)
    got = m.circuits()
    assert got == cli("model", "circuits", tiny, "--json")
    assert len(got["qk_singular_values"][0]) == 4  # d_k = 4: all of them, fewer than the default 8
    assert m.circuits(seed=1)["baseline"] != got["baseline"]
    assert m.circuits(seed=1)["composition"] == got["composition"]
    assert got["qk_token_pairs"] == [], "none unless asked"
    with pytest.raises(ValueError, match="^token_pairs: 1001 is not a whole number from 0 to 1000"):
        m.circuits(token_pairs=1001)
