"""The ELBO and its identities, checked against the independent NumPy/SciPy implementation."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.special import gammaln

from core.data.datasets import load_oaks, simulate
from core.fit import model, profiled, row_path
from core.machine.runtime import configure

import reference_pln as ref


@pytest.fixture(scope="module", autouse=True)
def _x64():
    configure()


def _random_point(rng, n, p, d):
    B = rng.normal(size=(d, p)) * 0.3
    M = rng.normal(size=(n, p))
    S = rng.uniform(0.2, 1.2, size=(n, p))
    root = rng.normal(size=(p, p))
    Omega = root @ root.T / p + np.eye(p)
    return B, M, S, Omega


def test_elbo_matches_independent_numpy_at_any_point():
    counts = simulate(60, 7, d=2, seed=3)
    Y, O, X = counts.counts, counts.offsets, counts.covariates
    data = model.make_data(Y, O, X, "float64")
    B, M, S, Omega = _random_point(np.random.default_rng(0), 60, 7, 2)
    ours = float(model.elbo(model.PLNParams(B, M, S), Omega, data))
    theirs = ref.full_elbo(Y, O, X, B, M, S, Omega)
    assert ours == pytest.approx(theirs, rel=1e-12)


def test_profiled_equals_full_at_closed_forms_and_trace_is_np():
    counts = load_oaks()
    Y, O, X = counts.counts, counts.offsets, counts.covariates
    n, p = Y.shape
    data = model.make_data(Y, O, X, "float64")
    rng = np.random.default_rng(1)
    M = np.log(Y + (Y == 0)) + 0.1 * rng.normal(size=Y.shape)
    S = rng.uniform(0.3, 0.8, size=Y.shape)

    B_ref, Sigma_ref = ref.closed_forms(Y, X, M, S)
    B = np.asarray(model.closed_form_coef(M, X))
    Sigma = np.asarray(model.closed_form_covariance(model.PLNParams(B, M, S), data))
    np.testing.assert_allclose(B, B_ref, rtol=1e-10)
    np.testing.assert_allclose(Sigma, Sigma_ref, rtol=1e-9, atol=1e-12)

    Omega = np.asarray(model.precision_from_covariance(Sigma))
    R = M - X @ B
    assert np.trace(Omega @ (R.T @ R + np.diag((S**2).sum(0)))) == pytest.approx(n * p, rel=1e-9)

    full = float(model.elbo(model.PLNParams(B, M, S), Omega, data))
    profiled = float(model.profiled_elbo(M, S, data))
    reference_profiled = ref.profiled_elbo_and_grad(Y, O, X, M, S)[0]
    assert full == pytest.approx(profiled, rel=1e-10)
    assert profiled == pytest.approx(reference_profiled, rel=1e-10)
    # The profiled ELBO is the maximum over Omega: any other Omega gives less.
    assert float(model.elbo(model.PLNParams(B, M, S), 1.1 * Omega, data)) < full


def test_exact_log_factorial_and_stirling_gap_on_oaks():
    Y = load_oaks().counts
    exact = model.exact_log_factorial_sum(Y)
    assert exact == pytest.approx(gammaln(Y + 1).sum(), rel=1e-14)
    assert exact == pytest.approx(1.286e6, rel=1e-3)
    # pyPLNmodels' Stirling term differs from the exact one by a constant of about 570.
    assert exact - model.stirling_log_factorial_sum(Y) == pytest.approx(570, abs=30)


def test_log_det_stays_finite_in_float32_for_p_114():
    # The seed's log(det(Omega)) overflows in float32 at p = 114; Cholesky does not.
    Omega = jnp.eye(114, dtype=jnp.float32) * 3.0
    assert not np.isfinite(float(jnp.log(jnp.linalg.det(Omega))))
    assert float(model._logdet_spd(Omega)) == pytest.approx(114 * np.log(3.0), rel=1e-5)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_the_profiled_log_det_is_that_of_the_precision_it_returns(dtype):
    # float64 takes it from Sigma's factor, float32 factors the Omega it returns again in float64:
    # either way the log-determinant of that Omega, as the ELBO's stationarity in Omega needs.
    rng = np.random.default_rng(4)
    root = rng.normal(size=(150, 60))
    sigma = jnp.asarray(root @ root.T / 60 + 0.05 * np.eye(150), dtype)  # p > n: close to singular
    precision, logdet = profiled.precision_and_logdet(sigma)
    assert logdet.dtype == jnp.float64
    exact = np.linalg.slogdet(np.asarray(precision, np.float64))
    assert exact[0] == 1 and float(logdet) == pytest.approx(exact[1], rel=1e-12, abs=1e-9)


@pytest.mark.parametrize("rows, p", [(20, 60), (40, 60), (59, 60), (60, 60), (90, 60)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_omega_through_the_rows_or_its_own_factor_is_numpys_inverse(rows, p, dtype):
    # Woodbury's n x n path (fewer rows than columns) and Sigma's p x p factor give NumPy's
    # Omega, R Omega, diagonal and log-determinant, to the rounding of the fit's dtype; which
    # path runs is `row_path.through_rows`'s choice, both are checked on either side of it.
    rng = np.random.default_rng(rows)
    R = rng.normal(size=(rows, p)) * rng.uniform(0.1, 3.0, size=p)
    variance = rng.uniform(0.05, 2.0, size=p) * rows
    sigma = (R.T @ R + np.diag(variance)) / rows
    omega = np.linalg.inv(sigma)
    precision, logdet, r_omega, diagonal = profiled.precision_terms(jnp.asarray(R, dtype), jnp.asarray(variance, dtype),
                                                                    rows)
    assert logdet.dtype == jnp.float64 and precision.dtype == r_omega.dtype == diagonal.dtype == np.dtype(dtype)
    tight = 1e-9 if dtype == "float64" else 2e-3
    assert float(logdet) == pytest.approx(-np.linalg.slogdet(sigma)[1], rel=1e-12 if dtype == "float64" else 1e-6)
    scale = np.max(np.abs(omega))
    np.testing.assert_allclose(np.asarray(precision, np.float64), omega, atol=tight * scale)
    np.testing.assert_allclose(np.asarray(diagonal, np.float64), np.diag(omega), atol=tight * scale)
    expected = np.asarray(R, dtype).astype(np.float64) @ omega
    np.testing.assert_allclose(np.asarray(r_omega, np.float64), expected, atol=tight * np.max(np.abs(expected)))


def test_through_the_rows_where_there_are_fewer_rows_than_columns():
    assert row_path.through_rows(59, 60, "float64") and not row_path.through_rows(60, 60, "float64")
    # float32 goes through float64 products there, worth it at half as many rows or fewer.
    assert row_path.through_rows(30, 60, "float32") and not row_path.through_rows(31, 60, "float32")
    # A GPU's float64 costs it less: there float32 goes through the rows wherever float64 does;
    # a TPU emulates float64 and keeps the CPU's rule.
    assert row_path.through_rows(59, 60, "float32", "gpu") and not row_path.through_rows(60, 60, "float32", "gpu")
    assert not row_path.through_rows(31, 60, "float32", "tpu")


def test_the_way_is_chosen_for_the_device_the_fit_is_traced_for(monkeypatch):
    # The engine traces a fit under jax.default_device(its device); the arrays of a trace carry
    # none, so the platform comes from there, else from JAX's default backend.
    cpu, seen = jax.devices("cpu")[0], []
    with jax.default_device(cpu):
        jax.jit(lambda x: seen.append(profiled.tracing_platform()) or x)(0)
    assert seen == ["cpu"]
    with jax.default_device("cpu"):
        assert profiled.tracing_platform() == "cpu"
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    assert profiled.tracing_platform() == "gpu"
    counts = simulate(40, 60, seed=1)
    data = model.make_data(counts.counts, counts.offsets, counts.covariates, "float32")
    assert not profiled.forms_precision(data)  # 40 x 60 in float32: through the rows on a GPU alone
    with jax.default_device(cpu):
        assert profiled.forms_precision(data)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_the_profiled_evaluation_with_fewer_rows_than_columns_is_the_direct_one(dtype, monkeypatch):
    # At p > n the evaluation's value and gradient come out of Woodbury's path as out of Sigma's
    # own factor (forced here), to the rounding of the fit's dtype.
    counts = simulate(30, 80, seed=3)
    data = jax.device_put(model.make_data(counts.counts, counts.offsets, counts.covariates, dtype))
    params, _ = model.init_params(data, "log_rates")
    woodbury = jax.jit(profiled.evaluate)(params.latent_mean, params.latent_sd, data)
    monkeypatch.setattr(row_path, "through_rows", lambda *shape: False)
    # JAX keeps the first trace of `evaluate` for these arguments: without emptying its caches
    # the "direct" evaluation was Woodbury's program again (4 Cholesky factors in each), and
    # this test compared a path with itself. Emptied after too, so no later test gets this one.
    jax.clear_caches()
    try:
        direct = jax.jit(profiled.evaluate)(params.latent_mean, params.latent_sd, data)
    finally:
        jax.clear_caches()
    relative = 1e-12 if dtype == "float64" else 1e-7
    assert float(woodbury.elbo) == pytest.approx(float(direct.elbo), rel=relative)
    for got, expected in ((woodbury.grad_mean, direct.grad_mean), (woodbury.grad_sd, direct.grad_sd)):
        expected = np.asarray(expected, np.float64)
        np.testing.assert_allclose(np.asarray(got, np.float64), expected,
                                   atol=(1e-9 if dtype == "float64" else 1e-3) * np.max(np.abs(expected)))


@pytest.mark.parametrize("init", ["seed", "log_counts", "log_rates_sd"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_initialisations_and_dtypes(init, dtype):
    counts = load_oaks()
    data = jax.device_put(model.make_data(counts.counts, counts.offsets, counts.covariates, dtype))
    params, precision = model.init_params(data, init)
    for leaf in [*params, precision]:
        assert leaf.dtype == np.dtype(dtype)
    value = model.elbo(params, precision, data)
    assert value.dtype == np.dtype(dtype) and np.isfinite(float(value))
    if init == "seed":
        assert float(jnp.max(jnp.abs(params.latent_mean))) == 0.0
        np.testing.assert_array_equal(np.asarray(precision), np.eye(114))
    else:
        Y = counts.counts
        log_counts = np.log(Y + (Y == 0))
        if init == "log_counts":
            np.testing.assert_allclose(np.asarray(params.latent_mean), log_counts, rtol=1e-6)
            np.testing.assert_array_equal(np.asarray(params.latent_sd), 0.5)
        else:
            # log_rates_sd: the log-rates, each cell's S the spread of a Poisson count's log.
            np.testing.assert_allclose(np.asarray(params.latent_mean), log_counts - counts.offsets, rtol=1e-6,
                                       atol=1e-5)
            np.testing.assert_allclose(np.asarray(params.latent_sd), 1.0 / np.sqrt(Y + 1.0), rtol=1e-6)
        # Started at the closed forms, the full ELBO is the profiled one.
        assert float(value) == pytest.approx(float(model.profiled_elbo(params.latent_mean, params.latent_sd, data)),
                                             rel=1e-4 if dtype == "float32" else 1e-10)
