"""A traced generation from Python (Model.generate(..., trace=True)): the command's reply, and
its last step's weights are the forward's attention row at that position."""
import numpy as np

import attnlab
from conftest import FIXTURES


def test_the_trace_is_the_commands_and_its_last_step_is_the_runs_row(cli):
    path = FIXTURES / "llama-f32"
    m = attnlab.load(str(path))
    traced = m.generate(ids=[1, 7, 19, 4], tokens=5, trace=True, alternatives=3)
    assert traced == cli("model", "generate", path, "--ids", "1,7,19,4", "--tokens", "5", "--trace",
                         "--alternatives", "3", "--json")
    last = traced["generated"][-1]
    run = m.run(ids=traced["ids"], capture=["attention"])
    position = last["position"]
    assert position == len(traced["ids"]) - 2
    for layer in range(len(last["attention"])):
        expected = run.attention[layer][:, position, :position + 1]
        assert np.allclose(np.array(last["attention"][layer]), expected, atol=1e-5)
    assert [a["id"] for a in last["alternatives"]][0] == last["id"]
    assert traced["cache"]["kv_heads"] == 2 and last["cache_bytes"] == traced["cache"]["bytes_per_token"] * (position + 2)


def test_a_q8_0_cache_holds_llama_cpps_blocks_and_moves_the_trace_little():
    """The cache in q8_0: each row of head_dim values is ⌈head_dim / 32⌉ blocks of an f16 scale
    and 32 int8 (34 bytes); its weights stay near the f32 cache's."""
    m = attnlab.load(str(FIXTURES / "llama-f32"))
    exact = m.generate(ids=[1, 7, 19, 4], tokens=5, trace=True)
    q8 = m.generate(ids=[1, 7, 19, 4], tokens=5, trace=True, cache="q8_0")
    c = q8["cache"]
    assert c["dtype"] == "q8_0"
    assert c["bytes_per_token"] == 2 * c["layers"] * c["kv_heads"] * -(-c["head_dim"] // 32) * 34
    for a, b in zip(exact["generated"], q8["generated"]):
        assert np.allclose(np.array(a["attention"]), np.array(b["attention"]), atol=0.05)
