"""attnlab.survey on a Dask cluster of worker processes on 127.0.0.1 (Debian's
python3-distributed): the same survey as the local run, bit for bit; and with a worker killed
while shards are running, the survey still completes with the same numbers (its shards run again
elsewhere) and no shard counted twice (a double count would change every sum)."""
import json
import os
import signal
import threading
import time

import pytest

from test_long_context import make_llama

distributed = pytest.importorskip("distributed")


def corpus(path, documents=32, length=400):
    import numpy as np
    r = np.random.RandomState(9)
    path.write_text("".join(json.dumps({"ids": [int(i) for i in r.randint(0, 50, length)]}) + "\n"
                            for _ in range(documents)))


def finder_survey(path):
    """The survey inside a head finder's page (the JSON in its script element)."""
    import re
    page = path.read_text()
    data = re.search(r'<script id="survey-data" type="application/json">(.*?)</script>', page, re.S)[1]
    return json.loads(data)  # JSON reads "<\/" as "</"


def without_shards(result):
    out = dict(result)
    out.pop("shards")
    return out


@pytest.fixture(scope="module")
def cluster():
    c = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                 dashboard_address=None, silence_logs=50)
    client = distributed.Client(c)
    yield client
    client.close()
    c.close()


def test_a_cluster_gives_the_local_survey(tmp_path, cluster):
    import attnlab
    folder = make_llama(tmp_path / "llama", positions=512)
    corpus(tmp_path / "corpus.jsonl", documents=6, length=120)
    local = attnlab.survey(str(folder), tmp_path / "corpus.jsonl", max_tokens=64, html=tmp_path / "local.html")
    remote = attnlab.survey(str(folder), tmp_path / "corpus.jsonl", client=cluster, shards=5, max_tokens=64,
                            html=tmp_path / "remote.html")
    assert remote["shards"] == 5
    assert without_shards(remote) == without_shards(local)
    # the head finder, written on this machine with the merged survey inside, as --html writes it
    for name, survey in (("local.html", local), ("remote.html", remote)):
        assert finder_survey(tmp_path / name) == json.loads(json.dumps(dict(survey))), name
    # a list of texts: sent to the workers, which write their own copy
    docs = [json.loads(line) for line in (tmp_path / "corpus.jsonl").read_text().splitlines()]
    listed = attnlab.survey(str(folder), docs, client=cluster, shards=3, max_tokens=64)
    assert without_shards(listed)["heads"] == without_shards(local)["heads"]
    # from a shell: python3 -m attnlab survey ... --scheduler tcp://...
    import subprocess
    import sys
    shell = subprocess.run([sys.executable, "-m", "attnlab", "survey", str(folder), str(tmp_path / "corpus.jsonl"),
                            "--scheduler", cluster.scheduler_info()["address"], "--max-tokens", "64", "--shards", "2",
                            "--html", str(tmp_path / "shell.html"), "--json"],
                           capture_output=True, text=True, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert shell.returncode == 0, shell.stderr
    from_shell = json.loads(shell.stdout)
    assert from_shell["shards"] == 2 and without_shards(from_shell) == without_shards(local)
    assert finder_survey(tmp_path / "shell.html") == from_shell
    # its options are the description's: a flag the survey does not have is refused
    wrong = subprocess.run([sys.executable, "-m", "attnlab", "survey", str(folder), str(tmp_path / "corpus.jsonl"),
                            "--max-tokens", "64", "--partial"], capture_output=True, text=True,
                           env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert wrong.returncode == 2 and "--partial" in wrong.stderr


def test_a_worker_killed_mid_run_costs_only_its_shards(tmp_path, cluster):
    import attnlab
    folder = make_llama(tmp_path / "llama", positions=512)
    corpus(tmp_path / "corpus.jsonl")
    local = attnlab.survey(str(folder), tmp_path / "corpus.jsonl", max_tokens=400)
    done = {}

    def run():
        done["result"] = attnlab.survey(str(folder), tmp_path / "corpus.jsonl", client=cluster, shards=16,
                                        max_tokens=400)

    thread = threading.Thread(target=run)
    thread.start()
    finished = lambda dask_scheduler: sum(1 for t in dask_scheduler.tasks.values()  # noqa: E731
                                          if t.key.startswith("attnlab-survey") and t.state == "memory")
    deadline = time.time() + 120
    while cluster.run_on_scheduler(finished) < 1 and time.time() < deadline:
        time.sleep(0.02)
    busy = [worker for worker, keys in cluster.processing().items() if keys]
    assert busy and thread.is_alive(), "the survey ended before a worker could be lost mid-run"
    pid = cluster.run(os.getpid, workers=[busy[0]])[busy[0]]
    os.kill(pid, signal.SIGKILL)
    thread.join(timeout=300)
    assert not thread.is_alive()
    assert without_shards(done["result"]) == without_shards(local)
