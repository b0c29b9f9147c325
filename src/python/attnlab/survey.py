"""What every head does across a corpus, on this machine or a Dask cluster (docs/survey.md).

``survey(model, texts)`` runs ``attnlab model survey`` here; with ``client=`` (a
``dask.distributed.Client``) it sends the corpus's shards to the cluster's workers, each of
which loads the model once (from a path every worker can read) and returns its shard's sums;
the sums are merged here, exactly: the result is what the local run returns, bit for bit. A
worker lost mid-run costs only its shards, which the scheduler runs again elsewhere; each
shard's sums are counted once, by its index.
"""
import hashlib
import json
import os
import tempfile
from typing import Optional, Sequence, Union

Texts = Union[str, "os.PathLike", Sequence[Union[str, dict]]]

# A worker's models and corpora, loaded once per process: {path: Model}, {digest: file}.
_MODELS: dict = {}
_CORPORA: dict = {}


def _corpus_lines(texts) -> Optional[str]:
    """A list of texts (strings, or dicts like a JSON Lines file's) as JSON Lines; None for a path."""
    if isinstance(texts, (str, os.PathLike)):
        return None
    lines = []
    for k, t in enumerate(texts):
        if isinstance(t, str):
            lines.append(json.dumps({"text": t}))
        elif isinstance(t, dict):
            lines.append(json.dumps(t))
        else:
            raise ValueError(f"texts[{k}]: a text is a string or a dict like {{\"text\": ...}} or {{\"ids\": [...]}}")
    if not lines:
        raise ValueError("texts: no documents")
    return "\n".join(lines) + "\n"


def _corpus_file(lines: str) -> str:
    """The lines written once to a file of this process's (a worker's own copy)."""
    digest = hashlib.sha256(lines.encode()).hexdigest()
    if digest not in _CORPORA:
        handle, path = tempfile.mkstemp(prefix="attnlab-survey-", suffix=".jsonl")
        with os.fdopen(handle, "w") as f:
            f.write(lines)
        _CORPORA[digest] = path
    return _CORPORA[digest]


def _model(path: str):
    from . import load
    if path not in _MODELS:
        _MODELS[path] = load(path)
    return _MODELS[path]


def _survey_shard(model_path: str, texts: str, lines: Optional[str], shard: int, arguments: dict) -> dict:
    """On a worker: one shard's sums (the model loaded once per worker process)."""
    corpus = _corpus_file(lines) if lines is not None else texts
    part = _model(model_path).survey(corpus, shard=shard, partial=True, **arguments)
    return dict(part)


def survey(model, texts: Texts, *, client=None, shards: Optional[int] = None, max_tokens: Optional[int] = None,
           skip_bad_lines: bool = False, out: Optional[str] = None, html: Optional[str] = None) -> dict:
    """Every head of `model` (a Model or its path) over `texts`: a file (a document a line, or
    JSON Lines of {"text"} or {"ids"}), or a list of strings or of such dicts. Without
    `client`, here (`shards` pieces merged, `out` a folder of finished shards to resume from);
    with a ``dask.distributed.Client``, `shards` (default: 4 a worker, at most a document
    each) go to its workers, which must read the model at the same path; a list of texts is
    sent to each worker once. The reply is `attnlab model survey --json`'s; `html`, a file
    where the head finder is written with the survey inside (as `--html` does)."""
    from . import Model, Result
    path = model.path if isinstance(model, Model) else str(model)
    local = model if isinstance(model, Model) else _model(path)
    lines = _corpus_lines(texts)
    corpus = _corpus_file(lines) if lines is not None else str(texts)
    arguments = {"skip_bad_lines": skip_bad_lines}
    if max_tokens is not None:
        arguments["max_tokens"] = max_tokens
    if html is not None:
        arguments["html"] = str(html)
    if client is None:
        return local.survey(corpus, shards=shards or 1, out=out, **arguments)
    if out is not None:
        raise ValueError("out: a folder of shards is for a survey on this machine; the cluster's shards return here")
    plan = local._native.survey_plan({"texts": corpus, **arguments})
    if shards is None:
        workers = max(1, len(client.scheduler_info().get("workers", {})))
        shards = 4 * workers
    shards = max(1, min(int(shards), plan["documents"]))
    # the texts go to the cluster once (every task refers to them), not once a task
    shared = client.scatter(lines, broadcast=True) if lines is not None else None
    per_shard = {k: v for k, v in arguments.items() if k != "html"}
    futures = [client.submit(_survey_shard, path, corpus if lines is None else "", shared, s,
                             {**per_shard, "shards": shards}, pure=False, key=f"attnlab-survey-{plan['corpus']}-{s}-of-{shards}")
               for s in range(shards)]
    parts = client.gather(futures)  # in shard order: one result a shard, whichever worker made it
    return Result(local._native.survey_merge({"texts": corpus, "shards": shards, **arguments}, list(parts)))
