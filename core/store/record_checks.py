"""What a stored run must make sense as, beyond its field types: the checks every record
passes, whether this program just measured it or someone hands it over in a file.

An import is a way to put anything into a store that everyone reads, so it meets the same
rules as a fresh run (`RunStore.finish` and the import both call `check`): the spec it
names is one this server would run (its caps), the flattened fields agree with that spec
(what ran, for pyPLNmodels, which runs its own algorithm), timings are consistent (min <=
median <= max, none negative, each repeat's time where kept summarized by them, the time
per iteration the steady state's over the iterations run), a finished run's ELBO is finite
and its last value is the final one, a divergence is at an iteration the run had, the timed
window lies before the run was stored, nothing is dated in the future, and text fields stay
short.
"""

from __future__ import annotations

import json
import math
import statistics
import time

from core import catalog
from core.results.result import RunResult
from core.spec import INITS, LR_RANGE, FitSpec, SpecError, cap, cap_variable

# Clocks of the machines a file comes from may run a little ahead of this one.
FUTURE_TOLERANCE_S = 300.0
# The timed window ends before the run is stored; allow for rounding of exported floats.
WINDOW_TOLERANCE_S = 1.0
MAX_TEXT = 500
MAX_ERROR_TEXT = 2_000
MAX_JSON_TEXT = 20_000
MAX_WARNINGS = 20
# More than the timing protocol ever takes (`core.run.repeats.MAX_REPEATS`), so that no file
# can make one record hold millions of numbers.
MAX_REPEAT_TIMES = 1_000
TIMINGS = ("queue_wait_s", "transfer_s", "trace_lower_s", "compile_s", "first_call_s", "run_s", "run_s_min",
           "run_s_max", "per_iter_ms")
# No timed call of a fit returns faster: one dispatch of a compiled program alone takes longer.
MIN_TIMED_CALL_S = 1e-6
COUNTS = ("compile_count", "disk_cache_hits", "recompile_count", "devices", "iterations_run", "chunk_iterations")


class RecordError(ValueError):
    """A record that is well typed but makes no sense as a run; the message says why."""


def check(run: RunResult) -> None:
    """Raise RecordError naming the first rule `run` breaks (see the module docstring)."""
    _check_text(run)
    spec = _check_spec(run)
    _check_shape(run, spec)
    _check_what_ran(run, spec)
    _check_outcome(run)
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
    _check_repeat_times(run)
    if run.time_to_solution_s is not None and not run.run_s_min <= run.time_to_solution_s <= run.run_s_max:
        raise RecordError(f"time_to_solution_s {run.time_to_solution_s} is not a steady-state time of the run "
                          f"(run_s_min {run.run_s_min} to run_s_max {run.run_s_max})")
    if not 0 <= run.iterations_run <= run.iterations or len(run.elbo) != run.iterations_run:
        raise RecordError(f"iterations_run must equal the ELBO curve's length ({len(run.elbo):,}) and be at most "
                          f"iterations ({run.iterations:,}); got {run.iterations_run:,}")
    _check_dates(run)


def _check_repeat_times(run: RunResult) -> None:
    """Each repeat's seconds, where kept, are what run_s, run_s_min and run_s_max summarize."""
    times = run.repeat_times
    if not times:
        return
    if len(times) > MAX_REPEAT_TIMES:
        raise RecordError(f"repeat_times holds {len(times):,} timings; at most {MAX_REPEAT_TIMES:,} are kept")
    if not all(math.isfinite(seconds) and seconds > 0 for seconds in times):
        raise RecordError("repeat_times must be seconds > 0")
    summary = {"run_s_min": min(times), "run_s": statistics.median(times), "run_s_max": max(times)}
    for name, expected in summary.items():
        if not math.isclose(getattr(run, name), expected, rel_tol=1e-9):
            raise RecordError(f"{name} {getattr(run, name)} is not what repeat_times give ({expected})")


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


def _check_what_ran(run: RunResult, spec: FitSpec) -> None:
    if run.strategy == "pyplnmodels":  # its own algorithm, whatever the spec says: it must be one
        if run.optimizer not in catalog.OPTIMIZERS or run.init not in INITS:
            raise RecordError(f"optimizer {run.optimizer!r:.80} and init {run.init!r:.80} must be ones this "
                              "program knows")
        if not (math.isfinite(run.lr) and LR_RANGE[0] <= run.lr <= LR_RANGE[1]):
            raise RecordError(f"lr must be between {LR_RANGE[0]:g} and {LR_RANGE[1]:g}; got {run.lr}")
    else:
        for name, expected in (("optimizer", spec.optimizer.name), ("lr", spec.optimizer.lr), ("init", spec.init)):
            if getattr(run, name) != expected:
                raise RecordError(f"{name} {getattr(run, name)!r:.80} disagrees with its spec's {expected!r:.80}")
    if not (math.isfinite(run.tol) and run.tol == spec.tol):
        raise RecordError(f"tol {run.tol!r} disagrees with its spec's {spec.tol!r}")


def _check_outcome(run: RunResult) -> None:
    finite = [math.isfinite(value) for value in run.elbo]
    if run.status == "ok" and not (all(finite) and run.final_elbo is not None and math.isfinite(run.final_elbo)):
        raise RecordError("a run with status ok has a finite ELBO at every iteration; this one has not")
    if run.status == "ok" and run.elbo and run.final_elbo != run.elbo[-1]:
        raise RecordError(f"final_elbo {run.final_elbo} is not the last value of its ELBO curve ({run.elbo[-1]})")
    if run.diverged_at is not None and not 0 <= run.diverged_at < max(1, run.iterations):
        raise RecordError(f"diverged_at {run.diverged_at} is not an iteration of the run (0 to {run.iterations - 1})")
    if run.final_change is not None and not (math.isfinite(run.final_change) and run.final_change >= 0):
        raise RecordError(f"final_change must be a relative change >= 0; got {run.final_change}")
    # Infinite where the float64 re-evaluation failed (Sigma not positive definite there).
    if run.estimated_gap is not None and not run.estimated_gap >= 0:
        raise RecordError(f"estimated_gap must be a relative distance >= 0; got {run.estimated_gap}")
    if run.status == "ok" and run.run_s_min < MIN_TIMED_CALL_S:
        raise RecordError(f"run_s_min {run.run_s_min} s is faster than any timed call of a fit can return "
                          f"({MIN_TIMED_CALL_S:g} s)")
    # A timed-out run's curve is the first call's so far, as a finished run's is; a diverged
    # run's is cut where it went wrong, while its time per iteration counts every iteration.
    if run.status in ("ok", "timed_out") and run.iterations_run > 0:
        expected = 1e3 * run.run_s / run.iterations_run
        if not math.isclose(run.per_iter_ms, expected, rel_tol=1e-6):
            raise RecordError(f"per_iter_ms {run.per_iter_ms} is not the steady state over the iterations run "
                              f"({expected:.6g} ms)")


def _check_shape(run: RunResult, spec: FitSpec) -> None:
    shape = spec.dataset.shape
    if shape is not None and run.status != "interrupted" and (run.n, run.p, run.d) != shape:
        raise RecordError(f"shape {run.n} x {run.p} (d = {run.d}) disagrees with its spec's "
                          f"{shape[0]} x {shape[1]} (d = {shape[2]})")
    if shape is None:  # data read from files: the caps on uploads hold for their runs too
        for name, value in (("rows", run.n), ("columns", run.p), ("covariates", run.d)):
            if value > cap(name):
                raise RecordError(f"{value:,} {name} is more than this server fits ({cap(name):,}, "
                                  f"{cap_variable(name)})")


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
