"""Refuse a fit that would not fit: its memory estimated before anything is loaded.

The estimate counts what a fit holds at its peak, in units of one n x p array:
Y and O (2), M and S (2), the optimizer's two moments or step sizes for each (4),
the new state written over the old one by the strategies that donate it (the compiled
loops, jit_step) or beside it by the others (4 more), and the temporaries of one iteration
(the rate matrix, the gradients and their products: 4, from XLA's memory analysis at
oaks x1000, where they come to about 3.5 arrays). A shared server fails better with a
clear refusal than with the device running out of memory halfway through a demo.
"""

from __future__ import annotations

import os
from typing import NamedTuple

from core.run import catalog, runtime
from core.spec import FitSpec, SpecError

# n x p arrays alive at the peak (see the module docstring).
_ARRAYS_DONATING = 2 + 2 + 4 + 4
_ARRAYS_NOT_DONATING = _ARRAYS_DONATING + 4
# Headroom for what the estimate leaves out (p x p blocks, the runtime itself).
USABLE_FRACTION = 0.9


class Estimate(NamedTuple):
    needed_bytes: int
    free_bytes: int | None

    @property
    def fits(self) -> bool:
        return self.free_bytes is None or self.needed_bytes <= USABLE_FRACTION * self.free_bytes


def shape_of(spec: FitSpec, counts=None) -> tuple[int, int, int] | None:
    """(n, p, d) of the spec's data without loading it; None when only loading tells."""
    return (counts.n, counts.p, counts.d) if counts is not None else spec.dataset.shape


def needed_bytes(spec: FitSpec, shape: tuple[int, int, int]) -> int:
    """The estimated peak bytes of `spec`'s fit on data of `shape` (see the module docstring)."""
    n, p, d = shape
    itemsize = 4 if spec.precision == "float32" else 8
    arrays = _ARRAYS_DONATING if catalog.get(spec.strategy).donates_state else _ARRAYS_NOT_DONATING
    return itemsize * (arrays * n * p + n * d)


def free_bytes(platform: str) -> int | None:
    """Memory free on `platform`'s first device: the accelerator's own, or the host's
    available memory for CPU; None where it cannot be told."""
    if platform == "cpu":
        try:
            with open("/proc/meminfo") as meminfo:
                for line in meminfo:
                    if line.startswith("MemAvailable:"):
                        return int(line.split()[1]) * 1024
        except OSError:
            pass
        try:
            return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError):
            return None
    stats = runtime.resolve_device(platform).memory_stats() or {}
    if "bytes_limit" not in stats:
        return None
    return int(stats["bytes_limit"]) - int(stats.get("bytes_in_use", 0))


def estimate(spec: FitSpec, counts=None) -> Estimate | None:
    """The spec's estimated need and the device's free memory; None when the data's
    shape is not known before loading."""
    shape = shape_of(spec, counts)
    if shape is None:
        return None
    return Estimate(needed_bytes(spec, shape), free_bytes(spec.device))


def _gb(value: int) -> str:
    return f"{value / 1e9:,.2f} GB"


def check(spec: FitSpec, counts=None) -> None:
    """Raise SpecError, with the estimate, when `spec` would not fit in free memory."""
    found = estimate(spec, counts)
    if found is None or found.fits:
        return
    n, p, _ = shape_of(spec, counts)
    raise SpecError(
        f"not enough memory: this fit needs about {_gb(found.needed_bytes)} (n = {n:,}, p = {p:,}, "
        f"{spec.precision}) and the {spec.device} has {_gb(found.free_bytes)} free; use fewer rows, "
        f"float32 or a device with more memory")
