"""Request strategies are memoised on the config fields they read (``_request_view``): they must read no other."""

from __future__ import annotations

import dataclasses
from typing import Any

from hypothesis import HealthCheck, given, settings

from graphcheck.scenario import EngineConfig
from graphcheck.strategies import _request_view, request_scripts, request_specs

#: What a request strategy may read of its config: the fields of the view and properties made of them.
ALLOWED = {
    "vocab_size",
    "max_model_len",
    "num_speculative_tokens",
    "naive_mode",
    "tokens_per_request",
    "seed_increment",
    "contract",  # its eos_lengths (one eos length per script under fastdeploy)
}


class RecordingConfig:
    """An EngineConfig that notes every attribute read of it."""

    def __init__(self, config: EngineConfig) -> None:
        self._config = config
        self.read: set[str] = set()

    def __getattr__(self, name: str) -> Any:
        self.read.add(name)
        return getattr(self._config, name)


def test_the_view_names_only_request_fields() -> None:
    config = EngineConfig(vocab_size=59, max_model_len=96, num_speculative_tokens=2)
    changed = dataclasses.replace(config, max_num_seqs=1, capture_sizes=(1,), block_size=4, model_seed=7)
    assert _request_view(config) == _request_view(changed)


def test_request_strategies_read_only_their_view_of_the_config() -> None:
    # A view no other test uses, so the memoised strategies are built here, from the recording config.
    config = RecordingConfig(EngineConfig(vocab_size=61, max_model_len=104, num_speculative_tokens=3))
    drawn = 0

    @settings(max_examples=25, database=None, deadline=None, suppress_health_check=list(HealthCheck))
    @given(request_scripts(config, 10), request_specs(config, 10, "r"))  # type: ignore[arg-type]
    def draw(script: Any, spec: Any) -> None:
        nonlocal drawn
        drawn += 1

    draw()
    assert drawn and config.read, "nothing was drawn from the config"
    assert config.read <= ALLOWED, f"read outside _request_view: {sorted(config.read - ALLOWED)}"
