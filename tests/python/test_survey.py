"""`attnlab model survey` against NumPy: a small Llama-style model made here, a corpus of
documents with repeated tokens cut into windows; every head's previous-token, self, sink,
induction, entropy, distance mean and variance, histogram, strongest example and most-drawn key
token computed from an independent NumPy forward (test_evict.py's, written from transformers'
modeling_llama.py) over each window. Then the exact merge: the corpus in 1, 3 or 7 shards gives
the same numbers bit for bit, a survey resumed from a folder of finished shards too, and a bad
line is refused naming its line, or skipped and listed."""
import json
import math

import numpy as np

from test_evict import MaskedLlama
from test_long_context import make_llama

WINDOW = 40


def corpus(path, seed=4):
    r = np.random.RandomState(seed)
    docs = []
    for k in range(9):
        n = int(r.randint(3, 110))
        ids = r.randint(0, 12 if k % 2 else 50, n)  # odd documents: a small alphabet, many repeats
        docs.append([int(i) for i in ids])
    path.write_text("".join(json.dumps({"ids": d}) + "\n" for d in docs))
    return docs


def numpy_survey(model, docs):
    H = model.H * model.L
    stats = {k: np.zeros(H) for k in ["rows", "previous", "self", "sink", "induction", "induction_rows", "entropy",
                                      "distance", "distance_squared"]}
    histogram = np.zeros((H, 24))
    best = [(-1.0, None)] * H
    drawn = [dict() for _ in range(H)]
    for d, doc in enumerate(docs):
        for start in range(0, len(doc), WINDOW):
            ids = np.array(doc[start:start + WINDOW])
            n = len(ids)
            if n < 2:
                continue
            _, w = model.forward(ids.tolist(), np.tril(np.ones((n, n), bool)))
            w = w.reshape(H, n, n)
            for h in range(H):
                for i in range(1, n):
                    a = w[h, i, :i + 1]
                    dist = i - np.arange(i + 1)
                    stats["rows"][h] += 1
                    stats["previous"][h] += a[i - 1]
                    stats["self"][h] += a[i]
                    stats["sink"][h] += a[0]
                    if ids[i] in ids[:i]:
                        stats["induction_rows"][h] += 1
                        after = [j for j in range(1, i + 1) if ids[j - 1] == ids[i]]
                        stats["induction"][h] += a[after].sum()
                    stats["entropy"][h] -= (a[a > 0] * np.log2(a[a > 0])).sum()
                    stats["distance"][h] += (a * dist).sum()
                    stats["distance_squared"][h] += (a * dist * dist).sum()
                    for j in range(i + 1):
                        histogram[h, 0 if dist[j] == 0 else int(math.floor(math.log2(dist[j]))) + 1] += a[j]
                    if i >= 2:
                        j = 1 + int(np.argmax(a[1:i]))
                        if a[j] > best[h][0]:
                            best[h] = (a[j], (d, start + i, start + j))
                    for j in range(1, i):
                        drawn[h][int(ids[j])] = drawn[h].get(int(ids[j]), 0.0) + a[j]
    return stats, histogram, best, drawn


def test_survey_against_numpy_and_exact_merges(tmp_path, cli):
    folder = make_llama(tmp_path / "llama", positions=256)
    docs = corpus(tmp_path / "corpus.jsonl")
    got = cli("model", "survey", folder, tmp_path / "corpus.jsonl", "--max-tokens", WINDOW, "--json")
    assert got["documents"] == len(docs)
    assert got["tokens"] == sum(len(d) for d in docs)
    assert got["windows"] == sum(-(-len(d) // WINDOW) for d in docs)
    stats, histogram, best, drawn = numpy_survey(MaskedLlama(folder), docs)
    for h, head in enumerate(got["heads"]):
        rows = stats["rows"][h]
        assert head["head"] == f"{h // 2}.{h % 2}" and head["rows"] == rows
        for name, key in [("previous_token", "previous"), ("self", "self"), ("sink", "sink"),
                          ("entropy", "entropy"), ("distance_mean", "distance")]:
            assert math.isclose(head[name], stats[key][h] / rows, abs_tol=2e-5), (h, name)
        assert head["induction_rows"] == stats["induction_rows"][h]
        assert math.isclose(head["induction"], stats["induction"][h] / stats["induction_rows"][h], abs_tol=2e-5)
        mean = stats["distance"][h] / rows
        assert math.isclose(head["distance_variance"], stats["distance_squared"][h] / rows - mean * mean,
                            rel_tol=1e-4, abs_tol=1e-3)
        bins = {(b["from"], b["to"]): b["weight"] for b in head["histogram"]}
        for b in range(24):
            span = (0, 0) if b == 0 else (2 ** (b - 1), 2 ** b - 1)
            assert math.isclose(bins.get(span, 0.0), histogram[h, b] / rows, abs_tol=2e-5), (h, b)
        top = head["examples"]["top"][0]
        activation, (document, query, key) = best[h]
        assert math.isclose(top["activation"], activation, abs_tol=2e-5)
        assert (top["document"], top["position"]) == (document, query)
        assert any(k["position"] == key for k in top["keys"])
        strongest = max(drawn[h].items(), key=lambda kv: (kv[1], -kv[0]))
        assert head["top_key_tokens"][0]["id"] == strongest[0]
        assert math.isclose(head["top_key_tokens"][0]["total"], strongest[1], rel_tol=1e-5)
    # Exact merges: any number of shards, and a survey resumed from finished shards.
    for shards in (3, 7):
        sharded = cli("model", "survey", folder, tmp_path / "corpus.jsonl", "--max-tokens", WINDOW,
                      "--shards", shards, "--json")
        assert sharded.pop("shards") == shards
        assert sharded == {k: v for k, v in got.items() if k != "shards"}
    out = tmp_path / "shards"
    first = cli("model", "survey", folder, tmp_path / "corpus.jsonl", "--max-tokens", WINDOW, "--shards", 3,
                "--out", out, "--json")
    (out / "shard-1-of-3.json").unlink()  # as if interrupted: shard 1 is computed again, 0 and 2 read back
    stamp = (out / "shard-0-of-3.json").stat().st_mtime_ns
    again = cli("model", "survey", folder, tmp_path / "corpus.jsonl", "--max-tokens", WINDOW, "--shards", 3,
                "--out", out, "--json")
    assert again == first and (out / "shard-0-of-3.json").stat().st_mtime_ns == stamp
    assert (out / "shard-1-of-3.json").exists()


def test_survey_bad_lines_are_refused_or_skipped(tmp_path, cli):
    folder = make_llama(tmp_path / "llama", positions=256)
    path = tmp_path / "corpus.jsonl"
    path.write_text('{"ids": [1, 2, 3]}\n{"ids": [1, 999]}\nnot json\n{"ids": [4, 5, 6, 7]}\n')
    code, err = cli("model", "survey", folder, path, check=False)
    assert code != 0 and "line 2" in err and "outside the model's vocabulary" in err
    got = cli("model", "survey", folder, path, "--skip-bad-lines", "--json")
    assert got["documents"] == 2
    assert [s["line"] for s in got["skipped"]] == [2, 3]


def test_survey_progress_counts_tokens_and_documents_on_a_terminal(tmp_path):
    """On a terminal the progress line counts tokens and documents (their totals from the plan)."""
    import os
    import pty
    import subprocess

    from conftest import ROOT
    folder = make_llama(tmp_path / "llama", positions=256)
    docs = corpus(tmp_path / "corpus.jsonl")
    master, terminal = pty.openpty()
    command = os.environ.get("ATTNLAB_CLI", str(ROOT / "build" / "attnlab"))
    done = subprocess.run([command, "model", "survey", str(folder), str(tmp_path / "corpus.jsonl"), "--max-tokens",
                           str(WINDOW), "--shards", "3", "--json"], stdout=subprocess.PIPE, stderr=terminal)
    os.close(terminal)
    seen = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # the terminal's other end closed
            break
        if not chunk:
            break
        seen += chunk
    os.close(master)
    assert done.returncode == 0
    last = seen.decode().replace("\r\n", "\n").split("\r")[-1]
    tokens = sum(len(d) for d in docs)
    assert f"100% ({tokens} of {tokens} tokens, {len(docs)} of {len(docs)} documents)" in last, last


def test_a_shard_tokenizes_only_its_documents_and_merges_to_the_whole(tmp_path, vocab_model):
    """Texts (a tokenizer's model): a shard's plan reads every line (the same documents, the same
    corpus) but tokenizes and prices only its own, and the shards' sums merge to the one pass."""
    import attnlab
    lines = ["The cat sat on the mat. The cat sat.", "", "A second document, a little longer than the first one is.",
             "x", "Words and words and words again.", "Last: the end of the corpus."]
    path = tmp_path / "texts.txt"
    path.write_text("\n".join(lines) + "\n")
    model = attnlab.load(str(vocab_model))
    whole = model._native.survey_plan({"texts": str(path), "max_tokens": 8})
    assert whole["documents"] == 5
    parts = [model._native.survey_plan({"texts": str(path), "max_tokens": 8, "shards": 3, "shard": s}) for s in range(3)]
    assert {p["corpus"] for p in parts} == {whole["corpus"]}
    assert sum(p["tokens"] for p in parts) == whole["tokens"] and all(0 < p["tokens"] < whole["tokens"] for p in parts)
    assert sum(p["windows"] for p in parts) == whole["windows"]
    one = model.survey(str(path), max_tokens=8)
    sums = [dict(model.survey(str(path), max_tokens=8, shards=3, shard=s, partial=True)) for s in range(3)]
    merged = model._native.survey_merge({"texts": str(path), "max_tokens": 8, "shards": 3}, sums)
    assert merged["heads"] == one["heads"] and merged["tokens"] == one["tokens"] == whole["tokens"]


def test_the_plan_prices_every_heads_token_sums(tmp_path):
    """The memory priced before work grows with the corpus's distinct tokens: 2 sums (as a query,
    as a key) a head a distinct token, 96 bytes each, beside a window's forward."""
    import attnlab
    folder = make_llama(tmp_path / "llama", positions=256)
    model = attnlab.load(str(folder))
    plans = []
    for k, docs in enumerate(([[1, 2, 3, 1, 2]], [[1, 2, 3, 4, 5, 6, 7, 8], [40, 41, 1]])):
        path = tmp_path / f"c{k}.jsonl"
        path.write_text("".join(json.dumps({"ids": d}) + "\n" for d in docs))
        plan = model._native.survey_plan({"texts": str(path), "max_tokens": WINDOW})
        assert plan["distinct_tokens"] == len({i for d in docs for i in d})
        plans.append(plan)
    heads = 2 * 2  # make_llama: 2 layers of 2 heads
    grew = plans[1]["memory"] - plans[0]["memory"]
    assert grew == heads * 2 * (plans[1]["distinct_tokens"] - plans[0]["distinct_tokens"]) * 96
