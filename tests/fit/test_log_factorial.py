"""sum(log Y!) without scipy gives scipy's figures (scipy comes with jax, so tests can use it)."""

import numpy as np
import pytest
from scipy.special import gammaln

from core.data.datasets import load_oaks
from core.fit import log_factorial


def test_log_gamma_matches_scipy_from_tiny_to_huge_arguments():
    z = np.concatenate([np.linspace(0.01, 40.0, 4001), np.geomspace(40.0, 1e12, 500), np.arange(1.0, 5000.0)])
    np.testing.assert_allclose(log_factorial.log_gamma(z), gammaln(z), rtol=2e-15, atol=3e-14)


def test_log_factorial_sum_of_oaks_and_of_counts_that_are_not_tallied():
    counts = load_oaks(1).counts
    assert log_factorial.log_factorial_sum(counts) == pytest.approx(float(np.sum(gammaln(counts + 1.0))), rel=1e-14)
    big = np.array([[0.0, 3.0, 2.0**25 + 2.0], [7.0, 0.0, 1e9]])  # past bincount's range: sorted instead
    assert log_factorial.log_factorial_sum(big) == pytest.approx(float(np.sum(gammaln(big + 1.0))), rel=1e-14)
    assert log_factorial.log_factorial_sum(np.zeros((2, 3))) == 0.0
