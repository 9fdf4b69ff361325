"""Malformed scenario files: every one is a ScenarioError naming its field, never a traceback.

Explicit regressions first (each crashed with something other than a
ScenarioError, or passed validation and crashed later), then a Hypothesis
test that mutates valid scenarios (types, numbers, nesting, unicode, sizes,
keys, raw text) and checks that ``Scenario.from_json`` / ``from_dict`` either
return a scenario that round-trips and encodes as UTF-8, or raise a
ScenarioError with a short ASCII message.
"""

from __future__ import annotations

import json
import sys
from typing import Any, Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from graphcheck.scenario import Scenario, ScenarioError, validate
from graphcheck.search.builtin import demo_scenario

#: The longest message a ScenarioError may carry (the CLI prints it on one line).
MAX_MESSAGE = 600


def _valid(mode: str = "target_match") -> dict[str, Any]:
    naive = mode == "naive"
    return json.loads(demo_scenario("target_match" if naive else mode, naive_mode=naive).to_json())


def _check_error(err: ScenarioError) -> None:
    text = str(err)
    assert isinstance(err.field, str) and err.field
    assert text.startswith(err.field)
    assert len(text) <= MAX_MESSAGE, text[:200]
    assert text.isascii(), ascii(text)  # prints on any terminal
    assert "\n" not in text


def _outcome(fn: Callable[[], Scenario]) -> Scenario | None:
    """Run ``fn``: a valid scenario round-trips and encodes; anything else must be a ScenarioError."""
    try:
        scenario = fn()
    except ScenarioError as err:
        _check_error(err)
        return None
    text = scenario.to_json()
    text.encode("utf-8")
    assert Scenario.from_json(text) == scenario
    assert Scenario.from_json(text).to_json() == text
    return scenario


def _error(fn: Callable[[], Scenario]) -> ScenarioError:
    with pytest.raises(ScenarioError) as info:
        fn()
    _check_error(info.value)
    return info.value


def _with(data: dict, path: tuple, value: Any) -> dict:
    data = json.loads(json.dumps(data))
    target = data
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return data


MARK = "@@graphcheck-raw@@"


def _text_with(data: dict, path: tuple, raw: str, *, ensure_ascii: bool = True) -> str:
    """JSON text of ``data`` with the value at ``path`` replaced by the raw JSON text ``raw``."""
    return json.dumps(_with(data, path, MARK), ensure_ascii=ensure_ascii).replace(json.dumps(MARK), raw, 1)


# ---------------------------------------------------------------------------
# A. huge integers, overflowing floats, deep nesting, arbitrary Python objects
# ---------------------------------------------------------------------------

BIG = "9" * 5000


@pytest.mark.parametrize(
    "path, field",
    [
        (("num_steps",), "num_steps"),
        (("config", "max_num_seqs"), "config.max_num_seqs"),
        (("requests", 0, "seed"), "requests[0].seed"),
        (("requests", 0, "temperature"), "requests[0].temperature"),
        (("requests", 0, "top_p"), "requests[0].top_p"),
        (("requests", 0, "prompt", 1), "requests[0].prompt[1]"),
        (("accepts", 0, "accepted"), "accepts[0].accepted"),
        (("format",), "format"),
    ],
)
@pytest.mark.parametrize("sign", ["", "-"])
def test_5000_digit_integer_in_json_names_its_field(path: tuple, field: str, sign: str) -> None:
    err = _error(lambda: Scenario.from_json(_text_with(_valid(), path, sign + BIG)))
    assert err.field == field
    assert "5000 digits" in str(err)


def test_5000_digit_integer_in_an_unknown_field() -> None:
    text = _text_with(_valid(), ("config", "colour"), BIG)
    assert _error(lambda: Scenario.from_json(text)).field == "config.colour"


@pytest.mark.parametrize(
    "path",
    [
        ("num_steps",),
        ("requests", 0, "seed"),
        ("requests", 0, "temperature"),
        ("requests", 0, "top_p"),
        ("config", "capture_sizes", 0),
    ],
)
@pytest.mark.parametrize(
    "value",
    [10**5000, -(10**5000), 10**400, 2**64, -(2**63) - 1],
    ids=["1e5000", "-1e5000", "1e400", "2^64", "-2^63-1"],
)
def test_huge_python_integers_in_from_dict(path: tuple, value: int) -> None:
    err = _error(lambda: Scenario.from_dict(_with(_valid(), path, value)))
    assert err.field.startswith(path[0])


@pytest.mark.parametrize("field", ["temperature", "top_p"])
@pytest.mark.parametrize("raw", ["1" + "0" * 400, "-1" + "0" * 400, "1e400", "-1e400", "NaN", "Infinity", "-Infinity"])
def test_overflowing_numbers_in_float_fields(field: str, raw: str) -> None:
    err = _error(lambda: Scenario.from_json(_text_with(_valid(), ("requests", 0, field), raw)))
    assert err.field == f"requests[0].{field}"


@pytest.mark.parametrize("raw", ["1e400", "-1e400", "NaN", "Infinity", "2.5", "1.0", "1e3"])
def test_floats_in_integer_fields(raw: str) -> None:
    err = _error(lambda: Scenario.from_json(_text_with(_valid(), ("num_steps",), raw)))
    assert err.field == "num_steps"


_NESTED_PATHS = [
    ("requests", 0, "reasoning"),
    ("requests", 0, "prompt", 0),
    ("requests", 0, "top_p"),
    ("name",),
    ("config", "capture_sizes"),
    ("accepts", 0),
]


@pytest.mark.parametrize("path", _NESTED_PATHS)
@pytest.mark.parametrize("opener, closer", [("[", "]"), ('{"a":', "}")])
def test_nesting_around_the_recursion_limit(path: tuple, opener: str, closer: str) -> None:
    """json.loads survives a depth just under the recursion limit; nothing after it may recurse.

    The depth that json.loads just survives depends on the stack in use, so every depth
    around the limit is tried.
    """
    limit = sys.getrecursionlimit()
    base = _valid()
    for depth in range(max(1, limit - 260), limit + 40):
        raw = opener * depth + ("1" if opener != "[" else "") + closer * depth
        _error(lambda: Scenario.from_json(_text_with(base, path, raw)))  # noqa: B023  (called at once)


@pytest.mark.parametrize("depth", [900, 1500, 2000, 100_000])
def test_deep_nesting_anywhere_is_a_scenario_error(depth: int) -> None:
    _error(lambda: Scenario.from_json(_text_with(_valid(), ("requests", 0, "reasoning"), "[" * depth + "]" * depth)))


class _Hostile:
    """An object whose repr, str, equality and hash all fail."""

    def __repr__(self) -> str:
        raise RuntimeError("repr must not be called")

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        raise RuntimeError("eq must not be called")

    def __hash__(self) -> int:
        return 1


class _SneakyInt(int):
    def __repr__(self) -> str:
        raise RuntimeError("repr must not be called")

    __str__ = __repr__

    def __le__(self, other: object) -> bool:
        raise RuntimeError("comparison must not be called")

    __ge__ = __lt__ = __gt__ = __le__


class _SneakyStr(str):
    def __str__(self) -> str:
        raise RuntimeError("str must not be called")

    __repr__ = __str__

    def __eq__(self, other: object) -> bool:
        raise RuntimeError("eq must not be called")

    def __hash__(self) -> int:
        raise RuntimeError("hash must not be called")


class _SneakyKey(_SneakyStr):
    """A key a dict can hold (it hashes as its text) that fails everything else."""

    __hash__ = str.__hash__


class _SneakyList(list):
    def __iter__(self):
        raise RuntimeError("iter must not be called")

    def __len__(self) -> int:
        raise RuntimeError("len must not be called")


class _SneakyDict(dict):
    def __iter__(self):
        raise RuntimeError("iter must not be called")

    def keys(self):
        raise RuntimeError("keys must not be called")

    def __getitem__(self, key):
        raise RuntimeError("getitem must not be called")

    def get(self, key, default=None):
        raise RuntimeError("get must not be called")


def _self_containing() -> list:
    loop: list = []
    loop.append(loop)
    return loop


def _deep_list(depth: int) -> list:
    value: list = []
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize(
    "value",
    [
        b"bytes",
        bytearray(b"x"),
        {1, 2},
        frozenset({3}),
        _Hostile(),
        object(),
        1 + 2j,
        range(3),
        Ellipsis,
        _self_containing(),
        _deep_list(50_000),
        {"a": _Hostile()},
        [_Hostile()],
        float("nan"),
        float("inf"),
        "x" * 100_000,
        [0] * 100_000,
        10**5000,
        type,
    ],
    ids=lambda v: type(v).__name__,
)
@pytest.mark.parametrize(
    "path",
    [
        ("num_steps",),
        ("name",),
        ("config",),
        ("config", "graph_scope"),
        ("requests", 0, "prompt"),
        ("requests", 0, "request_id"),
        ("requests", 0, "reasoning"),
        ("requests", 0, "temperature"),
        ("accepts",),
        ("format",),
    ],
)
def test_arbitrary_python_values_in_from_dict(value: Any, path: tuple) -> None:
    data = _valid()
    target = data
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    _error(lambda: Scenario.from_dict(data))


@pytest.mark.parametrize("key", [1, 1.5, None, (1, 2), _Hostile(), b"name", frozenset(), True])
@pytest.mark.parametrize("where", [(), ("config",), ("requests", 0)])
def test_non_string_keys_in_from_dict(key: Any, where: tuple) -> None:
    data = _valid()
    target = data
    for k in where:
        target = target[k]
    target[key] = 1
    _error(lambda: Scenario.from_dict(data))


def test_subclassed_builtins_never_run_their_overrides() -> None:
    data = _valid()
    data["num_steps"] = _SneakyInt(20)
    data["name"] = _SneakyStr("demo")
    data["requests"][0]["prompt"] = _SneakyList([1, 2, 3])
    data["config"] = _SneakyDict(data["config"])
    scenario = _outcome(lambda: Scenario.from_dict(data))
    assert scenario is not None  # values of subclassed builtins are taken at their builtin value
    assert type(scenario.num_steps) is int and scenario.num_steps == 20
    assert type(scenario.name) is str and scenario.name == "demo"
    assert scenario.requests[0].prompt == (1, 2, 3)
    data["num_steps"] = _SneakyInt(10**6)
    assert _error(lambda: Scenario.from_dict(data)).field == "num_steps"
    data = _valid()
    data["requests"][0]["request_id"] = _SneakyStr("zz" * 100)
    assert _error(lambda: Scenario.from_dict(data)).field == "requests[0].request_id"
    data = _valid()
    data[_SneakyKey("colour")] = 1
    assert _error(lambda: Scenario.from_dict(data)).field == "colour"


@pytest.mark.parametrize(
    "value", [None, 3, b"{}", bytearray(b"{"), b"\xff\xfe", ["{}"], _Hostile()], ids=lambda v: type(v).__name__
)
def test_from_json_of_a_non_string(value: Any) -> None:
    _error(lambda: Scenario.from_json(value))


def test_from_json_accepts_utf8_bytes() -> None:
    text = demo_scenario().to_json()
    assert Scenario.from_json(text.encode("utf-8")) == Scenario.from_json(text)


def test_messages_of_long_values_stay_short() -> None:
    err = _error(lambda: Scenario.from_dict(_with(_valid(), ("name",), "\u00e9" * 100_000)))
    assert err.field == "name"
    err = _error(lambda: Scenario.from_dict(_with(_valid(), ("num_steps",), [[[[["x" * 1000] * 1000] * 10]]])))
    assert err.field == "num_steps"


# ---------------------------------------------------------------------------
# D. strings must be valid Unicode (UTF-8 encodable); request ids printable
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path, field",
    [
        (("name",), "name"),
        (("requests", 0, "request_id"), "requests[0].request_id"),
        (("accepts", 0, "request_id"), "accepts[0].request_id"),
    ],
)
@pytest.mark.parametrize("text", ["\ud800", "a\udfffb", "\udc80\udc80", "ok\ud83d"])
@pytest.mark.parametrize("ensure_ascii", [True, False])
def test_lone_surrogates_are_rejected(path: tuple, field: str, text: str, ensure_ascii: bool) -> None:
    raw = json.dumps(text, ensure_ascii=ensure_ascii)
    err = _error(lambda: Scenario.from_json(_text_with(_valid(), path, raw, ensure_ascii=ensure_ascii)))
    assert err.field == field
    assert "surrogate" in str(err)
    err = _error(lambda: Scenario.from_dict(_with(_valid(), path, text)))
    assert err.field == field


def test_a_surrogate_pair_escape_is_a_valid_character() -> None:
    """``"\\ud83d\\ude00"`` in JSON is one character (U+1F600), not two lone surrogates."""
    data = _valid()
    text = _text_with(data, ("name",), '"demo \\ud83d\\ude00"')
    scenario = _outcome(lambda: Scenario.from_json(text))
    assert scenario is not None and scenario.name == "demo \U0001f600"


@pytest.mark.parametrize(
    "rid", ["a\x00b", "r\n1", "\t", "r\x7f", "r\x85", "r\u200b", "r\u2028", "r\ufeff", "r\U000e0001"]
)
def test_control_and_invisible_characters_in_request_ids_are_rejected(rid: str) -> None:
    data = _valid()
    old = data["requests"][0]["request_id"]
    data["requests"][0]["request_id"] = rid
    for acc in data["accepts"]:
        if acc["request_id"] == old:
            acc["request_id"] = rid
    err = _error(lambda: Scenario.from_dict(data))
    assert err.field == "requests[0].request_id"
    assert "printable" in str(err)


@pytest.mark.parametrize("name", ["a\x00b", "line\nbreak", "bell\x07", "x\x9b"])
def test_control_characters_in_the_name_are_rejected(name: str) -> None:
    assert _error(lambda: Scenario.from_dict(_with(_valid(), ("name",), name))).field == "name"


@pytest.mark.parametrize("rid", ["r-\u00e9t\u00e9", "\u8bf7\u6c42", "r 1", "\U0001f600"])
def test_printable_unicode_request_ids_and_names_are_kept(rid: str) -> None:
    data = _valid()
    old = data["requests"][0]["request_id"]
    data["requests"][0]["request_id"] = rid
    for acc in data["accepts"]:
        if acc["request_id"] == old:
            acc["request_id"] = rid
    data["name"] = f"demo {rid}\u200d"  # a zero-width joiner is fine in a name
    scenario = _outcome(lambda: Scenario.from_dict(data))
    assert scenario is not None and scenario.requests[0].request_id == rid
    for ensure_ascii in (True, False):
        again = Scenario.from_json(json.dumps(scenario.to_dict(), ensure_ascii=ensure_ascii))
        assert again == scenario


@pytest.mark.parametrize("key", ["\ud800", "a\x00", "x" * 5000, "\u00e9\u00e9"])
def test_odd_unknown_keys_are_named_safely(key: str) -> None:
    data = _valid()
    data["config"][key] = 1
    err = _error(lambda: Scenario.from_dict(data))
    assert err.field.startswith("config")
    assert len(err.field) < 120


# ---------------------------------------------------------------------------
# Hypothesis: mutate valid scenarios and their JSON text
# ---------------------------------------------------------------------------

_BASES = tuple(_valid(mode) for mode in ("greedy", "target_match", "topp", "naive"))


def _paths(value: Any, limit: int = 300) -> list[tuple]:
    """Paths into a JSON value, breadth first (the root included), at most ``limit``."""
    found: list[tuple] = []
    queue: list[tuple[tuple, Any]] = [((), value)]
    while queue and len(found) < limit:
        path, item = queue.pop(0)
        found.append(path)
        if isinstance(item, dict):
            queue.extend((path + (key,), child) for key, child in item.items())
        elif isinstance(item, list):
            queue.extend((path + (i,), child) for i, child in enumerate(item[:50]))
    return found


def _get(value: Any, path: tuple) -> Any:
    for key in path:
        value = value[key]
    return value


_NASTY_TEXT = [
    "",
    " ",
    "\ud800",
    "\udfff",
    "a\ud800b",
    "\x00",
    "\n",
    "\u202e",
    "\ufeff",
    "\uffff",
    "\U0010ffff",
    "\u00e9",
    "\U0001f600",
    "x" * 201,
    "x" * 65,
    "r0",
    "r1",
    "greedy",
    "topp",
    "step",
    "forward",
    "1",
    "true",
    "null",
]
_NUMBERS = [
    0,
    -1,
    1,
    2,
    3,
    7,
    63,
    64,
    255,
    256,
    511,
    512,
    513,
    4096,
    8192,
    10_000,
    10_001,
    2**31,
    2**53 + 1,
    2**63 - 2,
    2**63 - 1,
    2**63,
    2**64,
    -(2**63),
    10**30,
    -(10**30),
    0.0,
    -0.0,
    0.05,
    0.5,
    1.0,
    1.5,
    10.0,
    10.5,
    1e-300,
    1e300,
    float("nan"),
    float("inf"),
    float("-inf"),
]
# Raw JSON text that json.dumps cannot (or would not) produce.
_RAW = [
    BIG,
    "-" + BIG,
    "1" + "0" * 4400,
    "1e400",
    "-1e400",
    "1e-400",
    "NaN",
    "Infinity",
    "-Infinity",
    '"\\ud800"',
    '"\\udc00x"',
    '"\\ud83d\\ude00"',
    '"\\u0000"',
    "[" * 900 + "]" * 900,
    "[" * 2000 + "]" * 2000,
    '{"a":' * 990 + "1" + "}" * 990,
    "[" * 995 + "1" + "]" * 995,
    "[]",
    "{}",
    '""',
]

_leaf = st.one_of(
    st.sampled_from(_NUMBERS),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.none(),
    st.sampled_from(_NASTY_TEXT),
    st.text(st.characters(codec=None, min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=()), max_size=8),
)
_json_value = st.recursive(
    _leaf,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)


@st.composite
def _mutation(draw: st.DrawFn, data: Any) -> tuple[Any, str | None]:
    """Mutate ``data`` in place at one path; returns (data, raw text for MARK or None)."""
    paths = _paths(data)
    path = draw(st.sampled_from(paths))
    old = _get(data, path)
    kind = draw(
        st.sampled_from(
            ["replace", "number", "text", "raw", "wrap", "drop", "extra", "empty", "grow", "stringify", "listify"]
        )
    )
    raw = None
    if kind == "replace":
        new: Any = draw(_json_value)
    elif kind == "number":
        new = draw(st.sampled_from(_NUMBERS) | st.integers(-(2**70), 2**70))
    elif kind == "text":
        new = draw(st.sampled_from(_NASTY_TEXT) | st.text(max_size=70))
    elif kind == "raw":
        raw = draw(st.sampled_from(_RAW))
        new = MARK
    elif kind == "wrap":
        depth = draw(st.sampled_from([1, 2, 50, 900, 990, 1500, 2000]))
        opener, closer = draw(st.sampled_from([("[", "]"), ('{"a":', "}")]))
        raw = opener * depth + json.dumps(old) + closer * depth
        new = MARK
    elif kind == "drop" and path and isinstance(_get(data, path[:-1]), (dict, list)):
        parent = _get(data, path[:-1])
        del parent[path[-1]]
        return data, None
    elif kind == "extra" and isinstance(old, dict):
        old[draw(st.text(max_size=10) | st.sampled_from(["config", "request_id", "step", "prompt"]))] = draw(
            _json_value
        )
        return data, None
    elif kind == "empty":
        new = draw(st.sampled_from([[], {}, "", 0]))
    elif kind == "grow":
        n = draw(st.sampled_from([65, 201, 4097, 20_000]))
        # Grown from a bounded piece: a value grown by an earlier mutation (or a list of lists of
        # grown lists) must not multiply again, or one example takes gigabytes to serialise.
        if isinstance(old, str):
            new = (old or "x")[:64] * n
        elif isinstance(old, (list, dict)):
            piece = old if len(json.dumps(old)) <= 65_536 else "x" * 64
            new = [piece] * 65  # a whole request (or config) repeated past its list's limit
        else:
            new = [old] * n
    elif kind == "stringify":
        new = json.dumps(old)
    elif kind == "listify":
        new = [old]
    else:
        new = draw(_json_value)
    if not path:
        return new, raw
    _get(data, path[:-1])[path[-1]] = new
    return data, raw


def _text_mutation(text: str, data: st.DataObject) -> str:
    if not text:
        return text
    kind = data.draw(st.sampled_from(["truncate", "delete", "insert", "duplicate-key", "none"]))
    i = data.draw(st.integers(0, len(text) - 1))
    if kind == "truncate":
        return text[:i]
    if kind == "delete":
        return text[:i] + text[i + 1 :]
    if kind == "insert":
        return (
            text[:i]
            + data.draw(st.sampled_from(["\\", '"', ",", "[", "{", "}", "]", "\ud800", "\x00", "9" * 5000, "-"]))
            + text[i:]
        )
    if kind == "duplicate-key":
        return text.replace('"num_steps":', '"num_steps": 1, "num_steps":', 1)
    return text


@settings(
    max_examples=max(settings().max_examples * 10, 100),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_mutated_scenarios_load_or_raise_scenario_error(data: st.DataObject) -> None:
    obj = json.loads(json.dumps(data.draw(st.sampled_from(_BASES), label="base")))
    raws = []
    for _ in range(data.draw(st.integers(1, 3), label="mutations")):
        obj, raw = data.draw(_mutation(obj), label="mutation")
        if raw is not None:
            raws.append(raw)
    ensure_ascii = data.draw(st.booleans(), label="ensure_ascii")
    try:
        text = json.dumps(obj, ensure_ascii=ensure_ascii)
    except ValueError:  # an integer json.dumps itself cannot write: feed the object only
        text = None
    if text is not None:
        for raw in raws:
            text = text.replace(json.dumps(MARK), raw, 1)
        if data.draw(st.booleans(), label="mutate text"):
            text = _text_mutation(text, data)
        _outcome(lambda: Scenario.from_json(text))
    if not raws:
        _outcome(lambda: Scenario.from_dict(obj))


def test_validate_of_a_scenario_built_in_code() -> None:
    import dataclasses

    demo = demo_scenario()
    assert _error(lambda: validate(dataclasses.replace(demo, name="\ud800"))).field == "name"
    spec = dataclasses.replace(demo.requests[0], seed=10**5000)
    _error(lambda: validate(dataclasses.replace(demo, requests=(spec,) + demo.requests[1:])))
    spec = dataclasses.replace(demo.requests[0], temperature=float("nan"))
    assert _error(lambda: validate(dataclasses.replace(demo, requests=(spec,) + demo.requests[1:]))).field == (
        "requests[0].temperature"
    )
