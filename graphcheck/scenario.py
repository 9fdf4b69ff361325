"""The shared vocabulary: a Scenario is an engine configuration plus scripts.

A Scenario says everything needed to decode deterministically: the engine
configuration, which requests arrive when (with their prompts and sampling
parameters), when they change reasoning status or are aborted, and which
accept counts the harness forces on which steps.

This module is a leaf: it imports only the standard library, so that
``reference/`` and ``backends/`` can share it without depending on the rest of
the harness. Everything is a frozen dataclass; ``Scenario.from_json`` and
``Scenario.to_json`` round-trip losslessly, and ``from_dict`` turns every
malformed or out-of-range field into one ``ScenarioError`` that names the
field and the allowed range.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from typing import Any, Iterable, Mapping, Sequence

FORMAT_VERSION = 1

#: Seeds live in [0, SEED_MODULUS); every advance is taken modulo this bound.
SEED_MODULUS = 2**63 - 2

VERIFY_STRATEGIES = ("greedy", "target_match", "topp")
ACCEPT_POLICIES = ("normal", "accept_all", "reject_all")
GRAPH_SCOPES = ("forward", "forward_sampling", "step")

MAX_NUM_SEQS = 256
MAX_CAPTURE_SIZE = 512
MAX_SPECULATIVE_TOKENS = 5
MAX_VOCAB = 4096
MAX_HIDDEN = 128
MAX_MODEL_LEN = 8192
MAX_STEPS = 10_000
MAX_EOS_IDS = 8
MAX_CANDIDATE_LEN = 10
TEMPERATURE_RANGE = (0.05, 10.0)


class ScenarioError(ValueError):
    """A scenario field is missing, malformed or out of range.

    ``field`` is a path such as ``requests[2].top_p``; the message names the
    allowed range and the value that was given.
    """

    def __init__(self, field_path: str, message: str):
        field_path = field_path or "<scenario>"
        super().__init__(f"{field_path}: {message}")
        self.field = field_path
        self.reason = message


@dataclass(frozen=True)
class EngineConfig:
    """Static engine configuration; fixed for the lifetime of one engine."""

    max_num_seqs: int = 4
    num_speculative_tokens: int = 3
    num_model_steps: int = 1
    capture_sizes: tuple[int, ...] = (1, 2, 4)
    vocab_size: int = 64
    hidden_size: int = 16
    block_size: int = 8
    max_model_len: int = 128
    verify_strategy: str = "target_match"
    accept_policy: str = "normal"
    max_candidate_len: int = 5
    naive_mode: bool = False
    graph_scope: str = "step"
    model_seed: int = 0

    @property
    def tokens_per_request(self) -> int:
        """Padded token slots per request in one decode step (k + 1)."""
        return self.num_speculative_tokens + 1

    @property
    def max_padded_reqs(self) -> int:
        """Request slots every per-slot buffer holds: room for the largest bucket plus one."""
        largest = max(self.capture_sizes, default=0)
        return max(self.max_num_seqs, largest) + 1

    @property
    def seed_increment(self) -> int:
        """How far ``infer_seed`` advances per step: 4 per possible output token."""
        return 4 if self.naive_mode else 4 * self.tokens_per_request


@dataclass(frozen=True)
class ReasoningChange:
    """From ``step`` on, the request's reasoning_status is ``status`` (0..3)."""

    step: int
    status: int


@dataclass(frozen=True)
class RequestSpec:
    """One request of the script: when it arrives and how it decodes."""

    request_id: str
    arrival_step: int
    prompt: tuple[int, ...]
    max_dec_len: int
    eos_token_ids: tuple[int, ...]
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    seed: int = 0
    reasoning: tuple[ReasoningChange, ...] = ()
    abort_step: int | None = None


@dataclass(frozen=True)
class AcceptOverride:
    """At ``step``, request ``request_id`` accepts exactly ``accepted`` drafts (0..k)."""

    step: int
    request_id: str
    accepted: int


@dataclass(frozen=True)
class Scenario:
    """Engine configuration + request script + accept script + step count."""

    config: EngineConfig
    requests: tuple[RequestSpec, ...]
    accepts: tuple[AcceptOverride, ...] = ()
    num_steps: int = 20
    name: str = ""

    # -- serialisation -------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["format"] = FORMAT_VERSION
        return data

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "Scenario":
        try:
            data = json.loads(text)
        except (json.JSONDecodeError, RecursionError) as exc:
            raise ScenarioError("<json>", f"not valid JSON ({exc})") from None
        return cls.from_dict(data)

    @classmethod
    def from_dict(cls, data: Any) -> "Scenario":
        return _parse_scenario(data)

    # -- convenience ---------------------------------------------------
    def request(self, request_id: str) -> RequestSpec:
        for spec in self.requests:
            if spec.request_id == request_id:
                return spec
        raise KeyError(request_id)

    def accept_overrides_at(self, step: int) -> dict[str, int]:
        return {a.request_id: a.accepted for a in self.accepts if a.step == step}


# ---------------------------------------------------------------------------
# Parsing and validation. Every check names its field and the allowed range.
# ---------------------------------------------------------------------------

def _int(value: Any, path: str, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ScenarioError(path, f"must be an integer in [{lo}, {hi}], got {_show(value)}")
    if not lo <= value <= hi:
        raise ScenarioError(path, f"must be in [{lo}, {hi}], got {value}")
    return value


def _float(value: Any, path: str, lo: float, hi: float, lo_open: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ScenarioError(path, f"must be a number, got {_show(value)}")
    value = float(value)
    bracket = "(" if lo_open else "["
    if math.isnan(value) or value > hi or value < lo or (lo_open and value == lo):
        raise ScenarioError(path, f"must be in {bracket}{lo}, {hi}], got {value}")
    return value


def _bool(value: Any, path: str) -> bool:
    if not isinstance(value, bool):
        raise ScenarioError(path, f"must be true or false, got {_show(value)}")
    return value


def _choice(value: Any, path: str, choices: Sequence[str]) -> str:
    if value not in choices or not isinstance(value, str):
        raise ScenarioError(path, f"must be one of {', '.join(choices)}; got {_show(value)}")
    return value


def _str(value: Any, path: str, max_len: int = 200) -> str:
    if not isinstance(value, str) or len(value) > max_len:
        raise ScenarioError(path, f"must be a string of at most {max_len} characters, got {_show(value)}")
    return value


def _list(value: Any, path: str, max_len: int) -> list[Any]:
    if not isinstance(value, (list, tuple)):
        raise ScenarioError(path, f"must be a list, got {_show(value)}")
    if len(value) > max_len:
        raise ScenarioError(path, f"must have at most {max_len} entries, got {len(value)}")
    return list(value)


def _obj(value: Any, path: str, allowed: Iterable[str]) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ScenarioError(path, f"must be an object, got {_show(value)}")
    allowed = set(allowed)
    for key in value:
        if key not in allowed:
            raise ScenarioError(
                f"{path}.{key}" if path else str(key),
                f"unknown field; allowed: {', '.join(sorted(allowed))}",
            )
    return value


def _need(obj: Mapping[str, Any], key: str, path: str) -> Any:
    if key not in obj:
        raise ScenarioError(f"{path}.{key}" if path else key, "is required")
    return obj[key]


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _parse_config(data: Any, path: str) -> EngineConfig:
    defaults = EngineConfig()
    obj = _obj(data, path, EngineConfig.__dataclass_fields__)

    def get(key: str) -> Any:
        return obj.get(key, getattr(defaults, key))

    k = _int(get("num_speculative_tokens"), _join(path, "num_speculative_tokens"), 1, MAX_SPECULATIVE_TOKENS)
    vocab = _int(get("vocab_size"), _join(path, "vocab_size"), 8, MAX_VOCAB)
    sizes_path = _join(path, "capture_sizes")
    sizes = tuple(
        _int(v, f"{sizes_path}[{i}]", 1, MAX_CAPTURE_SIZE)
        for i, v in enumerate(_list(get("capture_sizes"), sizes_path, 64))
    )
    if len(set(sizes)) != len(sizes):
        raise ScenarioError(sizes_path, f"entries must be distinct, got {list(sizes)}")
    cfg = EngineConfig(
        max_num_seqs=_int(get("max_num_seqs"), _join(path, "max_num_seqs"), 1, MAX_NUM_SEQS),
        num_speculative_tokens=k,
        num_model_steps=_int(get("num_model_steps"), _join(path, "num_model_steps"), 1, k),
        capture_sizes=sizes,
        vocab_size=vocab,
        hidden_size=_int(get("hidden_size"), _join(path, "hidden_size"), 2, MAX_HIDDEN),
        block_size=_int(get("block_size"), _join(path, "block_size"), 1, 256),
        max_model_len=_int(get("max_model_len"), _join(path, "max_model_len"), 8, MAX_MODEL_LEN),
        verify_strategy=_choice(get("verify_strategy"), _join(path, "verify_strategy"), VERIFY_STRATEGIES),
        accept_policy=_choice(get("accept_policy"), _join(path, "accept_policy"), ACCEPT_POLICIES),
        max_candidate_len=_int(
            get("max_candidate_len"), _join(path, "max_candidate_len"), 1, min(MAX_CANDIDATE_LEN, vocab - 1)
        ),
        naive_mode=_bool(get("naive_mode"), _join(path, "naive_mode")),
        graph_scope=_choice(get("graph_scope"), _join(path, "graph_scope"), GRAPH_SCOPES),
        model_seed=_int(get("model_seed"), _join(path, "model_seed"), 0, 2**63 - 1),
    )
    return cfg


def _parse_reasoning(data: Any, path: str, num_steps: int) -> ReasoningChange:
    obj = _obj(data, path, ("step", "status"))
    return ReasoningChange(
        step=_int(_need(obj, "step", path), _join(path, "step"), 0, num_steps),
        status=_int(_need(obj, "status", path), _join(path, "status"), 0, 3),
    )


def _parse_request(data: Any, path: str, cfg: EngineConfig, num_steps: int) -> RequestSpec:
    obj = _obj(data, path, RequestSpec.__dataclass_fields__)
    vocab_hi = cfg.vocab_size - 1
    # Room for the prompt, every generated token and one step of drafts.
    room = cfg.max_model_len - cfg.tokens_per_request
    prompt_path = _join(path, "prompt")
    prompt_raw = _list(_need(obj, "prompt", path), prompt_path, room)
    if not prompt_raw:
        raise ScenarioError(prompt_path, f"must hold 1 to {room} token ids, got none")
    prompt = tuple(_int(t, f"{prompt_path}[{i}]", 0, vocab_hi) for i, t in enumerate(prompt_raw))
    max_dec_path = _join(path, "max_dec_len")
    max_dec_len = _int(_need(obj, "max_dec_len", path), max_dec_path, 1, max(1, room - len(prompt)))
    if len(prompt) + max_dec_len > room:
        raise ScenarioError(
            max_dec_path,
            f"prompt ({len(prompt)}) + max_dec_len ({max_dec_len}) + k + 1 must not exceed "
            f"max_model_len ({cfg.max_model_len})",
        )
    eos_path = _join(path, "eos_token_ids")
    eos_raw = _list(_need(obj, "eos_token_ids", path), eos_path, MAX_EOS_IDS)
    if not eos_raw:
        raise ScenarioError(eos_path, f"must hold 1 to {MAX_EOS_IDS} token ids, got none")
    eos = tuple(_int(t, f"{eos_path}[{i}]", 0, vocab_hi) for i, t in enumerate(eos_raw))
    arrival = _int(_need(obj, "arrival_step", path), _join(path, "arrival_step"), 0, num_steps - 1)
    abort = obj.get("abort_step")
    if abort is not None:
        # An abort at the arrival step would race the arrival; it must come later.
        abort = _int(abort, _join(path, "abort_step"), arrival + 1, num_steps)
    reasoning_path = _join(path, "reasoning")
    reasoning = tuple(
        _parse_reasoning(item, f"{reasoning_path}[{i}]", num_steps)
        for i, item in enumerate(_list(obj.get("reasoning", []), reasoning_path, 64))
    )
    request_id = _str(_need(obj, "request_id", path), _join(path, "request_id"), 64)
    if not request_id:
        raise ScenarioError(_join(path, "request_id"), "must not be empty")
    return RequestSpec(
        request_id=request_id,
        arrival_step=arrival,
        prompt=prompt,
        max_dec_len=max_dec_len,
        eos_token_ids=eos,
        temperature=_float(obj.get("temperature", 1.0), _join(path, "temperature"), *TEMPERATURE_RANGE),
        top_p=_float(obj.get("top_p", 1.0), _join(path, "top_p"), 0.0, 1.0, lo_open=True),
        top_k=_int(obj.get("top_k", 0), _join(path, "top_k"), 0, cfg.vocab_size),
        seed=_int(obj.get("seed", 0), _join(path, "seed"), 0, SEED_MODULUS - 1),
        reasoning=reasoning,
        abort_step=abort,
    )


def _parse_accept(data: Any, path: str, cfg: EngineConfig, ids: set[str], num_steps: int) -> AcceptOverride:
    obj = _obj(data, path, AcceptOverride.__dataclass_fields__)
    rid_path = _join(path, "request_id")
    rid = _str(_need(obj, "request_id", path), rid_path, 64)
    if rid not in ids:
        raise ScenarioError(rid_path, f"names no request of the script: {rid!r}")
    return AcceptOverride(
        step=_int(_need(obj, "step", path), _join(path, "step"), 0, num_steps - 1),
        request_id=rid,
        accepted=_int(_need(obj, "accepted", path), _join(path, "accepted"), 0, cfg.num_speculative_tokens),
    )


def _parse_scenario(data: Any) -> Scenario:
    obj = _obj(data, "", ("config", "requests", "accepts", "num_steps", "name", "format"))
    fmt = obj.get("format", FORMAT_VERSION)
    if fmt != FORMAT_VERSION or isinstance(fmt, bool):
        raise ScenarioError("format", f"must be {FORMAT_VERSION}, got {_show(fmt)}")
    num_steps = _int(obj.get("num_steps", 20), "num_steps", 1, MAX_STEPS)
    cfg = _parse_config(obj.get("config", {}), "config")
    requests = tuple(
        _parse_request(item, f"requests[{i}]", cfg, num_steps)
        for i, item in enumerate(_list(_need(obj, "requests", ""), "requests", 4096))
    )
    ids: set[str] = set()
    for i, spec in enumerate(requests):
        if spec.request_id in ids:
            raise ScenarioError(f"requests[{i}].request_id", f"duplicate id {spec.request_id!r}")
        ids.add(spec.request_id)
    accepts = tuple(
        _parse_accept(item, f"accepts[{i}]", cfg, ids, num_steps)
        for i, item in enumerate(_list(obj.get("accepts", []), "accepts", 100_000))
    )
    seen: set[tuple[int, str]] = set()
    for i, acc in enumerate(accepts):
        key = (acc.step, acc.request_id)
        if key in seen:
            raise ScenarioError(f"accepts[{i}]", f"a second override for request {acc.request_id!r} at step {acc.step}")
        seen.add(key)
    return Scenario(
        config=cfg,
        requests=requests,
        accepts=accepts,
        num_steps=num_steps,
        name=_str(obj.get("name", ""), "name"),
    )


def validate(scenario: Scenario) -> Scenario:
    """Re-validate a Scenario built in code (for example by a fuzzer) and return it."""
    return Scenario.from_dict(json.loads(scenario.to_json()))


def load_scenario(path: str) -> Scenario:
    """Read and validate a scenario file; every failure is a ScenarioError."""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except OSError as exc:
        raise ScenarioError("<file>", f"cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ScenarioError("<file>", f"{path} is not UTF-8 text") from None
    return Scenario.from_json(text)


__all__ = [
    "AMBIGUITY_EPS",
    "AcceptOverride",
    "RequestStep",
    "StepResult",
    "EngineConfig",
    "ReasoningChange",
    "RequestSpec",
    "Scenario",
    "ScenarioError",
    "SEED_MODULUS",
    "load_scenario",
    "validate",
]


# ---------------------------------------------------------------------------
# Step results: what the reference and every engine report after a step.
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class RequestStep:
    """One request's outcome of one step (only requests that ran in the step appear).

    ``seq_len`` counts positions that hold target KV (committed length - 1);
    ``draft_tokens`` are the proposals for the next step (empty when the drafter
    skipped or in NAIVE mode); ``ambiguous`` is set by the reference only, when a
    sampling decision sat within AMBIGUITY_EPS of a float boundary.
    """

    request_id: str
    accept_tokens: tuple[int, ...]
    draft_tokens: tuple[int, ...]
    infer_seed: int
    step_idx: int
    seq_len: int
    stopped: bool
    ambiguous: bool = False

    @property
    def accept_num(self) -> int:
        return len(self.accept_tokens)


@dataclass(frozen=True)
class StepResult:
    """All requests that ran in step ``step``, ordered by request id."""

    step: int
    requests: tuple[RequestStep, ...]

    def by_id(self) -> dict[str, RequestStep]:
        return {r.request_id: r for r in self.requests}


#: Float decisions closer than this to their threshold are ambiguous across libraries.
AMBIGUITY_EPS = 1e-9
