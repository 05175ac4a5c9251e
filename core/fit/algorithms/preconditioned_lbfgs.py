"""preconditioned_lbfgs: L-BFGS on the profiled ELBO whose initial inverse Hessian is a
model of the curvature at the current point, re-estimated every iteration.

Variables M and u = log S (two (n, p) arrays, kept apart). One iteration:

1. direction d = -H g by the L-BFGS two-loop recursion over the last `MEMORY` pairs
   (s, y), with H0 the inverse of the curvature model of the current point: in u, h_u =
   2 S^2 (A + diag Omega) + S^4 A (the curvature in u_ij alone, at fixed B and Omega); in
   column j of M, diag(A_j + Omega_jj) (in M_ij alone) less Omega_jj along X's columns,
   where B takes up any move of M and Omega's term has no curvature (`_inverse_h0`). Each
   cell's curvature is damped to at least its gradient's size (`_damped`), so that H0 never
   moves one cell by more than about one unit. If d is not a descent direction, d = -H0 g.
2. line search: t = 1, then halving, until Armijo's sufficient decrease holds (where the
   decrease it predicts is one the loss resolves), or Hager and Zhang's approximate Wolfe
   test (the slope has risen from its start by a tenth at least, to no more than (1 - 2
   delta) of its size, and the loss has not risen), which judges a step by its directional
   derivative once the loss changes by less than its own rounding. A step too small to move
   the point passes neither. On oaks
   the unit step is taken in about 19 iterations of 20. A search that finds no such step
   (`MAX_HALVINGS`) is tried again along -H0 g; when that fails too, the iteration stays
   where it is: a step that makes the ELBO non-finite, or lowers it beyond its rounding, is
   never taken (`_safe_search`).
3. the pair (s, y) = (t d, g_new - g) is kept if s.y = t (g_new.d - g.d) > 1e-6 t
   (|g_new.d| + |g.d|), a curvature beyond the rounding of that difference; otherwise its
   slot, the oldest pair's, is emptied. After a failed search every pair is forgotten.

Why damped: where the model is far from its optimum in one cell, a Newton step on that
cell's curvature alone overshoots without bound. In u the ELBO is -u + (A + w) e^(2u) / 2
(about): from below its optimum the curvature 2 S^2 (A + w) vanishes while the gradient
stays near 1, and one step sent S from 1e-3 to e^55 on pyPLNmodels' microcosm data, after
which no halving found a finite ELBO (the fit "diverged" at iteration 20). In M the same
holds for a counted cell whose rate has fallen to nothing (curvature Omega_jj, gradient
about Y). Near the optimum the gradient vanishes and the damping with it.

The ridge: scaling column j's residuals R_j = M_j - X B_j and its deviations S_j together,
v_j = (R_j in M, 1 in u_j), changes log det Sigma as much as the sum of log S, so the
prior's and the entropy's parts of -F are flat along v_j: its curvature there is the
Poisson terms' alone,
kappa_j = sum_i A ((R + S^2)^2 + 2 S^2). The per-cell model puts (A + w) R^2 + h_u there, far
more where A is small (a column of mostly zeros): on 95% zeros a fit crawled along those
directions for thousands of iterations. H0 is lowered to kappa_j along each v_j by a rank-one
correction (`_ridge_gain`, `_inverse_h0`): that set now converges in about 100 iterations.

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
import numpy as np

from core.fit import model, profiled
from core.fit.algorithms.base import Algorithm, FitState, Latent

# Pairs kept. On oaks (log_rates start) 2 and 3 take more iterations (68 and 77 to 1e-7 of the
# optimum, against 62), 5 and 10 as many as 4 at a costlier recursion (a fifth more at 5).
MEMORY = 4
ARMIJO = 1e-4
MAX_HALVINGS = 30
# The approximate Wolfe test's delta. Hager and Zhang let that test's loss rise by a slack
# (here it was 100 epsilon |loss|, 1.2e-5 |loss| in float32); here it may not rise at all: on
# plain Poisson counts, whose optimum has a nearly singular Sigma, float32 fits walked
# uphill by that slack step after step, 4.9e-5 below the optimum after 3,000 iterations (from
# 1e-6), and no corpus set stopped later without it.
WOLFE_DELTA = 0.1
# The test's sigma: a step it accepts has brought the slope up from its start by a tenth at
# least. Without this bound a step too small to move any variable passed (its point is the
# start's, its slope the start's): on oaks ~ 1 + tree in float32 a CPU fit run without a
# tolerance took that null step at every iteration from the 55th on, 4e-7 below the optimum,
# and never moved again. (On an H200 that fit stopped "short" 5.9e-5 below the optimum,
# after two iterations in a row that changed the ELBO by under its tol: the cause there was
# not seen, and two such null steps are one way to get it.)
WOLFE_SIGMA = 0.9
# The fraction of Omega_jj's curvature H0 keeps along X's columns (`_inverse_h0`): a column
# whose A underflows still gets a finite step, at most 1 / ALONG_X_FLOOR times H0's diagonal one.
ALONG_X_FLOOR = 1e-6
# The least curvature H0 keeps along a column's ridge, as a fraction of the diagonal model's
# (`_ridge_gain`): a column whose rates all underflow still gets a finite step.
RIDGE_FLOOR = 1e-6
# A pair is kept when s . y exceeds this fraction of the slopes it is the difference of
# (float32's epsilon is 1.2e-7, and the slopes are summed in float64).
CURVATURE_SLACK = 1e-6


class PreconditionedLbfgsState(NamedTuple):
    """Attributes:
        log_sd: u = log S, (n, p).
        loss: -F at the current point, a scalar of `model.wide_dtype`.
        gradient: d(-F)/dM and d(-F)/du.
        rate: A at the current point, damped (`_evaluate`), (n, p): with `column_precision`,
            H0's M block.
        column_precision: diag(Omega) at the current point, (p,).
        sd_curvature: h_u, damped, (n, p): H0's u block (see the module docstring).
        ridge_gain: (p,) 1 / kappa_j - 1 / m_j >= 0, H0's correction along each column's
            ridge (`_ridge_gain`).
        residual: R = M - X B at the current point, (n, p): each column's ridge direction.
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
    ridge_gain: jax.Array
    residual: jax.Array
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
    ridge_gain: jax.Array
    residual: jax.Array
    coef: jax.Array
    precision: jax.Array
    precision_diagonal: jax.Array


def _dot(a: Latent, b: Latent) -> jax.Array:
    """sum(a * b) over both arrays, accumulated in float64."""
    return model.wide_sum(a.latent_mean * b.latent_mean) + model.wide_sum(a.latent_sd * b.latent_sd)


def _axpy(scale, x: Latent, y: Latent) -> Latent:
    """y + scale x, the scalar cast to the arrays' dtype."""
    return jax.tree.map(lambda xx, yy: yy + scale.astype(yy.dtype) * xx, x, y)


def _damped(curvature: jax.Array, gradient: jax.Array) -> jax.Array:
    """max(curvature, |gradient|): a Newton step on it moves a cell by at most 1 (module
    docstring, "Why damped")."""
    return jnp.maximum(curvature, jnp.abs(gradient))


def _evaluate(latent_mean, log_sd, data) -> _Point:
    # Materialized once: XLA otherwise rewrites S * S as exp(2 u), one more exp over (n, p).
    latent_sd = jax.lax.optimization_barrier(jnp.exp(log_sd))
    found = profiled.evaluate(latent_mean, latent_sd, data, log_sd)
    variance = latent_sd * latent_sd
    diagonal = found.precision_diagonal
    spread = found.rate + diagonal
    sd_curvature = _damped(2.0 * variance * spread + variance * variance * found.rate, found.grad_log_sd)
    # H0's M block is A + Omega_jj: damping it is damping A, to at least |g| - Omega_jj. Kept
    # as an array: damping A + Omega_jj where it is read (H0, its along-X term) ran slower.
    rate = jnp.maximum(found.rate, jnp.abs(found.grad_mean) - diagonal)
    gradient = Latent(-found.grad_mean, -found.grad_log_sd)
    ridge_gain = _ridge_gain(found, variance, rate + diagonal, sd_curvature, data)
    return _Point(latent_mean, log_sd, latent_sd, -found.elbo, gradient, rate, sd_curvature, ridge_gain,
                  found.residual, found.coef, found.precision, diagonal)


def _ridge_gain(found: profiled.Evaluation, variance, mean_curvature, sd_curvature, data) -> jax.Array:
    """(p,): c_j = 1 / kappa_j - 1 / m_j (at least 0), what H0's inverse adds along each
    column's ridge v_j (module docstring, "The ridge").

    m_j = v_j' H0 v_j = sum_i (A + w) R^2 + h_u (R is orthogonal to X, so H0's term along X
    does not enter); kappa_j = sum_i A ((R + S^2)^2 + 2 S^2), the curvature of -F along
    v_j, damped like the cells' to at least |g . v_j| (a step along the ridge scales column
    j's residuals and deviations by at most e) and floored at 1e-6 m_j.
    """
    keep, _ = model._real_rows(data)
    A, residual = found.rate, found.residual
    kappa = jnp.sum(keep(A * ((residual + variance) ** 2 + 2.0 * variance)), axis=0)
    modelled = jnp.sum(keep(mean_curvature * residual * residual + sd_curvature), axis=0)
    slope = jnp.sum(keep(found.grad_mean * residual + found.grad_log_sd), axis=0)
    kappa = jnp.maximum(jnp.maximum(kappa, jnp.abs(slope)), RIDGE_FLOOR * modelled)
    return jnp.maximum(1.0 / kappa - 1.0 / modelled, 0.0)


class _H0(NamedTuple):
    """What H0 needs beside the state, made once per direction (`_h0`) for the recursion's
    H0 and the fallback's alike.

    Attributes:
        covariates: X, (n, d).
        along_x: (p, d, d), C_j's (`_inverse_h0`) Cholesky factor for each column j (1 / C_j
            where d = 1), wide dtype (`_along_x`).
        rows: (n, 1), 1 on real rows and 0 on padded ones (or 1: no padding).
    """

    covariates: jax.Array
    along_x: jax.Array
    rows: jax.Array


def _h0(own: PreconditionedLbfgsState, data) -> _H0:
    keep, _ = model._real_rows(data)
    rows = keep(jnp.ones((data.counts.shape[0], 1), own.residual.dtype))
    return _H0(data.covariates, _along_x(own, data.covariates), rows)


def _along_x(own: PreconditionedLbfgsState, covariates: jax.Array) -> jax.Array:
    """(p, d, d), of the wide dtype: for each column j, C_j's (`_inverse_h0`) lower Cholesky
    factor, or 1 / C_j for an intercept alone (d = 1).

    A factor rather than C_j's inverse: each direction applies it once (two triangular
    solves of d x d), and at d = 10 the batched inverse (an LU and its pivots' loop) was a
    tenth of an iteration."""
    X = covariates
    n, d = X.shape
    wide = model.wide_dtype(own.rate.dtype)
    weight = own.rate / (own.column_precision * (own.rate + own.column_precision))
    # C_j is symmetric: its d (d + 1) / 2 distinct entries, each a product over the rows
    # (n p of work apiece: at d = 10 the d^2 products were a tenth of an iteration), then
    # laid out in full.
    first, second = np.triu_indices(d)
    entry = np.zeros((d, d), np.int32)
    entry[first, second] = entry[second, first] = np.arange(first.size)
    distinct = (X[:, first] * X[:, second]).T @ weight  # (d (d + 1) / 2, p)
    cross = distinct.T[:, entry].astype(wide)  # (p, d, d): C_j
    # C_j + ALONG_X_FLOOR X^T X / w_j is exactly C_j of the model with w_j / (1 + ALONG_X_FLOOR) P_X.
    cross = cross + ALONG_X_FLOOR * model.wide_cross(X, X)[None] / own.column_precision.astype(wide)[:, None, None]
    # An intercept alone (d = 1, the usual design) divides rather than factor p 1 x 1 matrices.
    return 1.0 / cross if d == 1 else jnp.linalg.cholesky(cross)


def _inverse_h0(own: PreconditionedLbfgsState, q: Latent, h0: _H0) -> Latent:
    """H0 q, H0 the inverse of the curvature model of the module docstring (step 1).

    Per column j of M that model is h_j = diag(A_j + w_j) - w_j P_X (w_j = Omega_jj, P_X the
    projection on X's columns): moving M along X's columns moves B with it and leaves R, so
    Omega's term has no curvature there and A alone does. By Woodbury,
    h_j^-1 q = D^-1 q + D^-1 X C_j^-1 X^T D^-1 q with D = diag(A_j + w_j) and
    C_j = X^T diag(A_j / (w_j (A_j + w_j))) X, a d x d matrix (1 / w - 1 / (A + w), formed
    without the cancellation). Where A is small next to w (rare species, and on oaks A
    reaches 1e-7), the diagonal alone sees a curvature w where it is A: its steps along X
    were up to w / A too short, and L-BFGS took 43 iterations instead of 30 to 1e-5.

    Then each column's ridge (module docstring): the model lowered to curvature kappa_j
    along v_j = (R_j in M, 1 in u_j) by a rank-one change of the curvature along H0 v_j,
    whose inverse is H0's plus c_j v_j v_j' (Sherman and Morrison; c_j = `ridge_gain`).
    """
    X = h0.covariates
    dtype = q.latent_mean.dtype
    mean_curvature = own.rate + own.column_precision
    base = q.latent_mean / mean_curvature
    projected = (X.T @ base).T.astype(h0.along_x.dtype)  # (p, d): X^T D^-1 q
    if X.shape[1] == 1:
        shift = (h0.along_x[:, :, 0] * projected).astype(dtype)  # (p, 1): C_j^-1 X^T D^-1 q
    else:
        half = jax.lax.linalg.triangular_solve(h0.along_x, projected[..., None], left_side=True, lower=True)
        shift = jax.lax.linalg.triangular_solve(h0.along_x, half, left_side=True, lower=True,
                                                transpose_a=True)[..., 0].astype(dtype)
    along_ridge = own.ridge_gain * jnp.sum(own.residual * q.latent_mean + q.latent_sd, axis=0)
    return Latent(base + (X @ shift.T) / mean_curvature + along_ridge * own.residual,
                  q.latent_sd / own.sd_curvature + along_ridge * h0.rows)


def _direction(own: PreconditionedLbfgsState, h0: _H0) -> Latent:
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

    r = jax.lax.fori_loop(0, MEMORY, oldest_first, _inverse_h0(own, q, h0))
    return jax.tree.map(jnp.negative, r)


# Where the line search is (`_safe_search`): along the recursion's direction, along -H0 g
# after that failed, or given up (staying at t = 0).
_ALONG_DIRECTION, _ALONG_STEEPEST, _GAVE_UP = 0, 1, 2


class _Search(NamedTuple):
    """The line search's loop state."""

    phase: jax.Array
    direction: Latent
    slope: jax.Array  # g . direction
    t: jax.Array
    point: _Point  # at t along direction
    new_slope: jax.Array  # g_new . direction
    halvings: jax.Array  # along this direction
    evaluations: jax.Array


# Jitted on its own, at module level: run op by op (the eager strategy), a `lax.while_loop`
# whose body closes over this iteration's arrays is a new program at every call, so it was
# compiled (or loaded from the persistent cache) once an iteration, and JAX's cache of
# primitive executables kept every copy: thousands of memory mappings an eager run, until
# the process met vm.max_map_count and crashed. As one function of its inputs it is
# compiled once per shape; inside the compiled strategies it is inlined as before.
@jax.jit
def _safe_search(start_mean, own: PreconditionedLbfgsState, direction: Latent, slope, data) -> _Search:
    """t = 1, then halving (module docstring, step 2) along `direction`; after `MAX_HALVINGS`
    along -H0 g from t = 1; after as many again no step (t = 0: the current point, evaluated
    again). Whether a step was found: `phase` < `_GAVE_UP`.

    One `lax.while_loop` for all three: the first trial is accepted in most iterations (19 in
    20 on oaks), and the fallback's direction is made inside the loop's body, so an accepted
    first trial costs nothing more. (Choosing between a first search and a retry with a
    `lax.cond` copied the point, eight (n, p) arrays, out of the cond at every iteration:
    a third more time per iteration at oaks x100.)
    """
    dtype = start_mean.dtype

    def trial(along: Latent, t) -> tuple[_Point, jax.Array]:
        point = _evaluate(start_mean + t.astype(dtype) * along.latent_mean,
                          own.log_sd + t.astype(dtype) * along.latent_sd, data)
        return point, _dot(point.gradient, along)

    def accepted(search: _Search):
        finite = jnp.isfinite(search.point.loss)
        # Armijo's test only where the decrease it predicts, -t g.d, is one the loss can
        # resolve (its dtype's epsilon times the loss): once t d is under the variables'
        # rounding the point is the start again, and the start evaluated again can come out
        # a rounding lower (another fusion of the same sums), which passed as a decrease.
        resolved = -search.t * search.slope > jnp.finfo(dtype).eps * jnp.abs(own.loss)
        armijo = resolved & (search.point.loss <= own.loss + ARMIJO * search.t * search.slope)
        # Both of Hager and Zhang's bounds on the slope: without the lower one (the slope has
        # risen) the start itself passed, its slope unchanged (module docstring, step 2).
        wolfe = ((search.point.loss <= own.loss) & (search.new_slope <= -(1 - 2 * WOLFE_DELTA) * search.slope)
                 & (search.new_slope >= WOLFE_SIGMA * search.slope))
        return finite & (armijo | wolfe)

    def searching(search: _Search):
        return ~accepted(search) & (search.phase < _GAVE_UP)

    def next_trial(search: _Search) -> _Search:
        exhausted = search.halvings >= MAX_HALVINGS
        turn = exhausted & (search.phase == _ALONG_DIRECTION)
        give_up = exhausted & (search.phase == _ALONG_STEEPEST)
        along, along_slope = jax.lax.cond(turn, lambda: _steepest(own, _h0(own, data)),
                                          lambda: (search.direction, search.slope))
        t = jnp.where(turn, 1.0, jnp.where(give_up, 0.0, 0.5 * search.t)).astype(search.t.dtype)
        point, new_slope = trial(along, t)
        phase = jnp.where(turn, _ALONG_STEEPEST, jnp.where(give_up, _GAVE_UP, search.phase))
        halvings = jnp.where(turn, 0, search.halvings + 1)
        return _Search(phase, along, along_slope, t, point, new_slope, halvings, search.evaluations + 1)

    one = jnp.ones((), slope.dtype)
    zero = jnp.zeros((), jnp.int32)
    return jax.lax.while_loop(searching, next_trial,
                              _Search(zero + _ALONG_DIRECTION, direction, slope, one, *trial(direction, one), zero,
                                      zero + 1))


def _steepest(own: PreconditionedLbfgsState, h0: _H0) -> tuple[Latent, jax.Array]:
    """(-H0 g, its slope g . d): the direction when the recursion's goes uphill."""
    direction = jax.tree.map(jnp.negative, _inverse_h0(own, own.gradient, h0))
    return direction, _dot(own.gradient, direction)


# Jitted at module level for the reason `_safe_search` is: the eager strategy would build
# a new `lax.cond` program at every call.
@jax.jit
def _descent_direction(own: PreconditionedLbfgsState, data) -> tuple[Latent, jax.Array]:
    """(d, g . d): the recursion's direction, or -H0 g when that is not downhill (or NaN).

    A `lax.cond`, not a select between the two: a select makes -H0 g and its slope at
    every iteration, two passes over the variables and two sums that are almost never used.
    """
    h0 = _h0(own, data)
    direction = _direction(own, h0)
    slope = _dot(own.gradient, direction)
    return jax.lax.cond(slope < 0, lambda: (direction, slope), lambda: _steepest(own, h0))


class PreconditionedLbfgs(Algorithm):
    """L-BFGS with a per-iteration diagonal H0 and a halving line search (module docstring)."""

    family: ClassVar[str] = "profiled"
    name = "preconditioned_lbfgs"

    def init(self, params, precision, data):
        point = _evaluate(params.latent_mean, jnp.log(params.latent_sd), data)
        zeros = jnp.zeros((MEMORY,) + point.latent_mean.shape, point.latent_mean.dtype)
        own = PreconditionedLbfgsState(
            point.log_sd, point.loss, point.gradient, point.rate, point.precision_diagonal, point.sd_curvature,
            point.ridge_gain, point.residual, Latent(zeros, zeros), Latent(zeros, zeros),
            jnp.zeros((MEMORY,), point.loss.dtype), jnp.zeros((), jnp.int32), jnp.ones((), jnp.int32))
        return self._state(point, own, point.precision)

    @staticmethod
    def _state(point: _Point, own: PreconditionedLbfgsState, precision: jax.Array) -> FitState:
        return FitState(params=model.PLNParams(point.coef, point.latent_mean, point.latent_sd),
                        precision=precision, opt_state=own)

    def step(self, state, data):
        return self._step(state, data, whole=True)

    def loop_step(self, state, data):
        """`step`, but where Omega comes through the rows the state keeps the Omega it came
        with, for `finish` to make once: nothing in the loop reads Omega there (H0 reads its
        diagonal), and forming it is a product of p^2 n: up to half of a float64 iteration
        (scrna 100 x 300), a tenth at microcosm 921 x 1209 (docs/accuracy.md). Where Omega is
        Sigma's own inverse it is made anyway and kept."""
        return self._step(state, data, whole=profiled.forms_precision(data))

    def finish(self, state, data):
        if profiled.forms_precision(data):
            return state
        params = state.params
        return state._replace(precision=profiled.precision_at(params.latent_mean, params.latent_sd, data))

    def _step(self, state, data, whole: bool):
        """One iteration; the new state holds the new point's Omega if `whole`, else the
        state's own."""
        own = state.opt_state
        start_mean = state.params.latent_mean
        direction, slope = _descent_direction(own, data)
        dtype = start_mean.dtype
        search = _safe_search(start_mean, own, direction, slope, data)
        direction, slope, t, point, new_slope = search.direction, search.slope, search.t, search.point, search.new_slope
        found = search.phase < _GAVE_UP
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
        # After a failed search the pairs are forgotten (their 1 / (s . y) zeroed: the
        # recursion skips them), so the next direction is -H0 g at the same point.
        inverse_products = jnp.where(found, own.inverse_products.at[slot].set(inverse), 0.0)
        new = PreconditionedLbfgsState(
            point.log_sd, point.loss, point.gradient, point.rate, point.precision_diagonal, point.sd_curvature,
            point.ridge_gain, point.residual, remember(own.steps, step),
            remember(own.gradient_changes, change), inverse_products,
            jnp.where(keep, (slot + 1) % MEMORY, slot), own.evaluations + search.evaluations)
        return self._state(point, new, point.precision if whole else state.precision), -own.loss
