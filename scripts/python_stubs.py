#!/usr/bin/env python3
"""Writes the type stubs of the Python module (src/python/attnlab/__init__.pyi) from the module
itself, so that editors complete every function and keyword: the operations' signatures come
from their one description (docs/operations.md), the rest from the module's own annotations.

    PYTHONPATH=build/python /usr/bin/python3 scripts/python_stubs.py > src/python/attnlab/__init__.pyi

A test (python_stubs_are_current) regenerates them and fails when the committed file differs.
"""
import inspect
import sys

import attnlab

HEADER = '''"""Type stubs of attnlab's Python module, written by scripts/python_stubs.py from the module
(the operations' keywords from their descriptions, docs/operations.md). Do not edit by hand."""
from typing import Any, Iterable, Optional, Sequence, Union

import numpy as np

Tokens = Union[str, Sequence[int]]
Token = Union[int, str]
'''


def annotation_text(annotation) -> str:
    if annotation is inspect.Parameter.empty:
        return ""
    if isinstance(annotation, str):
        return annotation.replace("_np.", "np.")
    return getattr(annotation, "__name__", repr(annotation))


def signature_text(function, drop_self: bool = False) -> str:
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):  # a native function pybind11 does not describe
        return "(self, *args: Any, **kwargs: Any) -> Any" if drop_self else "(*args: Any, **kwargs: Any) -> Any"
    parts, star = [], False
    for p in signature.parameters.values():
        if p.kind == p.KEYWORD_ONLY and not star:
            parts.append("*")
            star = True
        if p.kind == p.VAR_POSITIONAL:
            star = True
        text = ("*" if p.kind == p.VAR_POSITIONAL else "**" if p.kind == p.VAR_KEYWORD else "") + p.name
        if annotation_text(p.annotation):
            text += ": " + annotation_text(p.annotation)
        if p.default is not p.empty:
            text += (" = " if annotation_text(p.annotation) else "=") + repr(p.default)
        parts.append(text)
        if p.kind == p.POSITIONAL_ONLY and p.name == "self":
            parts[-1] = "self"
    returns = annotation_text(signature.return_annotation)
    return f"({', '.join(parts)})" + (f" -> {returns}" if returns else "")


def class_text(name: str, cls) -> str:
    bases = [b.__name__ for b in cls.__bases__ if b is not object]
    lines = [f"class {name}({', '.join(bases)}):" if bases else f"class {name}:"]
    if "__getattr__" in vars(cls):  # a result whose fields are attributes too
        lines.append("    def __getattr__(self, name: str) -> Any: ...")
    members = [(key, value) for key, value in vars(cls).items() if not key.startswith("_") or key == "__init__"]
    if cls.__module__.endswith("_attnlab"):  # native: its attributes, untyped
        members = [(key, None) for key in dir(cls) if not key.startswith("_")]
        for key, _ in members:
            lines.append(f"    {key}: Any")
        return "\n".join(lines if len(lines) > 1 else lines + ["    ..."])
    for key, value in members:
        if isinstance(value, property):
            returns = annotation_text(inspect.signature(value.fget).return_annotation) if value.fget else ""
            lines.append(f"    @property\n    def {key}(self) -> {returns or 'Any'}: ...")
        elif isinstance(value, staticmethod):
            lines.append(f"    @staticmethod\n    def {key}{signature_text(value.__func__)}: ...")
        elif inspect.isfunction(value):
            lines.append(f"    def {key}{signature_text(value)}: ...")
    for key, annotation in getattr(cls, "__annotations__", {}).items():  # a dataclass's fields
        lines.append(f"    {key}: {annotation_text(annotation)}")
    return "\n".join(lines if len(lines) > 1 else lines + ["    ..."])


def main() -> None:
    out = [HEADER]
    for name in attnlab.__all__:
        obj = getattr(attnlab, name)
        if inspect.isclass(obj):
            out.append(class_text(name, obj))
        else:
            out.append(f"def {name}{signature_text(obj)}: ...")
    sys.stdout.write("\n\n".join(out) + "\n")


if __name__ == "__main__":
    main()
