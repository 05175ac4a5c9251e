"""What one fit produced: timings, compile counts, the ELBO curve and the environment.

A runnable's timing fills one `Measurement`; the engine turns it into the one
`RunResult` that it returns, the store keeps and `run --json` prints (its field names
are the JSON keys). ELBO values are the ELBO itself (negative), with the exact
log Y! = gammaln(Y + 1) (`log_factorial = "exact"`).
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from typing import Any, NamedTuple

import numpy as np

from core import catalog
from core.results import outcome, stability
from core.results.estimates import Estimates
from core.spec import DEFAULTS, FitSpec

STATUSES = ("ok", "diverged", "interrupted", "timed_out")
# Where a run's executables came from; a run whose executables came from more than one
# place says how many from each (`cache_label`): "compiled 1, disk 3".
CACHE_STATES = ("compiled", "memory", "disk", "none")


def met_tolerance(elbo: np.ndarray, spec: FitSpec) -> bool:
    """Whether a fit of `spec` whose ELBO curve is `elbo` stopped at its tolerance
    (`core.results.outcome.judge`'s `converged`)."""
    return outcome.judge(elbo, spec.tol, spec.iterations, spec.precision).converged is True


def cache_label(compiled: int, disk: int, memory: int) -> str:
    """"compiled", "disk" or "memory" when every executable came from one place, else
    "compiled 1, disk 3" (the counts of each place, zeros left out); "none" for no executable."""
    counts = {"compiled": compiled, "disk": disk, "memory": memory}
    places = [name for name, count in counts.items() if count > 0]
    if not places:
        return "none"
    if len(places) == 1:
        return places[0]
    return ", ".join(f"{name} {counts[name]}" for name in places)


def is_cache_label(text: str) -> bool:
    """Whether `text` is a label `cache_label` can give."""
    if text in CACHE_STATES:
        return True
    parts = [part.split(" ") for part in text.split(", ")]
    names = [part[0] for part in parts]
    order = ("compiled", "disk", "memory")  # as cache_label writes them
    return (len(parts) > 1 and all(len(part) == 2 and part[1].isdigit() and int(part[1]) > 0 for part in parts)
            and all(name in order for name in names) and len(set(names)) == len(names)
            and names == sorted(names, key=order.index))


class Remedy(NamedTuple):
    """What to change after a fit went wrong: a setting of the fit, its new value, and why.

    Attributes:
        setting: "init", "lr" or "precision" (the sidebar's box of that name).
        value: the value to try (a float for "lr").
        why: the advice (a diverged run's error ends with it).
    """

    setting: str
    value: str | float
    why: str


def divergence_remedy(precision: str, optimizer: str, init: str, lr: float, not_finite: bool = True) -> Remedy | None:
    """What to try after a fit diverged: the optimizer's default start where the start is one
    its steps cannot take; the default learning rate where a larger one made the steps
    overshoot; float64 where float32's overflow may be the cause (an ELBO that went non-finite,
    `not_finite`); None where none of these."""
    found = catalog.OPTIMIZERS.get(optimizer)
    if found is not None and found.set_steps and init == "log_rates_sd":
        start = DEFAULTS.init_for(optimizer)
        return Remedy("init", start, f"{optimizer} steps by a set size, which can take the small S of the "
                                     f"log_rates_sd start through zero: start it from {start}, its default")
    if found is not None and found.takes_lr and lr > DEFAULTS.lr:
        return Remedy("lr", DEFAULTS.lr, f"{optimizer}'s steps at a learning rate of {lr:g} overshoot: try the "
                                         f"default, {DEFAULTS.lr:g}")
    if precision == "float32" and not_finite:
        smaller = " or a smaller learning rate" if found is not None and found.takes_lr else ""
        return Remedy("precision", "float64", "float32 overflows exp above 88 and loses an ill-conditioned Sigma "
                                              f"where float64 does not: try float64{smaller}")
    return None


def _with_advice(error: str | None, not_finite: bool, precision: str, optimizer: str, init: str,
                 lr: float) -> str | None:
    """A divergence message (`error`; None for a fit that did not diverge), with what to try
    (`divergence_remedy`)."""
    remedy = divergence_remedy(precision, optimizer, init, lr, not_finite) if error else None
    return f"{error}; {remedy.why}" if remedy is not None else error


@dataclasses.dataclass
class Measurement:
    """What timing a runnable measured, before the engine adds the queue and the derived
    figures; every field has the meaning of the `RunResult` field of the same name.

    Attributes:
        elbo: ELBO per iteration of the first call, float64, exact log Y!; a non-finite
            value marks where the fit diverged.
        times: seconds of each timed steady-state call.
        shape: (n, p, d) of the data fitted.
        optimizer, lr, init: what actually ran (pyplnmodels ignores the spec's).
        timed_out: the run passed its time budget (`core.coordination.budget`) and stopped early:
            `elbo` is the curve so far and `times` the repeats that finished (maybe none).
        warnings: what the runnable itself knows a reader of its numbers must be told.
        final_change: the last relative ELBO change as the runnable's stopping test read it
            (float64-accumulated), or None where it has no such test (the trace's is used).
        final_latent: (M, S) at the end of the first call, on the host, for the check of
            where the fit ended; None where the runnable does not hand them over. Not kept.
        certified_elbo, estimated_gap: that check (`core.run.certified`), or None.
        program: the fingerprint of the compiled program that ran (`core.run.fingerprint`),
            "" where nothing is compiled ahead (eager, the peers).
        estimates: B and Sigma at the final point (`core.results.estimates`), made with the
            check; None where it is.
    """

    elbo: np.ndarray
    times: list[float]
    shape: tuple[int, int, int]
    transfer_s: float
    first_call_s: float
    device_kind: str
    versions: dict[str, Any]
    optimizer: str
    lr: float
    init: str
    # What a fit that compiles nothing ahead on one device (a peer) measures.
    trace_lower_s: float = 0.0
    compile_s: float = 0.0
    compile_count: int = 0
    disk_cache_hits: int = 0
    recompile_count: int = 0
    cache: str = "none"
    devices: int = 1
    processes: int = 1
    chunk_iterations: int = 0
    timed_out: bool = False
    from_scratch: bool = False
    warnings: list[str] = dataclasses.field(default_factory=list)
    final_change: float | None = None
    final_latent: tuple[np.ndarray, np.ndarray] | None = None
    certified_elbo: float | None = None
    estimated_gap: float | None = None
    program: str = ""
    estimates: Estimates | None = None


@dataclasses.dataclass
class RunResult:
    """One stored run.

    Attributes:
        id: store row id (0 until stored).
        created_at: epoch seconds when the run finished.
        spec: the FitSpec as a dict (`FitSpec.to_dict()`); `spec_key` is its hash.
        strategy, dataset, n, p, d, precision, device, iterations, optimizer, lr, init,
        repeats, tol: the spec, flattened for tables ("dataset" is its label).
        status: "ok", "diverged" (an ELBO not finite, or ending orders of magnitude below
            its start: see `core.results.outcome`), "interrupted" (killed mid-run) or
            "timed_out" (stopped past the server's time budget: the curve so far, the
            repeats that finished; timings 0 when none did).
        error: for "diverged" and "timed_out", where and what; else None.
        diverged_at: the iteration where a diverged fit went wrong, or None.
        iterations_run: iterations done (while_loop may stop early; diverged runs stop).
        transfer_s: host-to-device copy of the data, timed apart from the fit (for data
            drawn on the devices, the draw, its compilation included).
        trace_lower_s: tracing to a jaxpr and lowering to StableHLO (0 when cached or eager).
        compile_s: XLA compilation (0 when cached in memory; a disk-cache load otherwise).
        first_call_s: the first execution (for eager and jit-on-call, includes dispatch
            warm-up and any compilation JAX does lazily).
        run_s, run_s_min, run_s_max: steady state over `repeats` executions (median, min, max).
        per_iter_ms: run_s / iterations_run in milliseconds.
        compile_count: XLA compilations that ran (persistent-cache loads excluded).
        disk_cache_hits: executables loaded from the persistent compilation cache.
        recompile_count: compilations during the steady-state repeats (0 for jitted code).
        cache: "compiled" (built now), "memory" (reused in process), "disk" (loaded from
            the persistent cache), "none" (eager: nothing compiled ahead), or where each
            came from when they came from more than one place, e.g. "compiled 1, disk 3".
        final_elbo: last finite ELBO.
        elbo: ELBO per iteration, up to the first non-finite value or the while_loop stop.
        log_factorial: "exact" (gammaln) for every ELBO here.
        devices: number of devices used.
        processes: processes that computed the fit together (`jax.process_count()`; 1
            unless it ran under jax.distributed).
        device_kind: e.g. "cpu", "NVIDIA H100".
        versions: jax, jaxlib, optax, numpy, python versions; platform; cpu_count; host.
        queue_wait_s: seconds spent waiting for the device in the host's queue.
        chunk_iterations: iterations per call when a large compiled loop was split into
            calls (so that a cancel lands within seconds); 0 when it ran in one call.
        timed_start, timed_end: epoch seconds of the timed section, while the run held
            the device; `to_dict()` also gives them as `timed_window` [start, end].
        time_to_solution_s: for a fit that stopped at its tolerance (`tol` > 0, the last
            relative ELBO change under it), the steady-state seconds from its first
            iteration to the stop: `run_s`, whose repeats all stop there. None for a fit
            run for a fixed number of iterations (`tol` = 0), one that used them all
            before meeting `tol`, or one that did not finish.
        final_change: the last relative ELBO change |ELBO_k - ELBO_k-1| / |ELBO_k| (as the
            stopping test read it, float64-accumulated, for a fit that stops at `tol`), or
            None (diverged, or one iteration); `converged` and `stalled` compare it with `tol`
            and with what the precision resolves.
        warnings: what a reader of this run's numbers must know, one sentence each: the data
            were changed to be fitted (all-zero columns dropped), or float32 rounding may
            move the ELBO by more than the lab promises. Empty for most runs.
        from_scratch: 1 when the run was asked to compile from scratch and skipped the
            in-memory and persistent compilation caches (`core.run.cold_compile`); 0 when
            it could use them (its `cache` then says whether it did) or compiles nothing
            ahead (eager, the peers).
        worker: the Dask worker that ran it, "<address> on <host>" (`core.cluster`); empty
            for a run made in the process that stored it (the command line without
            --scheduler, a benchmark).
        owner: who started it, for who may delete it: "user:<issuer> <subject>" for a dashboard user
            signed in with the team's SSO, "session:<token>" for a dashboard session
            otherwise (a token never reused), empty for the command line and imports.
        timed_with: the mark shared by runs timed together, their repeats in turn
            (`core.run.engine.run_together`): their ratios are free of the machine's load
            at one moment. Empty for a run timed alone.
        certified_elbo: the profiled ELBO at the final M and S, evaluated again in float64
            NumPy (exact log Y!), whatever the fit's precision; None where not made (a peer,
            data drawn on the devices, runs stored before it existed).
        estimated_gap: how far below the optimum the float64 gradient there puts the fit,
            relative (`core.fit.certificate`); `converged` needs it at most
            `outcome.CONVERGED_GAP` where it is known.
        program: the fingerprint of the compiled program the run executed
            (`core.run.fingerprint`): two runs with one fingerprint on one kind of device ran
            one program, so any difference between their timings is noise. "" where nothing
            is compiled ahead (eager, the peers) or for runs stored before it was recorded.
        repeat_times: seconds of each timed steady-state call, in the order they ran (their
            median, min and max are run_s, run_s_min and run_s_max), so that a difference
            between two runs can be tested again later (`core.results.significance`). Empty
            for runs stored before they were kept.
        estimates: what the fit estimates, B and Sigma (`core.results.estimates`), for the
            caller of the run that made it; never stored (`NOT_STORED`), so None for a run
            read from the store.
    """

    spec: dict[str, Any]
    spec_key: str
    strategy: str
    dataset: str
    n: int
    p: int
    d: int
    precision: str
    device: str
    iterations: int
    optimizer: str
    lr: float
    init: str
    repeats: int
    tol: float
    status: str
    error: str | None
    diverged_at: int | None
    iterations_run: int
    transfer_s: float
    trace_lower_s: float
    compile_s: float
    first_call_s: float
    run_s: float
    run_s_min: float
    run_s_max: float
    per_iter_ms: float
    compile_count: int
    disk_cache_hits: int
    recompile_count: int
    cache: str
    final_elbo: float | None
    elbo: list[float]
    devices: int
    device_kind: str
    versions: dict[str, Any]
    processes: int = 1
    log_factorial: str = "exact"
    queue_wait_s: float = 0.0
    chunk_iterations: int = 0
    timed_start: float = 0.0
    timed_end: float = 0.0
    id: int = 0
    created_at: float = 0.0
    from_scratch: int = 0
    time_to_solution_s: float | None = None
    final_change: float | None = None
    warnings: list[str] = dataclasses.field(default_factory=list)
    worker: str = ""
    owner: str = ""
    timed_with: str = ""
    certified_elbo: float | None = None
    estimated_gap: float | None = None
    program: str = ""
    repeat_times: list[float] = dataclasses.field(default_factory=list)
    estimates: Estimates | None = None

    def _verdict(self) -> tuple[bool | None, bool, bool]:
        if self.status != "ok":
            return None, False, False
        return outcome.certified_verdict(self.final_change, self.tol, self.precision,
                                         self.iterations_run < self.iterations, self.estimated_gap)

    @property
    def stalled(self) -> bool:
        """Whether the fit stopped on a relative ELBO change its precision cannot tell from
        none (`core.results.outcome.stalled`), and its float64 gradient (where known) does not
        say it arrived: not converged, whatever `tol` says."""
        return self._verdict()[1]

    @property
    def short(self) -> bool:
        """Whether the fit stopped at `tol` but its float64 gradient puts it more than
        `outcome.CONVERGED_GAP` below the optimum: not converged."""
        return self._verdict()[2]

    @property
    def converged(self) -> bool | None:
        """Whether the fit stopped at `tol` and is at the optimum: it stopped before its last
        iteration (the strategies stop only there, on a float64-accumulated ELBO that the
        trace may round) or with its last relative ELBO change under `tol`, and its float64
        gradient puts it within `outcome.CONVERGED_GAP` of the optimum (where known; else it
        must not be `stalled`); None when `tol` is 0 (a fixed number of iterations was asked
        for) or the fit did not finish well (see `core.results.outcome`)."""
        return self._verdict()[0]

    @property
    def remedy(self) -> Remedy | None:
        """What its notes advise trying: for a diverged run, what its error says
        (`divergence_remedy`); for a float32 run that stopped short of the optimum or stalled
        at float32's resolution, float64 (as `outcome.short_note` and `outcome.stall_note`
        say); else None."""
        if self.status == "diverged" and self.error:
            # Whether its ELBO went non-finite is not kept: the error says whether the advice
            # (the same either way, but float64's, given only for a non-finite ELBO) was given.
            remedy = divergence_remedy(self.precision, self.optimizer, self.init, self.lr)
            return remedy if remedy is not None and self.error.endswith(remedy.why) else None
        if self.status == "ok" and self.precision == "float32" and (self.short or self.stalled):
            return Remedy("precision", "float64", "float64 resolves the ELBO's changes that float32 cannot")
        return None

    @property
    def unstable(self) -> str:
        """Why its timings carry other processes' load (`core.results.stability`), or "" for a
        run timed on a quiet machine (or stored before the machine's state was kept)."""
        return stability.unstable(self.versions)

    def to_dict(self, with_elbo: bool = True) -> dict[str, Any]:
        """The run as plain JSON data, as stored and exported (its estimates are neither)."""
        out = dataclasses.asdict(dataclasses.replace(self, **dict.fromkeys(NOT_STORED)))  # not copied
        for name in NOT_STORED:
            out.pop(name)
        out["timed_window"] = [self.timed_start, self.timed_end]
        out["unstable"] = self.unstable
        out["converged"] = self.converged
        out["stalled"] = self.stalled
        out["short"] = self.short
        if not with_elbo:
            out.pop("elbo")
        return out

    @classmethod
    def measured(cls, spec: FitSpec, measurement: Measurement, queue_wait_s: float,
                 timed_window: tuple[float, float], budget_s: float | None = None,
                 warnings: tuple[str, ...] = (), together: int = 1) -> RunResult:
        """The result of `spec`: its measurement, the time it queued, its timed window, for
        a run that timed out the budget it passed, and `warnings` (about the data and the
        precision) before the measurement's own; `together`: how many runs were timed
        together with it, sharing that budget."""
        ended = outcome.judge(measurement.elbo, spec.tol, spec.iterations, spec.precision,
                              measurement.final_change, measurement.estimated_gap)
        trace = ended.elbo
        times = measurement.times or [0.0]  # a run stopped by its budget may have timed no repeat
        run_s = statistics.median(times)
        n, p, d = measurement.shape
        status = ended.status
        error = _with_advice(ended.error, ended.elbo.size < len(measurement.elbo), spec.precision,
                             measurement.optimizer, measurement.init, measurement.lr)
        if status == "ok" and measurement.timed_out:
            status = "timed_out"
            # Timed together, the strategies share one hold of the device and its budget: "per
            # run" alone read as each one's, beside one that finished alone in a third of it.
            shared = f", shared by the {together} strategies timed together" if together > 1 else ""
            error = (f"stopped past this server's time budget of {budget_s or 0:,.0f} s per run{shared} "
                     f"(PLNLAB_MAX_RUN_SECONDS): {len(trace):,} of {spec.iterations:,} iterations in the first "
                     f"call, {len(measurement.times)} of {spec.repeats} timed repeats")
            # How far it got, as a run out of iterations says it: whether a larger budget is worth asking for.
            gap = measurement.estimated_gap
            if gap is not None and np.isfinite(gap):
                error += f"; checked in float64 where it stopped, {outcome.how_far(gap)}"
        return cls(
            **{name: getattr(measurement, name) for name in _KEPT_AS_MEASURED},
            **{name: getattr(spec, name) for name in _FROM_SPEC},
            spec=spec.to_dict(), spec_key=spec.key, dataset=spec.dataset.label, n=n, p=p, d=d,
            status=status, error=error, diverged_at=ended.diverged_at, final_change=ended.final_change,
            iterations_run=len(trace), final_elbo=float(trace[-1]) if len(trace) else None,
            elbo=[float(v) for v in trace],
            run_s=run_s, run_s_min=min(times), run_s_max=max(times),
            repeat_times=[float(seconds) for seconds in measurement.times],
            per_iter_ms=1e3 * run_s / max(1, len(measurement.elbo)),
            time_to_solution_s=run_s if status == "ok" and measurement.times and ended.converged else None,
            queue_wait_s=queue_wait_s, timed_start=timed_window[0], timed_end=timed_window[1], created_at=time.time(),
            from_scratch=int(measurement.from_scratch), warnings=[*warnings, *measurement.warnings],
        )

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> RunResult:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in values.items() if k in names})


# Fields a run carries to its caller but the store never keeps (nor an export).
NOT_STORED = ("estimates",)
# The fields a run keeps as its measurement measured them (same name, same meaning), and those
# it takes from its spec as they are; `RunResult.measured` derives the others.
_DERIVED = ("elbo", "times", "shape", "timed_out", "from_scratch", "warnings", "final_change", "final_latent")
_KEPT_AS_MEASURED = tuple(f.name for f in dataclasses.fields(Measurement) if f.name not in _DERIVED)
_FROM_SPEC = ("strategy", "precision", "device", "iterations", "repeats", "tol")
