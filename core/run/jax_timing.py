"""The timing protocol for a JAX strategy: first call, then steady-state repeats.

Every timed section ends in `jax.block_until_ready`, since JAX dispatches
asynchronously; the data's copy to the device, tracing+lowering and XLA compilation
are timed apart by `core.run.prepared`; the first call and `repeats` steady-state calls
follow, each steady-state call starting from the same initial state.

`start` does everything up to the repeats and returns a `Timing` whose `repeat` times one
steady-state call: `measure` drives its repeats in a row, `core.run.engine.run_together`
drives the repeats of several fits in turn.
"""

from __future__ import annotations

import threading

import jax
import numpy as np

from core.coordination.budget import Budget
from core.data.counts import CountData
from core.machine import compile_log, runtime
from core.machine.compilations import CompileCounter
from core.results.result import Measurement
from core.run import progress
from core.run.cold_compile import from_scratch
from core.run.prepared import ExecutableCache, PreparedFit, prepare, timed
from core.run.progress import Progress, ProgressCallback
from core.run.repeats import steady_state
from core.spec import FitSpec


class Timing:
    """A prepared fit whose first call has run: what remains is its steady-state repeats.

    Attributes:
        elbo: the first call's ELBO curve (float64).
        first_call_s: the first call's seconds.
    """

    def __init__(self, spec: FitSpec, prep: PreparedFit, report: ProgressCallback, cancel: threading.Event | None,
                 budget: Budget | None, watched: bool, cold: bool) -> None:
        self.spec, self.prep, self.report, self.cancel, self.budget, self.cold = (
            spec, prep, report, cancel, budget, cold)
        strategy, problem = prep.strategy, prep.problem
        self._between_steps = None
        # Whether the budget stopped the first call's loop: a fit is timed out only where its
        # own work was cut, not because a budget it shares with fits timed beside it passed
        # after it had finished (its curve and repeats whole).
        self._first_call_cut = False
        # Python loops and compiled loops split into calls come back between iterations, and
        # where someone watches, they report them.
        steps_between = strategy.python_loop or problem.iterations_per_call < problem.iterations
        counted = watched and steps_between
        if steps_between:
            between = (progress.live_elbo_reporter(report, problem.iterations, cancel, budget)
                       if watched else progress.stop_checker(cancel, budget))

            def between_steps(i, value) -> bool:
                stop = between(i, value)
                self._first_call_cut = self._first_call_cut or (stop and i + 1 < problem.iterations)
                return stop

            self._between_steps = between_steps
        self._repeat_counter = CompileCounter()
        self._recompiles: list[compile_log.Compile] = []
        # A total only where iterations will be reported: one compiled call says nothing until
        # it returns, and a bar at 0/500 all through it read as hung.
        report(Progress("first_call", 0, problem.iterations if counted else 0))
        with jax.default_device(prep.device):
            # Copied outside the timing (a run that donates its state consumes it) and outside
            # the count: the copy compiles helpers of its own.
            start = jax.block_until_ready(strategy.fresh_state(prep.state))
        with CompileCounter() as self._first_counter, jax.default_device(prep.device), from_scratch(cold):
            output, self.first_call_s = timed(
                lambda: strategy.run(prep.executables, problem, start, prep.data, prep.tol, self._between_steps))
        self.elbo = np.asarray(output.elbo, dtype=np.float64)[: int(output.iterations_run)]
        if counted and self.elbo.size < problem.iterations:
            # Stopped at its tolerance between two reports: its bar kept the last count ("41 of at
            # most 500" where it converged at 49) while the first calls timed beside it ran.
            report(Progress("first_call", int(self.elbo.size), problem.iterations))
        # The change the stopping test read (float64-accumulated), not the trace's, which a
        # float32 trace may round to 0 (`core.results.outcome`).
        tested = None if output.stop is None else float(output.stop.change)
        self.tested_change = tested if tested is not None and np.isfinite(tested) else None
        # M and S on the host, for the check of where the fit ended (`core.run.certified`), made
        # after the run has left the device queue and its time budget; not where other
        # processes hold some of their rows (a jax.distributed run).
        params = output.state.params
        whole = all(getattr(array, "is_fully_addressable", True) for array in (params.latent_mean, params.latent_sd))
        self.final_latent = (np.asarray(params.latent_mean), np.asarray(params.latent_sd)) if whole else None
        del output, start, params  # the device state is not needed: free its buffers before the repeats

    def repeat(self, r: int) -> tuple[float, bool]:
        """Times the r-th steady-state call -> (its seconds, whether it ran every iteration
        the first call ran; a call the budget stopped partway is not a repeat)."""
        prep, strategy, budget = self.prep, self.prep.strategy, self.budget
        # JAX explains any compile here (a steady-state call should compile nothing); its
        # flags change no cache key, and the watch stays outside the timed call.
        with compile_log.watch() as compiles, self._repeat_counter, jax.default_device(prep.device):
            start = jax.block_until_ready(strategy.fresh_state(prep.state))
            between = (progress.repeat_reporter(self.report, r, self.spec.repeats, self.cancel, budget)
                       if self._between_steps is not None else None)
            output, seconds = timed(lambda: strategy.run(prep.executables, prep.problem, start, prep.data, prep.tol,
                                                         between))
        self._recompiles.extend(compiles)
        return seconds, not (budget is not None and budget.passed and int(output.iterations_run) < self.elbo.size)

    def measurement(self, times: list[float]) -> Measurement:
        """What was measured, with `times` the seconds of the whole steady-state calls."""
        prep, spec, budget = self.prep, self.spec, self.budget
        strategy, problem, compilation = prep.strategy, prep.problem, prep.compilation
        # The label says where the strategy's executables came from (`prepare` counts them);
        # the counts add what the first call compiled besides, such as the op that stacks a
        # Python loop's ELBOs, which the persistent cache may hold while the executables are new.
        return Measurement(
            elbo=self.elbo, final_change=self.tested_change, times=times, shape=(problem.n, problem.p, problem.d),
            transfer_s=prep.transfer_s, trace_lower_s=compilation.trace_lower_s, compile_s=compilation.compile_s,
            first_call_s=self.first_call_s,
            compile_count=compilation.compile_count + self._first_counter.compiles,
            disk_cache_hits=compilation.disk_cache_hits + self._first_counter.disk_hits,
            recompile_count=self._repeat_counter.backend_compiles, cache=compilation.cache, program=compilation.program,
            devices=strategy.device_count(prep.device),
            # A JAX fit runs in every process of a jax.distributed run.
            processes=jax.process_count(),
            device_kind=prep.device.device_kind, versions=runtime.environment(prep.device),
            optimizer=spec.optimizer.name, lr=spec.optimizer.lr, init=spec.init,
            final_latent=self.final_latent,
            chunk_iterations=problem.chunk,
            timed_out=self._first_call_cut or (budget is not None and budget.passed and len(times) < spec.repeats),
            from_scratch=self.cold and strategy.compiled_ahead,
            warnings=recompile_warnings(self._recompiles),
        )


# Recompiles explained per run: the first few say why; the rest are counted.
MAX_EXPLAINED = 3


def recompile_warnings(compiles: list[compile_log.Compile]) -> list[str]:
    """What a reader must know of compiles during the steady-state repeats, in JAX's words."""
    if not compiles:
        return []
    said = [f"{c.function} compiled again during the timed repeats: "
            + (c.why or "JAX gave no reason (it explains functions outside JAX itself)")
            for c in compiles[:MAX_EXPLAINED]]
    if len(compiles) > MAX_EXPLAINED:
        said.append(f"{len(compiles) - MAX_EXPLAINED} more compiles during the timed repeats")
    return said


def start(spec: FitSpec, counts: CountData | None, report: ProgressCallback, cancel: threading.Event | None,
          cache: ExecutableCache | None, watched: bool, budget: Budget | None = None, cold: bool = False) -> Timing:
    """Prepare `spec`'s fit and run its first call; `watched` asks for live reports from
    loops that can give them. Past `budget`, the fit stops at the next iteration (Python
    loops) or call (split compiled loops) and the measurement is marked `timed_out`. `cold`
    compiles from scratch (`core.run.cold_compile`), the first call's own compilations included."""
    prep = prepare(spec, counts, report, cache, cold=cold)
    progress.check(cancel)
    return Timing(spec, prep, report, cancel, budget, watched, cold)


def measure(spec: FitSpec, counts: CountData | None, report: ProgressCallback,
            cancel: threading.Event | None, cache: ExecutableCache | None, watched: bool,
            budget: Budget | None = None, cold: bool = False) -> Measurement:
    """Prepare and time `spec`'s fit (`start`), its repeats in a row."""
    timing = start(spec, counts, report, cancel, cache, watched, budget, cold)
    return timing.measurement(steady_state(spec.repeats, timing.repeat, report, cancel, budget))
