"""Plain, hashable descriptions of a fit: what to fit, how, and where.

Specs are frozen dataclasses of plain Python values so that they can key caches
(`st.cache_data`, the in-process executable cache) and be stored as JSON. They are
validated on construction: a spec that exists is a spec that can be run, short of the
device or the data files being absent, which the engine checks when it runs.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import Any

DATASET_KINDS = ("oaks", "simulated", "csv")
PRECISIONS = ("float32", "float64")
DEVICES = ("cpu", "gpu", "tpu")
OPTIMIZERS = ("seed", "adam", "rprop")
INITS = ("seed", "log_counts")

# Caps keep a mistyped number from taking a shared server down; they are generous
# enough for the benchmarks (oaks x1000 is n = 116,000).
MAX_REPLICATE = 100_000
MAX_ROWS = 10_000_000
MAX_COLUMNS = 2_000
MAX_COVARIATES = 50
MAX_ITERATIONS = 1_000_000
MAX_REPEATS = 100


class SpecError(ValueError):
    """A spec, option or input that is not acceptable; the message says what is accepted."""


def _check_choice(name: str, value: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise SpecError(f"{name} must be one of {', '.join(choices)}; got {value!r}")


def _check_int(name: str, value: int, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise SpecError(f"{name} must be a whole number; got {value!r}")
    if not low <= value <= high:
        raise SpecError(f"{name} must be between {low:,} and {high:,}; got {value:,}")


@dataclasses.dataclass(frozen=True)
class DatasetSpec:
    """Which counts to fit.

    Attributes:
        kind: "oaks" (pyPLNmodels' oaks, 116 x 114, rows repeated `replicate` times),
            "simulated" (PLN draws of size n x p with d covariates from `seed`) or
            "csv" (counts, and optionally log-offsets, read from files).
        replicate: oaks only: each row is repeated this many times (np.repeat, axis 0).
        n, p, d, seed: simulated only.
        counts_path, offsets_path: csv only. `offsets_path` holds log-offsets.
        content_hash: csv only: a hash of the files' bytes, so that a spec names data,
            not a path whose content may change. Filled in by `core.data`.
    """

    kind: str = "oaks"
    replicate: int = 1
    n: int = 0
    p: int = 0
    d: int = 1
    seed: int = 0
    counts_path: str = ""
    offsets_path: str = ""
    content_hash: str = ""

    def __post_init__(self) -> None:
        _check_choice("dataset", self.kind, DATASET_KINDS)
        if self.kind == "oaks":
            _check_int("replicate", self.replicate, 1, MAX_REPLICATE)
        elif self.kind == "simulated":
            _check_int("n", self.n, 2, MAX_ROWS)
            _check_int("p", self.p, 1, MAX_COLUMNS)
            _check_int("d", self.d, 1, MAX_COVARIATES)
            _check_int("seed", self.seed, 0, 2**31 - 1)
            if self.d >= self.n:
                raise SpecError(f"d must be smaller than n; got d = {self.d}, n = {self.n}")
        elif not self.counts_path:
            raise SpecError("a csv dataset needs a counts file (--counts)")

    @property
    def label(self) -> str:
        """A short human name: "oaks x100", "simulated 1000x50 (seed 0)", "csv counts.csv"."""
        if self.kind == "oaks":
            return f"oaks x{self.replicate}"
        if self.kind == "simulated":
            return f"simulated {self.n}x{self.p} d={self.d} (seed {self.seed})"
        return f"csv {self.counts_path.rsplit('/', 1)[-1]}"


@dataclasses.dataclass(frozen=True)
class OptimizerSpec:
    """Which optax transformation drives the gradient steps (see `core.optim`).

    Attributes:
        name: "seed" (the tutorial's RAdam, negated and clipped to 0.1; `lr` unused),
            "adam" or "rprop" (pyPLNmodels' choice).
        lr: learning rate for adam and rprop.
    """

    name: str = "seed"
    lr: float = 0.01

    def __post_init__(self) -> None:
        _check_choice("optimizer", self.name, OPTIMIZERS)
        if not isinstance(self.lr, (int, float)) or isinstance(self.lr, bool):
            raise SpecError(f"lr must be a number; got {self.lr!r}")
        if not 0.0 < float(self.lr) <= 10.0:
            raise SpecError(f"lr must be in (0, 10]; got {self.lr}")

    @property
    def label(self) -> str:
        return "seed (RAdam, clip 0.1)" if self.name == "seed" else f"{self.name}(lr={self.lr:g})"


@dataclasses.dataclass(frozen=True)
class FitSpec:
    """Everything that determines one timed fit.

    Attributes:
        dataset: the data.
        strategy: a name from `core.strategies.names()`.
        iterations: gradient steps (the while_loop strategy may stop earlier at `tol`).
        precision: "float32" or "float64"; every array of the fit has this dtype.
        device: platform to run on: "cpu", "gpu" or "tpu".
        optimizer: the gradient transformation.
        init: "seed" (M = 0, S = 1, B = 0, Omega = I) or "log_counts" (pyPLNmodels').
        repeats: steady-state timing repeats after the first call.
        tol: relative ELBO change under which while_loop stops; 0 runs every iteration.
    """

    dataset: DatasetSpec = DatasetSpec()
    strategy: str = "scan"
    iterations: int = 150
    precision: str = "float32"
    device: str = "cpu"
    optimizer: OptimizerSpec = OptimizerSpec()
    init: str = "seed"
    repeats: int = 3
    tol: float = 0.0

    def __post_init__(self) -> None:
        _check_int("iterations", self.iterations, 1, MAX_ITERATIONS)
        _check_choice("precision", self.precision, PRECISIONS)
        _check_choice("device", self.device, DEVICES)
        _check_choice("init", self.init, INITS)
        _check_int("repeats", self.repeats, 1, MAX_REPEATS)
        if not isinstance(self.tol, (int, float)) or isinstance(self.tol, bool):
            raise SpecError(f"tol must be a number; got {self.tol!r}")
        if not 0.0 <= float(self.tol) < 1.0:
            raise SpecError(f"tol must be in [0, 1); got {self.tol}")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> FitSpec:
        values = dict(values)
        values["dataset"] = DatasetSpec(**values.get("dataset", {}))
        values["optimizer"] = OptimizerSpec(**values.get("optimizer", {}))
        return cls(**values)

    @property
    def key(self) -> str:
        """A stable hash naming this spec, so that stored runs of the same spec are found."""
        text = json.dumps(self.to_dict(), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]
