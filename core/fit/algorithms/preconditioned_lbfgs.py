"""preconditioned_lbfgs: L-BFGS on the profiled ELBO whose initial inverse Hessian is a
model of the curvature at the current point, re-estimated every iteration.

Variables M and u = log S (two (n, p) arrays, kept apart). One iteration:

1. direction d = -H g by the L-BFGS two-loop recursion over the last `MEMORY` pairs
   (s, y), with H0 the inverse of the curvature model of the current point: in u, h_u =
   2 S^2 (A + diag Omega) + S^4 A (the curvature in u_ij alone, at fixed B and Omega); in
   column j of M, diag(A_j + Omega_jj) (in M_ij alone) less Omega_jj along X's columns,
   where B takes up any move of M and Omega's term has no curvature (`_inverse_h0`). If d
   is not a descent direction, d = -H0 g.
2. line search: t = 1, then halving, until Armijo's sufficient decrease holds, or Hager
   and Zhang's approximate Wolfe test (the slope has risen to (1 - 2 delta) of its start
   and the loss has not risen by more than its rounding), which judges a step by its
   directional derivative once the loss changes by less than its own rounding. On oaks
   the unit step is taken in about 19 iterations of 20.
3. the pair (s, y) = (t d, g_new - g) is kept if s.y = t (g_new.d - g.d) > 1e-6 t
   (|g_new.d| + |g.d|), a curvature beyond the rounding of that difference; otherwise its
   slot, the oldest pair's, is emptied.

What an iteration costs is passes over (n, p) arrays (at oaks x100 each takes about as long
as a small matrix product), so none is made twice: the fallback to -H0 g runs only when the
recursion's direction goes uphill (`lax.cond`, rare), and s.y = t (g_new.d - g.d) comes from
the two slopes the line search has already summed.

Why preconditioned: A spans 1e-7 to 2e3 on oaks, so one scalar scale (stock L-BFGS,
`lbfgs`) fits no coordinate. With the diagonal of the model alone the fit came within 1e-5
of the optimum in 43 iterations on oaks, at any replication; with the model's correction
along X in 30 (31 with 5 pairs), at about 5% more per iteration (the error left after 40
diagonal iterations lay half along X: 180 times the gap in the diagonal's norm). Every
evaluation is `core.fit.profiled.evaluate` (value, gradient, A and Omega in one pass, sums
in float64).
"""

from __future__ import annotations

from typing import ClassVar, NamedTuple

import jax
import jax.numpy as jnp

from core.fit import model, profiled
from core.fit.algorithms.base import Algorithm, FitState, Latent

# Pairs kept. On oaks (log_rates start) 2 and 3 take more iterations (68 and 77 to 1e-7 of the
# optimum, against 62), 5 and 10 as many as 4 at a costlier recursion (a fifth more at 5).
MEMORY = 4
ARMIJO = 1e-4
MAX_HALVINGS = 30
# The approximate Wolfe test's slack on the loss, in units of the parameters' epsilon times
# |loss| (float32: 1.2e-5 |loss|; 10 is too little on oaks), and its delta.
LOSS_SLACK = 100.0
WOLFE_DELTA = 0.1
# The fraction of Omega_jj's curvature H0 keeps along X's columns (`_inverse_h0`): a column
# whose A underflows still gets a finite step, at most 1 / ALONG_X_FLOOR times H0's diagonal one.
ALONG_X_FLOOR = 1e-6
# A pair is kept when s . y exceeds this fraction of the slopes it is the difference of
# (float32's epsilon is 1.2e-7, and the slopes are summed in float64).
CURVATURE_SLACK = 1e-6


class PreconditionedLbfgsState(NamedTuple):
    """Attributes:
        log_sd: u = log S, (n, p).
        loss: -F at the current point, a scalar of `model.wide_dtype`.
        gradient: d(-F)/dM and d(-F)/du.
        rate: A at the current point, (n, p): with `column_precision`, H0's M block.
        column_precision: diag(Omega) at the current point, (p,).
        sd_curvature: h_u, (n, p): H0's u block (see the module docstring).
        steps: the last `MEMORY` s, (MEMORY, n, p) each, a ring buffer.
        gradient_changes: the matching y.
        inverse_products: (MEMORY,) 1 / (s . y), 0 for an empty slot, wide dtype.
        slot: int32, the slot written next (the oldest pair once full).
        evaluations: int32, evaluations of the objective so far (the start's included).
    """

    log_sd: jax.Array
    loss: jax.Array
    gradient: Latent
    rate: jax.Array
    column_precision: jax.Array
    sd_curvature: jax.Array
    steps: Latent
    gradient_changes: Latent
    inverse_products: jax.Array
    slot: jax.Array
    evaluations: jax.Array


class _Point(NamedTuple):
    """An evaluated point: what the line search tries and the state keeps."""

    latent_mean: jax.Array
    log_sd: jax.Array
    latent_sd: jax.Array
    loss: jax.Array
    gradient: Latent
    rate: jax.Array
    sd_curvature: jax.Array
    coef: jax.Array
    precision: jax.Array


def _dot(a: Latent, b: Latent) -> jax.Array:
    """sum(a * b) over both arrays, accumulated in float64."""
    return model.wide_sum(a.latent_mean * b.latent_mean) + model.wide_sum(a.latent_sd * b.latent_sd)


def _axpy(scale, x: Latent, y: Latent) -> Latent:
    """y + scale x, the scalar cast to the arrays' dtype."""
    return jax.tree.map(lambda xx, yy: yy + scale.astype(yy.dtype) * xx, x, y)


def _evaluate(latent_mean, log_sd, data) -> _Point:
    # Materialized once: XLA otherwise rewrites S * S as exp(2 u), one more exp over (n, p).
    latent_sd = jax.lax.optimization_barrier(jnp.exp(log_sd))
    found = profiled.evaluate(latent_mean, latent_sd, data)
    variance = latent_sd * latent_sd
    spread = found.rate + jnp.diagonal(found.precision)
    sd_curvature = 2.0 * variance * spread + variance * variance * found.rate
    gradient = Latent(-found.grad_mean, -found.grad_log_sd)
    return _Point(latent_mean, log_sd, latent_sd, -found.elbo, gradient, found.rate, sd_curvature, found.coef,
                  found.precision)


def _along_x(own: PreconditionedLbfgsState, covariates: jax.Array) -> jax.Array:
    """(p, d, d): the inverse of C_j (`_inverse_h0`) for each column j, of the wide dtype;
    made once per direction, for the recursion's H0 and the fallback's alike."""
    X = covariates
    n, d = X.shape
    wide = model.wide_dtype(own.rate.dtype)
    weight = own.rate / (own.column_precision * (own.rate + own.column_precision))
    pairs = (X[:, :, None] * X[:, None, :]).reshape(n, d * d)
    cross = (pairs.T @ weight).T.reshape(-1, d, d).astype(wide)  # (p, d, d): C_j
    # C_j + ALONG_X_FLOOR X^T X / w_j is exactly C_j of the model with w_j / (1 + ALONG_X_FLOOR) P_X.
    cross = cross + ALONG_X_FLOOR * model.wide_cross(X, X)[None] / own.column_precision.astype(wide)[:, None, None]
    # An intercept alone (d = 1, the usual design) divides rather than factor p 1 x 1 matrices.
    return 1.0 / cross if d == 1 else jnp.linalg.inv(cross)


def _inverse_h0(own: PreconditionedLbfgsState, q: Latent, covariates: jax.Array, along_x: jax.Array) -> Latent:
    """H0 q, H0 the inverse of the curvature model of the module docstring (step 1), with
    `along_x` = `_along_x(own, covariates)`.

    Per column j of M that model is h_j = diag(A_j + w_j) - w_j P_X (w_j = Omega_jj, P_X the
    projection on X's columns): moving M along X's columns moves B with it and leaves R, so
    Omega's term has no curvature there and A alone does. By Woodbury,
    h_j^-1 q = D^-1 q + D^-1 X C_j^-1 X^T D^-1 q with D = diag(A_j + w_j) and
    C_j = X^T diag(A_j / (w_j (A_j + w_j))) X, a d x d matrix (1 / w - 1 / (A + w), formed
    without the cancellation). Where A is small next to w (rare species, and on oaks A
    reaches 1e-7), the diagonal alone sees a curvature w where it is A: its steps along X
    were up to w / A too short, and L-BFGS took 43 iterations instead of 30 to 1e-5.
    """
    X = covariates
    dtype = q.latent_mean.dtype
    mean_curvature = own.rate + own.column_precision
    base = q.latent_mean / mean_curvature
    projected = (X.T @ base).T.astype(along_x.dtype)  # (p, d): X^T D^-1 q
    shift = jnp.einsum("jde,je->jd", along_x, projected).astype(dtype)  # (p, d): C_j^-1 X^T D^-1 q
    return Latent(base + (X @ shift.T) / mean_curvature, q.latent_sd / own.sd_curvature)


def _direction(own: PreconditionedLbfgsState, covariates: jax.Array, along_x: jax.Array) -> Latent:
    """-H g by the two-loop recursion, newest pair first, H0 as `_inverse_h0`.

    Each loop is a `lax.fori_loop` over the pairs rather than unrolled: its pair is a slice
    of the ring buffer at a traced slot either way, and one body to compile instead of one
    per pair took a fifth off the cold start's compile.
    """
    def pair(j):
        i = (own.slot - 1 - j) % MEMORY
        return (jax.tree.map(lambda memory: memory[i], own.steps),
                jax.tree.map(lambda memory: memory[i], own.gradient_changes), own.inverse_products[i])

    def newest_first(j, carry):
        q, alphas = carry
        s, y, inverse_product = pair(j)
        alpha = inverse_product * _dot(s, q)
        return _axpy(-alpha, y, q), alphas.at[j].set(alpha)

    q, alphas = jax.lax.fori_loop(0, MEMORY, newest_first,
                                  (own.gradient, jnp.zeros((MEMORY,), own.inverse_products.dtype)))

    def oldest_first(k, r):
        j = MEMORY - 1 - k
        s, y, inverse_product = pair(j)
        beta = inverse_product * _dot(y, r)
        return _axpy(alphas[j] - beta, s, r)

    r = jax.lax.fori_loop(0, MEMORY, oldest_first, _inverse_h0(own, q, covariates, along_x))
    return jax.tree.map(jnp.negative, r)


# Jitted on its own, at module level: run op by op (the eager strategy), a `lax.while_loop`
# whose body closes over this iteration's arrays is a new program at every call, so it was
# compiled (or loaded from the persistent cache) once an iteration, and JAX's cache of
# primitive executables kept every copy: thousands of memory mappings an eager run, until
# the process met vm.max_map_count and crashed. As one function of its inputs it is
# compiled once per shape; inside the compiled strategies it is inlined as before.
@jax.jit
def _line_search(start_mean, own: PreconditionedLbfgsState, direction: Latent, slope, data):
    """t = 1, then halving (module docstring, step 2) -> (t, the point at t, its slope
    g_new . d, halvings)."""
    dtype = start_mean.dtype
    slack = LOSS_SLACK * jnp.finfo(dtype).eps * jnp.abs(own.loss)

    def trial(t) -> tuple[_Point, jax.Array]:
        point = _evaluate(start_mean + t.astype(dtype) * direction.latent_mean,
                          own.log_sd + t.astype(dtype) * direction.latent_sd, data)
        return point, _dot(point.gradient, direction)

    def accepted(t, point: _Point, new_slope):
        finite = jnp.isfinite(point.loss)
        armijo = point.loss <= own.loss + ARMIJO * t * slope
        wolfe = (point.loss <= own.loss + slack) & (new_slope <= -(1 - 2 * WOLFE_DELTA) * slope)
        return finite & (armijo | wolfe)

    def keep_halving(carry):
        t, point, new_slope, halvings = carry
        return ~accepted(t, point, new_slope) & (halvings < MAX_HALVINGS)

    def halve(carry):
        t, _, _, halvings = carry
        return (t * 0.5, *trial(t * 0.5), halvings + 1)

    one = jnp.ones((), slope.dtype)
    return jax.lax.while_loop(keep_halving, halve, (one, *trial(one), jnp.zeros((), jnp.int32)))


def _steepest(own: PreconditionedLbfgsState, covariates: jax.Array, along_x: jax.Array) -> tuple[Latent, jax.Array]:
    """(-H0 g, its slope g . d): the direction when the recursion's goes uphill."""
    direction = jax.tree.map(jnp.negative, _inverse_h0(own, own.gradient, covariates, along_x))
    return direction, _dot(own.gradient, direction)


# Jitted at module level for the reason `_line_search` is: the eager strategy would build
# a new `lax.cond` program at every call.
@jax.jit
def _descent_direction(own: PreconditionedLbfgsState, covariates: jax.Array) -> tuple[Latent, jax.Array]:
    """(d, g . d): the recursion's direction, or -H0 g when that is not downhill (or NaN).

    A `lax.cond`, not a select between the two: a select makes -H0 g and its slope at
    every iteration, two passes over the variables and two sums that are almost never used.
    """
    along_x = _along_x(own, covariates)
    direction = _direction(own, covariates, along_x)
    slope = _dot(own.gradient, direction)
    return jax.lax.cond(slope < 0, lambda: (direction, slope), lambda: _steepest(own, covariates, along_x))


class PreconditionedLbfgs(Algorithm):
    """L-BFGS with a per-iteration diagonal H0 and a halving line search (module docstring)."""

    family: ClassVar[str] = "profiled"
    name = "preconditioned_lbfgs"

    def init(self, params, precision, data):
        point = _evaluate(params.latent_mean, jnp.log(params.latent_sd), data)
        zeros = jnp.zeros((MEMORY,) + point.latent_mean.shape, point.latent_mean.dtype)
        own = PreconditionedLbfgsState(
            point.log_sd, point.loss, point.gradient, point.rate, jnp.diagonal(point.precision), point.sd_curvature,
            Latent(zeros, zeros), Latent(zeros, zeros),
            jnp.zeros((MEMORY,), point.loss.dtype), jnp.zeros((), jnp.int32), jnp.ones((), jnp.int32))
        return self._state(point, own)

    @staticmethod
    def _state(point: _Point, own: PreconditionedLbfgsState) -> FitState:
        return FitState(params=model.PLNParams(point.coef, point.latent_mean, point.latent_sd),
                        precision=point.precision, opt_state=own)

    def step(self, state, data):
        own = state.opt_state
        start_mean = state.params.latent_mean
        direction, slope = _descent_direction(own, data.covariates)
        dtype = start_mean.dtype
        t, point, new_slope, halvings = _line_search(start_mean, own, direction, slope, data)
        step = jax.tree.map(lambda d: t.astype(dtype) * d, direction)
        change = jax.tree.map(jnp.subtract, point.gradient, own.gradient)
        # s . y = t d . (g_new - g), from the slopes already summed: one sum fewer. The pair
        # is kept when that curvature is positive beyond the rounding of the difference:
        # measured against the slopes it is made of, this takes no sum over the variables
        # (|s| |y| took two, 5% of an iteration at oaks x100).
        product = t * (new_slope - slope)
        keep = product > CURVATURE_SLACK * t * (jnp.abs(new_slope) + jnp.abs(slope))
        slot = own.slot

        # A pair that fails the test empties its slot (zeros, 1 / (s . y) = 0: the recursion
        # skips it) rather than leaving the old pair there: keeping the old one reads the
        # slot it overwrites, which XLA cannot do in place, and cost four extra passes over
        # the variables at every iteration. Only the oldest pair, which the next kept pair
        # overwrites anyway, is lost, and only after a rejection.
        def remember(memory: Latent, pair: Latent) -> Latent:
            return jax.tree.map(lambda buffer, value: jax.lax.dynamic_update_index_in_dim(
                buffer, jnp.where(keep, value, jnp.zeros_like(value)), slot, 0), memory, pair)

        inverse = jnp.where(keep, 1.0 / jnp.where(keep, product, 1.0), 0.0)
        new = PreconditionedLbfgsState(
            point.log_sd, point.loss, point.gradient, point.rate, jnp.diagonal(point.precision), point.sd_curvature,
            remember(own.steps, step),
            remember(own.gradient_changes, change), own.inverse_products.at[slot].set(inverse),
            jnp.where(keep, (slot + 1) % MEMORY, slot), own.evaluations + 1 + halvings)
        return self._state(point, new), -own.loss
