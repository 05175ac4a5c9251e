"""preconditioned_lbfgs's shortcuts compute what the textbook iteration computes, and its
safeguards hold.

Each iteration avoids passes over the (n, p) variables: s . y is taken from the two slopes
the line search summed, -H0 g is made only when the recursion's direction goes uphill, and
H0 is applied by Woodbury and Sherman-Morrison rather than by a dense solve. These tests
check each against the direct computation, in float64; and that no step lowers the ELBO or
makes it non-finite, the line search falling back when it finds none.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from core.data.datasets import simulate
from core.fit import model, profiled, strategies
from core.fit.algorithms import preconditioned_lbfgs as plbfgs
from core.fit.algorithms.base import Latent
from core.machine.runtime import configure
from core.spec import OptimizerSpec


@pytest.fixture(scope="module")
def problem():
    configure()
    counts = simulate(40, 6, d=2, seed=5)
    data = jax.device_put(model.make_data(counts.counts, counts.offsets, counts.covariates, "float64"))
    params, precision = model.init_params(data, "log_rates")
    return data, params, precision


def test_each_kept_pair_has_the_inverse_of_its_own_curvature_product(problem):
    data, params, precision = problem
    algorithm = plbfgs.PreconditionedLbfgs()
    state = algorithm.init(params, precision, data)
    step = jax.jit(algorithm.step)
    checked = 0
    for _ in range(8):
        slot = int(state.opt_state.slot)
        state, _ = step(state, data)
        own = state.opt_state
        if int(own.slot) == slot:
            continue  # the pair was not kept
        pair = [jax.tree.map(lambda memory: memory[slot], buffers) for buffers in (own.steps, own.gradient_changes)]
        direct = float(plbfgs._dot(*pair))
        assert direct > 0
        assert float(own.inverse_products[slot]) == pytest.approx(1.0 / direct, rel=1e-9)
        checked += 1
    assert checked >= 6


def _state_with_one_pair(problem, inverse_product):
    """A state at the start with one remembered pair (s, y) = (g, g) and the given 1 / (s . y)."""
    data, params, precision = problem
    own = plbfgs.PreconditionedLbfgs().init(params, precision, data).opt_state
    gradient = own.gradient
    steps = jax.tree.map(lambda memory, g: memory.at[0].set(g), own.steps, gradient)
    changes = jax.tree.map(lambda memory, g: memory.at[0].set(g), own.gradient_changes, gradient)
    return own._replace(steps=steps, gradient_changes=changes,
                        inverse_products=own.inverse_products.at[0].set(inverse_product),
                        slot=jnp.ones((), jnp.int32))


def _h0_times(own, q, h0):
    """H0 q from its definition, per column j a dense 2n x 2n solve: the curvature model
    blockdiag(diag(A_j + w_j) - w_j / (1 + floor) X (X^T X)^-1 X^T, diag(h_u)), lowered along
    the ridge v_j = (R_j, 1) to kappa_j by the rank-one change along H v_j (kappa_j as
    `ridge_gain` says: c_j = 1 / kappa_j - 1 / m_j)."""
    X, R = np.asarray(h0.covariates), np.asarray(own.residual)
    A, w, h_u = np.asarray(own.rate), np.asarray(own.column_precision), np.asarray(own.sd_curvature)
    n, p = A.shape
    projection = X @ np.linalg.solve(X.T @ X, X.T)
    kept = w / (1.0 + plbfgs.ALONG_X_FLOOR)
    mean, sd = np.empty((n, p)), np.empty((n, p))
    for j in range(p):
        model = np.zeros((2 * n, 2 * n))
        model[:n, :n] = np.diag(A[:, j] + w[j]) - kept[j] * projection
        model[n:, n:] = np.diag(h_u[:, j])
        v = np.concatenate([R[:, j], np.ones(n)])
        bent = model @ v
        m = v @ bent
        gain = float(own.ridge_gain[j])
        if gain > 0:
            kappa = 1.0 / (gain + 1.0 / m)
            model -= (1.0 - kappa / m) / m * np.outer(bent, bent)
        column = np.concatenate([np.asarray(q.latent_mean)[:, j], np.asarray(q.latent_sd)[:, j]])
        solved = np.linalg.solve(model, column)
        mean[:, j], sd[:, j] = solved[:n], solved[n:]
    return Latent(mean, sd)


def _steepest(own, h0):
    return jax.tree.map(np.negative, _h0_times(own, own.gradient, h0))


def _context(problem, own):
    data, _, _ = problem
    return plbfgs._h0(own, data)


@pytest.mark.parametrize("d", [1, 2, 4])
def test_h0_is_the_inverse_of_the_curvature_model(d):
    # Woodbury's d x d solves per column (a division for an intercept alone) and Sherman and
    # Morrison's along each ridge give what the dense solve gives.
    configure()
    counts = simulate(40, 6, d=d, seed=5)
    data = jax.device_put(model.make_data(counts.counts, counts.offsets, counts.covariates, "float64"))
    problem = (data, *model.init_params(data, "log_rates"))
    own = _state_with_one_pair(problem, 0.0)
    # Whatever the ridge's gain (at this start the data leave it at 0 in some columns).
    own = own._replace(ridge_gain=own.ridge_gain + jnp.linspace(0.0, 0.05, own.ridge_gain.size))
    h0 = _context(problem, own)
    got = plbfgs._inverse_h0(own, own.gradient, h0)
    for mine, dense in zip(got, _h0_times(own, own.gradient, h0)):
        np.testing.assert_allclose(np.asarray(mine), dense, rtol=1e-8, atol=1e-12)


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_the_recursions_direction_unless_uphill_then_minus_h0_g(problem, sign):
    data, params, _ = problem
    own = _state_with_one_pair(problem, 0.0)
    h0 = _context(problem, own)
    norm = float(plbfgs._dot(own.gradient, own.gradient))
    # With s = y = g and 1 / (s . y) = c / |g|^2 the recursion gives g . d =
    # -|g|^2 ((1 - c)^2 k + c), k = g H0 g / |g|^2: downhill for c = 1, uphill for
    # c = 1 - 1 / (2k) when k < 1/4 (a pair no step would have kept).
    k = float(plbfgs._dot(own.gradient, _h0_times(own, own.gradient, h0))) / norm
    assert k < 0.25
    c = 1.0 if sign > 0 else 1.0 - 1.0 / (2.0 * k)
    own = own._replace(inverse_products=own.inverse_products.at[0].set(c / norm))
    recursion = plbfgs._direction(own, h0)
    recursion_slope = float(plbfgs._dot(own.gradient, recursion))
    assert (recursion_slope < 0) == (sign > 0)

    direction, slope = plbfgs._descent_direction(own, data)
    expected = recursion if sign > 0 else _steepest(own, h0)
    for got, want in zip(direction, expected):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-9, atol=0)
    assert float(slope) == pytest.approx(float(plbfgs._dot(own.gradient, expected)), rel=1e-9)
    assert float(slope) < 0


def test_a_rejected_pair_empties_its_slot_and_leaves_the_others(problem):
    data, params, precision = problem
    algorithm = plbfgs.PreconditionedLbfgs()
    state = algorithm.init(params, precision, data)
    step = jax.jit(algorithm.step)
    for _ in range(plbfgs.MEMORY + 1):
        state, _ = step(state, data)
    before = state.opt_state
    assert bool(jnp.all(before.inverse_products > 0))  # the memory is full
    # A held gradient 1e-3 of the true one: the step along -H0 g_held is short, the true
    # gradient barely changes, so s . y = -t g_held H0 (g_new - g_held) < 0 and the pair fails.
    held = jax.tree.map(lambda g: 1e-3 * g, before.gradient)
    state = state._replace(opt_state=before._replace(gradient=held, inverse_products=jnp.zeros_like(
        before.inverse_products)))
    after, _ = step(state, data)
    own, slot = after.opt_state, int(before.slot)
    assert int(own.slot) == slot
    assert float(own.inverse_products[slot]) == 0.0
    for buffers, old in ((own.steps, before.steps), (own.gradient_changes, before.gradient_changes)):
        for got, was in zip(buffers, old):
            assert not np.any(np.asarray(got[slot]))
            others = [i for i in range(plbfgs.MEMORY) if i != slot]
            np.testing.assert_array_equal(np.asarray(got)[others], np.asarray(was)[others])


def test_the_log_sd_gradient_is_the_chain_rule_of_the_sd_gradient(problem):
    # The evaluation makes dF/du (u = log S) without dividing by S; it must still be S dF/dS,
    # and the gradient autodiff finds for the ELBO at the closed forms.
    data, params, _ = problem
    found = profiled.evaluate(params.latent_mean, params.latent_sd, data)
    np.testing.assert_allclose(found.grad_log_sd, found.grad_sd * params.latent_sd, rtol=1e-12, atol=1e-12)

    def profiled_elbo(log_sd):
        return profiled.evaluate(params.latent_mean, jnp.exp(log_sd), data).elbo

    autodiff = jax.grad(profiled_elbo)(jnp.log(params.latent_sd))
    np.testing.assert_allclose(found.grad_log_sd, autodiff, rtol=1e-6, atol=1e-8)


def test_h0_moves_no_cell_by_more_than_about_one_unit():
    # Far below its optimum in log S the ELBO is -u + (A + w) e^(2u) / 2: the curvature vanishes
    # while the gradient stays near 1, and an undamped step sent S from 1e-3 to e^55 on
    # microcosm. Damped, -H0 g moves each cell by at most 1 (before the ridge's correction).
    counts = simulate(30, 4, seed=2)
    data = jax.device_put(model.make_data(counts.counts, counts.offsets, counts.covariates, "float64"))
    params, precision = model.init_params(data, "log_rates")
    tiny = params._replace(latent_sd=jnp.full_like(params.latent_sd, 1e-4))
    own = plbfgs.PreconditionedLbfgs().init(tiny, precision, data).opt_state
    move = plbfgs._inverse_h0(own._replace(ridge_gain=jnp.zeros_like(own.ridge_gain)), own.gradient,
                              plbfgs._h0(own, data))
    assert float(jnp.max(jnp.abs(move.latent_sd))) <= 1.0 + 1e-12
    # In M the move along X (a column's mean, which B takes up) comes on top of the cell's own.
    assert float(jnp.max(jnp.abs(move.latent_mean))) <= 2.0


def test_a_search_that_finds_no_step_takes_none_and_forgets_its_pairs(problem):
    # A direction along which the ELBO only falls: both the search along it and the one along
    # -H0 g are given no way up (the gradient's sign flipped), so the iteration stays put.
    data, params, precision = problem
    algorithm = plbfgs.PreconditionedLbfgs()
    state = algorithm.init(params, precision, data)
    step = jax.jit(algorithm.step)
    for _ in range(3):
        state, _ = step(state, data)
    own = state.opt_state
    uphill = jax.tree.map(jnp.negative, own.gradient)
    held = state._replace(opt_state=own._replace(gradient=uphill))
    after, value = step(held, data)
    assert float(value) == pytest.approx(-float(own.loss))
    np.testing.assert_array_equal(np.asarray(after.params.latent_mean), np.asarray(state.params.latent_mean))
    assert float(after.opt_state.loss) == float(own.loss)
    assert not np.any(np.asarray(after.opt_state.inverse_products))


def test_a_step_too_small_to_move_the_point_is_not_taken(problem):
    # Under the variables' rounding, start + t d is the start: its loss and its slope are the
    # start's. Such a step once passed the approximate Wolfe test (loss not risen, slope not
    # above its bound) and the fit took it again at every iteration, stuck where it stood.
    # The search must turn to -H0 g instead, and go down along it.
    data, params, precision = problem
    algorithm = plbfgs.PreconditionedLbfgs()
    state = jax.jit(algorithm.step)(algorithm.init(params, precision, data), data)[0]
    own = state.opt_state
    direction, slope = plbfgs._descent_direction(own, data)
    vanishing = jax.tree.map(lambda d: d * 1e-300, direction)
    search = plbfgs._safe_search(state.params.latent_mean, own, vanishing, slope * 1e-300, data)
    assert int(search.phase) == plbfgs._ALONG_STEEPEST
    assert float(search.point.loss) < float(own.loss)


def test_no_accepted_step_lowers_the_elbo_on_microcosm():
    # The data whose fit once blew up (S to e^55, then NaN): every step keeps a finite ELBO
    # and never lowers the ELBO the fit reads, in float32 and in float64.
    from core.data import corpus

    counts = corpus.load("microcosm 400x100")
    for dtype in ("float32", "float64"):
        data = jax.device_put(model.make_data(counts.counts, counts.offsets, counts.covariates, dtype))
        params, precision = model.init_params(data, "log_rates")
        algorithm = plbfgs.PreconditionedLbfgs()
        state = algorithm.init(params, precision, data)
        step = jax.jit(algorithm.step)
        losses = [float(state.opt_state.loss)]
        for _ in range(25):
            state, _ = step(state, data)
            losses.append(float(state.opt_state.loss))
        assert np.all(np.isfinite(losses)), dtype
        assert np.all(np.diff(losses) <= 0), dtype


def _wide_fit(name: str, precision: str):
    """A few iterations of the default on 20 x 50 counts (through the rows in both
    precisions) by strategy `name` -> (its output, the data, the lowered program)."""
    configure()
    counts = simulate(20, 50, seed=3)
    data = jax.device_put(model.make_data(counts.counts, counts.offsets, counts.covariates, precision))
    problem = strategies.Problem(counts.n, counts.p, counts.d, precision, 6, OptimizerSpec("preconditioned_lbfgs"))
    state = strategies.init_state(data, "log_rates", problem.algorithm)
    strategy = strategies.get(name)
    tol = jnp.asarray(0.0, precision)
    lowered = strategy.lower(problem, state, data, tol)
    output = jax.block_until_ready(strategy.run(strategy.compile(lowered), problem, strategy.fresh_state(state), data,
                                                tol))
    return output, data, lowered


@pytest.mark.parametrize("name", ["scan", "scan_pytree_class", "fori_loop", "while_loop", "jit_step", "eager"])
def test_a_fit_through_the_rows_ends_with_the_omega_of_its_last_point(name):
    # Inside a compiled loop the state keeps the Omega it came with (`loop_step`), and the
    # program makes the last point's once at its end (`finish`); Python loops step whole.
    output, data, _ = _wide_fit(name, "float64")
    M, S = (np.asarray(array) for array in (output.state.params.latent_mean, output.state.params.latent_sd))
    X = np.asarray(data.covariates)
    R = M - X @ np.linalg.lstsq(X, M, rcond=None)[0]
    sigma = (R.T @ R + np.diag((S * S).sum(axis=0))) / M.shape[0]
    np.testing.assert_allclose(np.asarray(output.state.precision), np.linalg.inv(sigma), rtol=1e-7, atol=1e-10)


@pytest.mark.parametrize("precision", ["float64", "float32"])
def test_the_compiled_loop_forms_omega_through_the_rows_only_after_its_last_iteration(precision):
    # Omega = n (D^-1 - (L^-1 R D^-1)^T (L^-1 R D^-1)) is a product of p^2 n that nothing in
    # the loop reads (H0 reads its diagonal): XLA leaves it out of the loop's body once the
    # carried state does not keep it. Its instructions are named after the p x p scope.
    _, data, lowered = _wide_fit("scan", precision)
    p = data.counts.shape[1]
    products = [line for line in lowered["fit"].compile().as_text().splitlines()
                if f"[{p},{p}]" in line.split("=", 1)[-1].split("(", 1)[0]
                and f"{profiled.P_BY_P_SCOPE}/dot_general" in line]
    assert products, "Omega's product is made at the end of the program"
    assert not [line for line in products if "while/body" in line]
