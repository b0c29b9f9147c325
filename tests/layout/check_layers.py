#!/usr/bin/env python3
"""attnlab's layers link downward only: this check fails on an #include that runs up.

The order, low to high, written once here (docs/architecture.md draws it):
    core < kernels < model < scenario < analysis < report < operations < faces (cli, server, wasm, python)
A file under src/<layer>/ or include/attnlab/<layer>/ may include "attnlab/<lower or same
layer>/...". Faces never include each other, except that the CLI may start the server.
A source may include a private header of its own folder ("simd.hpp"), never one of
another folder ("../kernels/kernel_impl.hpp").

Usage: check_layers.py REPO_ROOT      exit 0 when every include respects the order.
"""
import pathlib
import re
import sys

ORDER = ["core", "kernels", "model", "scenario", "analysis", "report", "operations"]
FACES = {"cli", "server", "wasm", "python"}
FACE_MAY_INCLUDE = {"cli": {"server"}}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def rank(layer):
    return len(ORDER) if layer in FACES else ORDER.index(layer)


def layer_of(path, root):
    rel = path.relative_to(root).parts
    if rel[0] == "src":
        return rel[1]
    if rel[:2] == ("include", "attnlab"):
        return rel[2]
    return None


def problems(root):
    found = []
    files = [p for top in ("src", "include/attnlab") for p in (root / top).rglob("*") if p.suffix in (".cpp", ".hpp")]
    for path in sorted(files):
        layer = layer_of(path, root)
        if layer not in ORDER and layer not in FACES:
            found.append(f"{path.relative_to(root)}: folder '{layer}' is not a layer ({', '.join(ORDER + sorted(FACES))})")
            continue
        for target in INCLUDE.findall(path.read_text(encoding="utf-8")):
            where = f"{path.relative_to(root)} (layer {layer}) includes \"{target}\""
            if target.startswith("../") or "/../" in target:
                found.append(f"{where}: a private header of another folder; make it public under include/attnlab/")
                continue
            parts = target.split("/")
            if parts[0] != "attnlab":
                continue  # a private header of this folder, or a generated one
            if len(parts) != 3:
                found.append(f"{where}: public headers live at attnlab/<layer>/<name>.hpp")
                continue
            other = parts[1]
            if other not in ORDER and other not in FACES:
                found.append(f"{where}: '{other}' is not a layer")
            elif other in FACES and layer in FACES and other != layer and other not in FACE_MAY_INCLUDE.get(layer, set()):
                found.append(f"{where}: faces do not call each other")
            elif other in FACES and layer not in FACES:
                found.append(f"{where}: a layer never includes a face")
            elif rank(other) > rank(layer):
                found.append(f"{where}: '{other}' is above '{layer}' (order: {' < '.join(ORDER)} < faces)")
            elif not (root / "include" / target).exists():
                found.append(f"{where}: no such header")
    return found


if __name__ == "__main__":
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    bad = problems(root)
    for line in bad:
        print(line)
    print(f"layers: {len(bad)} include(s) out of order" if bad else "layers: every include runs downward")
    sys.exit(1 if bad else 0)
