"""`model evict` against an independent NumPy implementation written from the policies'
definitions (docs/long-context.md; StreamingLLM, H2O) and the families' forward
(transformers' modeling_gpt2.py and modeling_llama.py), in float64.

Evicting a token from the cache before step t is the same as masking it from query t's row: a
token's row at every layer depends only on the keys it saw, so the decode equals a forward
over the prefix with one mask row per query. Each step below runs that masked forward over
ids[:t + 1] and reads its last row: the next token's logits and every head's weights.
"""
import json
import math

import numpy as np
import pytest

import attnlab
from conftest import FIXTURES
from make_family_fixtures import silu
from test_qk import read_folder


def gelu_new(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def softmax_rows(scores):
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


class MaskedGpt2:
    def __init__(self, folder):
        c = json.loads((folder / "config.json").read_text())
        self.w, self.H, self.L, self.eps = read_folder(folder), c["n_head"], c["n_layer"], c["layer_norm_epsilon"]

    def ln(self, x, g, b):
        return (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + self.eps) * g + b

    def forward(self, ids, mask):
        """logits [n, vocab] and weights [L, H, n, n] with mask[i, j]: query i sees key j."""
        w, n = self.w, len(ids)
        x = w["wte.weight"][ids] + w["wpe.weight"][:n]
        d = x.shape[1]
        hd = d // self.H
        weights = []
        for l in range(self.L):
            p = f"h.{l}."
            qkv = self.ln(x, w[p + "ln_1.weight"], w[p + "ln_1.bias"]) @ w[p + "attn.c_attn.weight"] + w[p + "attn.c_attn.bias"]
            q, k, v = (qkv[:, s * d:(s + 1) * d].reshape(n, self.H, hd).transpose(1, 0, 2) for s in range(3))
            a = softmax_rows(np.where(mask, q @ k.transpose(0, 2, 1) / math.sqrt(hd), -np.inf))
            weights.append(a)
            z = (a @ v).transpose(1, 0, 2).reshape(n, d)
            x = x + z @ w[p + "attn.c_proj.weight"] + w[p + "attn.c_proj.bias"]
            m = self.ln(x, w[p + "ln_2.weight"], w[p + "ln_2.bias"])
            x = x + gelu_new(m @ w[p + "mlp.c_fc.weight"] + w[p + "mlp.c_fc.bias"]) @ w[p + "mlp.c_proj.weight"] + w[p + "mlp.c_proj.bias"]
        return self.ln(x, w["ln_f.weight"], w["ln_f.bias"]) @ w["wte.weight"].T, np.array(weights)


class MaskedLlama:
    def __init__(self, folder):
        c = json.loads((folder / "config.json").read_text())
        assert c["model_type"] == "llama"
        self.c, self.w = c, read_folder(folder)
        self.H, self.K, self.L = c["num_attention_heads"], c["num_key_value_heads"], c["num_hidden_layers"]
        self.hd = c.get("head_dim") or c["hidden_size"] // self.H
        self.eps = c["rms_norm_eps"]
        from make_family_fixtures import layer_plan
        self.freqs = [f for _, f in layer_plan(c)]

    def rms(self, x, g):
        return x / np.sqrt((x ** 2).mean(-1, keepdims=True) + self.eps) * g

    def rope(self, x, freqs):  # x [heads, n, hd], positions 0..n-1, split halves
        n, half = x.shape[1], len(freqs)
        angle = np.arange(n)[:, None] * freqs[None, :]
        cos, sin = np.cos(angle), np.sin(angle)
        a, b = x[..., :half], x[..., half:2 * half]
        return np.concatenate([a * cos - b * sin, b * cos + a * sin, x[..., 2 * half:]], axis=-1)

    def forward(self, ids, mask):
        w, n, H, K, hd = self.w, len(ids), self.H, self.K, self.hd
        x = w["model.embed_tokens.weight"][ids]
        weights = []
        for l in range(self.L):
            p = f"model.layers.{l}."
            a = self.rms(x, w[p + "input_layernorm.weight"])
            proj = lambda s, heads: (a @ w[p + f"self_attn.{s}_proj.weight"].T).reshape(n, heads, hd).transpose(1, 0, 2)
            q, k, v = self.rope(proj("q", H), self.freqs[l]), self.rope(proj("k", K), self.freqs[l]), proj("v", K)
            k, v = np.repeat(k, H // K, axis=0), np.repeat(v, H // K, axis=0)
            att = softmax_rows(np.where(mask, q @ k.transpose(0, 2, 1) / math.sqrt(hd), -np.inf))
            weights.append(att)
            x = x + (att @ v).transpose(1, 0, 2).reshape(n, H * hd) @ w[p + "self_attn.o_proj.weight"].T
            m = self.rms(x, w[p + "post_attention_layernorm.weight"])
            x = x + (silu(m @ w[p + "mlp.gate_proj.weight"].T) * (m @ w[p + "mlp.up_proj.weight"].T)) @ w[p + "mlp.down_proj.weight"].T
        head = w.get("lm_head.weight", w["model.embed_tokens.weight"])
        return self.rms(x, w["model.norm.weight"]) @ head.T, np.array(weights)


class SplitMix64:
    def __init__(self, seed):
        self.state = seed

    def uniform(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & (2 ** 64 - 1)
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & (2 ** 64 - 1)
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & (2 ** 64 - 1)
        return (((z ^ (z >> 31)) >> 11) + 1) * 2.0 ** -53


def log_softmax(logits):
    m = logits.max()
    return logits - (m + np.log(np.exp(logits - m).sum()))


def run_policy(model, ids, policy, budget, sinks=4, seed=0):
    """Each predicted position's loss and top token, and the tokens cached at the last step."""
    n, slots = len(ids), budget - 1
    rows = np.zeros((n, n), bool)  # rows[i]: the keys query i saw, as committed

    def step(t, kept):
        mask = rows[:t + 1, :t + 1].copy()
        mask[t] = False
        mask[t, kept + [t]] = True
        logits, weights = model.forward(ids[:t + 1], mask)
        return logits[t], weights[:, :, t, :t + 1]

    kept, score, rng, losses, tops = [], np.zeros(n), SplitMix64(seed), [], []
    for t in range(n - 1):
        if t > 0:
            kept.append(t - 1)
        while policy != "full" and len(kept) > slots:
            if policy == "window":
                i = 0
            elif policy == "sinks":
                i = min(sinks, slots)
            elif policy == "random":
                i = min(len(kept) - 1, int(rng.uniform() * len(kept)))
            elif policy == "h2o":
                candidates = len(kept) - (slots - slots // 2)
                i = int(np.argmin(score[kept[:candidates]]))
            else:  # effect
                p = log_softmax(step(t, kept)[0])
                kl = [np.sum(np.exp(p) * (p - log_softmax(step(t, kept[:c] + kept[c + 1:])[0]))) for c in range(len(kept))]
                i = int(np.argmin(kl))
            del kept[i]
        logits, weights = step(t, kept)
        rows[t, kept + [t]] = True
        score[kept + [t]] += weights.sum(axis=(0, 1))[kept + [t]]
        lp = log_softmax(logits)
        losses.append(-lp[ids[t + 1]])
        tops.append(int(np.argmax(logits)))
    return losses, tops, kept + [n - 2]


CASES = {"tiny-f32": (MaskedGpt2, [3, 17, 5, 3, 17, 29, 8, 3, 17, 5, 3, 17, 29, 8, 12, 3]),
         "llama-f32": (MaskedLlama, [1, 7, 19, 4, 7, 19, 33, 2, 11, 7, 19, 4, 30, 2])}


@pytest.mark.parametrize("fixture", sorted(CASES))
def test_every_policy_keeps_what_an_independent_implementation_keeps(fixture):
    make, ids = CASES[fixture]
    model = make(FIXTURES / fixture)
    budgets, policies = [3, 6], ["full", "window", "sinks", "h2o", "random", "effect"]
    got = attnlab.load(str(FIXTURES / fixture)).evict(ids=ids, budget=budgets, policy=policies, sinks=2, seed=7,
                                                      kept=True)
    ref_losses, ref_tops, _ = run_policy(model, ids, "full", len(ids))
    assert got["full"]["loss"] == pytest.approx(np.mean(ref_losses), abs=1e-5)
    assert got["predicted"] == len(ids) - 1
    expected = [("full", len(ids))] + [(p, b) for p in policies[1:] for b in budgets]
    assert [(r["policy"], r["budget"]) for r in got["results"]] == expected
    for r in got["results"]:
        losses, tops, kept = run_policy(model, ids, r["policy"], r["budget"], sinks=2, seed=7)
        where = f'{r["policy"]} at {r["budget"]}'
        assert r["kept"] == [kept], where
        assert r["loss"] == pytest.approx(np.mean(losses), abs=1e-5), where
        assert r["agreement"] == pytest.approx(np.mean(np.array(tops) == np.array(ref_tops))), where


def test_the_command_and_python_give_the_same_reply(cli):
    path = FIXTURES / "tiny-f32"
    ids = CASES["tiny-f32"][1]
    command = cli("model", "evict", path, "--ids", ",".join(map(str, ids)), "--budget", "4", "--policy", "h2o,sinks",
                  "--cache", "q8_0", "--json")
    assert attnlab.load(str(path)).evict(ids=ids, budget=[4], policy=["h2o", "sinks"], cache="q8_0") == command
    assert command["cache"] == "q8_0"


def test_a_file_of_texts_in_json_lines(tmp_path, cli):
    path = FIXTURES / "tiny-f32"
    texts = tmp_path / "texts.jsonl"
    texts.write_text('{"ids": [3, 17, 5, 3, 17, 29]}\n\n{"ids": [8, 3, 17, 5]}\n')
    got = cli("model", "evict", path, "--texts", texts, "--budget", "2", "--policy", "window", "--json")
    assert (got["texts"], got["tokens"], got["predicted"]) == (2, 10, 8)
    one = [cli("model", "evict", path, "--ids", ids, "--budget", "2", "--policy", "window", "--json")
           for ids in ("3,17,5,3,17,29", "8,3,17,5")]
    assert got["results"][0]["loss"] == pytest.approx((one[0]["results"][0]["loss"] * 5 + one[1]["results"][0]["loss"] * 3) / 8)
    # The same texts as sequences of ids (Python and the API): the same reply.
    assert attnlab.load(str(path)).evict(sequences=[[3, 17, 5, 3, 17, 29], [8, 3, 17, 5]], budget=[2],
                                         policy=["window"]) == got
    with pytest.raises(ValueError, match="sequences\\[1\\]"):
        attnlab.load(str(path)).evict(sequences=[[3, 17], [8]])
    texts.write_text('{"ids": [3, 17]}\n{"ids": [3, 99]}\n')
    code, err = cli("model", "evict", path, "--texts", texts, "--json", check=False)
    assert code == 2 and "line 2" in err and "99" in err
