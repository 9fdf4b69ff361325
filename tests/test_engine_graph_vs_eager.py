"""Graph replay against eager execution, bit for bit: step results and buffer state.

After every step the per-slot state buffers must be identical, the KV caches
identical outside the sink block, and the packed scratch identical over the
real token rows. Every graph's static inputs must still be the engine's
current, live buffers.
"""

from __future__ import annotations

import pytest

from _engine_scenarios import EXTRA, SCOPES, demo, lockstep, run_engine, with_scope
from backends.engine import Engine
from reference import make_weights

torch = pytest.importorskip("torch")


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


CASES = [(f"demo-{m}", s) for m in ("topp", "naive") for s in SCOPES] + [
    (name, s) for name in ("buckets", "small_seqs", "eager_above") for s in SCOPES
]


@pytest.mark.parametrize("name,scope", CASES)
def test_graph_matches_eager_bit_for_bit(name, scope):
    base = demo(name.removeprefix("demo-")) if name.startswith("demo-") else EXTRA[name]()
    assert lockstep(with_scope(base, scope)) > 0


def test_static_input_table_names_the_engine_buffers():
    scenario = with_scope(EXTRA["buckets"](), "step")
    engine = Engine(scenario.config, make_weights(scenario.config))
    names = {inp.name for inp in engine.graphs[8].target.static_inputs}
    for expected in ("infer_seed", "seq_lens_this_time", "block_tables", "k_cache", "draft_k_cache",
                     "accept_override", "weights.embed", "cu_seqlens_out"):
        assert expected in names


def test_memory_is_flat_across_replays():
    scenario = with_scope(EXTRA["buckets"](), "forward")
    engine = Engine(scenario.config, make_weights(scenario.config))
    sizes = []
    run_engine(engine, scenario, on_step=lambda t: sizes.append(engine.memory_bytes()))
    assert len(set(sizes)) == 1
