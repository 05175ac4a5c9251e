"""Refuse a fit that would not fit: its memory estimated before anything is loaded.

The estimate counts what a fit holds at its peak on the device, fitted to XLA's own memory
analysis (arguments + temporaries + outputs not written over the arguments) of the
compiled fits at shapes from n >> p to p >> n (`tests/machine/test_memory_estimate.py`
compares the two), with a margin:

- n x p arrays: Y and O (2), M and S (2), the optimizer's two moments or step sizes for
  each (4), and the temporaries of one iteration (the rate matrix, gradients and their
  products: XLA keeps 6 to 9 alive) -> 18 for the fits that write the new state over the
  old (compiled loops, jit_step); the others keep both states and, op by op, more
  temporaries -> 6 more. The quasi-Newton optimizers remember pairs of steps and gradient
  changes in M and S: preconditioned_lbfgs 4 pairs and a line search's trial point (XLA
  keeps 46 to 48) -> 50; optax's lbfgs 10 pairs (72 to 76) -> 80;
- p x p arrays: Omega, and Sigma, its Cholesky factor, the inverse and their products
  in one iteration (XLA keeps 3.5 to 4.9 alive; the ELBO's trace term is summed row-wise,
  without a p x p Gram) -> 5; the optimizers that evaluate the ELBO at more than one
  point an iteration keep more (diagonal_newton 6.2, preconditioned_lbfgs 7.5) -> 8; a
  float32 fit factors its p x p matrices again in float64 for their log-determinant (seed and
  rprop keep 6.3 float32 p x p arrays at p >> n, optax's lbfgs more) -> 4 more;
- the profiled optimizers (`catalog.PROFILED`) with fewer rows than columns work through the
  rows' n x n matrix in float64 instead (`core.fit.row_path`): p x p arrays 2.1 (float64)
  to 5.1 (float32: Omega is made in float64 and cast) -> 4 and 6, and 8 float64 n x p
  arrays more (R D^-1, its solves and their products; XLA keeps 35 to 43 n x p arrays in
  all for preconditioned_lbfgs, 16 to 25 for diagonal_newton). preconditioned_lbfgs makes
  Omega there once, after its loop (`Algorithm.finish`): the state's and the new one, at
  most 1.7 p x p arrays beside the rest -> 2;
- n x d: X and its products (2); d x p: B, its moments and gradient (6).

On the CPU the host is the device, so the data's host copies count too: Y and O in
float64 as loaded and in the fit's precision as placed. A shared server fails better
with a clear refusal than with the device running out of memory halfway through a demo.
"""

from __future__ import annotations

import os
from typing import NamedTuple

from core import catalog
from core.fit import row_path
from core.machine import runtime
from core.spec import PROFILED_OPTIMIZERS, FitSpec, SpecError

# Arrays alive at the peak, by shape (see the module docstring), and the optimizers that keep more.
N_P_ARRAYS_DONATING = 18
NOT_DONATING_EXTRA = 6
N_P_ARRAYS_BY_OPTIMIZER = {"preconditioned_lbfgs": 50, "lbfgs": 80}
P_P_ARRAYS = 5
P_P_ARRAYS_BY_OPTIMIZER = {"preconditioned_lbfgs": 8, "diagonal_newton": 8}
FLOAT32_P_P_EXTRA = 4
P_P_ARRAYS_THROUGH_ROWS = {"float64": 4, "float32": 6}
P_P_ARRAYS_THROUGH_ROWS_BY_OPTIMIZER = {"preconditioned_lbfgs": 2}
WIDE_N_P_ARRAYS_THROUGH_ROWS = 8
N_D_ARRAYS = 2
D_P_ARRAYS = 6
# Bytes per cell of the data's host copies (Y and O as float64, then in the fit's precision).
HOST_BYTES_PER_CELL = 2 * 8
# Headroom for what the estimate leaves out (the runtime itself, the executables).
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


def _itemsize(spec: FitSpec) -> int:
    return 4 if spec.precision == "float32" else 8


def device_bytes(spec: FitSpec, shape: tuple[int, int, int]) -> int:
    """The estimated peak bytes of `spec`'s fit on the device, for data of `shape`."""
    n, p, d = shape
    optimizer = spec.optimizer.name
    arrays = N_P_ARRAYS_BY_OPTIMIZER.get(optimizer, N_P_ARRAYS_DONATING)
    arrays += 0 if catalog.runnable(spec.strategy).donates_state else NOT_DONATING_EXTRA
    wide = 0
    if optimizer in PROFILED_OPTIMIZERS and row_path.through_rows(n, p, spec.precision, spec.device):
        square = P_P_ARRAYS_THROUGH_ROWS_BY_OPTIMIZER.get(optimizer, P_P_ARRAYS_THROUGH_ROWS[spec.precision])
        wide = 8 * WIDE_N_P_ARRAYS_THROUGH_ROWS * n * p  # float64 whatever the fit's precision
    else:
        square = P_P_ARRAYS_BY_OPTIMIZER.get(optimizer, P_P_ARRAYS)
        square += FLOAT32_P_P_EXTRA if spec.precision == "float32" else 0
    return wide + _itemsize(spec) * (arrays * n * p + square * p * p + N_D_ARRAYS * n * d + D_P_ARRAYS * d * p)


def host_bytes(spec: FitSpec, shape: tuple[int, int, int]) -> int:
    """The data's copies on the host: Y and O as loaded (float64) and in the fit's precision."""
    n, p, _ = shape
    return (HOST_BYTES_PER_CELL + 2 * _itemsize(spec)) * n * p


def needed_bytes(spec: FitSpec, shape: tuple[int, int, int]) -> int:
    """The estimated peak bytes of `spec`'s fit where it runs: the device's, and on the CPU
    (where host and device share the memory) the host copies of the data too."""
    return device_bytes(spec, shape) + (host_bytes(spec, shape) if spec.device == "cpu" else 0)


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
    """Gigabytes to the digits an estimate holds (three or so: "112 GB", "24.0 GB")."""
    gigabytes = value / 1e9
    return f"{gigabytes:,.{0 if gigabytes >= 100 else 1 if gigabytes >= 10 else 2}f} GB"


def check(spec: FitSpec, counts=None) -> None:
    """Raise SpecError, with the estimate, when `spec` would not fit in free memory."""
    found = estimate(spec, counts)
    if found is None or found.fits:
        return
    n, p, _ = shape_of(spec, counts)
    raise SpecError(
        f"not enough memory: this fit needs about {_gb(found.needed_bytes)} (n = {n:,}, p = {p:,}, "
        f"{spec.precision}) and the {spec.device} has {_gb(found.free_bytes)} free; use fewer rows"
        f"{', float32' if spec.precision == 'float64' else ''} or a device with more memory")
