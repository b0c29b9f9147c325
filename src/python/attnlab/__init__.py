"""attnlab in Python: attention computed step by step, scenarios, and real models.

The same engine as the ``attnlab`` command, as NumPy arrays:

>>> import attnlab, numpy as np
>>> t = attnlab.attend(q, k, v, causal=True)          # every intermediate of one head
>>> t.weights                                          # [n × m], each row sums to 1
>>> out = attnlab.flash(q, k, v, causal=True)         # the fast kernel: outputs only
>>> s = attnlab.Scenario.load("three-tokens")         # a bundled scenario, or a file
>>> s.run(temperature=0.5).heads[0].weights
>>> m = attnlab.load("path/to/model")                 # a Hugging Face folder or a .gguf file
>>> r = m.run("The cat sat on the mat", capture=["attention"])
>>> r.attention[5][1]                                  # head 5.1's weights, [n × n]

Arrays are views of the C++ results (no copy) and read-only; each keeps what it views
alive. Bad input raises ValueError with the message the command prints. Shapes and names
follow attnlab's vocabulary: n query tokens, m keys, d_k, d_v, heads as "L.H" (0-based).
See docs/python.md for a worked session.
"""

from __future__ import annotations

import html as _html
import inspect as _inspect
import json as _json
import os as _os
import re as _re
from dataclasses import dataclass
from typing import Iterable, Optional, Sequence, Union

import numpy as _np

from . import _attnlab
from ._attnlab import HeadTrace

__version__ = _attnlab.__version__
__all__ = [
    "attend", "flash", "Scenario", "Trace", "HeadTrace", "load", "Model", "ModelRun", "HeadScore",
    "Result", "cost", "kv", "show", "survey",
]

Tokens = Union[str, Sequence[int]]
Token = Union[int, str]


# ---- the lab's colour scale (web/colour.js, copied beside this file by the build) ----------

def _page_colours():
    """The page's colour stops and masked-cell colour, read from its own colour.js."""
    path = _os.path.join(_os.path.dirname(__file__), "colour.js")
    with open(path, encoding="utf-8") as f:
        text = f.read()
    stops = _re.findall(r"'(#[0-9a-f]{6})'", _re.search(r"STOPS = \[(.*?)\]", text).group(1))
    masked = _re.search(r"MASKED = '(#[0-9a-f]{6})'", text).group(1)
    return [tuple(int(h[i:i + 2], 16) for i in (1, 3, 5)) for h in stops], masked


_STOPS, _MASKED = _page_colours()


def _colour(w: float) -> str:
    """A weight in [0, 1] on the page's scale (its 256-entry table, linear between stops)."""
    k = 0 if not w > 0 else 255 if w >= 1 else round(w * 255)
    pos = k / 255 * (len(_STOPS) - 1)
    lo = min(len(_STOPS) - 2, int(pos))
    f = pos - lo
    r, g, b = (round(_STOPS[lo][c] + (_STOPS[lo + 1][c] - _STOPS[lo][c]) * f) for c in range(3))
    return f"rgb({r},{g},{b})"


def heatmap_html(weights, rows: Sequence[str], columns: Sequence[str], title: str = "",
                 masked=None) -> str:
    """A weight matrix as an HTML table in the lab's colours: rows are queries, columns keys."""
    w = _np.asarray(weights)
    cells = []
    for i, name in enumerate(rows):
        tds = []
        for j in range(w.shape[1]):
            x = float(w[i, j])
            if masked is not None and masked[i, j]:
                tds.append(f'<td style="background:{_MASKED}" title="masked"></td>')
            else:
                ink = "#fff" if x > 0.5 else "#000"
                tds.append(f'<td style="background:{_colour(x)};color:{ink}" title="{x:.6g}">{x:.2f}</td>')
        cells.append(f"<tr><th>{_html.escape(str(name))}</th>{''.join(tds)}</tr>")
    head = "".join(f"<th>{_html.escape(str(c))}</th>" for c in columns)
    caption = f"<caption>{_html.escape(title)}</caption>" if title else ""
    return ('<table class="attnlab-heatmap" style="border-collapse:collapse;font:12px monospace">'
            f"{caption}<tr><th></th>{head}</tr>{''.join(cells)}</table>")


def _head_html(self, rows=None, columns=None, title=""):
    n, m = self.weights.shape
    rows = rows if rows is not None else [str(i) for i in range(n)]
    columns = columns if columns is not None else [str(j) for j in range(m)]
    return heatmap_html(self.weights, rows, columns, title or f"{self.name}: weights [n × m]",
                        masked=_np.isneginf(self.logits))


HeadTrace._repr_html_ = lambda self: _head_html(self)


# ---- the engine ---------------------------------------------------------------------------

class Trace:
    """Every intermediate of an attention computation: ``heads`` (each a HeadTrace with
    queries, keys, values, scores, scaled, logits, exponentials, weights, mixed, output),
    the layer's ``output``, the tokens. With one head, its arrays are here too
    (``t.weights`` is ``t.heads[0].weights``). ``to_json()`` is what ``attnlab run --json``
    prints for the same scenario."""

    def __init__(self, native):
        self._native = native

    tokens = property(lambda self: self._native.tokens, doc="the query tokens' names")
    source_tokens = property(lambda self: self._native.source_tokens or self._native.tokens,
                             doc="the key tokens' names (the queries' own in self-attention)")
    heads = property(lambda self: self._native.heads, doc="one HeadTrace per head")
    output = property(lambda self: self._native.output, doc="[n × d_out] the layer's output")
    kernel = property(lambda self: self._native.kernel)

    def to_json(self) -> dict:
        """The trace as ``attnlab run --json`` prints it (the same numbers, bit for bit)."""
        return self._native.to_json()

    def scenario(self) -> dict:
        """The scenario that was run, in the scenario file format."""
        return self._native.scenario_json()

    @property
    def intervention(self) -> Optional[dict]:
        """Before and after, when the run had interventions (mask_tokens, ablate_heads...)."""
        return self._native.intervention_json()

    def _one(self, name):
        heads = self.heads
        if len(heads) != 1:
            raise ValueError(f"{name}: the trace has {len(heads)} heads; use trace.heads[h].{name}")
        return getattr(heads[0], name)

    queries = property(lambda self: self._one("queries"), doc="[n × d_k] (one head)")
    keys = property(lambda self: self._one("keys"), doc="[m × d_k] (one head)")
    values = property(lambda self: self._one("values"), doc="[m × d_v] (one head)")
    scores = property(lambda self: self._one("scores"), doc="[n × m] q·kᵀ (one head)")
    scaled = property(lambda self: self._one("scaled"), doc="[n × m] scores × scale (one head)")
    logits = property(lambda self: self._one("logits"), doc="[n × m] scaled ÷ T, -inf masked (one head)")
    weights = property(lambda self: self._one("weights"), doc="[n × m] softmax rows (one head)")
    outputs = property(lambda self: self._one("output"),
                       doc="[n × d_v] the head's output: weights · v, after an intervention's scale or ablation")

    def __repr__(self):
        return (f"<attnlab.Trace: {len(self.tokens)} queries × {len(self.source_tokens)} keys, "
                f"{len(self.heads)} head{'s' if len(self.heads) != 1 else ''}>")

    def _repr_html_(self):
        return "".join(_head_html(h, self.tokens, self.source_tokens, f"head {h.name}: weights")
                       for h in self.heads)


def attend(q, k, v, *, causal: bool = False, temperature: float = 1.0, window: Optional[int] = None,
           scale: Optional[float] = None) -> Trace:
    """softmax(q·kᵀ · scale / T) · v, every step kept: q [n × d_k], k [m × d_k], v [m × d_v].

    causal: query i sees keys up to its position (needs n = m); window w: query i sees
    keys j with |i − j| < w; scale: the scores' factor (default 1/√d_k); temperature T > 0.
    Computed in float64 by the reference engine (the one ``attnlab run`` uses)."""
    return Trace(_attnlab._attend(q, k, v, causal, temperature, window, scale))


def flash(q, k, v, *, causal: bool = False, temperature: float = 1.0, window: Optional[int] = None,
          scale: Optional[float] = None, precision: str = "f32", threads: int = 0) -> _np.ndarray:
    """The fast (tiled, online-softmax) kernel: outputs only, float32.

    q [H × n × d_k], k [H_kv × m × d_k], v [H_kv × m × d_v] (H a multiple of H_kv:
    grouped-query attention), or one head's 2-D arrays; returns [H × n × d_v] (or
    [n × d_v]). precision "bf16" rounds the products' inputs to bfloat16."""
    return _attnlab._flash(q, k, v, causal, temperature, window, scale, precision, threads)


class Scenario:
    """A scenario: tokens, embeddings, heads and mask (docs/scenario-format.md)."""

    def __init__(self, native):
        self._native = native

    @staticmethod
    def load(name_or_path: str) -> "Scenario":
        """A bundled scenario by name (Scenario.names()) or a scenario file by path."""
        return Scenario(_attnlab._load_scenario(name_or_path))

    @staticmethod
    def parse(text: str) -> "Scenario":
        """A scenario from its JSON text."""
        return Scenario(_attnlab._parse_scenario(text))

    @staticmethod
    def names() -> list:
        """The bundled scenarios' names, the default first."""
        return _attnlab._scenario_names()

    name = property(lambda self: self._native.name)
    description = property(lambda self: self._native.description)
    tokens = property(lambda self: self._native.tokens)
    n = property(lambda self: self._native.n)
    m = property(lambda self: self._native.m)
    d_model = property(lambda self: self._native.d_model)

    def to_json(self) -> dict:
        return self._native.to_json()

    def run(self, *, causal: Optional[bool] = None, temperature: Optional[float] = None,
            window: Optional[int] = None, query: Optional[int] = None, mask_tokens: Iterable[int] = (),
            ablate_heads: Iterable[str] = (), scale_heads: Iterable[str] = (),
            kernel: str = "reference") -> Trace:
        """Runs it as ``attnlab run`` does with the same flags: causal, temperature, window
        (0 removes it) and query override the file; mask_tokens, ablate_heads ("H" or
        "H:zero|mean|uniform") and scale_heads ("H:F") are interventions, reported before and
        after in ``trace.intervention``; kernel "tiled" runs the fast kernel (outputs only)."""
        return Trace(_attnlab._run_scenario(self._native, causal, temperature, window, query,
                                            list(mask_tokens), list(ablate_heads), list(scale_heads),
                                            kernel))

    def __repr__(self):
        return f"<attnlab.Scenario {self.name}: {self.n} tokens, d_model {self.d_model}>"


# ---- models -------------------------------------------------------------------------------

class Result(dict):
    """A result as the command's --json prints it (a dict, equal to that JSON), whose fields
    are also attributes: numbers as they are, lists of numbers as NumPy arrays
    (``a.heads`` is ``np.asarray(a["heads"])``), objects as Results."""

    def __getattr__(self, name):
        try:
            value = self[name]
        except KeyError:
            raise AttributeError(f"{name}: not a field of this result; it has {', '.join(self)}") from None
        if isinstance(value, dict):
            return Result(value)
        if isinstance(value, list) and value and _numeric(value):
            return _np.asarray(value, dtype=float)
        return value

    def __dir__(self):
        return list(self) + dir(dict)

    def to_dict(self) -> dict:
        """A plain dict (a copy): exactly what the command's --json prints."""
        return _json.loads(_json.dumps(self))

    def __repr__(self):
        return f"<attnlab.Result: {', '.join(self)}>"


def _numeric(value) -> bool:
    while isinstance(value, list) and value:
        value = value[0]
    return isinstance(value, (int, float)) and not isinstance(value, bool)


# ---- operations described once ----------------------------------------------------------
# Each operation's fields (name, default, help) are listed once in the library
# (operations/request.hpp); these functions take them as keyword arguments with the same
# names and defaults as the command's flags and the HTTP API's body (docs/operations.md).

_OPERATIONS = {d["name"]: d for d in _attnlab._operations()["operations"]}


# The Python type each kind of field takes (the kinds of docs/operations.md).
_KIND_TYPES = {"flag": "bool", "count": "int", "counts": "Union[int, Sequence[int]]", "number": "float",
               "text": "str", "choice": "str", "bytes": "Union[int, str]", "tokens": "Union[str, Sequence[int]]",
               "token": "Union[int, str]", "heads": "Sequence[str]", "choices": "Sequence[str]",
               "sequences": "Sequence[Sequence[int]]"}


class _Operation:
    """Operation `name` as Python takes it, from its description: `positional` fields may be
    given by position, every other field by keyword, each defaulting as the description
    says. A token field takes text or a list of ids under its name (and ids under its ids
    key). The arguments go to the library as one dict, read as JSON by the reader every face
    shares."""

    def __init__(self, name: str, positional: Sequence[str] = ()):
        described = _OPERATIONS[name]
        fields = [f for f in described["fields"] if "python" in f["faces"]]
        params, self._ids_keys = [], {}
        for f in fields:
            default = tuple(f["default"]) if isinstance(f["default"], list) else f["default"]
            if f["name"] in positional:
                kind = _inspect.Parameter.POSITIONAL_OR_KEYWORD
                # A token field may come as its ids instead: the library says when neither came.
                required = f["required"] and f["kind"] != "tokens"
                default = _inspect.Parameter.empty if required else default
            else:
                kind = _inspect.Parameter.KEYWORD_ONLY
            annotation = _KIND_TYPES[f["kind"]]
            if default is None:
                annotation = f"Optional[{annotation}]"
            params.append(_inspect.Parameter(f["name"], kind, default=default, annotation=annotation))
            if f["kind"] == "tokens":
                self._ids_keys[f["name"]] = f["ids"]
        params += [_inspect.Parameter(ids, _inspect.Parameter.KEYWORD_ONLY, default=None,
                                      annotation="Optional[Sequence[int]]") for ids in self._ids_keys.values()]
        params.sort(key=lambda p: p.kind)  # the positional ones first, in the description's order
        self.signature = _inspect.Signature(params)
        self.doc = described["help"] + ".\n\n" + "\n".join(
            f"{f['name']}: {f['help']}" + (f" ({f['unit']})" if f["unit"] else "") for f in fields)

    def arguments(self, *args, **kwargs) -> dict:
        """The arguments as the object the library reads; TypeError for an unknown keyword."""
        body = {}
        for key, value in self.signature.bind(*args, **kwargs).arguments.items():
            if value is None:
                continue
            if key in self._ids_keys and not isinstance(value, str):
                key = self._ids_keys[key]  # a list of ids given where text may go
            body[key] = list(value) if isinstance(value, tuple) else value
        return body

    def described(self, function, method: bool = False):
        """`function` with the operation's signature and help."""
        params = list(self.signature.parameters.values())
        if method:
            params.insert(0, _inspect.Parameter("self", _inspect.Parameter.POSITIONAL_ONLY))
        function.__signature__ = self.signature.replace(
            parameters=params, return_annotation=function.__annotations__.get("return", _inspect.Signature.empty))
        function.__doc__ = self.doc
        return function


def _model_method(name: str, positional: Sequence[str] = ()):
    """Model method for operation `name` ("model attribute" is Model.attribute): the
    operation's keyword arguments, its reply as the command's --json prints it."""
    operation = _Operation(name, positional)

    def method(self, *args, **kwargs) -> dict:
        return Result(self._native.operation(name, operation.arguments(*args, **kwargs)))

    method.__name__ = method.__qualname__ = name.split()[-1]
    return operation.described(method, method=True)


@dataclass(frozen=True)
class HeadScore:
    """A head's detector scores on the sequences it was run on (docs/models.md)."""
    head: str            # "L.H"
    layer: int
    index: int           # the head within its layer
    previous_token: float
    duplicate_token: float
    induction: float
    sink: float          # the mean weight on the first token (an attention sink)


class ModelRun:
    """One forward pass: ``logits`` [n × vocabulary] (with logits="last", the last
    position's alone, [1 × vocabulary]); with capture=["attention"],
    ``attention[l]`` [H × n × n] (head l.h's weights are ``attention[l][h]``); with
    capture=["stream"], ``stream[l]`` {"x_in", "attention", "mlp"} each [n × d_model], and
    ``final_stream``. Arrays are views of the run."""

    def __init__(self, model: "Model", native):
        self.model = model
        self._native = native

    ids = property(lambda self: self._native.ids)
    n = property(lambda self: self._native.n)
    logits = property(lambda self: self._native.logits)
    attention = property(lambda self: self._native.attention)
    stream = property(lambda self: self._native.stream)
    final_stream = property(lambda self: self._native.final_stream)

    @property
    def tokens(self) -> list:
        return self.model.token_texts(self.ids)

    def head(self, name: str) -> _np.ndarray:
        """Head "L.H"'s weights [n × n] (needs capture=["attention"])."""
        layer, head = _head_ref(name)
        if not self.attention:
            raise ValueError('head: the run kept no attention; run with capture=["attention"]')
        return self.attention[layer][head]

    def top_k(self, position: int = -1, k: Optional[int] = None) -> list:
        """The k most probable next tokens at a position (default: the last; k: the run's top_k),
        as (id, token, probability)."""
        return self._native.top_k(position, self._native.top_k_default if k is None else k)

    @property
    def explained(self) -> Optional["Trace"]:
        """With layer and head: that head as a scenario's Trace (every intermediate), as
        `attnlab model run --layer --head` explains it; None otherwise."""
        native = self._native.explained
        return None if native is None else Trace(native)

    def __repr__(self):
        return f"<attnlab.ModelRun: {self.n} tokens>"

    def _repr_html_(self):
        if not self.attention:
            return _html.escape(repr(self))
        t = self.tokens
        return heatmap_html(self.attention[-1][0], t, t, f"head {len(self.attention) - 1}.0: weights")


def _head_ref(name: str):
    parts = str(name).split(".")
    if len(parts) != 2 or not all(p.isdigit() for p in parts):
        raise ValueError(f'head: "{name}" is not a head; write layer.head, e.g. "5.1"')
    return int(parts[0]), int(parts[1])


def _tokens(tokens: Tokens):
    return tokens if isinstance(tokens, str) else [int(t) for t in tokens]


class Model:
    """A model read from a Hugging Face folder or a GGUF file (attnlab.load)."""

    def __init__(self, native):
        self._native = native

    path = property(lambda self: self._native.path)
    config = property(lambda self: self._native.config, doc="the family-neutral config, as `model info --json`")

    def __repr__(self):
        return f"<attnlab.Model {self.path}: {self._native.describe()}>"

    def tokenize(self, text: str) -> list:
        """The text's token ids, as the model's own tokenizer gives them (BOS where it adds one):
        the "ids" of `attnlab model tokenize --json`."""
        return self._native.operation("model tokenize", {"text": text})["ids"]

    info = _model_method("model info")
    export = _model_method("model export")

    def token_texts(self, ids: Sequence[int]) -> list:
        return self._native.token_texts([int(i) for i in ids])

    def run(self, *args, **kwargs) -> "ModelRun":
        return ModelRun(self, self._native.run(_RUN.arguments(*args, **kwargs)))

    def ablate(self, tokens: Tokens, heads: Iterable[str], *,
               capture: Iterable[str] = ("attention",)) -> ModelRun:
        """The run with heads "L.H" zeroed (``attnlab model run --ablate``)."""
        return self.run(tokens, capture=capture, ablate=heads)

    map = _model_method("model map", ("text",))
    survey = _model_method("model survey", ("texts",))
    generate = _model_method("model generate", ("text", "tokens"))
    kv = _model_method("model kv")
    evict = _model_method("model evict", ("text",))
    eval = _model_method("model eval")

    def heads(self, *args, **kwargs) -> list:
        return [HeadScore(f"{h['layer']}.{h['head']}", h["layer"], h["head"], h["previous_token"],
                          h["duplicate_token"], h["induction"], h["sink"])
                for h in self._native.operation("model heads", _HEADS.arguments(*args, **kwargs))["heads"]]

    attribute = _model_method("model attribute", ("text",))
    qk = _model_method("model qk", ("text",))
    circuits = _model_method("model circuits")
    lens = _model_method("model lens", ("text",))
    patch = _model_method("model patch", ("clean", "corrupt"))
    verdict = _model_method("model verdict", ("text",))


_HEADS = _Operation("model heads", ("sequences",))
_HEADS.described(Model.heads, method=True)
Model.heads.__doc__ += "\n\nA list of HeadScore, one per head (L.H), as `model heads --json` scores them."
_RUN = _Operation("model run", ("text",))
_RUN.described(Model.run, method=True)
Model.run.__doc__ += ("\n\nA ModelRun: logits, attention[l] [H × n × n] (capture \"attention\"), stream[l] "
                      "(capture \"stream\"), and with layer and head the head explained as a Trace (explained).")


def load(path: str) -> Model:
    """A model: a Hugging Face folder (config.json, model.safetensors, the tokenizer's files),
    a .gguf file, or ollama:NAME[:TAG]. Nothing is downloaded."""
    return Model(_attnlab._load(str(path)))


_COST = _Operation("cost", positional=("tokens",))
_KV = _Operation("kv", positional=("model",))


@_COST.described
def cost(*args, **kwargs) -> dict:
    return Result(_attnlab._cost(_COST.arguments(*args, **kwargs)))


@_KV.described
def kv(*args, **kwargs) -> dict:
    return Result(_attnlab._kv(_KV.arguments(*args, **kwargs)))


def show(model: Union[str, Model], text: Optional[str] = None, *, port: int = 0):
    """Opens the lab on a model from a notebook: starts ``attnlab serve --model`` (the command
    on PATH, or ATTNLAB_COMMAND) on 127.0.0.1 and returns an IFrame of the page (the URL
    outside IPython), its model panel running `text` first (token ids separated by spaces
    for a model without a tokenizer). The server runs until the Python process ends."""
    import atexit
    import shutil
    import subprocess
    import urllib.parse
    path = model.path if isinstance(model, Model) else str(model)
    command = _os.environ.get("ATTNLAB_COMMAND") or shutil.which("attnlab")
    if not command:
        raise ValueError("show: the attnlab command is not on PATH; set ATTNLAB_COMMAND to build/attnlab")
    process = subprocess.Popen([command, "serve", "--model", path, "--port", str(port)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    url = process.stdout.readline().strip()
    if not url.startswith("http://"):
        process.kill()
        raise ValueError(f"show: attnlab serve did not start: {process.stderr.read().strip()}")
    atexit.register(process.terminate)
    if text:
        url += "#" + urllib.parse.urlencode({"text": text}, quote_via=urllib.parse.quote)
    try:
        from IPython.display import IFrame
        return IFrame(url, width="100%", height=720)
    except ImportError:
        return url


from .survey import survey  # noqa: E402  (it reads Model and load from here)
