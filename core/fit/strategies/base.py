"""What every strategy shares: the fit state, one iteration of the algorithm, stopping, the interface.

One iteration is the algorithm's `step` (`core.fit.algorithms`): for the seed tutorial's
algorithm, corrected,

1. ELBO and its gradient with respect to B, M, S at the current Omega;
2. the optimizer's update of B, M, S;
3. Omega <- Sigma^-1 at the closed-form Sigma for the new B, M, S.

The ELBO recorded for iteration i is the one of the state iteration i starts from.
Strategies differ only in what they hand to XLA: nothing, each function, one iteration,
or the whole loop.

Stopping: with `tol` > 0 (`Problem.stops`) every strategy stops after the second
iteration in a row whose relative ELBO change |ELBO_i - ELBO_i-1| / |ELBO_i| is under
`tol` (or the first that is not a number), from the third iteration on (optax's rprop
makes no move in its first: its step lags the gradient by one iteration), inside its
compiled loop, and a loop run in several calls (`run_calls`) ends at the call that
stopped. One iteration under tol is not enough: a float32 line search that finds only a
step its rounding hides made one such change 5e-6 below the optimum, then went on to it.
A `lax.scan` cannot end early, so a compiled loop that stops runs its body under
`lax.while_loop` (`loop_until`): XLA compiles both to one While loop, with the trip count
or the count and the test as its condition. (Holding the state
with a `lax.cond` once stopped would cost a copy of the carry per held iteration, about
as much as an iteration.) Python loops apply the same test, in the fit's dtype, on the
host.
"""

from __future__ import annotations

import abc
import dataclasses
import functools
from typing import Any, Callable, ClassVar, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from core import catalog
from core.fit import algorithms, model
from core.fit.algorithms import Algorithm, FitState
from core.spec import OptimizerSpec


class FitOutput(NamedTuple):
    """What a strategy's run returns.

    Attributes:
        state: the state after the last iteration run.
        elbo: ELBO per iteration, of the fit's dtype: (iterations,), or for a loop that
            stopped in one of several calls, as many as those calls run; NaN past
            `iterations_run`.
        iterations_run: iterations actually run (fewer when the fit stopped at `tol`).
        stop: for a loop that stops (`Problem.stops`), where it stands after this call
            (`Stop`); None otherwise.
    """

    state: FitState
    elbo: jax.Array
    iterations_run: Any
    stop: Any = None


class Stop(NamedTuple):
    """Where a stopping fit stands; carried through its loop and from one call to the next.

    Attributes:
        previous: the ELBO of the last iteration run (inf before the first), of
            `model.wide_dtype`: the profiled algorithms' ELBOs are, and the test is made in it.
        done: bool scalar: the fit has stopped (tolerance met, ELBO not a number, or no
            iterations left).
        remaining: int32, iterations the fit may still run.
        ran: int32, iterations run.
        change: the relative change of the last iteration as the test read it (NaN before
            two), of `model.wide_dtype`: what a run reports as its `final_change`, since the
            trace, in the fit's dtype, may round a float32 change under tol to 0.
        quiet: int32, how many iterations in a row have changed the ELBO by less than tol.
    """

    previous: jax.Array
    done: jax.Array
    remaining: jax.Array
    ran: jax.Array
    change: jax.Array
    quiet: jax.Array


# The first iteration whose change may stop a fit (see the module docstring).
FIRST_STOP = 3
# Iterations in a row whose change must be under tol (see the module docstring).
QUIET_ITERATIONS = 2


def start_stop(iterations: int, dtype) -> Stop:
    """The `Stop` of a fit of at most `iterations` in `dtype` that has not started.

    NumPy scalars, which a compiled loop takes as they are: made with `jnp`, each was a
    small program compiled in every fresh process (tens of milliseconds of its start)."""
    wide = model.wide_dtype(dtype)
    return Stop(np.asarray(np.inf, wide), np.asarray(False), np.asarray(iterations, np.int32),
                np.asarray(0, np.int32), np.asarray(np.nan, wide), np.asarray(0, np.int32))


def relative_change(value, previous):
    """|value - previous| / |value| in the values' dtype (jnp or NumPy alike)."""
    return abs(value - previous) / abs(value)


def quiet_after(quiet, change, tol):
    """The count of iterations in a row under `tol` after one that changed the ELBO by
    `change` (jnp or NumPy alike)."""
    return (quiet + 1) * (~(change >= tol))


def met_after(quiet, change, ran):
    """Whether a fit stops: `QUIET_ITERATIONS` in a row under tol, or a change that is
    not a number (a diverged fit stops too), from iteration `FIRST_STOP` on."""
    not_a_number = change != change  # noqa: PLR0124 (NaN's test, for jnp and NumPy alike)
    return ((quiet >= QUIET_ITERATIONS) | not_a_number) & (ran >= FIRST_STOP)


def after(stop: Stop, value: jax.Array, tol: jax.Array) -> Stop:
    """`stop` after an iteration whose ELBO is `value`: done once it stops (`met_after`)
    or once no iterations are left."""
    value = value.astype(stop.previous.dtype)
    remaining, ran = stop.remaining - 1, stop.ran + 1
    change = relative_change(value, stop.previous)
    quiet = quiet_after(stop.quiet, change, tol).astype(stop.quiet.dtype)
    met = met_after(quiet, change, ran)
    return Stop(value, met | (remaining <= 0), remaining, ran, jnp.where(ran >= 2, change, jnp.nan), quiet)


def loop_until(step: Callable[[Any], tuple[Any, jax.Array]], carry: Any, iterations: int, tol: jax.Array,
               stop: Stop, dtype):
    """Up to `iterations` of `step(carry) -> (carry, ELBO)` in a `lax.while_loop` that ends
    once the fit stops (`after`) -> (carry, trace (iterations,) in `dtype`, NaN past the
    stop, iterations run, stop)."""

    def going(loop):
        i, _, _, stop = loop
        return (i < iterations) & ~stop.done

    def body(loop):
        i, carry, trace, stop = loop
        carry, value = step(carry)
        return i + 1, carry, trace.at[i].set(value.astype(dtype)), after(stop, value, tol)

    start = (jnp.asarray(0, jnp.int32), carry, empty_trace(iterations, dtype), stop)
    run, carry, trace, stop = jax.lax.while_loop(going, body, start)
    return carry, trace, run, stop


def scan_loop(body: Callable, carry: Any, iterations: int, stopping: tuple | None, dtype):
    """`lax.scan(body, carry, length=iterations)` -> (carry, trace in `dtype` (the fit's),
    iterations run, stop).

    `body(carry, None) -> (carry, ELBO)`. With `stopping` = (tol, stop), the same body
    under `loop_until`, which ends at the stop; without it, the plain scan.
    """
    if stopping is None:
        carry, trace = jax.lax.scan(body, carry, length=iterations)
        return carry, trace.astype(dtype), iterations, None
    return loop_until(lambda c: body(c, None), carry, iterations, *stopping, dtype)


@dataclasses.dataclass(frozen=True)
class Problem:
    """The static part of a fit: what a compiled executable is specialised to.

    Attributes:
        n, p, d: data shape.
        dtype: "float32" or "float64".
        iterations: loop length (compiled into scan and fori_loop), the most a fit runs.
        optimizer: the optimizer spec (its algorithm is closed over, hence static).
        chunk: for strategies that can split their compiled loop (`chunkable`), the
            iterations per call; 0 runs the loop in one call. Large fits are split so that
            a cancel lands between calls within seconds, and stopping fits so that a fit
            that stops early does not hold the device for the rest of a long loop. Without
            stopping it divides `iterations` (every call runs the same executable); with
            stopping, the last call may hold past the end.
        stops: whether the fit stops at a tolerance (`FitSpec.tol` > 0; see the module
            docstring). A loop that stops is compiled with its test, one that does not
            without.
    """

    n: int
    p: int
    d: int
    dtype: str
    iterations: int
    optimizer: OptimizerSpec
    chunk: int = 0
    stops: bool = False

    @property
    def iterations_per_call(self) -> int:
        """Iterations one call of a compiled loop runs: `chunk` when it splits the loop, else all."""
        return self.chunk if 0 < self.chunk < self.iterations else self.iterations

    @property
    def algorithm(self) -> Algorithm:
        return algorithms.make(self.optimizer)

    @property
    def transformation(self) -> optax.GradientTransformation:
        """The optax transformation of a gradient optimizer (ValueError for the others)."""
        return algorithms.transformation_of(self.algorithm)


def as_algorithm(optimizer: Algorithm | optax.GradientTransformation) -> Algorithm:
    """`optimizer` as an algorithm: a bare optax transformation is the seed tutorial's
    algorithm with that optimizer."""
    if isinstance(optimizer, Algorithm):
        return optimizer
    return algorithms.GradientAlgorithm("optax", optimizer)


def init_state(data: model.PLNData, init: str, optimizer: Algorithm | optax.GradientTransformation) -> FitState:
    """The starting state for `init` (see `model.init_params`) and the optimizer (an
    algorithm, or an optax transformation of the gradient in B, M, S)."""
    params, precision = model.init_params(data, init)
    return as_algorithm(optimizer).init(params, precision, data)


def fit_step(
    state: FitState, data: model.PLNData, optimizer: Algorithm | optax.GradientTransformation
) -> tuple[FitState, jax.Array]:
    """One iteration of the optimizer's algorithm; returns the new state and the ELBO at the old one."""
    return as_algorithm(optimizer).step(state, data)


def loop_step(
    state: FitState, data: model.PLNData, optimizer: Algorithm | optax.GradientTransformation
) -> tuple[FitState, jax.Array]:
    """`fit_step` for the body of a compiled loop, whose program ends in `finished`
    (`Algorithm.loop_step`: the default optimizer makes Omega once there, not at every
    iteration, where it comes through the rows)."""
    return as_algorithm(optimizer).loop_step(state, data)


def finished(state: FitState, data: model.PLNData, optimizer: Algorithm | optax.GradientTransformation) -> FitState:
    """The state a compiled loop of `loop_step`s ends with, made whole (`Algorithm.finish`)."""
    return as_algorithm(optimizer).finish(state, data)


def empty_trace(iterations: int, dtype) -> jax.Array:
    """ELBO buffer for compiled loops: NaN marks iterations that did not run."""
    return jnp.full((iterations,), jnp.nan, dtype=dtype)


# Called with (iteration, its ELBO); a true return stops the loop after that iteration
# (a run past its time budget keeps the curve so far).
IterationCallback = Callable[[int, jax.Array], Any]


class Strategy(abc.ABC):
    """A way of compiling (or not) the same fit.

    Subclasses set `name` and implement `lower` and `run`. The engine times `lower`
    (tracing and lowering to StableHLO), `compile` (XLA) and `run` separately, and
    caches what `compile` returns per `Problem` and device.

    Class attributes:
        name: registry name.
        compiled_ahead: whether `lower` produces anything to compile.
        python_loop: whether iterations are driven from Python (so progress can be
            reported per iteration).
        static_iterations: whether the iteration count is baked into the executable.
        chunkable: whether the compiled loop can be split into calls of
            `Problem.chunk` iterations (see `run_calls`).
        donates_state: whether `run` consumes the state it is given (its buffers are
            donated to XLA, which reuses them for the output): callers that run again
            from the same start pass `fresh_state(state)`.
    """

    name: ClassVar[str]
    compiled_ahead: ClassVar[bool] = True
    python_loop: ClassVar[bool] = False
    static_iterations: ClassVar[bool] = True
    chunkable: ClassVar[bool] = False
    donates_state: ClassVar[bool] = False

    def place_data(self, host: model.PLNData, device) -> model.PLNData:
        """Copy the host data to where this strategy computes (default: `device` alone)."""
        return jax.device_put(host, device)

    def place_state(self, state: FitState, device) -> FitState:
        """Lay out the initial state to match `place_data` (default: as created)."""
        return state

    def place_scalar(self, value: jax.Array, device) -> jax.Array:
        """Put a scalar argument of the fit (the tolerance) where the fit computes (default:
        on `device`)."""
        return jax.device_put(value, device)

    def fresh_state(self, state: FitState) -> FitState:
        """A state `run` may consume: a device-side copy when `run` donates its buffers."""
        if not self.donates_state:
            return state
        # A copy by the runtime, where each array lives: `leaf.copy()` compiled a copy
        # program per shape and dtype (about ten in a fresh process, a tenth of a second).
        return jax.tree.map(lambda leaf: jax.device_put(leaf, leaf.sharding, may_alias=False), state)

    def run_calls(self, call: Callable[[FitState, Stop | None], FitOutput], problem: Problem, state: FitState,
                  stop: Stop | None = None, on_iteration: IterationCallback | None = None) -> FitOutput:
        """Run the compiled loop `call` (one chunk of iterations) until `problem.iterations`,
        or, for a loop that stops (`stop` given), until a call says it has stopped.

        Between chunks `on_iteration(last iteration, its ELBO)` is called after the chunk
        has finished (so a cancel raised there stops at once; a true return ends the loop
        there); without it, and without stopping, the chunks are dispatched back to back.
        """
        per_call = problem.iterations_per_call
        calls = -(-problem.iterations // per_call)
        if calls == 1:
            return call(state, stop)
        traces, run = [], 0
        for _ in range(calls):
            output = call(state, stop)
            state, stop = output.state, output.stop
            traces.append(output.elbo)
            # A stopping loop reads back whether it stopped: one device sync per call.
            ran = per_call if stop is None else int(output.iterations_run)
            run += ran
            if on_iteration is not None:
                jax.block_until_ready(output.elbo)
                if on_iteration(run - 1, output.elbo[ran - 1]):
                    break
            if stop is not None and bool(stop.done):
                break
        return FitOutput(state, jnp.concatenate(traces)[:problem.iterations], run, stop)

    def device_count(self, device) -> int:
        """How many devices a run on `device`'s platform uses."""
        return 1

    @abc.abstractmethod
    def lower(self, problem: Problem, state: FitState, data: model.PLNData, tol: jax.Array) -> dict[str, Any]:
        """Trace and lower the functions to compile, by name: {name: jax.stages.Lowered}."""

    def compile(self, lowered: dict[str, Any]) -> dict[str, Any]:
        """XLA-compile every lowered function: {name: jax.stages.Compiled}."""
        return {name: item.compile() for name, item in lowered.items()}

    @abc.abstractmethod
    def run(
        self,
        executables: dict[str, Any],
        problem: Problem,
        state: FitState,
        data: model.PLNData,
        tol: jax.Array,
        on_iteration: IterationCallback | None = None,
    ) -> FitOutput:
        """Run the fit from `state` with the compiled `executables`."""

    @classmethod
    def description(cls) -> str:
        """What the strategy does: its module docstring, as the catalog reads it."""
        return catalog.runnable(cls.name).description


class PythonLoopStrategy(Strategy):
    """Shared driver for strategies whose loop is a Python `for`."""

    python_loop = True
    static_iterations = False

    @abc.abstractmethod
    def step(self, executables: dict[str, Any], problem: Problem, state: FitState, data: model.PLNData):
        """One iteration -> (state, elbo)."""

    def run(self, executables, problem, state, data, tol, on_iteration=None):
        trace = []
        # The stopping test (`after`) on the host: the same numbers as on the device.
        wide = model.wide_dtype(problem.dtype)
        tolerance = np.asarray(tol, problem.dtype).astype(wide)
        previous = np.asarray(np.inf, wide)
        change = np.asarray(np.nan, wide)
        quiet = 0
        for i in range(problem.iterations):
            state, value = self.step(executables, problem, state, data)
            trace.append(value)
            if on_iteration is not None and on_iteration(i, value):
                break
            if problem.stops:
                current = np.asarray(value).astype(wide)  # a device sync: a loop that stops must know
                step_change = relative_change(current, previous)
                change = step_change if i >= 1 else change
                quiet = int(quiet_after(quiet, step_change, tolerance))
                if met_after(quiet, step_change, i + 1):
                    break
                previous = current
        stop = None
        if problem.stops:
            stop = Stop(jnp.asarray(previous, wide), jnp.asarray(True), jnp.asarray(problem.iterations - len(trace)),
                        jnp.asarray(len(trace)), jnp.asarray(change, wide), jnp.asarray(quiet, jnp.int32))
        return FitOutput(state, jnp.stack(trace).astype(problem.dtype), len(trace), stop)


class CompiledLoopStrategy(Strategy):
    """Shared driver for strategies whose whole loop is one compiled function.

    Subclasses set `fit` to a function `(state, data, optimizer, iterations, stopping=None)
    -> FitOutput` (`optimizer` is the algorithm); the algorithm and the iteration count are
    closed over, so they are compile-time constants, and the state, the data and, for a
    fit that stops, `stopping` = (tol, `Stop`) are the executable's arguments. The state is
    donated: XLA writes the final state over the initial one instead of holding both,
    which at large n (M, S and the optimizer's moments, all n x p) saves a third of the
    peak memory.
    """

    fit: ClassVar[Callable[..., FitOutput]]
    donates_state = True
    chunkable = True

    def lower(self, problem, state, data, tol):
        algorithm, iterations = problem.algorithm, problem.iterations_per_call
        if problem.stops:
            def fit(state, data, stopping):
                return type(self).fit(state, data, algorithm, iterations, stopping)

            stopping = (tol, start_stop(problem.iterations, problem.dtype))
            return {"fit": jax.jit(fit, donate_argnums=0).lower(state, data, stopping)}
        fit = functools.partial(type(self).fit, optimizer=algorithm, iterations=iterations)
        return {"fit": jax.jit(fit, donate_argnums=0).lower(state, data)}

    def run(self, executables, problem, state, data, tol, on_iteration=None):
        if problem.stops:
            return self.run_calls(lambda start, stop: executables["fit"](start, data, (tol, stop)), problem, state,
                                  start_stop(problem.iterations, problem.dtype), on_iteration)
        return self.run_calls(lambda start, _: executables["fit"](start, data), problem, state, None, on_iteration)
