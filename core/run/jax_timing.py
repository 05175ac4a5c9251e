"""The timing protocol for a JAX strategy: first call, then steady-state repeats.

Every timed section ends in `jax.block_until_ready`, since JAX dispatches
asynchronously; the data's copy to the device, tracing+lowering and XLA compilation
are timed apart by `core.run.prepared`; the first call and `repeats` steady-state calls
follow, each steady-state call starting from the same initial state.
"""

from __future__ import annotations

import threading

import jax
import numpy as np

from core.data.counts import CountData
from core.machine import runtime
from core.machine.budget import Budget
from core.machine.compilations import CompileCounter
from core.results.result import Measurement
from core.run import progress
from core.run.cold_compile import from_scratch
from core.run.prepared import ExecutableCache, prepare, timed
from core.run.progress import Progress, ProgressCallback
from core.run.repeats import steady_state
from core.spec import FitSpec


def measure(spec: FitSpec, counts: CountData | None, report: ProgressCallback,
            cancel: threading.Event | None, cache: ExecutableCache | None, watched: bool,
            budget: Budget | None = None, cold: bool = False) -> Measurement:
    """Prepare and time `spec`'s fit; `watched` asks for live reports from loops that can
    give them. Past `budget`, the fit stops at the next iteration (Python loops) or call
    (split compiled loops) and the measurement is marked `timed_out`. `cold` compiles from
    scratch (`core.run.cold_compile`), the first call's own compilations included."""
    prep = prepare(spec, counts, report, cache, cold=cold)
    progress.check(cancel)
    strategy, problem = prep.strategy, prep.problem
    between_steps = None
    chunked = problem.iterations_per_call < problem.iterations
    if strategy.python_loop or chunked:
        between_steps = (progress.live_elbo_reporter(report, problem.iterations, cancel, budget) if watched
                         else progress.stop_checker(cancel, budget))
    report(Progress("first_call", 0, problem.iterations))
    with jax.default_device(prep.device):
        # Copied outside the timing (a run that donates its state consumes it) and outside
        # the count: the copy compiles helpers of its own.
        start = jax.block_until_ready(strategy.fresh_state(prep.state))
    with CompileCounter() as first_counter, jax.default_device(prep.device), from_scratch(cold):
        output, first_call_s = timed(
            lambda: strategy.run(prep.executables, problem, start, prep.data, prep.tol, between_steps))
    elbo = np.asarray(output.elbo, dtype=np.float64)[: int(output.iterations_run)]
    # The change the stopping test read (float64-accumulated), not the trace's, which a
    # float32 trace may round to 0 (`core.results.outcome`).
    tested_change = None if output.stop is None else float(output.stop.change)
    del output, start  # the final state is not needed: free its buffers before the repeats

    def repeat(r: int) -> tuple[float, bool]:
        start = jax.block_until_ready(strategy.fresh_state(prep.state))
        between = (progress.repeat_reporter(report, r, spec.repeats, cancel, budget)
                   if between_steps is not None else None)
        output, seconds = timed(lambda: strategy.run(prep.executables, problem, start, prep.data, prep.tol, between))
        return seconds, not (budget is not None and budget.passed and int(output.iterations_run) < elbo.size)

    with CompileCounter() as repeat_counter, jax.default_device(prep.device):
        times = steady_state(spec.repeats, repeat, report, cancel, budget)
    compilation = prep.compilation
    compile_count = compilation.compile_count + first_counter.compiles
    disk_cache_hits = compilation.disk_cache_hits + first_counter.disk_hits
    # The label says where the strategy's executables came from (`prepare` counts them);
    # the counts add what the first call compiled besides, such as the op that stacks a
    # Python loop's ELBOs, which the persistent cache may hold while the executables are new.
    cache_state = compilation.cache
    return Measurement(
        elbo=elbo, final_change=tested_change if tested_change is not None and np.isfinite(tested_change) else None,
        times=times, shape=(problem.n, problem.p, problem.d),
        transfer_s=prep.transfer_s, trace_lower_s=compilation.trace_lower_s, compile_s=compilation.compile_s,
        first_call_s=first_call_s,
        compile_count=compile_count, disk_cache_hits=disk_cache_hits,
        recompile_count=repeat_counter.backend_compiles, cache=cache_state,
        devices=strategy.device_count(prep.device),
        # A JAX fit runs in every process of a jax.distributed run.
        processes=jax.process_count(),
        device_kind=prep.device.device_kind, versions=runtime.environment(prep.device),
        optimizer=spec.optimizer.name, lr=spec.optimizer.lr, init=spec.init,
        chunk_iterations=problem.chunk,
        timed_out=budget is not None and budget.passed,
        from_scratch=cold and strategy.compiled_ahead,
    )
