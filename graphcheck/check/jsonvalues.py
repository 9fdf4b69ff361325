"""Records as JSON and back, exactly: how a lockstep run's outcome crosses processes (``-j N``) without pickle.

A :class:`ValueCodec` turns a value into JSON types and back to an equal value. JSON's own types
stay as they are (a list stays a list); what JSON cannot hold is tagged with a one-key object
``{"$": TAG, "v": ...}``: a tuple, a dict (its keys need not be strings), a set, a float that is
not finite, bytes, a NumPy array or scalar, a :class:`~graphcheck.scenario.Scenario`, and an
instance of one of the dataclasses the codec was given (by class name, its fields encoded in
turn). Anything else is kept as its ``repr`` (:class:`Shown`, whose own ``repr`` is that text),
so what a report or a headline prints of it is unchanged.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Mapping

from graphcheck.scenario import Scenario

TAG = "$"


class Shown(str):
    """A value the codec could not keep, as its ``repr``: it prints (``repr``, ``f"{x!r}"``) as the value did."""

    def __repr__(self) -> str:
        return str(self)


class ValueCodec:
    """Encode values to JSON types and back; ``types``: the dataclasses it may rebuild, by class name."""

    def __init__(self, *types: type) -> None:
        self.types: Mapping[str, type] = {cls.__name__: cls for cls in types}

    def encode(self, value: Any) -> Any:
        if value is None or isinstance(value, (bool, str)):
            return str(value) if isinstance(value, Shown) else value
        if isinstance(value, int):
            return int(value)
        if isinstance(value, float):
            return value if math.isfinite(value) else _tagged("float", repr(value))
        if isinstance(value, list):
            return [self.encode(v) for v in value]
        if isinstance(value, tuple) and not hasattr(value, "_fields"):
            return _tagged("tuple", [self.encode(v) for v in value])
        if isinstance(value, dict):
            return _tagged("dict", [[self.encode(k), self.encode(v)] for k, v in value.items()])
        if isinstance(value, (set, frozenset)):
            items = sorted((self.encode(v) for v in value), key=repr)
            return _tagged(type(value).__name__ if type(value) in (set, frozenset) else "set", items)
        if isinstance(value, bytes):
            return _tagged("bytes", value.hex())
        if isinstance(value, Scenario):
            return _tagged("Scenario", value.to_dict())
        if type(value).__name__ in self.types and type(value) is self.types[type(value).__name__]:
            return _tagged(type(value).__name__, self.fields(value))
        if type(value).__module__ == "numpy":
            return self._numpy(value)
        return _tagged("repr", repr(value))

    def fields(self, record: Any) -> dict[str, Any]:
        """Every init field of the dataclass ``record``, encoded."""
        return {f.name: self.encode(getattr(record, f.name)) for f in dataclasses.fields(record) if f.init}

    def rebuild(self, cls: type, data: Mapping[str, Any]) -> Any:
        """The dataclass ``cls`` from :meth:`fields`' dict."""
        return cls(**{name: self.decode(value) for name, value in data.items()})

    def decode(self, data: Any) -> Any:
        if isinstance(data, list):
            return [self.decode(v) for v in data]
        if not isinstance(data, dict):
            return data
        tag = data[TAG]
        value: Any = data.get("v")  # JSON, of the shape its tag says
        if tag == "tuple":
            return tuple(self.decode(v) for v in value)
        if tag == "dict":
            return {_hashable(self.decode(k)): self.decode(v) for k, v in value}
        if tag in ("set", "frozenset"):
            items = (_hashable(self.decode(v)) for v in value)
            return set(items) if tag == "set" else frozenset(items)
        if tag == "float":
            return float(value)
        if tag == "bytes":
            return bytes.fromhex(value)
        if tag == "Scenario":
            return Scenario.from_dict(value)
        if tag == "ndarray" or tag == "numpy":
            return _numpy_value(tag, data)
        if tag == "repr":
            return Shown(value)
        if tag in self.types:
            return self.rebuild(self.types[tag], value)
        raise ValueError(f"unknown tag {tag!r} in an encoded value")

    def _numpy(self, value: Any) -> Any:
        if hasattr(value, "shape") and hasattr(value, "dtype") and hasattr(value, "tolist"):
            kind = "ndarray" if type(value).__name__ == "ndarray" else "numpy"
            return {TAG: kind, "dtype": str(value.dtype), "v": self.encode(value.tolist())}
        return _tagged("repr", repr(value))


def _tagged(tag: str, value: Any) -> dict[str, Any]:
    return {TAG: tag, "v": value}


def _hashable(value: Any) -> Any:
    return tuple(_hashable(v) for v in value) if isinstance(value, list) else value


def _numpy_value(tag: str, data: Mapping[str, Any]) -> Any:
    import numpy as np

    plain = ValueCodec().decode(data["v"])
    array = np.asarray(plain, dtype=np.dtype(data["dtype"]))
    return array if tag == "ndarray" else array[()]


__all__ = ["Shown", "TAG", "ValueCodec"]
