"""Graph replay against eager execution, bit for bit: step results and buffer state.

After every step the per-slot state buffers must be identical, the KV caches
identical outside the sink block, and the packed scratch identical over the
real token rows. Every graph's static inputs must still be the engine's
current, live buffers.
"""

from __future__ import annotations

import pytest

from graphcheck.capture.devices import resolve
from graphcheck.check.threads import single_threaded

from _engine_scenarios import (
    LOCKSTEP_CASES,
    assert_reads_named_buffers,
    engine_for,
    lockstep,
    memory_per_step,
    scenario_for,
)
from _layers import fast_first

torch = pytest.importorskip("torch")


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    with single_threaded(resolve("cpu")):
        yield


@pytest.mark.parametrize("name,scope", fast_first(LOCKSTEP_CASES, 6))
def test_graph_matches_eager_bit_for_bit(name, scope):
    assert lockstep(scenario_for(name, scope)) > 0


def test_static_input_table_names_the_engine_buffers():
    _, engine = engine_for("buckets", "step")
    assert_reads_named_buffers(engine)


def test_memory_is_flat_across_replays():
    scenario, engine = engine_for("buckets", "forward")
    assert len(set(memory_per_step(engine, scenario))) == 1
