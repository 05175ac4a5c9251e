"""Every reduction over rows the fit relies on gives float64 NumPy's answer, at every row count.

A block sum that dropped its first block for 256 to 511 rows made float32 fits of three of
pyPLNmodels' data sets stop 1e-3 to 2.5e-2 below the optimum, and no test saw it: they ran
oaks (116 rows) and oaks x1000. So `model.wide_sum` and `model.wide_cross` are checked here
for every row count from 1 to 2,100 (one to nine 256-row blocks, each with every remainder),
and the whole profiled evaluation (its float32 column sums and Gram, the ELBO's float64
accumulation) for row counts drawn by hypothesis over the same range and at every block
boundary.

Compiling a program per row count takes 0.1 s with XLA's defaults, too long for 2,100 of
them, so the sweep compiles groups of row counts per program with XLA's quicker CPU
settings (the numbers are the same: a reduction's result does not depend on how fast its
code was built), in two threads; the hypothesis test compiles as the lab does (XLA's defaults,
`xla_settings.PRODUCTION`, over the session's quick settings).
"""

import concurrent.futures

import jax
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.fit import model, profiled
from core.machine.runtime import configure

from xla_settings import PRODUCTION, QUICK

ROWS = 2100
GROUP = 60
# float32 terms summed in float64 (wide_sum) or in 256-row float32 blocks added in float64
# (wide_cross): relative to the sum of |terms|, within a few float32 roundings of a block.
WIDE_TOLERANCE = 3e-6


@pytest.fixture(scope="module")
def arrays():
    configure()
    rng = np.random.default_rng(7)
    # Mixed signs and magnitudes, as M, R and the ELBO's cell terms are.
    left = rng.normal(size=(ROWS, 3)).astype(np.float32)
    right = (rng.normal(size=(ROWS, 4)) * rng.lognormal(0.0, 2.0, size=(ROWS, 4))).astype(np.float32)
    return left, right


def _group(counts):
    def reductions(left, right):
        return [(model.wide_cross(left[:n], right[:n]), model.wide_sum(right[:n])) for n in counts]
    return jax.jit(reductions, compiler_options=QUICK)


def _check(counts, left, right):
    found = _group(counts)(left[: counts[-1]], right[: counts[-1]])
    wrong = []
    for n, (cross, total) in zip(counts, found):
        a, b = left[:n].astype(np.float64), right[:n].astype(np.float64)
        scale = np.abs(a).T @ np.abs(b)
        if cross.dtype != np.float64 or np.any(np.abs(np.asarray(cross) - a.T @ b) > WIDE_TOLERANCE * scale):
            wrong.append(f"wide_cross at {n} rows")
        if abs(float(total) - b.sum()) > WIDE_TOLERANCE * np.abs(b).sum():
            wrong.append(f"wide_sum at {n} rows")
    return wrong


def test_every_row_count_to_2100_sums_as_float64_numpy(arrays):
    left, right = arrays
    counts = list(range(1, ROWS + 1))
    groups = [counts[start:start + GROUP] for start in range(0, len(counts), GROUP)]
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        wrong = [item for found in pool.map(lambda counts: _check(counts, left, right), groups) for item in found]
    assert not wrong, wrong[:20]


def _numpy_profiled_elbo(Y, O, X, M, S, log_factorial_sum):
    """The profiled ELBO (B, Sigma at their closed forms) in float64 NumPy, written out again."""
    n = Y.shape[0]
    B = np.linalg.solve(X.T @ X, X.T @ M)
    R = M - X @ B
    sigma = (R.T @ R + np.diag((S * S).sum(axis=0))) / n
    return (-0.5 * n * np.linalg.slogdet(sigma)[1] + np.sum(Y * (O + M) - np.exp(O + M + S * S / 2) + np.log(S))
            - log_factorial_sum)


# Row counts around every block boundary up to eight blocks, and anywhere to 2,100.
_EDGES = sorted({max(1, k * model.ROW_BLOCK + e) for k in range(9) for e in (-1, 0, 1)})


@settings(max_examples=30, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(rows=st.one_of(st.sampled_from(_EDGES), st.integers(2, ROWS)), d=st.integers(1, 3))
def test_the_float32_evaluation_is_float64_numpys_at_any_row_count(rows, d):
    configure()
    rng = np.random.default_rng(rows * 10 + d)
    p = 5
    X = np.column_stack([np.ones(rows), rng.normal(size=(rows, d - 1))])
    if rows <= d:
        return  # B is not identifiable with fewer rows than covariates
    Y = rng.poisson(3.0, (rows, p)).astype(np.float64)
    O = rng.normal(0.0, 0.5, (rows, p))
    M = np.log(Y + 1.0) - O + rng.normal(0.0, 0.1, (rows, p))
    S = rng.uniform(0.2, 0.8, (rows, p))
    data = model.make_data(Y, O, X, "float32")
    M32, S32 = M.astype(np.float32), S.astype(np.float32)
    found = jax.jit(profiled.evaluate, compiler_options=PRODUCTION)(M32, S32, jax.device_put(data))
    # The reference takes the float32 numbers the fit holds, so only the sums differ.
    expected = _numpy_profiled_elbo(*(np.asarray(a, np.float64) for a in (data.counts, data.offsets, data.covariates,
                                                                          M32, S32)), float(data.log_factorial_sum))
    scale = np.sum(np.abs(Y * (O + M))) + np.sum(np.exp(O + M + S * S / 2)) + float(data.log_factorial_sum)
    assert found.elbo.dtype == np.float64
    assert abs(float(found.elbo) - expected) <= 2e-7 * scale, (rows, d, float(found.elbo), expected)
