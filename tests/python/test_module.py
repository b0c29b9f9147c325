"""The Python module against the command's JSON on the same inputs (bit for bit: the same
code runs), against NumPy written from the formula, and as a notebook user would misuse it."""
import gc
import json
import resource

import numpy as np
import pytest

import attnlab
from conftest import ROOT


def softmax_attention(q, k, v, causal=False, temperature=1.0, scale=None, window=None):
    """The formula, in NumPy: softmax(q·kᵀ · scale / T) · v, masked keys out."""
    n, m = len(q), len(k)
    logits = q @ k.T * (scale if scale is not None else 1 / np.sqrt(q.shape[1])) / temperature
    i = np.arange(n)[:, None] + (m - n)
    j = np.arange(m)[None, :]
    allowed = np.ones((n, m), bool)
    if causal:
        allowed &= j <= i
    if window is not None:
        allowed &= np.abs(i - j) < window  # the engine's window: |i − j| < w
    logits = np.where(allowed, logits, -np.inf)
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    w = e / e.sum(axis=1, keepdims=True)
    return w, w @ v


def read_safetensors(path):
    """A safetensors file's F32 tensors as float64 arrays (8-byte header length, JSON, data)."""
    data = path.read_bytes()
    size = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + size])
    out = {}
    for name, t in header.items():
        if name != "__metadata__":
            begin, end = t["data_offsets"]
            raw = np.frombuffer(data[8 + size + begin:8 + size + end], np.float32)
            out[name] = raw.reshape(t["shape"]).astype(np.float64)
    return out


# ---- the engine ---------------------------------------------------------------------------

def test_attend_keeps_every_step_and_matches_the_formula():
    rng = np.random.default_rng(1)
    q, k, v = rng.normal(size=(4, 3)), rng.normal(size=(6, 3)), rng.normal(size=(6, 2))
    t = attnlab.attend(q, k, v, temperature=0.7, scale=0.5, window=3)
    w, out = softmax_attention(q, k, v, temperature=0.7, scale=0.5, window=3)
    np.testing.assert_array_equal(t.queries, q)
    np.testing.assert_array_equal(t.keys, k)
    np.testing.assert_array_equal(t.values, v)
    np.testing.assert_allclose(t.scores, q @ k.T, rtol=0, atol=1e-14)
    np.testing.assert_allclose(t.scaled, q @ k.T * 0.5, rtol=0, atol=1e-14)
    assert (np.isneginf(t.logits) == (w == 0)).all() and (w == 0).sum() > 0
    np.testing.assert_allclose(t.weights, w, rtol=0, atol=1e-14)
    np.testing.assert_allclose(t.outputs, out, rtol=0, atol=1e-14)
    np.testing.assert_allclose(t.weights.sum(axis=1), 1, atol=1e-14)
    h = t.heads[0]
    largest = h.logits.max(axis=1)  # the engine shifts only rows whose largest logit is past ±60
    np.testing.assert_array_equal(h.shifts, np.where(np.abs(largest) <= 60, 0.0, largest))
    np.testing.assert_allclose(h.exponentials, np.exp(h.logits - h.shifts[:, None]), rtol=1e-15)
    np.testing.assert_allclose(h.row_sums, h.exponentials.sum(axis=1), rtol=1e-15)
    big = attnlab.attend(q * 40, k * 40, v).heads[0]
    assert (big.shifts != 0).any(), "logits past ±60 are shifted"
    np.testing.assert_allclose(big.weights.sum(axis=1), 1, atol=1e-14)
    assert t.weights.shape == (4, 6) and t.weights.dtype == np.float64
    assert not t.weights.flags.writeable, "views of the trace are read-only"


def test_attend_is_the_commands_run_of_the_same_scenario(cli, tmp_path):
    rng = np.random.default_rng(2)
    q = rng.normal(size=(5, 4))
    t = attnlab.attend(q, q, rng.normal(size=(5, 3)), causal=True)
    path = tmp_path / "attend.json"
    path.write_text(json.dumps(t.scenario()))
    assert t.to_json() == cli("run", path, "--json")


def test_every_bundled_scenario_runs_as_the_command_runs_it(cli):
    names = attnlab.Scenario.names()
    assert names[0] == "three-tokens" and len(names) > 3
    for name in names:
        assert attnlab.Scenario.load(name).run().to_json() == cli("run", name, "--json"), name


def test_options_and_interventions_are_the_commands_flags(cli):
    s = attnlab.Scenario.load("three-tokens")
    t = s.run(causal=True, temperature=0.5, mask_tokens=[1], ablate_heads=["0:mean"])
    assert t.to_json() == cli("run", "three-tokens", "--json", "--causal", "-T", "0.5", "--mask-token", "1",
                              "--ablate-head", "0:mean")
    assert t.intervention is not None and t.intervention["applied"]
    tiled = s.run(kernel="tiled")
    assert tiled.to_json() == cli("run", "three-tokens", "--json", "--kernel", "tiled")


def test_flash_matches_the_reference_with_grouped_heads():
    rng = np.random.default_rng(3)
    H, H_kv, n, d_k, d_v = 4, 2, 75, 16, 8
    q = rng.normal(size=(H, n, d_k)).astype(np.float32)
    k = rng.normal(size=(H_kv, n, d_k)).astype(np.float32)
    v = rng.normal(size=(H_kv, n, d_v)).astype(np.float32)
    out = attnlab.flash(q, k, v, causal=True)
    assert out.shape == (H, n, d_v) and out.dtype == np.float32
    for h in range(H):
        _, want = softmax_attention(q[h].astype(np.float64), k[h // 2].astype(np.float64),
                                    v[h // 2].astype(np.float64), causal=True)
        np.testing.assert_allclose(out[h], want, rtol=0, atol=2e-5)
        t = attnlab.attend(q[h], k[h // 2], v[h // 2], causal=True)
        np.testing.assert_allclose(out[h], t.outputs, rtol=0, atol=2e-5)
    one = attnlab.flash(q[0], k[0], v[0], window=5, temperature=2.0)
    np.testing.assert_allclose(one, attnlab.attend(q[0], k[0], v[0], window=5, temperature=2.0).outputs, atol=2e-5)


def test_bad_arguments_raise_value_error_naming_what_is_wrong(cli):
    q = np.zeros((3, 4))
    with pytest.raises(ValueError, match=r"^k: has 2 columns and q 4"):
        attnlab.attend(q, np.zeros((3, 2)), np.zeros((3, 2)))
    with pytest.raises(ValueError, match=r"^v: has 4 rows and k 3"):
        attnlab.attend(q, q, np.zeros((4, 2)))
    with pytest.raises(ValueError, match=r"^q: is 1-dimensional"):
        attnlab.attend(np.zeros(3), q, q)
    with pytest.raises(ValueError, match=r"^temperature: "):
        attnlab.attend(q, q, q, temperature=0)
    with pytest.raises(ValueError, match=r"^k: has 3 key/value heads, which does not divide q's 4"):
        attnlab.flash(np.zeros((4, 2, 8), np.float32), np.zeros((3, 2, 8), np.float32), np.zeros((3, 2, 8), np.float32))
    with pytest.raises(ValueError, match=r"^precision: "):
        attnlab.flash(q, q, q, precision="f8")
    # The command's message, word for word, after its "attnlab: ".
    code, stderr = cli("run", "no-such-scenario", check=False)
    assert code == 2
    with pytest.raises(ValueError) as raised:
        attnlab.Scenario.load("no-such-scenario")
    assert stderr.strip() == "attnlab: " + str(raised.value)


def test_arrays_stay_valid_while_their_owner_lives_and_after_the_trace_goes():
    rng = np.random.default_rng(4)
    q = rng.normal(size=(8, 4))
    t = attnlab.attend(q, q, q)
    weights, head = t.weights, t.heads[0]
    expected = weights.copy()
    del t
    gc.collect()
    for _ in range(50):  # other allocations that would reuse freed memory
        attnlab.attend(rng.normal(size=(8, 4)), q, q)
    np.testing.assert_array_equal(weights, expected)
    np.testing.assert_array_equal(head.weights, expected)
    assert weights.base is not None, "a view, not a copy"


def test_ten_thousand_calls_do_not_leak():
    q = np.ones((4, 4))

    def rss_kib():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * resource.getpagesize() // 1024

    for _ in range(500):  # warm-up: allocator pools, caches
        attnlab.attend(q, q, q).weights.sum()
    before = rss_kib()
    for _ in range(10_000):
        t = attnlab.attend(q, q, q)
        t.weights.sum()
        attnlab.flash(q, q, q)
    gc.collect()
    grown = rss_kib() - before
    # A trace of 4 tokens is about 3 KB: 10,000 leaked would be 30 MB.
    assert grown < 4096, f"resident memory grew {grown} KiB over 10,000 calls"


# ---- models -------------------------------------------------------------------------------

def test_a_model_run_is_the_commands_and_numpys(cli, tiny):
    m = attnlab.load(tiny)
    ids = [3, 17, 5, 3, 17, 5, 39, 0, 22, 3]
    r = m.run(ids, capture=["attention", "stream"])
    want = cli("model", "run", tiny, "--ids", ",".join(map(str, ids)), "--json")
    assert r.ids == want["ids"]
    assert len(r.attention) == 2 and r.attention[0].shape == (4, 10, 10)
    for layer in range(2):
        np.testing.assert_array_equal(r.attention[layer], np.array(want["weights"][layer], np.float32))
    np.testing.assert_allclose(r.logits[-1], np.array(want["last_logits"], np.float32), rtol=0, atol=1e-5)
    # NumPy's forward from the formula (tests/model/make_gpt2_fixtures.py wrote it).
    expected = json.loads((tiny / "expected.json").read_text())
    assert expected["ids"] == ids
    np.testing.assert_allclose(r.logits, expected["logits"], rtol=0, atol=2e-4)
    # The residual stream: each layer's input is the last one's plus what its attention and
    # MLP wrote, and its LayerNorm is NumPy's block input.
    w = read_safetensors(tiny / "model.safetensors")
    for layer in range(2):
        s = r.stream[layer]
        after = r.stream[layer + 1]["x_in"] if layer + 1 < 2 else r.final_stream
        np.testing.assert_allclose(after, s["x_in"] + s["attention"] + s["mlp"], rtol=0, atol=1e-5)
        x = s["x_in"].astype(np.float64)
        normed = (x - x.mean(1, keepdims=True)) / np.sqrt(x.var(1, keepdims=True) + 1e-5)
        normed = normed * w[f"transformer.h.{layer}.ln_1.weight"] + w[f"transformer.h.{layer}.ln_1.bias"]
        np.testing.assert_allclose(normed, expected["block_inputs"][layer], rtol=0, atol=2e-4)
    np.testing.assert_allclose(r.head("1.2"), expected["attention"][1][2], rtol=0, atol=2e-5)
    assert [(c["id"], c["token"]) for c in want["top_k"][:3]] == [(i, t) for i, t, _ in r.top_k(-1, k=3)]
    assert r.top_k(-1, k=5) == r.top_k(9, k=5)
    with pytest.raises(ValueError, match="^position: 10 is not a position of the run's 10 tokens"):
        r.top_k(10)
    # The last position's logits alone: NumPy's last row, the same next tokens.
    last = m.run(ids, capture=[], logits="last")
    assert last.logits.shape == (1, 40)
    as_the_command = m.run(ids, logits="last")  # the weights kept, the last position's logits: the same sums
    np.testing.assert_array_equal(as_the_command.logits[0], np.array(want["last_logits"], np.float32))
    assert [(c["id"], c["token"], c["probability"]) for c in want["top_k"][:3]] == as_the_command.top_k(-1, k=3)
    np.testing.assert_allclose(last.logits[0], expected["logits"][-1], rtol=0, atol=2e-4)
    assert [t[0] for t in last.top_k(-1, k=5)] == [t[0] for t in r.top_k(-1, k=5)]
    with pytest.raises(ValueError, match=r'^position: the run computed the logits of positions 9 to 9 only'):
        last.top_k(2)
    none = m.run(ids, capture=[], logits="none")
    assert none.logits.shape == (0, 40)
    with pytest.raises(ValueError, match=r'^position: the run computed no logits \(logits="none"\)'):
        none.top_k(-1)
    with pytest.raises(ValueError, match='^logits: "all" is not a choice'):
        m.run(ids, logits="all")


def test_ablation_generation_and_heads_are_the_commands(cli, tiny):
    m = attnlab.load(tiny)
    ids = "3,17,5,3,17,5"
    ablated = m.ablate([3, 17, 5, 3, 17, 5], ["0.1", "1.3"])
    want = cli("model", "run", tiny, "--ids", ids, "--ablate", "0.1", "--ablate", "1.3", "--json")
    # The command computes the last position alone (logits="last"): the same sums in another order.
    np.testing.assert_allclose(ablated.logits[-1], np.array(want["last_logits"], np.float32), rtol=0, atol=1e-5)
    assert not np.array_equal(ablated.logits, m.run([3, 17, 5, 3, 17, 5]).logits), "the ablation changes something"
    g = m.generate([3, 17, 5], 6, temperature=0.8, top_k=10, seed=7)
    assert g == cli("model", "generate", tiny, "--ids", "3,17,5", "--tokens", 6, "--temperature", 0.8, "--top-k",
                    10, "--seed", 7, "--json")
    # The prompt's products in bf16, as --bf16 runs them (or refused as it refuses them).
    bf16 = ("model", "generate", tiny, "--ids", "3,17,5,9,2,11", "--tokens", 2, "--bf16", "--json")
    code, stderr = cli(*bf16, check=False)
    if code == 0:
        assert m.generate([3, 17, 5, 9, 2, 11], 2, bf16=True) == cli(*bf16)
    else:
        with pytest.raises(ValueError) as raised:
            m.generate([3, 17, 5, 9, 2, 11], 2, bf16=True)
        assert stderr.strip() == "attnlab: --" + str(raised.value)
    scores = m.heads()
    want = cli("model", "heads", tiny, "--json")["heads"]
    assert [(s.layer, s.index, s.previous_token, s.duplicate_token, s.induction) for s in scores] == [
        (h["layer"], h["head"], h["previous_token"], h["duplicate_token"], h["induction"]) for h in want]
    assert scores[5].head == "1.1"
    on_ids = cli("model", "heads", tiny, "--ids", "3,17,5,3,17,5", "--json")["heads"]
    for given in (m.heads(ids=[3, 17, 5, 3, 17, 5]), m.heads([[3, 17, 5, 3, 17, 5]])):
        assert [s.induction for s in given] == [h["induction"] for h in on_ids]
    with pytest.raises(ValueError, match=r"^sequences\[0\]\[1\]: token id 99 is outside the vocabulary"):
        m.heads([[3, 99]])


def test_attribution_lens_patching_and_verdict_are_the_commands(cli, tiny):
    m = attnlab.load(tiny)
    ids = [3, 17, 5, 3, 17]
    flag = ",".join(map(str, ids))
    assert m.attribute(ids, target=5) == cli("model", "attribute", tiny, "--ids", flag, "--target", 5, "--json")
    assert m.lens(ids) == cli("model", "lens", tiny, "--ids", flag, "--json")
    corrupt = [3, 22, 5, 3, 17]
    assert m.patch(ids, corrupt, target=5, contrast=0) == cli(
        "model", "patch", tiny, "--clean-ids", flag, "--corrupt-ids", ",".join(map(str, corrupt)), "--target", 5,
        "--contrast", 0, "--json")
    assert m.verdict(ids, steps=4) == cli("model", "verdict", tiny, "--ids", flag, "--steps", 4, "--json")
    a = m.attribute(ids, target=5)
    assert isinstance(a.heads, np.ndarray) and a.heads.size == 2 * 4
    np.testing.assert_array_equal(a.heads, np.asarray(a["heads"], float))
    assert a.target == 5 and isinstance(a.parts, list)
    with pytest.raises(AttributeError, match="^colour: not a field of this result"):
        a.colour
    p = m.patch(ids, corrupt, target=5, contrast=0)
    assert p.heads.shape == (2, 4) and p.clean["ids"] == ids and (p.clean.ids == ids).all()


def test_the_command_line_options_python_lacked_are_its_keywords_now(cli, tiny, tmp_path):
    """Each model operation's fields are Python's keywords (the descriptions are shared): the
    verdict over the induction task or a file of texts, the evaluation with heads ablated and
    the KV cache measured, each the command's --json."""
    m = attnlab.load(tiny)
    assert m.verdict(induction=2, seed=5, steps=2) == cli("model", "verdict", tiny, "--induction", 2, "--seed", 5,
                                                          "--steps", 2, "--json")
    assert m.eval(ablate=["0.1", "1.3"], seed=2) == cli("model", "eval", tiny, "--ablate", "0.1", "--ablate", "1.3",
                                                        "--seed", 2, "--json")
    kv = m.kv(context=[4, 8], dtype="f16")
    want = cli("model", "kv", tiny, "--context", "4,8", "--dtype", "f16", "--json")
    assert [c["formula_bytes"] for c in kv["contexts"]] == [c["formula_bytes"] for c in want["contexts"]]
    assert kv["contexts"][1]["formula_bytes"] == 2 * 2 * 4 * 4 * 8 * 2  # 2 × L × H_kv × d_head × tokens × 2 bytes
    with pytest.raises(ValueError, match=r"^ablate\[0\]: head 2\.0 does not exist"):
        m.eval(ablate=["2.0"])
    with pytest.raises(ValueError, match="^steps: 0 is not a whole number from 1 to 256"):
        m.verdict([3, 4], steps=0)
    assert m.info() == cli("model", "info", tiny, "--json")
    gguf = tmp_path / "tiny.gguf"  # its name goes into the file (general.name): the same for both
    exported = m.export(gguf=str(gguf), type="f32")
    written = gguf.read_bytes()
    assert exported == cli("model", "export", tiny, "--gguf", gguf, "--type", "f32", "--json")
    assert gguf.read_bytes() == written
    texts = tmp_path / "texts.txt"
    texts.write_text("#3 #17\n")
    with pytest.raises(ValueError, match="^texts: "):
        m.verdict(texts=str(texts))  # no tokenizer to read the texts with


def test_text_goes_through_the_models_tokenizer(cli, vocab_model):
    m = attnlab.load(vocab_model)
    text = " Hello world, attention!"
    assert m.tokenize(text) == cli("model", "tokenize", vocab_model, text, "--json")["ids"]
    r = m.run(text)
    assert r.ids == m.tokenize(text)
    assert r.tokens == cli("model", "tokenize", vocab_model, text, "--json")["tokens"]
    assert m.attribute(text, target=" world") == cli("model", "attribute", vocab_model, "--text", text, "--target",
                                                     " world", "--json")
    with pytest.raises(ValueError, match='^target: " big world" is 2 tokens, not one'):
        m.attribute(text, target=" big world")


def test_model_errors_are_the_commands_messages(cli, tiny, tmp_path):
    m = attnlab.load(tiny)
    code, stderr = cli("model", "run", tiny, "--ids", "1,2", "--ablate", "9.9", check=False)
    assert code == 2
    with pytest.raises(ValueError) as raised:
        m.run([1, 2], ablate=["9.9"])
    assert stderr.strip() == "attnlab: --" + str(raised.value), "the same message, the flag named as the flag"
    code, stderr = cli("model", "info", tmp_path, check=False)
    with pytest.raises(ValueError) as raised:
        attnlab.load(tmp_path)
    assert code == 2 and stderr.strip() == "attnlab: " + str(raised.value)
    with pytest.raises(ValueError, match=r'^capture\[0\]: "weights" is not a choice; give one of attention, stream'):
        m.run([1, 2], capture=["weights"])
    with pytest.raises(ValueError, match="^tokens: the prompt's 3 tokens plus 99 new ones"):
        m.generate([1, 2, 3], 99)
    with pytest.raises(ValueError, match=r"^head: \"5\" is not a head"):
        m.run([1, 2]).head("5")


def test_model_arrays_outlive_the_run_and_the_model(tiny):
    m = attnlab.load(tiny)
    r = m.run([3, 17, 5])
    attention, logits = r.attention[1], r.logits
    kept = attention.copy(), logits.copy()
    del r, m
    gc.collect()
    attnlab.load(tiny).run([1, 2, 3, 4, 5, 6])
    np.testing.assert_array_equal(attention, kept[0])
    np.testing.assert_array_equal(logits, kept[1])


# ---- cost, the KV cache, HTML -------------------------------------------------------------

def test_cost_and_kv_follow_their_formulas():
    c = attnlab.cost(1024, d_model=768, heads=12, layers=12)["rows"][0]
    assert c["dense_cells"] == 1024 ** 2 and c["causal_cells"] == 1024 * 1025 // 2
    assert c["flops_layer_dense"] == 4 * 1024 ** 2 * 64 * 12
    kv = attnlab.kv(layers=32, heads=32, kv_heads=8, head_dim=128, context=[4096], dtype="f16")
    assert kv["bytes_per_token"] == 2 * 32 * 8 * 128 * 2
    assert kv["rows"][0]["cache_bytes"] == 4096 * 2 * 32 * 8 * 128 * 2
    with pytest.raises(TypeError, match="colour"):
        attnlab.kv(colour=3)
    with pytest.raises(ValueError, match="^dtype: "):
        attnlab.cost(10, dtype="f7")
    with pytest.raises(ValueError, match="^tokens: 0 tokens has no grid"):
        attnlab.cost(0)
    with pytest.raises(ValueError, match="^heads: "):
        attnlab.cost(10, d_model=100, heads=3)
    assert kv["model"]["parameters"] is None and kv["weight_bytes"] is None, "unknown, as POST /api/kv says"


def test_each_operation_takes_the_fields_of_its_one_description(cli):
    """Python's keywords, their defaults and the command's flags all come from the one
    description (GET /api/operations serves the same): the same names, the same defaults."""
    import inspect
    described = {d["name"]: d for d in cli("operations")["operations"]}
    for name, function in [("cost", attnlab.cost), ("kv", attnlab.kv), ("model generate", attnlab.Model.generate)]:
        parameters = inspect.signature(function).parameters
        for field in described[name]["fields"]:
            if "python" not in field["faces"]:
                assert field["name"] not in parameters, f"{name}: {field['name']} is the command line's alone"
                continue
            default = parameters[field["name"]].default
            want = field["default"]
            if field["required"] and field["kind"] != "tokens":
                assert default is inspect.Parameter.empty, f"{name}: {field['name']} is required"
            else:
                assert (list(default) if isinstance(default, tuple) else default) == want, (name, field["name"])
    # The KV table's contexts are the command's default in Python too (they had drifted).
    assert attnlab.kv("llama-3-8b")["rows"] == cli("kv", "--model", "llama-3-8b", "--json")["rows"]
    # And cost's whole reply is the command's --json.
    assert attnlab.cost([3, 6, 100000], window=2) == cli("cost", "--tokens", "3,6,100000", "--window", 2, "--json")


def test_a_seeded_generation_is_the_same_in_python_and_the_command(cli, tiny):
    """Sampling at temperature 1 with a seed and no top_k: the same tokens in both faces
    (the command sampled among the top 5 by default before the description was shared)."""
    m = attnlab.load(tiny)
    g = m.generate([3, 17, 5], 8, temperature=1, seed=3)
    assert g == cli("model", "generate", tiny, "--ids", "3,17,5", "--tokens", 8, "--temperature", 1, "--seed", 3,
                    "--json")
    assert m.generate(ids=[3, 17, 5], tokens=8, temperature=1, seed=3) == g
    nucleus = m.generate([3, 17, 5], 8, temperature=1, top_p=0.3, seed=3)
    assert nucleus == cli("model", "generate", tiny, "--ids", "3,17,5", "--tokens", 8, "--temperature", 1, "--top-p",
                          0.3, "--seed", 3, "--json")
    code, stderr = cli("model", "generate", tiny, "--ids", "3", "--temperature", 1, "--top-p", 0, check=False)
    with pytest.raises(ValueError) as raised:
        m.generate([3], 2, temperature=1, top_p=0)
    # the same message, the field as each face spells it
    assert code == 2 and stderr.strip() == "attnlab: --top-p" + str(raised.value).removeprefix("top_p")
    with pytest.raises(ValueError, match=r"^ids\[1\]: token id 99 is outside the vocabulary"):
        m.generate([3, 99], 2)
    with pytest.raises(ValueError, match="^temperature: "):
        m.generate([3], 2, temperature=-1)


def test_traces_and_heads_show_as_the_labs_heatmap():
    t = attnlab.Scenario.load("three-tokens").run(causal=True)
    page = t._repr_html_()
    assert page.count("<tr>") == 1 + 3 and "attnlab-heatmap" in page
    assert "#5c5c5c" in page, "masked cells in the page's masked colour"
    assert "rgb(8,48,107)" in page, "a weight of 1 in the page's darkest blue (web/colour.js)"
    assert t.heads[0]._repr_html_().count("<td") == 9
    assert "HeadTrace" in repr(t.heads[0]) and "Trace" in repr(t)
    assert repr(t.heads[0]).startswith("<attnlab.HeadTrace ") and "d_k=" in repr(t.heads[0])  # the binding's
    assert "softmax" in attnlab.attend.__doc__


def test_show_starts_the_lab_on_the_model(tiny, monkeypatch):
    import os
    import urllib.request
    monkeypatch.setenv("ATTNLAB_COMMAND", os.environ.get("ATTNLAB_CLI", "build/attnlab"))
    url = attnlab.show(attnlab.load(tiny), "3 17 5")
    url = url if isinstance(url, str) else url.src
    assert url.startswith("http://127.0.0.1:") and url.endswith("/#text=3%2017%205")
    url = url.split("#")[0]
    with urllib.request.urlopen(url + "api/model") as reply:
        info = json.loads(reply.read())
    config = attnlab.load(tiny).config
    assert info["loaded"] is True and {k: info.get(k) for k in config} == config
    with pytest.raises(ValueError, match="^show: attnlab serve did not start: attnlab: "):
        attnlab.show("/no/such/model")


def test_a_gguf_file_loads_and_runs_as_the_command_runs_it(cli):
    from conftest import FIXTURES
    path = FIXTURES / "gguf" / "llama-f32.gguf"
    m = attnlab.load(path)
    assert m.config["n_layer"] >= 1 and "llama" in repr(m).lower()
    ids = [1, 5, 9, 2, 5, 9]
    r = m.run(ids, capture=["attention"])
    want = cli("model", "run", path, "--ids", ",".join(map(str, ids)), "--json")
    np.testing.assert_allclose(r.logits[-1], np.array(want["last_logits"], np.float32), rtol=0, atol=1e-5)
    for layer, weights in enumerate(r.attention):
        np.testing.assert_array_equal(weights, np.array(want["weights"][layer], np.float32))


def test_the_type_stubs_are_the_modules_own():
    """src/python/attnlab/__init__.pyi is what scripts/python_stubs.py writes from the module now:
    an option added to an operation's description and not to the stubs fails here (regenerate:
    PYTHONPATH=build/python /usr/bin/python3 scripts/python_stubs.py > src/python/attnlab/__init__.pyi)."""
    import ast
    import subprocess
    import sys
    written = subprocess.run([sys.executable, str(ROOT / "scripts" / "python_stubs.py")], capture_output=True,
                             text=True, check=True).stdout
    committed = (ROOT / "src" / "python" / "attnlab" / "__init__.pyi").read_text()
    assert written == committed, "the stubs are out of date: regenerate them"
    tree = ast.parse(committed)
    functions = {node.name: node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}
    keywords = {a.arg for a in functions["verdict"].args.kwonlyargs}
    assert {"texts", "induction", "seed", "steps", "ids"} <= keywords


def test_the_tour_notebook_runs_and_shows_what_it_says():
    """docs/notebooks/tour.ipynb executed as a user would (Debian's nbclient and ipykernel):
    the worked head's numbers digit for digit, a model's heads, and attribution's parts adding
    up to the logit."""
    import nbclient
    import nbformat
    notebook = nbformat.read(ROOT / "docs" / "notebooks" / "tour.ipynb", as_version=4)
    nbclient.NotebookClient(notebook, timeout=120, kernel_name="python3",
                            resources={"metadata": {"path": str(ROOT / "docs" / "notebooks")}}).execute()
    printed = "".join(out.get("text", "") for cell in notebook.cells if cell.cell_type == "code"
                      for out in cell.outputs)
    errors = [out for cell in notebook.cells if cell.cell_type == "code" for out in cell.outputs
              if out.output_type == "error"]
    assert not errors, errors
    assert "scores of t3: [3. 1. 4.]" in printed
    assert "weights of t3: [0.31 0.07 0.62]" in printed
    assert "output of t3: [0.69 0.93]" in printed
    assert "(4, 8, 8) = heads × n × n" in printed and "rows sum to one: True" in printed
    assert "strongest induction head: " in printed
    assert "the parts add up to the logit: True" in printed and "measures weighed: 9" in printed
