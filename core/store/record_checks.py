"""What a stored run must make sense as, beyond its field types: the checks every record
passes, whether this program just measured it or someone hands it over in a file.

An import is a way to put anything into a store that everyone reads, so it meets the same
rules as a fresh run: the spec it names is one this server would run (its caps), the
flattened fields agree with that spec, timings are consistent (min <= median <= max, none
negative), the timed window lies before the run was stored, nothing is dated in the future,
and text fields stay short.
"""

from __future__ import annotations

import json
import math
import time

from core.fit import catalog
from core.run.result import RunResult
from core.spec import FitSpec, SpecError, cap

# Clocks of the machines a file comes from may run a little ahead of this one.
FUTURE_TOLERANCE_S = 300.0
# The timed window ends before the run is stored; allow for rounding of exported floats.
WINDOW_TOLERANCE_S = 1.0
MAX_TEXT = 500
MAX_ERROR_TEXT = 2_000
MAX_JSON_TEXT = 20_000
MAX_WARNINGS = 20
TIMINGS = ("queue_wait_s", "transfer_s", "trace_lower_s", "compile_s", "first_call_s", "run_s", "run_s_min",
           "run_s_max", "per_iter_ms")
COUNTS = ("compile_count", "disk_cache_hits", "recompile_count", "devices", "iterations_run", "chunk_iterations")


class RecordError(ValueError):
    """A record that is well typed but makes no sense as a run; the message says why."""


def check(run: RunResult) -> None:
    """Raise RecordError naming the first rule `run` breaks (see the module docstring)."""
    _check_text(run)
    spec = _check_spec(run)
    _check_shape(run, spec)
    for name in TIMINGS:
        value = getattr(run, name)
        if math.isnan(value) or value < 0:
            raise RecordError(f"{name} must be a number of seconds >= 0; got {value}")
    for name in COUNTS:
        if getattr(run, name) < 0:
            raise RecordError(f"{name} must be >= 0; got {getattr(run, name)}")
    if not run.run_s_min <= run.run_s <= run.run_s_max:
        raise RecordError(f"timings are inconsistent: run_s_min {run.run_s_min} <= run_s {run.run_s} "
                          f"<= run_s_max {run.run_s_max} does not hold")
    if run.time_to_solution_s is not None and not run.run_s_min <= run.time_to_solution_s <= run.run_s_max:
        raise RecordError(f"time_to_solution_s {run.time_to_solution_s} is not a steady-state time of the run "
                          f"(run_s_min {run.run_s_min} to run_s_max {run.run_s_max})")
    if not 0 <= run.iterations_run <= run.iterations or len(run.elbo) != run.iterations_run:
        raise RecordError(f"iterations_run must equal the ELBO curve's length ({len(run.elbo):,}) and be at most "
                          f"iterations ({run.iterations:,}); got {run.iterations_run:,}")
    _check_dates(run)


def _check_text(run: RunResult) -> None:
    for name, value in vars(run).items():
        limit = MAX_ERROR_TEXT if name == "error" else MAX_TEXT
        if isinstance(value, str) and len(value) > limit:
            raise RecordError(f"{name} is {len(value):,} characters long; at most {limit:,} are kept")
    if len(run.warnings) > MAX_WARNINGS or any(len(warning) > MAX_TEXT for warning in run.warnings):
        raise RecordError(f"warnings must be at most {MAX_WARNINGS} sentences of at most {MAX_TEXT:,} characters")
    for name in ("spec", "versions"):
        size = len(json.dumps(getattr(run, name)))
        if size > MAX_JSON_TEXT:
            raise RecordError(f"{name} is {size:,} characters of JSON; at most {MAX_JSON_TEXT:,} are kept")


def _check_spec(run: RunResult) -> FitSpec:
    """The record's spec, as this server would accept it (its caps), agreeing with the record."""
    if run.strategy not in catalog.RUNNABLES:
        raise RecordError(f"strategy must be one of {', '.join(catalog.RUNNABLES)}; got {run.strategy!r:.80}")
    try:
        spec = FitSpec.from_dict(run.spec)
    except (SpecError, TypeError, ValueError, AttributeError) as exc:
        raise RecordError(f"spec is not one this server runs: {exc}") from None
    # Not the dataset's label: its wording may change between versions, the spec's values do not.
    flattened = {"strategy": spec.strategy, "precision": spec.precision, "device": spec.device,
                 "iterations": spec.iterations, "repeats": spec.repeats}
    for name, expected in flattened.items():
        if getattr(run, name) != expected:
            raise RecordError(f"{name} {getattr(run, name)!r:.80} disagrees with its spec's {expected!r:.80}")
    return spec


def _check_shape(run: RunResult, spec: FitSpec) -> None:
    shape = spec.dataset.shape
    if shape is not None and run.status != "interrupted" and (run.n, run.p, run.d) != shape:
        raise RecordError(f"shape {run.n} x {run.p} (d = {run.d}) disagrees with its spec's "
                          f"{shape[0]} x {shape[1]} (d = {shape[2]})")
    if shape is None:  # data read from files: the caps on uploads hold for their runs too
        for name, value in (("rows", run.n), ("columns", run.p), ("covariates", run.d)):
            if value > cap(name):
                raise RecordError(f"{value:,} {name} is more than this server fits ({cap(name):,}, "
                                  f"PLNLAB_MAX_{name.upper()})")


def _check_dates(run: RunResult) -> None:
    now = time.time()
    if not math.isfinite(run.created_at) or not 0 <= run.created_at <= now + FUTURE_TOLERANCE_S:
        raise RecordError(f"created_at {_date(run.created_at)} is in the future or not a date")
    if run.timed_end:  # 0: a run from before timed windows were recorded, or interrupted
        if not 0 < run.timed_start <= run.timed_end <= run.created_at + WINDOW_TOLERANCE_S:
            raise RecordError(f"timed window {_date(run.timed_start)} to {_date(run.timed_end)} does not end "
                              f"before the run was stored ({_date(run.created_at)})")


def _date(epoch: float) -> str:
    try:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(epoch)) + " UTC"
    except (OverflowError, ValueError, OSError):
        return repr(epoch)
