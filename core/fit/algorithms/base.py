"""What every fitting algorithm provides, and the state every strategy carries.

An algorithm is a pair of pure functions, optax style: `init(params, precision, data)`
makes the starting `FitState`, and `step(state, data)` makes one iteration, returning the
new state and the ELBO of the state it was given. The JIT strategies
(`core.fit.strategies`) compile `step` in their different ways (op by op, one jitted
iteration, a whole `lax.scan` or `lax.while_loop`), so every algorithm runs under every
strategy that only needs those two functions.

`family` says what more a strategy may rely on (`core.spec.refusal` lists what each
strategy needs):

- "gradient": an optax transformation (`transformation`) moves B, M and S by the ELBO's
  gradient at the current Omega; Omega is then set at its closed form (the seed
  tutorial's algorithm).
- "profiled": M and S move (by an optax transformation of the profiled gradient, a line
  search, a Newton step), B and Omega are at their closed forms, and the state holds the
  evaluation of its point (`core.fit.profiled`).

`step`'s ELBO is of `model.wide_dtype` (accumulated in float64), so that a stopping test
can tell changes smaller than a float32 ELBO's rounding (1.2e-7 of it) from none; the
strategies record it in the fit's dtype.
"""

from __future__ import annotations

import abc
from typing import Any, ClassVar, NamedTuple

import jax
import optax

from core.fit import model


class FitState(NamedTuple):
    """Everything that changes from one iteration to the next.

    The fields are in the order JAX flattens a dict of them (its keys sorted), so that a
    loop whose carry is this state and one whose carry is `_asdict()` are one compiled
    program, and the second loads the first's executable from the persistent cache.
    Build it by keyword.

    Attributes:
        opt_state: the algorithm's own state (an optax state for the gradient families).
        params: B, M, S.
        precision: Omega, (p, p).
    """

    opt_state: Any
    params: model.PLNParams
    precision: jax.Array


class Latent(NamedTuple):
    """Two (n, p) arrays, one per row parameter: M and S, or what stands for them (their
    gradients, step memories, or log S), so that per-row state is laid out by name.

    Attributes:
        latent_mean: for M.
        latent_sd: for S.
    """

    latent_mean: Any
    latent_sd: Any


class Algorithm(abc.ABC):
    """One way of moving the parameters; see the module docstring.

    Attributes:
        name: the optimizer's name in `core.spec.OPTIMIZERS`.
        family: "gradient" or "profiled".
    """

    name: str
    family: ClassVar[str]

    @abc.abstractmethod
    def init(self, params: model.PLNParams, precision: jax.Array, data) -> FitState:
        """The starting state from an initialisation's B, M, S and Omega (`model.init_params`)."""

    @abc.abstractmethod
    def step(self, state: FitState, data) -> tuple[FitState, jax.Array]:
        """One iteration: (new state, ELBO of `state`, a scalar of `model.wide_dtype`)."""

    def loop_step(self, state: FitState, data) -> tuple[FitState, jax.Array]:
        """`step` inside a compiled loop, whose program calls `finish` once after its last
        iteration (once per call, where a long fit runs in chunks): an algorithm may leave out
        of the state what nothing in the loop reads, for `finish` to make there. By default
        `step` itself."""
        return self.step(state, data)

    def finish(self, state: FitState, data) -> FitState:
        """The state after `loop_step`s, made whole (by default as it is)."""
        return state


def closed_form_state(latent: Latent, data) -> tuple[model.PLNParams, jax.Array]:
    """B and Omega at their closed forms for M, S: (PLNParams, Omega)."""
    coef = model.closed_form_coef(latent.latent_mean, data.covariates)
    params = model.PLNParams(coef, latent.latent_mean, latent.latent_sd)
    return params, model.closed_form_precision(params, data)


def transformation_of(algorithm) -> optax.GradientTransformation:
    """The optax transformation of a gradient-family algorithm (strategies that take one
    apart, e.g. jit_per_function, need it); ValueError for the others."""
    transformation = getattr(algorithm, "transformation", None)
    if transformation is None:
        raise ValueError(f"optimizer {algorithm.name} is not an optax transformation of the gradient")
    return transformation
