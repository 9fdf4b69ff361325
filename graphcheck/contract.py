"""Decoding contracts: the semantic choices an engine's ops make, as one named object.

Two engines that both decode "correctly" can still differ in when a seed
advances, what a row seed is near the modulus, which eos list a request stops
on, or how wide a float band their sampling needs. A ``Contract`` names each of
those choices, so the reference (and the model-agnostic oracle) compute what
the engine under test promises, and the checker compares only what the
contract defines. ``default`` is graphcheck's own contract (docs/decoding-semantics.md);
``fastdeploy`` follows FastDeploy's GPU ops as they are today and
``fastdeploy-xpu`` its XPU ops (the verify window). docs/adapters.md lists
every point with its test.

A leaf: standard library only (the reference, the engine and the checker share it).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

#: ``seed_advance``: when a request's ``infer_seed`` moves on.
#: ``every_step``: by 4(k+1) (NAIVE 4) every step the request runs, whatever the strategy.
#: ``target_match_only``: only TARGET_MATCH verification advances it; GREEDY, TOPP and
#: NAIVE never do (NAIVE samples with the unchanged seed).
SEED_ADVANCES = ("every_step", "target_match_only")
#: ``row_seed``: how output row j's seed derives from ``infer_seed``.
#: ``modular``: ``(infer_seed + 4j) mod M``, always in [0, M).
#: ``int64_wrap``: the sum wraps in int64 and takes C's remainder (sign of the dividend),
#: so within 4(k+1) of M the row seeds come out negative.
ROW_SEEDS = ("modular", "int64_wrap")
#: ``topp_draw``: the TOPP phase-2 draw.
#: ``row_seed``: one number from the row's seed, so the token is a function of the scenario.
#: ``unspecified``: a process-wide generator: only membership in the row's candidates is defined.
TOPP_DRAWS = ("row_seed", "unspecified")
#: ``eos_scope``: ``request``: each request stops on its own eos list; ``batch``: one list for the
#: whole batch, overwritten by each admitted request (the last one admitted wins).
EOS_SCOPES = ("request", "batch")


@dataclass(frozen=True)
class Contract:
    """One decoding contract (see the module docstring; each field's values above).

    ``min_tokens``: eos is banned (its score set to minus infinity before any
    sampling or verify decision) at output row j while ``step_idx + j < min_tokens``.
    ``sampling_eps``: the float band of sampling decisions: a decision whose
    float comparison sits closer than this to its threshold is *ambiguous*
    (float64 arithmetic needs 1e-9; float32 probabilities and running sums about 1e-6).
    ``verify_window``: TOPP verify fallback (0: off): a draft equal to its row's
    second candidate is accepted, with the next ``verify_window`` drafts, when
    each of those equals its own row's top candidate.
    """

    name: str
    seed_advance: str = "every_step"
    row_seed: str = "modular"
    topp_draw: str = "row_seed"
    eos_scope: str = "request"
    min_tokens: int = 0
    sampling_eps: float = 1e-9
    verify_window: int = 0

    def advances_seed(self, verify_strategy: str, naive_mode: bool) -> bool:
        """Whether a running request's ``infer_seed`` moves on in a step of this configuration."""
        if self.seed_advance == "every_step":
            return True
        return verify_strategy == "target_match" and not naive_mode

    def points(self) -> tuple[tuple[str, str], ...]:
        """(field, value) of every choice, for reports and ``graphcheck contracts``."""
        return (
            ("seed_advance", self.seed_advance),
            ("row_seed", self.row_seed),
            ("topp_draw", self.topp_draw),
            ("eos_scope", self.eos_scope),
            ("min_tokens", str(self.min_tokens)),
            ("sampling_eps", f"{self.sampling_eps:g}"),
            ("verify_window", str(self.verify_window)),
        )


DEFAULT = Contract("default")
FASTDEPLOY = Contract(
    "fastdeploy",
    seed_advance="target_match_only",
    row_seed="int64_wrap",
    topp_draw="unspecified",
    eos_scope="batch",
    min_tokens=1,
    sampling_eps=1e-6,
)
FASTDEPLOY_XPU = replace(FASTDEPLOY, name="fastdeploy-xpu", verify_window=2)

CONTRACTS: dict[str, Contract] = {c.name: c for c in (DEFAULT, FASTDEPLOY, FASTDEPLOY_XPU)}
CONTRACT_NAMES = tuple(CONTRACTS)


def contract_named(name: str) -> Contract:
    """The preset called ``name``; KeyError naming the presets otherwise."""
    try:
        return CONTRACTS[name]
    except KeyError:
        raise KeyError(f"unknown contract {name!r}; known: {', '.join(CONTRACT_NAMES)}") from None


__all__ = [
    "CONTRACTS",
    "CONTRACT_NAMES",
    "Contract",
    "DEFAULT",
    "EOS_SCOPES",
    "FASTDEPLOY",
    "FASTDEPLOY_XPU",
    "ROW_SEEDS",
    "SEED_ADVANCES",
    "TOPP_DRAWS",
    "contract_named",
]
