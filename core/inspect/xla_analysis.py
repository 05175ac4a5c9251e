"""XLA's cost and memory analyses of a compiled executable, read the same on every backend.

jax's `Compiled.cost_analysis()` and `memory_analysis()` have changed shape across
versions and backends (a dict, a list of dicts, None; -1 for "unknown"): this module
turns whatever they return into `Cost` and `Memory`, with None for anything unknown.
"""

from __future__ import annotations

import dataclasses
from typing import Any


@dataclasses.dataclass(frozen=True)
class Cost:
    """XLA's cost estimate; None where XLA gives none (e.g. -1 on some GPU builds).

    Attributes:
        flops: floating-point operations.
        bytes_accessed: bytes read and written.
        transcendentals: exp, log and similar calls.
    """

    flops: float | None = None
    bytes_accessed: float | None = None
    transcendentals: float | None = None

    def __add__(self, other: Cost) -> Cost:
        pairs = zip(dataclasses.astuple(self), dataclasses.astuple(other))
        return Cost(*(None if a is None or b is None else a + b for a, b in pairs))

    def scaled(self, factor: float) -> Cost:
        return Cost(*(None if a is None else a * factor for a in dataclasses.astuple(self)))


@dataclasses.dataclass(frozen=True)
class Memory:
    """XLA's memory analysis of one executable, in bytes; None where not reported."""

    argument_bytes: int | None = None
    output_bytes: int | None = None
    alias_bytes: int | None = None
    temp_bytes: int | None = None
    generated_code_bytes: int | None = None
    peak_bytes: int | None = None


def normalise_cost(raw: Any) -> Cost:
    """XLA's cost analysis -> `Cost`.

    jax has returned a dict, a list of one dict per module, or None across versions and
    backends; negative values mean "unknown" (some GPU builds report -1 flops).
    """
    entries = [] if raw is None else [raw] if isinstance(raw, dict) else [entry for entry in raw if entry]
    if not entries:
        return Cost()
    total = Cost(0.0, 0.0, 0.0)
    for entry in entries:
        # A missing key means XLA counted none of that kind; a negative value, unknown.
        values = (float(entry.get(key, 0.0)) for key in ("flops", "bytes accessed", "transcendentals"))
        total = total + Cost(*(value if value >= 0 else None for value in values))
    return total


def normalise_memory(stats: Any) -> Memory | None:
    """`Compiled.memory_analysis()` -> `Memory`, None-safe across backends."""
    if stats is None:
        return None

    def read(name):
        value = getattr(stats, name, None)
        return int(value) if isinstance(value, (int, float)) and value >= 0 else None

    return Memory(*(read(f"{name}_in_bytes") for name in (
        "argument_size", "output_size", "alias_size", "temp_size", "generated_code_size", "peak_memory")))
