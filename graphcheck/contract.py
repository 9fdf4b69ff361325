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
#: NAIVE never do (NAIVE samples with the unchanged seed). ``none``: never (an engine that has
#: no per-request seed stream, such as one that decodes greedily).
SEED_ADVANCES = ("every_step", "target_match_only", "none")
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
#: ``sampling``: ``request``: each request's temperature, top_p and top_k decide its tokens;
#: ``greedy``: the engine decodes greedily whatever the request asks (the top-scoring token).
SAMPLINGS = ("request", "greedy")
#: ``max_len_token``: the token a request emits when it reaches ``max_dec_len`` without an eos:
#: ``eos`` (FastDeploy's update kernel writes ``eos[0]`` in its place) or ``drawn`` (the token sampled).
MAX_LEN_TOKENS = ("eos", "drawn")
#: ``seed_advance_sum``: how an advancing ``infer_seed`` adds the increment, with ``row_seed``'s two
#: arithmetics: ``modular`` (``(infer_seed + 4(k+1)) mod M``) or ``int64_wrap`` (the int64 sum wraps
#: and C's remainder keeps its sign: within 4(k+1) of M the next seed is hugely negative).
SEED_ADVANCE_SUMS = ROW_SEEDS
#: ``window_second``: the second candidate the TOPP verify window compares a draft with.
#: ``ranked``: the row's second-ranked token; ``stored``: as FastDeploy's ``top_p_candidates`` stores it,
#: 0 past a row's cut, so a row with a single candidate has second candidate 0.
WINDOW_SECONDS = ("ranked", "stored")
#: ``accept_all_eos``: an eos draft under the accept_all policy: ``emit`` (emitted, the request stops)
#: or ``replace`` (FastDeploy's dummy-run guard: the draft becomes token ``ACCEPT_ALL_EOS_STANDIN``).
ACCEPT_ALL_EOS = ("emit", "replace")
#: The token FastDeploy's accept_all guard emits in place of an eos draft.
ACCEPT_ALL_EOS_STANDIN = 5
#: ``naive_params``: where NAIVE sampling reads a request's top_p, top_k and seed: ``slot`` (its own
#: slot) or ``packed_row`` (FastDeploy's sampler: slot r for packed output row r, which is another
#: slot whenever a lower slot is free; a free slot holds the idle values top_p 1, top_k 0, seed 0).
#: Temperature is always the request's own.
NAIVE_PARAMS = ("slot", "packed_row")
#: ``covering_eos``: the ``min_tokens`` ban of a request whose eos ids cover the whole vocabulary:
#: ``unbanned`` (nothing is banned) or ``uniform`` (every token is banned alike, so the row's
#: probabilities are uniform and the best token is 0).
COVERING_EOS = ("unbanned", "uniform")
#: ``eos_lengths``: ``any``: the requests of a scenario may have eos lists of different lengths;
#: ``uniform``: all have one length (FastDeploy's eos buffer has one shape), which scenarios are fitted to.
EOS_LENGTHS = ("any", "uniform")
#: ``reasoning``: ``status``: a request's reasoning status (its script) decides whether its drafts are
#: verified (status 1 skips them, as FastDeploy's thinking phase does); ``none``: the engine has no such
#: status, so scenarios are fitted without reasoning scripts.
REASONINGS = ("status", "none")


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
    sampling: str = "request"
    max_len_token: str = "eos"
    seed_advance_sum: str = "modular"
    window_second: str = "ranked"
    accept_all_eos: str = "emit"
    naive_params: str = "slot"
    covering_eos: str = "unbanned"
    eos_lengths: str = "any"
    reasoning: str = "status"

    def advances_seed(self, verify_strategy: str, naive_mode: bool) -> bool:
        """Whether a running request's ``infer_seed`` moves on in a step of this configuration."""
        if self.seed_advance == "none":
            return False
        if self.seed_advance == "every_step":
            return True
        return verify_strategy == "target_match" and not naive_mode

    def top_k_of(self, top_k: int) -> int:
        """The top_k a request with ``top_k`` samples with: 1 (the best token) when sampling is greedy."""
        return 1 if self.sampling == "greedy" else top_k

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
            ("sampling", self.sampling),
            ("max_len_token", self.max_len_token),
            ("seed_advance_sum", self.seed_advance_sum),
            ("window_second", self.window_second),
            ("accept_all_eos", self.accept_all_eos),
            ("naive_params", self.naive_params),
            ("covering_eos", self.covering_eos),
            ("eos_lengths", self.eos_lengths),
            ("reasoning", self.reasoning),
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
    seed_advance_sum="int64_wrap",
    accept_all_eos="replace",
    naive_params="packed_row",
    covering_eos="uniform",
    eos_lengths="uniform",
)
FASTDEPLOY_XPU = replace(FASTDEPLOY, name="fastdeploy-xpu", verify_window=2, window_second="stored")
#: Hugging Face transformers' continuous batching, decoding greedily: no seed stream, each request
#: stops on its own eos list, float32 scores (``graphcheck.engines.hf_cb``).
HF_CB = Contract("hf-cb", seed_advance="none", sampling="greedy", sampling_eps=1e-6, max_len_token="drawn")
#: vLLM's greedy speculative decoding: drafts accepted while they are the target's top token, then one more;
#: a request stops on its stop token (kept) or at max_tokens (the token drawn).
VLLM = Contract(
    "vllm", seed_advance="none", sampling="greedy", sampling_eps=1e-6, max_len_token="drawn", reasoning="none"
)

CONTRACTS: dict[str, Contract] = {c.name: c for c in (DEFAULT, FASTDEPLOY, FASTDEPLOY_XPU, HF_CB, VLLM)}
CONTRACT_NAMES = tuple(CONTRACTS)
#: The presets graphcheck's own engine implements (and an engine that declares nothing is taken to):
#: ``hf-cb`` and ``vllm`` are one engine's own each.
GENERAL_CONTRACTS = tuple(name for name in CONTRACT_NAMES if name not in (HF_CB.name, VLLM.name))


def contract_named(name: str) -> Contract:
    """The preset called ``name``; KeyError naming the presets otherwise."""
    try:
        return CONTRACTS[name]
    except KeyError:
        raise KeyError(f"unknown contract {name!r}; known: {', '.join(CONTRACT_NAMES)}") from None


__all__ = [
    "ACCEPT_ALL_EOS",
    "ACCEPT_ALL_EOS_STANDIN",
    "COVERING_EOS",
    "CONTRACTS",
    "CONTRACT_NAMES",
    "Contract",
    "DEFAULT",
    "EOS_LENGTHS",
    "EOS_SCOPES",
    "FASTDEPLOY",
    "FASTDEPLOY_XPU",
    "GENERAL_CONTRACTS",
    "HF_CB",
    "MAX_LEN_TOKENS",
    "NAIVE_PARAMS",
    "REASONINGS",
    "SAMPLINGS",
    "ROW_SEEDS",
    "SEED_ADVANCES",
    "SEED_ADVANCE_SUMS",
    "TOPP_DRAWS",
    "VLLM",
    "WINDOW_SECONDS",
    "contract_named",
]
