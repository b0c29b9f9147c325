"""`model kv --report OUT.md`: the measure written as Markdown to share, the same report the
reply carries (the machine's available memory aside, read again when each is written)."""
import os
import subprocess

import attnlab
from conftest import FIXTURES, ROOT


def without_memory(report):
    return [line for line in report.splitlines() if not line.startswith("- machine:") and "available" not in line]


def test_the_report_file_is_the_replys_report(tmp_path, cli):
    path, out = FIXTURES / "llama-f32", tmp_path / "kv.md"
    reply = cli("model", "kv", path, "--context", "4,8", "--report", out, "--json")
    written = out.read_text()
    assert written.startswith(f"# The KV cache of {path}, measured\n")
    assert "| 8 | 2 KiB |" in written  # 2 layers × 2 × 2 KV heads × 8 × 8 tokens × 4 bytes
    assert "- machine: " in written and "cores" in written
    assert without_memory(written) == without_memory(reply["report"])
    assert attnlab.load(str(path)).kv(context=[4])["report"].startswith(f"# The KV cache of {path}")
    done = subprocess.run([os.environ.get("ATTNLAB_CLI", str(ROOT / "build" / "attnlab")), "model", "kv", str(path), "--context", "4", "--report",
                           str(tmp_path / "missing" / "kv.md")], capture_output=True, text=True)
    assert done.returncode == 2 and "kv.md" in done.stderr
