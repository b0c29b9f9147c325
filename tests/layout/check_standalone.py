#!/usr/bin/env python3
"""The repository stands alone: no file a user or contributor reads sends them to a
document they do not have. Fails when a file under src/, include/, web/, scenarios/,
docs/ or the README mentions "seed 000"-style names, "../shared", DESIGN.md, or an issue
number ("issue 6"): name the doc page (docs/...), the scenario or the paper instead.

Usage: check_standalone.py REPO_ROOT      exit 0 when nothing refers outside the repository.
"""
import pathlib
import re
import sys

FORBIDDEN = re.compile(r"seed\s*0\d\d|\.\./shared|DESIGN\.md|\bissues?\s*#?\d+", re.I)
PLACES = ["src", "include", "web", "scenarios", "docs", "README.md"]
TEXT = {".cpp", ".hpp", ".h", ".js", ".mjs", ".html", ".css", ".json", ".md", ".txt", ".cmake", ".svg"}


def files(root):
    for place in PLACES:
        path = root / place
        if path.is_file():
            yield path
        elif path.is_dir():
            yield from (p for p in sorted(path.rglob("*")) if p.is_file() and p.suffix in TEXT)


def problems(root):
    found = []
    for path in files(root):
        for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            for match in FORBIDDEN.finditer(line):
                found.append(f"{path.relative_to(root)}:{number}: \"{match.group(0)}\" refers to a document "
                             "outside the repository; name the doc page, the scenario or the paper instead")
    return found


if __name__ == "__main__":
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    bad = problems(root)
    for line in bad:
        print(line)
    print(f"stand-alone: {len(bad)} reference(s) outside the repository" if bad
          else "stand-alone: nothing refers outside the repository")
    sys.exit(1 if bad else 0)
