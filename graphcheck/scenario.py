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
field and the allowed range. Whatever it is given (huge integers, deep
nesting, lone surrogates, objects of any type), parsing raises nothing else
and never calls back into the objects it was handed (a subclass of a builtin
is read at its builtin value), and every message is one short ASCII line.

Validation checks the format alone (types, ranges, the ``MAX_*`` limits below),
the same for every engine: whether an engine can hold a scenario is the
engine's estimate, judged by the memory gate (``graphcheck.check.memory_gate``)
before a lockstep run builds anything. What a step reports is
``graphcheck.step_result``.
"""

from __future__ import annotations

import dataclasses
import errno
import itertools
import json
import math
import os
import stat
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

from graphcheck.contract import CONTRACT_NAMES, CONTRACTS
from graphcheck.errors import InputError

FORMAT_VERSION = 1

#: Seeds live in [0, SEED_MODULUS); every advance is taken modulo this bound.
SEED_MODULUS = 2**63 - 2

VERIFY_STRATEGIES = ("greedy", "target_match", "topp")
ACCEPT_POLICIES = ("normal", "accept_all", "reject_all")
GRAPH_SCOPES = ("forward", "forward_sampling", "step")
#: The engine's model: ``exact`` is the integer model the reference recomputes bit for bit;
#: ``float32`` / ``bfloat16`` a small real transformer in that dtype (checked by the
#: model-agnostic oracle, with a numeric tolerance eager vs graph).
MODELS = ("exact", "float32", "bfloat16")

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
MAX_REQUEST_ID_LEN = 64
MAX_ENGINE_OPTIONS = 16
MAX_ENGINE_OPTION = 2**31 - 1
MAX_NAME_LEN = 200
#: Scenarios a finding's history may hold (``Scenario.history``).
MAX_HISTORY = 64


class ScenarioError(InputError, ValueError):
    """A scenario field is missing, malformed or out of range (bad input; still a ValueError too).

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
    model: str = "exact"
    contract: str = "default"
    #: Knobs of the engine under test that graphcheck's format does not name (page size, token
    #: budget, ...): ``(name, value)`` pairs sorted by name. An engine declares them, with the
    #: values to draw, in ``EngineCapabilities.options``; written to JSON as an object.
    engine_options: tuple[tuple[str, int], ...] = ()

    def option(self, name: str, default: int) -> int:
        """The engine option ``name``, or ``default`` when the scenario does not set it."""
        for key, value in self.engine_options:
            if key == name:
                return value
        return default

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
class Prelude:
    """A scenario the engine pair ran before this one, on the same config (``Scenario.history``)."""

    requests: tuple[RequestSpec, ...]
    accepts: tuple[AcceptOverride, ...] = ()
    num_steps: int = 20


@dataclass(frozen=True)
class Scenario:
    """Engine configuration + request script + accept script + step count.

    ``history``: the scenarios the same engine pair ran before this one since it was
    built, in order, the engines reset after each (as a pooled pair goes through them);
    a finding that needs them carries them, and running the scenario runs them first.
    """

    config: EngineConfig
    requests: tuple[RequestSpec, ...]
    accepts: tuple[AcceptOverride, ...] = ()
    num_steps: int = 20
    name: str = ""
    history: tuple[Prelude, ...] = ()

    # -- serialisation -------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        data = _plain(self)
        options = data["config"].pop("engine_options")
        if options:  # omitted when empty, so files written before options existed read the same
            data["config"]["engine_options"] = {name: value for name, value in options}
        if not data["history"]:  # omitted when empty, as engine_options
            del data["history"]
        data["format"] = FORMAT_VERSION
        return data

    # -- history ---------------------------------------------------------
    def preludes(self) -> tuple[Scenario, ...]:
        """The scenarios of ``history``, each a scenario of this config (named ``history N``)."""
        return tuple(
            Scenario(self.config, p.requests, p.accepts, p.num_steps, f"history {i + 1}")
            for i, p in enumerate(self.history)
        )

    def without_history(self) -> Scenario:
        return dataclasses.replace(self, history=()) if self.history else self

    def with_history(self, earlier: Sequence[Scenario]) -> Scenario:
        """This scenario after ``earlier`` (scenarios of its config) on the same engine pair."""
        return dataclasses.replace(self, history=tuple(Prelude(s.requests, s.accepts, s.num_steps) for s in earlier))

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, sort_keys=True)

    @classmethod
    def from_json(cls, text: str | bytes) -> Scenario:
        """Parse and validate JSON text (a str, or UTF-8 bytes); every failure is a ScenarioError."""
        return cls.from_dict(_load_json(text))

    @classmethod
    def from_dict(cls, data: Any) -> Scenario:
        """Validate a decoded scenario (any object: every problem is a ScenarioError naming its field)."""
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
# Reading values. Nothing here calls back into the objects it is given: a
# subclass of a builtin is read at its builtin value through the builtin's own
# methods, anything else is only type-checked, and messages render values
# with ``_show`` (bounded, ASCII, no repr of foreign objects).
# ---------------------------------------------------------------------------

#: Integer literals longer than this are out of every field's range; the JSON
#: reader keeps them as their digit count (converting them could fail).
_MAX_INT_DIGITS = 64


class _HugeInt:
    """An integer literal of the JSON text too long to convert: only its digit count is kept."""

    __slots__ = ("digits", "negative")

    def __init__(self, digits: int, negative: bool):
        self.digits = digits
        self.negative = negative

    def describe(self) -> str:
        return f"{'a negative' if self.negative else 'an'} integer of {self.digits} digits"


def _json_int(text: str) -> int | _HugeInt:
    negative = text.startswith("-")
    digits = len(text) - negative
    if digits > _MAX_INT_DIGITS:
        return _HugeInt(digits, negative)
    return int(text)


def _load_json(text: Any) -> Any:
    if isinstance(text, (bytes, bytearray)):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ScenarioError("<json>", f"not UTF-8 text (byte {exc.start})") from None
    elif isinstance(text, str):
        text = str.__str__(text)
    else:
        raise ScenarioError("<json>", f"must be JSON text (str or UTF-8 bytes), got {_show(text)}")
    try:
        return json.loads(text, parse_int=_json_int)
    except RecursionError:
        raise ScenarioError("<json>", "not valid JSON (nested too deeply)") from None
    except ValueError as exc:  # json.JSONDecodeError and anything else the decoder refuses
        raise ScenarioError("<json>", f"not valid JSON ({_clip(str(exc))})") from None


def _clip(text: str, limit: int = 120) -> str:
    text = ascii(text)[1:-1]
    return text if len(text) <= limit else text[: limit - 3] + "..."


_SHOW_MAX = 60


def _show(value: Any) -> str:
    """A short ASCII rendering of any value for a message.

    Bounded in length and depth; never calls the value's own methods (foreign
    objects show as ``<TYPE object>``), never converts a huge integer to text.
    """
    try:
        text = _render(value, 3, _SHOW_MAX + 1)
    except Exception:  # a message must never fail
        text = "<unprintable value>"
    return text if len(text) <= _SHOW_MAX else text[: _SHOW_MAX - 3] + "..."


def _type_name(value: Any) -> str:
    try:
        name = vars(type)["__name__"].__get__(type(value))  # the real name, whatever the class claims
    except Exception:
        name = "?"
    return ascii(name)[1:-1] if isinstance(name, str) else "?"


def _int_digits(value: int) -> str:
    """The digit count of a big integer, without converting it to text."""
    n = abs(value)
    bits = n.bit_length()
    digits = int((bits - 1) * 0.30102999566398120) + 1  # digits of 2**(bits-1)
    if bits > 100_000:
        return f"about {digits}"
    return str(digits + 1 if n >= 10**digits else digits)


def _render(value: Any, depth: int, budget: int) -> str:
    if value is None or isinstance(value, bool):
        return "null" if value is None else ("true" if value else "false")
    if isinstance(value, _HugeInt):
        return f"<{value.describe()}>"
    if isinstance(value, int):
        value = int.__index__(value)
        if value.bit_length() > 160:
            return f"<{'a negative' if value < 0 else 'an'} integer of {_int_digits(value)} digits>"
        return str(value)
    if isinstance(value, float):
        return repr(float.__float__(value))
    if isinstance(value, str):
        return ascii(str.__getitem__(value, slice(0, budget)))
    if type(value) in (bytes, bytearray):
        return ascii(bytes(value[:budget]))
    if isinstance(value, (list, tuple, dict)):
        if isinstance(value, dict):
            count = dict.__len__(value)
            items: Iterable[Any] = itertools.islice(dict.items(value), 8)
            opener, closer = "{", "}"
        elif isinstance(value, list):
            count = list.__len__(value)
            items = list.__getitem__(value, slice(0, 8))
            opener, closer = "[", "]"
        else:
            count = tuple.__len__(value)
            items = tuple.__getitem__(value, slice(0, 8))
            opener, closer = "(", ")"
        if count and depth <= 0:
            return f"{opener}...{closer}"
        parts: list[str] = []
        used = 2
        for item in items:
            if used > budget:
                break
            if opener == "{":
                key, item = item
                part = f"{_render(key, depth - 1, budget - used)}: {_render(item, depth - 1, budget - used)}"
            else:
                part = _render(item, depth - 1, budget - used)
            parts.append(part)
            used += len(part) + 2
        more = ", ..." if len(parts) < count else ("," if opener == "(" and count == 1 else "")
        return f"{opener}{', '.join(parts)}{more}{closer}"
    return f"<{_type_name(value)} object>"


_PATH_CHARS = frozenset(".[]'\"\\ ")


def _key_label(key: Any) -> str:
    """A dict key as a field-path component: plain keys as they are, anything else shown."""
    if isinstance(key, str):
        key = str.__str__(key)
        if len(key) <= 40 and key.isascii() and key.isprintable() and not _PATH_CHARS.intersection(key):
            return key
    return _show(key)


def _int(value: Any, path: str, lo: int, hi: int) -> int:
    if isinstance(value, _HugeInt):
        raise ScenarioError(path, f"must be an integer in [{lo}, {hi}], got {value.describe()}")
    if isinstance(value, bool) or not isinstance(value, int):
        raise ScenarioError(path, f"must be an integer in [{lo}, {hi}], got {_show(value)}")
    value = int.__index__(value)
    if not lo <= value <= hi:
        raise ScenarioError(path, f"must be in [{lo}, {hi}], got {_show(value)}")
    return value


def _ints(values: list[Any], path: str, lo: int, hi: int) -> tuple[int, ...]:
    """``_int`` of every entry (``path[i]``); plain ints in range pass in one sweep (token lists are long)."""
    if values and set(map(type, values)) == {int} and lo <= min(values) and max(values) <= hi:
        return tuple(values)
    return tuple(_int(v, f"{path}[{i}]", lo, hi) for i, v in enumerate(values))


def _float(value: Any, path: str, lo: float, hi: float, lo_open: bool = False) -> float:
    bounds = f"{'(' if lo_open else '['}{lo}, {hi}]"
    if isinstance(value, _HugeInt):
        raise ScenarioError(path, f"must be in {bounds}, got {value.describe()}")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ScenarioError(path, f"must be a number in {bounds}, got {_show(value)}")
    if isinstance(value, int):
        value = int.__index__(value)
        if not lo <= value <= hi:  # exact: an int of any size compares with a float
            raise ScenarioError(path, f"must be in {bounds}, got {_show(value)}")
        value = float(value)
    else:
        value = float.__float__(value)
    if math.isnan(value) or value > hi or value < lo or (lo_open and value == lo):
        raise ScenarioError(path, f"must be in {bounds}, got {_show(value)}")
    return value


def _bool(value: Any, path: str) -> bool:
    if not isinstance(value, bool):
        raise ScenarioError(path, f"must be true or false, got {_show(value)}")
    return value


def _choice(value: Any, path: str, choices: Sequence[str]) -> str:
    if isinstance(value, str):
        value = str.__str__(value)
        if value in choices:
            return value
    raise ScenarioError(path, f"must be one of {', '.join(choices)}; got {_show(value)}")


def _str(value: Any, path: str, max_len: int, *, printable: bool = False) -> str:
    """A string of at most ``max_len`` characters, encodable as UTF-8 (no lone surrogates) and
    without control characters; ``printable``: every character printable (``str.isprintable``:
    no control, format, separator but the space, private-use, unassigned or surrogate)."""
    if not isinstance(value, str):
        raise ScenarioError(path, f"must be a string of at most {max_len} characters, got {_show(value)}")
    value = str.__str__(value)
    if len(value) > max_len:
        raise ScenarioError(path, f"must be a string of at most {max_len} characters, got {len(value)}: {_show(value)}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ScenarioError(
            path,
            f"must be valid Unicode text: character {exc.start} is a lone surrogate "
            f"U+{ord(value[exc.start]):04X}, which UTF-8 cannot encode",
        ) from None
    if value.isascii() and value.isprintable():
        return value
    for i, ch in enumerate(value):
        code = ord(ch)
        if printable and not ch.isprintable():
            raise ScenarioError(
                path,
                f"must be printable: character {i} (U+{code:04X}) is a control, format, separator, "
                "private-use or unassigned character",
            )
        if code < 0x20 or 0x7F <= code < 0xA0 or code in (0xFFFE, 0xFFFF):
            raise ScenarioError(path, f"must not hold control characters: character {i} is U+{code:04X}")
    return value


def _list(value: Any, path: str, max_len: int) -> list[Any]:
    if isinstance(value, list):
        count = list.__len__(value)
    elif isinstance(value, tuple):
        count = tuple.__len__(value)
    else:
        raise ScenarioError(path, f"must be a list, got {_show(value)}")
    if count > max_len:
        raise ScenarioError(path, f"must have at most {max_len} entries, got {count}")
    if isinstance(value, list):
        return list.__getitem__(value, slice(None))
    return list(tuple.__getitem__(value, slice(None)))


def _obj(value: Any, path: str, allowed: Iterable[str]) -> dict[str, Any]:
    """An object with string keys, all in ``allowed``, as a plain dict."""
    if isinstance(value, dict):
        pairs = list(dict.items(value))
    elif isinstance(value, Mapping):
        try:
            pairs = [(key, item) for key, item in value.items()]
        except Exception as exc:
            raise ScenarioError(path, f"must be an object; reading the mapping failed ({_type_name(exc)})") from None
    else:
        raise ScenarioError(path, f"must be an object, got {_show(value)}")
    allowed = set(allowed)
    out: dict[str, Any] = {}
    for key, item in pairs:
        if not isinstance(key, str):
            raise ScenarioError(_join(path, _key_label(key)), f"field names must be strings, got {_show(key)}")
        key = str.__str__(key)
        if key not in allowed:
            raise ScenarioError(_join(path, _key_label(key)), f"unknown field; allowed: {', '.join(sorted(allowed))}")
        out[key] = item
    return out


def _need(obj: Mapping[str, Any], key: str, path: str) -> Any:
    if key not in obj:
        raise ScenarioError(_join(path, key), "is required")
    return obj[key]


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


# ---------------------------------------------------------------------------
# Parsing and validation. Every check names its field and the allowed range.
# ---------------------------------------------------------------------------


def _parse_config(data: Any, path: str) -> EngineConfig:
    defaults = EngineConfig()
    obj = _obj(data, path, EngineConfig.__dataclass_fields__)

    def get(key: str) -> Any:
        return obj.get(key, getattr(defaults, key))

    k = _int(get("num_speculative_tokens"), _join(path, "num_speculative_tokens"), 1, MAX_SPECULATIVE_TOKENS)
    vocab = _int(get("vocab_size"), _join(path, "vocab_size"), 8, MAX_VOCAB)
    sizes_path = _join(path, "capture_sizes")
    sizes = _ints(_list(get("capture_sizes"), sizes_path, 64), sizes_path, 1, MAX_CAPTURE_SIZE)
    if len(set(sizes)) != len(sizes):
        raise ScenarioError(sizes_path, f"entries must be distinct, got {_show(list(sizes))}")
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
        model=_choice(get("model"), _join(path, "model"), MODELS),
        contract=_choice(get("contract"), _join(path, "contract"), CONTRACT_NAMES),
        engine_options=_parse_options(obj.get("engine_options", {}), _join(path, "engine_options")),
    )
    return cfg


def _parse_options(data: Any, path: str) -> tuple[tuple[str, int], ...]:
    """``engine_options``: an object of at most MAX_ENGINE_OPTIONS ``name: integer`` entries (also
    the ``[[name, value], ...]`` pairs a Scenario built in code holds)."""
    if isinstance(data, (list, tuple)):
        pairs = []
        for i, item in enumerate(_list(data, path, MAX_ENGINE_OPTIONS)):
            entry = _list(item, f"{path}[{i}]", 2)
            if len(entry) != 2:
                raise ScenarioError(f"{path}[{i}]", f"must be a [name, value] pair, got {_show(item)}")
            pairs.append((entry[0], entry[1]))
    elif isinstance(data, dict):
        pairs = list(dict.items(data))
    else:
        raise ScenarioError(path, f"must be an object of name: integer, got {_show(data)}")
    if len(pairs) > MAX_ENGINE_OPTIONS:
        raise ScenarioError(path, f"must have at most {MAX_ENGINE_OPTIONS} entries, got {len(pairs)}")
    out: dict[str, int] = {}
    for key, value in pairs:
        name = _str(key, f"{path}.<name>", 32) if not isinstance(key, str) else str.__str__(key)
        if not (name and name[0].isalpha() and name.isascii() and all(c.isalnum() or c == "_" for c in name)):
            raise ScenarioError(
                _join(path, _key_label(key)), "option names are 1-32 ASCII letters, digits or _, starting with a letter"
            )
        if len(name) > 32:
            raise ScenarioError(_join(path, _key_label(key)), "option names are at most 32 characters")
        if name in out:
            raise ScenarioError(_join(path, name), "is given twice")
        out[name] = _int(value, _join(path, name), 0, MAX_ENGINE_OPTION)
    return tuple(sorted(out.items()))


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
    prompt = _ints(prompt_raw, prompt_path, 0, vocab_hi)
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
    eos = _ints(eos_raw, eos_path, 0, vocab_hi)
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
    request_id = _str(_need(obj, "request_id", path), _join(path, "request_id"), MAX_REQUEST_ID_LEN, printable=True)
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
    rid = _str(_need(obj, "request_id", path), rid_path, MAX_REQUEST_ID_LEN, printable=True)
    if rid not in ids:
        raise ScenarioError(rid_path, f"names no request of the script: {_show(rid)}")
    return AcceptOverride(
        step=_int(_need(obj, "step", path), _join(path, "step"), 0, num_steps - 1),
        request_id=rid,
        accepted=_int(_need(obj, "accepted", path), _join(path, "accepted"), 0, cfg.num_speculative_tokens),
    )


def _parse_format(value: Any) -> None:
    if isinstance(value, int) and not isinstance(value, bool) and int.__index__(value) == FORMAT_VERSION:
        return
    if isinstance(value, float) and float.__float__(value) == FORMAT_VERSION:
        return
    raise ScenarioError("format", f"must be {FORMAT_VERSION}, got {_show(value)}")


def _parse_scenario(data: Any) -> Scenario:
    obj = _obj(data, "", ("config", "requests", "accepts", "num_steps", "name", "format", "history"))
    _parse_format(obj.get("format", FORMAT_VERSION))
    cfg = _parse_config(obj.get("config", {}), "config")
    script = _parse_script(obj, "", cfg)
    history = tuple(
        _parse_script(_obj(item, f"history[{i}]", ("requests", "accepts", "num_steps")), f"history[{i}]", cfg)
        for i, item in enumerate(_list(obj.get("history", []), "history", MAX_HISTORY))
    )
    return Scenario(
        config=cfg,
        requests=script.requests,
        accepts=script.accepts,
        num_steps=script.num_steps,
        name=_str(obj.get("name", ""), "name", MAX_NAME_LEN),
        history=history,
    )


def _parse_script(obj: dict[str, Any], path: str, cfg: EngineConfig) -> Prelude:
    """The requests, accepts and step count of a scenario (or of one of its history's) at ``path``."""
    num_steps = _int(obj.get("num_steps", 20), _join(path, "num_steps"), 1, MAX_STEPS)
    requests = tuple(
        _parse_request(item, f"{_join(path, 'requests')}[{i}]", cfg, num_steps)
        for i, item in enumerate(_list(_need(obj, "requests", path), _join(path, "requests"), 4096))
    )
    ids: set[str] = set()
    for i, spec in enumerate(requests):
        if spec.request_id in ids:
            raise ScenarioError(f"{_join(path, 'requests')}[{i}].request_id", f"duplicate id {_show(spec.request_id)}")
        ids.add(spec.request_id)
    accepts = tuple(
        _parse_accept(item, f"{_join(path, 'accepts')}[{i}]", cfg, ids, num_steps)
        for i, item in enumerate(_list(obj.get("accepts", []), _join(path, "accepts"), 100_000))
    )
    seen: set[tuple[int, str]] = set()
    for i, acc in enumerate(accepts):
        key = (acc.step, acc.request_id)
        if key in seen:
            raise ScenarioError(
                f"{_join(path, 'accepts')}[{i}]",
                f"a second override for request {_show(acc.request_id)} at step {acc.step}",
            )
        seen.add(key)
    return Prelude(requests, accepts, num_steps)


def validate(scenario: Scenario) -> Scenario:
    """Re-validate a Scenario built in code (for example by a fuzzer) and return it.

    The fields go through the same parser as a file's (``Scenario.from_dict``) without
    a JSON text in between: the parser accepts only what JSON can hold (plain ints,
    finite floats, str, bool, lists), so what it accepts also writes as JSON.
    """
    try:
        data = scenario.to_dict()
    except (TypeError, ValueError, AttributeError, RecursionError) as exc:
        raise ScenarioError("<scenario>", f"cannot be read ({_type_name(exc)}: {_clip(str(exc))})") from None
    return Scenario.from_dict(data)


def one_eos_length(requests: Sequence[RequestSpec]) -> tuple[RequestSpec, ...]:
    """``requests`` with every eos list cut to the length of the shortest one (each keeps its first ids)."""
    shortest = min((len(r.eos_token_ids) for r in requests), default=0)
    return tuple(
        r if len(r.eos_token_ids) == shortest else dataclasses.replace(r, eos_token_ids=r.eos_token_ids[:shortest])
        for r in requests
    )


def fit_to_contract(scenario: Scenario) -> Scenario:
    """``scenario`` within what its contract can run: under ``eos_lengths`` ``uniform`` (FastDeploy keeps
    one eos buffer of one shape) every eos list cut to one length (``one_eos_length``); under ``reasoning``
    ``none`` no reasoning scripts; else itself."""
    contract = CONTRACTS.get(scenario.config.contract)
    if contract is None:
        return scenario
    requests = scenario.requests
    if contract.eos_lengths == "uniform" and len({len(r.eos_token_ids) for r in requests}) > 1:
        requests = one_eos_length(requests)
    if contract.reasoning == "none" and any(r.reasoning for r in requests):
        requests = tuple(dataclasses.replace(r, reasoning=()) if r.reasoning else r for r in requests)
    return scenario if requests is scenario.requests else dataclasses.replace(scenario, requests=requests)


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}
_SCALARS = frozenset((int, float, str, bool, type(None)))


def _plain(value: Any) -> Any:
    """``value`` with every dataclass made a dict and every tuple a list, recursively (JSON's shapes)."""
    kind = type(value)
    if kind in _SCALARS:
        return value
    if isinstance(value, (list, tuple)):
        if _SCALARS.issuperset(map(type, value)):  # a token list: nothing to convert
            return list(value)
        return [_plain(v) for v in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        names = _FIELD_NAMES.get(kind)
        if names is None:
            names = _FIELD_NAMES[kind] = tuple(f.name for f in dataclasses.fields(value))
        return {name: _plain(getattr(value, name)) for name in names}
    return value


#: The largest file graphcheck reads back (a scenario, a report's divergences.json): far above any it
#: writes, so that a file linked to /dev/zero or grown without bound is refused, not read.
MAX_READ_BYTES = 64 * 2**20


def read_regular_file(path: str | os.PathLike[str], limit: int = MAX_READ_BYTES) -> str:
    """The UTF-8 text of ``path`` when it is a regular file of at most ``limit`` bytes.

    Anything else raises OSError before a byte is read: a FIFO (reading it would block forever), a
    device (``/dev/zero`` never ends), a directory, a file above the limit. UnicodeDecodeError and
    ValueError (a path with a NUL byte) propagate as ``open`` raises them.
    """
    info = os.stat(path)
    if not stat.S_ISREG(info.st_mode):
        raise OSError(errno.EINVAL, "not a regular file")
    if info.st_size > limit:
        raise OSError(errno.EFBIG, f"larger than {limit // 2**20} MiB")
    with open(path, "rb") as handle:
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise OSError(errno.EFBIG, f"larger than {limit // 2**20} MiB")
    return data.decode("utf-8")


def load_scenario(path: str) -> Scenario:
    """Read and validate a scenario file; every failure is a ScenarioError."""
    shown = _clip(str(path), 200)
    try:
        text = read_regular_file(path)
    except OSError as exc:
        raise ScenarioError("<file>", f"cannot read {shown}: {_clip(str(exc.strerror or exc))}") from None
    except UnicodeDecodeError:
        raise ScenarioError("<file>", f"{shown} is not UTF-8 text") from None
    except ValueError as exc:  # a path with a NUL byte, or one the file system cannot encode
        raise ScenarioError("<file>", f"cannot read {shown}: {_clip(str(exc))}") from None
    return Scenario.from_json(text)


__all__ = [
    "AcceptOverride",
    "EngineConfig",
    "Prelude",
    "ReasoningChange",
    "RequestSpec",
    "Scenario",
    "ScenarioError",
    "SEED_MODULUS",
    "fit_to_contract",
    "load_scenario",
    "one_eos_length",
    "read_regular_file",
    "validate",
]
