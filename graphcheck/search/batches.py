"""Scenarios in batches that share one engine configuration.

Building and capturing an engine pair costs more than most scenarios' steps,
and a suite's strategy draws a new configuration with every scenario. A fuzzed
example is therefore a *batch*: one scenario drawn from the strategy, then
``size - 1`` more from the same strategy, each :func:`rebase`-d onto the first
one's configuration, so that the batch runs on one pair of pooled engines
(``graphcheck.check.pool``).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from hypothesis import strategies as st

from graphcheck.scenario import AcceptOverride, EngineConfig, RequestSpec, Scenario, ScenarioError, validate


def _fold(tokens: tuple[int, ...], vocab: int) -> tuple[int, ...]:
    return tuple(t % vocab for t in tokens)


def _rebase_request(spec: RequestSpec, config: EngineConfig) -> RequestSpec:
    """``spec`` within ``config``'s limits: prompt and max_dec_len within the room, ids within the vocab."""
    room = config.max_model_len - config.tokens_per_request  # prompt + generated tokens (scenario validation)
    vocab = config.vocab_size
    prompt = _fold(spec.prompt[: max(1, room - 1)], vocab)
    return dataclasses.replace(
        spec,
        prompt=prompt,
        max_dec_len=max(1, min(spec.max_dec_len, room - len(prompt))),
        eos_token_ids=_fold(spec.eos_token_ids, vocab),
        top_k=min(spec.top_k, vocab),
    )


def rebase(scenario: Scenario, config: EngineConfig) -> Scenario | None:
    """``scenario`` on ``config``: what the new config makes invalid is clamped, then it is re-validated.

    Accept overrides are clamped to k, prompts cut to the room (``max_model_len - k - 1``
    less one generated token) with max_dec_len within what is left, token ids folded
    into the vocab, ``top_k`` clamped to it. None when the result is still invalid
    (``graphcheck.scenario.validate``; its memory limit included).
    """
    k = config.num_speculative_tokens
    rebased = dataclasses.replace(
        scenario,
        config=config,
        requests=tuple(_rebase_request(r, config) for r in scenario.requests),
        accepts=tuple(AcceptOverride(a.step, a.request_id, min(a.accepted, k)) for a in scenario.accepts),
    )
    try:
        return validate(rebased)
    except ScenarioError:
        return None


def batch_of(drawn: list[Scenario]) -> tuple[Scenario, ...]:
    """The first of ``drawn``, then each other rebased onto its config (those that stay invalid dropped)."""
    first, others = drawn[0], drawn[1:]
    rebased = (rebase(s, first.config) for s in others)
    return (first, *(s for s in rebased if s is not None))


def batches(strategy: Any, size: int) -> Any:
    """A strategy of batches: ``size`` scenarios of ``strategy`` on the first one's config.

    Every batch is full (Hypothesis would draw lists of a few elements on average,
    whatever their maximum), since every scenario a batch holds shares its capture.
    Shrinking cannot delete scenarios from it, so it shrinks each towards the
    suite's simplest scenario; a search skips a scenario that already passed, so
    the minimal passing scenarios a shrunk batch keeps cost only their drawing.
    """
    if size < 1:
        raise ValueError(f"batches: size must be at least 1, got {size}")
    return st.lists(strategy, min_size=size, max_size=size).map(batch_of)


__all__ = ["batch_of", "batches", "rebase"]
