"""Injectable faults: named bugs that reproduce real graph-capture bug classes.

A fault is a switch on one of the engine's real code paths, never a separate
fake engine: the engine receives a set of names at construction
(``Engine(..., faults=[...])``, ``graphcheck run --inject NAME``) and the code
path that the bug lived on asks ``fault_on(engine.faults, NAME)`` through the
constants below. With no fault on, every switch takes the correct branch.

Each :class:`Fault` names its bug class (the number in ``spec/bug-classes.md``),
the real case it mirrors and the divergence graphcheck must report first.
``FAULTS`` is the registry ``graphcheck faults`` lists.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import AbstractSet, Iterable

#: Bug classes are numbered 1..NUM_BUG_CLASSES in spec/bug-classes.md.
NUM_BUG_CLASSES = 17

# Fault names: the code paths test these constants, never string literals.
REBIND_OUTPUT_OFFSETS = "rebind-output-offsets"
STALE_PADDING_ROWS = "stale-padding-rows"
NAIVE_SEED_FROZEN = "naive-seed-frozen"
CLONE_HELD_PER_STEP = "clone-held-per-step"


@dataclass(frozen=True)
class Fault:
    """One injectable bug.

    ``summary``: what the switch breaks and where in the engine;
    ``mirrors``: the shipped bug it reproduces (project #issue/PR);
    ``signal``: the first divergence graphcheck reports (kind and tensor).
    """

    name: str
    bug_class: int
    summary: str
    mirrors: str
    signal: str


_CATALOG = (
    Fault(
        REBIND_OUTPUT_OFFSETS,
        1,
        "eager pre-process (pack_target_inputs outside a graph: eager steps, and before each replay in "
        "scopes forward / forward_sampling) computes cu_seqlens_out and batch_ids_out into fresh tensors "
        "and REBINDS the buffer fields to them instead of copying into the captured storage",
        "FastDeploy #7864 / #8061: cu_seqlens_q_output and batch_id_per_token_output assigned, not copy_'d",
        "address (cu_seqlens_out) at the first replay after an eager step; token where a graph reads the "
        "stale offsets (scope forward_sampling: its sampling and verify; scope forward never reads them and "
        "scope step packs its own), at that replay or once a request beyond slot 0 runs",
    ),
    Fault(
        STALE_PADDING_ROWS,
        3,
        "pack_target_inputs (eager before a replay, or inside the step graph) resets only the token ids, "
        "positions and output token index of the padding rows between the real token count and the "
        "bucket's token capacity; their batch ids, KV slot mapping and output-row owners keep what an "
        "earlier, larger batch wrote, so padded rows write KV into real requests' cache rows",
        "sglang #10892 / #22958 / #25529, vllm-ascend #15461: rows between the real batch and the bucket "
        "keep an earlier batch's data (the fix pattern, e.g. gLLM #174: fill slot_mapping[real:padded] "
        "with a dummy slot)",
        "token (eager vs graph) at the first replay with fewer real tokens than an earlier pack whose "
        "stale rows map to KV of a request still decoding",
    ),
    Fault(
        NAIVE_SEED_FROZEN,
        8,
        "build_sampling_params skips the in-place infer_seed advance in NAIVE mode (eager and graph "
        "paths alike): every step reuses the same random numbers",
        "FastDeploy #8061 review: the seed increment moved into the MTP op and the NAIVE path lost it",
        "seed (infer_seed) against the reference at the first NAIVE step a request runs",
    ),
    Fault(
        CLONE_HELD_PER_STEP,
        14,
        "every graph step clones seq_lens_this_time before the replay and the engine keeps each clone "
        "(engine.kept_inputs), so live memory grows by one buffer per replay",
        "FastDeploy #8061 (per-step clone of last_seq_lens_this_time kept alive); llama.cpp #25835 "
        "(+7.96 MiB per request)",
        "memory (memory_bytes) at the second graph replay",
    ),
)

#: name -> Fault, the registry ``graphcheck faults`` lists.
FAULTS: dict[str, Fault] = {f.name: f for f in _CATALOG}


class UnknownFault(ValueError):
    pass


def check_faults(names: Iterable[str]) -> frozenset[str]:
    """Validate fault names against the registry."""
    chosen = frozenset(names)
    unknown = sorted(chosen - FAULTS.keys())
    if unknown:
        known = ", ".join(sorted(FAULTS)) or "none yet"
        raise UnknownFault(f"unknown fault(s) {', '.join(unknown)}; known: {known}")
    return chosen


def fault_on(faults: AbstractSet[str], name: str) -> bool:
    """Whether the registered fault ``name`` is switched on in ``faults``."""
    if name not in FAULTS:  # a typo in engine code must not silently disable a switch
        raise UnknownFault(f"engine code asked for unregistered fault {name!r}")
    return name in faults
