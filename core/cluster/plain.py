"""What a worker sends back, as plain data the submitter checks: a schema, not a pickle.

A worker's task returns `encode(result)`: nested dicts, lists, strings, numbers and bytes
only, which Dask carries in its msgpack family. The submitter's client accepts nothing else
(`core.cluster.connection`: `deserializers=["msgpack"]`), so a worker that is not ours, or
a compromised one, cannot make the server unpickle an object of its choosing: what it sends
is refused before any of it is built. `decode` then rebuilds only the result types listed
in `types()`, field by field, and refuses anything else with `NotPlain`.

How each value is written:

- None, bool, int, float, str, bytes: as they are;
- a list: a list (msgpack may give it back as a tuple); a tuple: {"t": [...]}; a dict:
  {"d": {key: value}} (string keys) or {"m": [[key, value], ...]};
- a NumPy array of numbers: {"a": [dtype, shape, bytes]}; a NumPy scalar: its Python value;
- one of `types()` (frozen dataclasses and dataclasses of plain fields): {"o": name, "f":
  {field: value}}, every field of the type present and no other.

Dask's own messages (a task's exception, a killed worker) still travel in its report
stream, which its client does not let us restrict: there, mutual TLS is what keeps out a
worker that is not ours (docs/security.md).
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
from collections.abc import Callable
from typing import Any

import numpy as np

from core.data.counts import DataError
from core.run.progress import Cancelled
from core.spec import SpecError

# The types a task may return, by the name written on the wire: every result type of
# `core.cluster.tasks` and what they hold. Each is plain data (no JAX), importable by the server.
_TYPE_PATHS = {
    "RunResult": "core.results.result", "Estimates": "core.results.estimates",
    "Inspection": "core.inspect.findings", "Executable": "core.inspect.findings",
    "ArrayLayout": "core.inspect.findings", "Peaks": "core.inspect.findings", "Floor": "core.inspect.findings",
    "Analysis": "core.inspect.findings",
    "Cost": "core.inspect.xla_analysis", "Memory": "core.inspect.xla_analysis",
    "PitfallResult": "core.inspect.pitfall_notes", "Compile": "core.machine.compile_log",
    "Timeline": "core.inspect.trace_findings", "StrategyTrace": "core.inspect.trace_findings",
    "Span": "core.inspect.trace_findings", "OpTime": "core.inspect.trace_findings",
    "PartTime": "core.inspect.trace_findings",
    "Stopped": "core.cluster.plain", "Refused": "core.cluster.plain",
}
# NumPy dtypes an array may have: numbers only (an object array would hold anything).
_DTYPES = frozenset({"bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                     "float16", "float32", "float64", "complex64", "complex128"})
# A sequence as msgpack gives it back: Dask reads its arrays as tuples.
_SEQUENCES = (list, tuple)
# Nesting deeper than this is refused: no result of ours is a tenth as deep.
MAX_DEPTH = 32


class NotPlain(ValueError):
    """A value that is not plain data of the schema: refused, with where and why."""


@dataclasses.dataclass(frozen=True)
class Stopped:
    """What a task that stopped at its submitter's cancel returns (`returned`): a Cancel is
    what the user asked for, not a failed computation for the worker to log as an error
    with its traceback. The submitter raises `core.run.progress.Cancelled` with `reason`."""

    reason: str


@dataclasses.dataclass(frozen=True)
class Refused:
    """What a task whose spec or data was refused returns (`returned`): a refusal (more memory
    than the device has, past the time budget, data that cannot be fitted) is an answer for
    the user, not a failed computation for the worker to log with its traceback ("Compute
    Failed", once per refusal). The submitter raises the `DataError` (`data`) or `SpecError`
    it carries."""

    message: str
    data: bool = False

    def error(self) -> SpecError:
        return (DataError if self.data else SpecError)(self.message)


def returned(task: Callable) -> Callable:
    """A task that returns `encode(task(...))`: a worker's result leaves it as plain data
    (a task cancelled on the way, `Stopped`; one refused, `Refused`)."""
    @functools.wraps(task)
    def plainly(*args, **kwargs):
        try:
            return encode(task(*args, **kwargs))
        except Cancelled as cancelled:
            return encode(Stopped(str(cancelled)))
        except SpecError as refused:
            return encode(Refused(str(refused), isinstance(refused, DataError)))

    return plainly


@functools.cache
def types() -> dict[str, type]:
    """{name on the wire: class}, imported on first use (no import-time work)."""
    return {name: getattr(importlib.import_module(module), name) for name, module in _TYPE_PATHS.items()}


def encode(value: Any, _depth: int = 0) -> Any:
    """`value` as plain data; `NotPlain` for anything the schema does not hold."""
    if _depth > MAX_DEPTH:
        raise NotPlain(f"nested deeper than {MAX_DEPTH}")
    down = _depth + 1
    if isinstance(value, np.generic):  # before the primitives: np.float64 is a float
        return value.item()
    if value is None or isinstance(value, (bool, int, float, str, bytes)):
        return value
    if isinstance(value, np.ndarray):
        if value.dtype.name not in _DTYPES:
            raise NotPlain(f"an array of {value.dtype}")
        return {"a": [value.dtype.name, list(value.shape), np.ascontiguousarray(value).tobytes()]}
    if isinstance(value, list):
        return [encode(item, down) for item in value]
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return {"t": [encode(item, down) for item in value]}
    if isinstance(value, dict):
        if all(isinstance(key, str) for key in value):
            return {"d": {key: encode(item, down) for key, item in value.items()}}
        return {"m": [[encode(key, down), encode(item, down)] for key, item in value.items()]}
    name = type(value).__name__
    if types().get(name) is type(value) and dataclasses.is_dataclass(value):
        return {"o": name, "f": {field.name: encode(getattr(value, field.name), down)
                                 for field in dataclasses.fields(value)}}
    raise NotPlain(f"a {type(value).__module__}.{name} is not one of the result types")


def decode(data: Any, _depth: int = 0) -> Any:
    """The value `encode` wrote; `NotPlain` for anything else."""
    if _depth > MAX_DEPTH:
        raise NotPlain(f"nested deeper than {MAX_DEPTH}")
    down = _depth + 1
    if data is None or isinstance(data, (bool, int, float, str, bytes)):
        return data
    if isinstance(data, _SEQUENCES):
        return [decode(item, down) for item in data]
    if not isinstance(data, dict) or len(data) not in (1, 2):
        raise NotPlain(f"unexpected {type(data).__name__}")
    if set(data) == {"t"} and isinstance(data["t"], _SEQUENCES):
        return tuple(decode(item, down) for item in data["t"])
    if set(data) == {"d"} and isinstance(data["d"], dict):
        return {_key(key): decode(item, down) for key, item in data["d"].items()}
    if set(data) == {"m"} and isinstance(data["m"], _SEQUENCES):
        pairs = [pair for pair in data["m"] if isinstance(pair, _SEQUENCES) and len(pair) == 2]
        if len(pairs) != len(data["m"]):
            raise NotPlain("a mapping whose items are not pairs")
        return {_hashable(decode(key, down)): decode(item, down) for key, item in pairs}
    if set(data) == {"a"}:
        return _array(data["a"])
    if set(data) == {"o", "f"}:
        return _object(data["o"], data["f"], down)
    raise NotPlain(f"unexpected keys {sorted(map(str, data))[:4]}")


def _key(key: Any) -> str:
    if not isinstance(key, str):
        raise NotPlain("a dictionary key that is not a string")
    return key


def _hashable(key: Any) -> Any:
    try:
        hash(key)
    except TypeError:
        raise NotPlain(f"an unhashable key ({type(key).__name__})") from None
    return key


def _array(parts: Any) -> np.ndarray:
    if not (isinstance(parts, _SEQUENCES) and len(parts) == 3 and parts[0] in _DTYPES
            and isinstance(parts[2], bytes) and isinstance(parts[1], _SEQUENCES)
            and all(isinstance(n, int) and n >= 0 for n in parts[1])):
        raise NotPlain("an array that is not [numeric dtype, shape, bytes]")
    dtype, shape, raw = np.dtype(parts[0]), parts[1], parts[2]
    if int(np.prod(shape, dtype=np.int64)) * dtype.itemsize != len(raw):
        raise NotPlain(f"an array of shape {shape} and {len(raw)} bytes")
    return np.frombuffer(raw, dtype=dtype).reshape(shape).copy()


def _object(name: Any, fields: Any, depth: int) -> Any:
    cls = types().get(name) if isinstance(name, str) else None
    if cls is None:
        raise NotPlain(f"{str(name)[:60]!r} is not one of the result types")
    if not isinstance(fields, dict):
        raise NotPlain(f"{name} without its fields")
    expected = {field.name for field in dataclasses.fields(cls) if field.init}
    if set(fields) != expected:
        missing, extra = sorted(expected - set(fields)), sorted(set(map(str, fields)) - expected)
        raise NotPlain(f"{name} with fields missing {missing[:4]} or unknown {extra[:4]}")
    return cls(**{field: decode(value, depth) for field, value in fields.items()})
