"""What a strategy hands to XLA: its source, jaxpr, StableHLO, optimized HLO, costs and memory.

`inspect_fit(spec)` prepares the fit the way the engine does (`core.run.prepared.prepare`,
with a private executable cache so that compile counts and times are those of this
strategy), lowers it once more for the StableHLO text, and returns an `Inspection`
made of plain strings and numbers only, so that the app can cache it by spec.

Costs come from XLA's own analysis of each compiled executable. XLA counts a loop's
body once whatever its trip count (checked on jaxlib 0.10.1: a scan of 5 and of 50
iterations report the same flops), so for the compiled-loop strategies an
executable's figures are those of one iteration plus the set-up around the loop; for
the Python-loop strategies one iteration calls every executable once.
"""

from __future__ import annotations

import functools
import inspect
import sys

import jax
import jaxlib

from core.coordination.device_queue import device_lock
from core.fit import model, strategies
from core.fit.strategies import base
from core.inspect.findings import DISPLAY_CHARS, Executable, Inspection, clip, executable_rows  # noqa: F401
from core.inspect.layout import array_layouts
from core.inspect.xla_analysis import Cost, normalise_cost, normalise_memory
from core.run.prepared import ExecutableCache, prepare
from core.spec import FitSpec


def strategy_sources(name: str) -> tuple[tuple[str, str], ...]:
    """(title, source) of the strategy's module and of the shared `fit_step` and `elbo`."""
    module = sys.modules[type(strategies.get(name)).__module__]
    return (
        (f"{module.__name__} (the strategy)", inspect.getsource(module)),
        ("core.fit.strategies.base.fit_step (one iteration, shared by every strategy)",
         inspect.getsource(base.fit_step)),
        ("core.fit.model.elbo (the objective, shared by every strategy)", inspect.getsource(model.elbo)),
    )


def _jaxpr(prep) -> tuple[str, str]:
    """The jaxpr of what the strategy compiles, and what it is the jaxpr of.

    A compiled-loop strategy's module defines `_fit`, whose arguments are bound by name;
    when it needs something only the strategy's `lower` builds (e.g. sharded's layout),
    or for Python loops, the jaxpr is that of one iteration.
    """
    strategy, problem = prep.strategy, prep.problem
    optimizer = problem.algorithm
    whole_fit = getattr(sys.modules[type(strategy).__module__], "_fit", None)
    # A loop that stops takes where it stands (`base.Stop`): here, at the start.
    stop = base.start_stop(problem.iterations, problem.dtype)
    available = {"state": prep.state, "data": prep.data, "tol": prep.tol, "stop": stop,
                 "optimizer": optimizer, "iterations": problem.iterations}
    if problem.stops:
        available["stopping"] = (prep.tol, stop)
    signature = inspect.signature(whole_fit).parameters if whole_fit is not None else {}
    parameters = [name for name, parameter in signature.items()
                  if name in available or parameter.default is inspect.Parameter.empty]
    if strategy.python_loop or not parameters or any(name not in available for name in parameters):
        step = functools.partial(base.fit_step, optimizer=optimizer)
        jaxpr = jax.make_jaxpr(step)(prep.state, prep.data)
        what = "one iteration (core.fit.strategies.base.fit_step)"
        if strategy.python_loop:
            what += ", which the Python loop calls" + (" op by op" if not strategy.compiled_ahead else "")
        else:
            what += "; the whole loop needs arguments that only the strategy's lower() builds"
        return str(jaxpr), what
    static = {name: available[name] for name in ("optimizer", "iterations") if name in parameters}
    names = [name for name in parameters if name not in static]
    jaxpr = jax.make_jaxpr(lambda *values: whole_fit(**static, **dict(zip(names, values))))(
        *[available[name] for name in names])
    return str(jaxpr), f"the whole fit ({type(strategy).__module__}._fit, {problem.iterations} iterations)"


def _executable(name: str, lowered, compiled) -> Executable:
    try:
        optimized = compiled.as_text() or ""
    except Exception:  # noqa: BLE001 - some backends/loaded executables cannot print HLO
        optimized = ""
    try:
        memory = normalise_memory(compiled.memory_analysis())
    except Exception:  # noqa: BLE001 - not implemented on every backend
        memory = None
    return Executable(name, lowered.as_text(), optimized, normalise_cost(compiled.cost_analysis()), memory)


def _stops_early(strategy, problem) -> bool:
    """Whether the compiled loop stops at a tolerance, i.e. may run fewer iterations."""
    whole_fit = getattr(sys.modules[type(strategy).__module__], "_fit", None)
    return problem.stops or (whole_fit is not None and "tol" in inspect.signature(whole_fit).parameters)


def _costs(strategy, problem, executables: tuple[Executable, ...], devices: int) -> tuple[Cost, Cost, str]:
    iterations = problem.iterations
    if not executables:
        return Cost(), Cost(), "Nothing is compiled ahead, so XLA has no cost estimate to give."
    total = Cost(0.0, 0.0, 0.0)
    for executable in executables:
        total = total + executable.cost
    if strategy.python_loop:
        note = (f"The Python loop calls each of the {len(executables)} executable(s) once per "
                f"iteration: per iteration is their sum, per run that times the cap of {iterations:,} iterations.")
    else:
        note = ("XLA counts a loop body once whatever its trip count, so the executable's figures "
                f"are one iteration (plus the set-up around the loop); per run is that times the cap of "
                f"{iterations:,} iterations.")
    # Either loop stops at its tolerance: a fit that converged in 49 of 500 read as ten times its work.
    if _stops_early(strategy, problem):
        note += " The fit stops early at its tolerance, so the per-run figure is an upper bound."
    if devices > 1:
        note += f" The program is partitioned over {devices} devices: the figures are those of one device."
    return total, total.scaled(iterations), note


def inspect_fit(spec: FitSpec, counts=None) -> Inspection:
    """Prepare `spec`'s fit and collect what its strategy hands to XLA.

    Holds the engine's lock for `spec.device` throughout, so that compiling here does not
    distort another session's timed run on the same device.

    Args:
        spec: the fit; its dataset is loaded and its executables compiled (seconds for
            oaks x1000), in a private cache so the compile figures are this strategy's.
        counts: the data when the caller holds it (an uploaded CSV), as `core.run.prepared.prepare`.

    Returns:
        An `Inspection` of plain strings and numbers.

    Raises:
        SpecError: the device is absent or the data are invalid.
    """
    with device_lock(spec.device):
        prep = prepare(spec, counts, cache=ExecutableCache(size=1))
        strategy, problem = prep.strategy, prep.problem
        with jax.default_device(prep.device):
            jaxpr, jaxpr_of = _jaxpr(prep)
            # Lowering again is cheap next to compiling, and Lowered objects are not cached.
            lowered = strategy.lower(problem, prep.state, prep.data, prep.tol)
        executables = tuple(_executable(name, lowered[name], prep.executables[name]) for name in lowered)
        layout = tuple(array_layouts(prep.data, "data") + array_layouts(prep.state, "state"))
    devices = strategy.device_count(prep.device)
    per_iteration, per_run, note = _costs(strategy, problem, executables, devices)
    return Inspection(
        strategy=strategy.name,
        description=strategy.description(),
        dataset=spec.dataset.label,
        n=problem.n, p=problem.p, d=problem.d,
        precision=spec.precision,
        device=prep.device.platform if prep.device.device_kind == prep.device.platform
        else f"{prep.device.platform} ({prep.device.device_kind})",
        iterations=problem.iterations,
        optimizer=spec.optimizer.label,
        compiled=strategy.compiled_ahead,
        python_loop=strategy.python_loop,
        sources=strategy_sources(strategy.name),
        jaxpr=jaxpr,
        jaxpr_of=jaxpr_of,
        executables=executables,
        cost_per_iteration=per_iteration,
        cost_per_run=per_run,
        cost_note=note,
        compile_count=prep.compilation.compile_count,
        disk_cache_hits=prep.compilation.disk_cache_hits,
        cache=prep.compilation.cache,
        trace_lower_s=prep.compilation.trace_lower_s,
        compile_s=prep.compilation.compile_s,
        versions={"jax": jax.__version__, "jaxlib": jaxlib.__version__},
        layout=layout,
    )
