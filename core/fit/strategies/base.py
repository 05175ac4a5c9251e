"""What every strategy shares: the fit state, one iteration of the algorithm, the interface.

One iteration, whatever is compiled around it (the seed tutorial's algorithm, corrected):

1. ELBO and its gradient with respect to B, M, S at the current Omega;
2. the optimizer's update of B, M, S;
3. Omega <- Sigma^-1 at the closed-form Sigma for the new B, M, S.

The ELBO recorded for iteration i is the one computed in step 1 of iteration i.
Strategies differ only in what they hand to XLA: nothing, each function, one iteration,
or the whole loop.
"""

from __future__ import annotations

import abc
import dataclasses
import functools
import sys
from typing import Any, Callable, ClassVar, NamedTuple

import jax
import jax.numpy as jnp
import optax

from core.fit import model
from core.fit.optim import make_optimizer
from core.spec import OptimizerSpec


class FitState(NamedTuple):
    """Everything that changes from one iteration to the next.

    Attributes:
        params: B, M, S.
        precision: Omega, (p, p).
        opt_state: the optimizer's state for `params`.
    """

    params: model.PLNParams
    precision: jax.Array
    opt_state: optax.OptState


class FitOutput(NamedTuple):
    """What a strategy's run returns.

    Attributes:
        state: the state after the last iteration run.
        elbo: (iterations,) ELBO per iteration; NaN past `iterations_run`.
        iterations_run: iterations actually run (while_loop may stop early).
    """

    state: FitState
    elbo: jax.Array
    iterations_run: Any


@dataclasses.dataclass(frozen=True)
class Problem:
    """The static part of a fit: what a compiled executable is specialised to.

    Attributes:
        n, p, d: data shape.
        dtype: "float32" or "float64".
        iterations: loop length (compiled into scan and fori_loop).
        optimizer: the optimizer spec (its transformation is closed over, hence static).
        chunk: for strategies that can split their compiled loop (`chunkable`), the
            iterations per call, a divisor of `iterations`; 0 runs the loop in one call.
            Large fits are split so that a cancel lands between calls within seconds.
    """

    n: int
    p: int
    d: int
    dtype: str
    iterations: int
    optimizer: OptimizerSpec
    chunk: int = 0

    @property
    def iterations_per_call(self) -> int:
        """Iterations one call of a compiled loop runs: `chunk` when it splits the loop, else all."""
        return self.chunk if 0 < self.chunk < self.iterations else self.iterations

    @property
    def transformation(self) -> optax.GradientTransformation:
        return make_optimizer(self.optimizer)


def init_state(data: model.PLNData, init: str, optimizer: optax.GradientTransformation) -> FitState:
    """The starting state for `init` (see `model.init_params`)."""
    params, precision = model.init_params(data, init)
    return FitState(params, precision, optimizer.init(params))


def fit_step(
    state: FitState, data: model.PLNData, optimizer: optax.GradientTransformation
) -> tuple[FitState, jax.Array]:
    """One iteration; returns the new state and the ELBO at the old one."""
    loss, grads = jax.value_and_grad(model.negative_elbo)(state.params, state.precision, data)
    updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
    params = optax.apply_updates(state.params, updates)
    precision = model.closed_form_precision(params, data)
    return FitState(params, precision, opt_state), -loss


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

    def fresh_state(self, state: FitState) -> FitState:
        """A state `run` may consume: a device-side copy when `run` donates its buffers."""
        if not self.donates_state:
            return state
        return jax.tree.map(lambda leaf: leaf.copy(), state)

    def run_calls(self, call: Callable[[FitState], FitOutput], problem: Problem, state: FitState,
                  on_iteration: IterationCallback | None = None) -> FitOutput:
        """Run the compiled loop `call` (one chunk of iterations) until `problem.iterations`.

        Between chunks `on_iteration(last iteration, its ELBO)` is called after the chunk
        has finished (so a cancel raised there stops at once; a true return ends the loop
        there); without it the chunks are dispatched back to back.
        """
        calls = problem.iterations // problem.iterations_per_call
        if calls == 1:
            return call(state)
        traces = []
        for index in range(calls):
            output = call(state)
            state = output.state
            traces.append(output.elbo)
            if on_iteration is not None:
                jax.block_until_ready(output.elbo)
                if on_iteration((index + 1) * problem.iterations_per_call - 1, output.elbo[-1]):
                    break
        return FitOutput(state, jnp.concatenate(traces), len(traces) * problem.iterations_per_call)

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
        """The first paragraph of the strategy's module docstring."""
        doc = sys.modules[cls.__module__].__doc__ or ""
        return " ".join(doc.split())


class PythonLoopStrategy(Strategy):
    """Shared driver for strategies whose loop is a Python `for`."""

    python_loop = True
    static_iterations = False

    @abc.abstractmethod
    def step(self, executables: dict[str, Any], problem: Problem, state: FitState, data: model.PLNData):
        """One iteration -> (state, elbo)."""

    def run(self, executables, problem, state, data, tol, on_iteration=None):
        trace = []
        for i in range(problem.iterations):
            state, value = self.step(executables, problem, state, data)
            trace.append(value)
            if on_iteration is not None and on_iteration(i, value):
                break
        return FitOutput(state, jnp.stack(trace), len(trace))


class CompiledLoopStrategy(Strategy):
    """Shared driver for strategies whose whole loop is one compiled function.

    Subclasses set `fit` to a function `(state, data, optimizer, iterations) -> FitOutput`;
    the optimizer and the iteration count are closed over, so they are compile-time
    constants, and the state and data are the executable's arguments. The state is
    donated: XLA writes the final state over the initial one instead of holding both,
    which at large n (M, S and the optimizer's moments, all n x p) saves a third of the
    peak memory.
    """

    fit: ClassVar[Callable[..., FitOutput]]
    donates_state = True
    chunkable = True

    def lower(self, problem, state, data, tol):
        fit = functools.partial(type(self).fit, optimizer=problem.transformation,
                                iterations=problem.iterations_per_call)
        return {"fit": jax.jit(fit, donate_argnums=0).lower(state, data)}

    def run(self, executables, problem, state, data, tol, on_iteration=None):
        return self.run_calls(lambda start: executables["fit"](start, data), problem, state, on_iteration)
