"""Simulated PLN data born sharded on the devices, for n too large for one host array.

`core.data.datasets.simulate` draws on the host with NumPy and the sharded strategy then copies
the rows out; at n = 1,000,000+ that host array is the bottleneck. Here each device
draws its own rows with `jax.random` inside one jitted function whose output is
row-sharded, so no process ever holds all rows, on the host or on one device.

The model is `core.data.datasets.simulate`'s (X = [1, N(0, 1)], intercepts near log 5, AR(1)
covariance 0.6^|j - k| scaled by s in [0.5, 1], Y ~ Poisson(exp(X B + Z)), zero
offsets), but the draws come from JAX's generator, not NumPy's: the same (n, p, d, seed)
gives different numbers here and there, so compare fits on one kind of draw only.
Row i's draws come from `fold_in(key, i)`, so the data do not depend on the device
count: a strong-scaling series fits the same rows on 1, 2 or 4 devices.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh

from core.data import datasets as data
from core.fit import model, sharding

# exp(20) ~ 5e8, as in core.data.datasets: keeps a tail draw from overflowing the Poisson rate.
_MAX_LOG_RATE = 20.0


class Truth(NamedTuple):
    """The parameters the rows are drawn from (host arrays, float64).

    Attributes:
        coef: B, (d, p).
        covariance: Sigma, (p, p).
    """

    coef: np.ndarray
    covariance: np.ndarray


def true_parameters(p: int, d: int, seed: int) -> Truth:
    """B and Sigma as `core.data.datasets.simulate` builds them (tiny: drawn on the host)."""
    return Truth(*data.draw_truth(np.random.default_rng(seed), p, d))


def _draw_rows(key_data, coef, chol, *, n, n_padded, dtype):
    key = jax.random.wrap_key_data(key_data)
    d, p = coef.shape

    def row(i):
        keys = jax.random.split(jax.random.fold_in(key, i), 3)
        slopes = jax.random.normal(keys[0], (d - 1,), dtype)
        x = jnp.concatenate([jnp.ones((1,), dtype), slopes])
        z = x @ coef + chol @ jax.random.normal(keys[1], (p,), dtype)
        y = jax.random.poisson(keys[2], jnp.exp(jnp.minimum(z, _MAX_LOG_RATE)), dtype=jnp.int32)
        return y.astype(dtype), x

    ids = jnp.arange(n_padded)
    counts, covariates = jax.vmap(row)(ids)
    real = ids < n
    # Padded rows are Y = 0, O = 0, X = 0, as model.PaddedPLNData requires.
    counts = jnp.where(real[:, None], counts, 0)
    covariates = jnp.where(real[:, None], covariates, 0)
    return counts, jnp.zeros_like(counts), covariates, real.astype(dtype)


def _log_factorial_sum(counts, dtype):
    # Summed and kept in float64 when enabled, as model.make_data keeps it: sum(log Y!) is
    # ~1e8 at n = 10^6, beyond float32's 7 digits. Exact gammaln, as
    # model.exact_log_factorial_sum.
    wide = model.wide_dtype(dtype)
    return jnp.sum(jax.scipy.special.gammaln(counts.astype(wide) + 1))


def simulate_on_devices(n: int, p: int, d: int = 1, seed: int = 0, *, mesh: Mesh,
                        dtype: str = "float32") -> tuple[model.PaddedPLNData, Truth]:
    """Draw a PLN data set of n rows directly into row blocks on `mesh`'s devices.

    Args:
        n, p, d: rows, count columns, covariates (intercept included), d < n.
        seed: seeds both the host draw of B, Sigma and the devices' `jax.random` key.
        mesh: a 1-D ("rows",) mesh, e.g. `sharding.mesh_for("cpu")`; every process of a
            distributed run passes the same one and gets its own rows.
        dtype: "float32" or "float64" (float64 needs `jax_enable_x64`).

    Returns:
        (data padded to a multiple of the device count and row-sharded, the true B and Sigma).
    """
    if not (isinstance(n, int) and isinstance(p, int) and isinstance(d, int) and 1 <= d < n and p >= 1):
        raise ValueError(f"need whole numbers p >= 1 and 1 <= d < n; got n={n}, p={p}, d={d}")
    dtype = jnp.dtype(dtype)
    truth = true_parameters(p, d, seed)
    n_padded = sharding.padded_rows(n, mesh.size)
    rows, vector, whole = sharding.row_sharding(mesh), sharding.row_sharding(mesh, 1), sharding.replicated(mesh)
    draw = jax.jit(functools.partial(_draw_rows, n=n, n_padded=n_padded, dtype=dtype),
                   out_shardings=(rows, rows, rows, vector))
    # The small inputs are replicated explicitly: in several processes a bare host
    # array would not be a valid argument to a computation spanning them all.
    coef, chol = (jax.make_array_from_callback(a.shape, whole, lambda index, a=a: a[index])
                  for a in (truth.coef.astype(dtype), np.linalg.cholesky(truth.covariance).astype(dtype)))
    key = np.asarray(jax.random.key_data(jax.random.key(seed)))
    key = jax.make_array_from_callback(key.shape, whole, lambda index: key[index])
    counts, offsets, covariates, mask = draw(key, coef, chol)
    total = jax.jit(functools.partial(_log_factorial_sum, dtype=dtype), out_shardings=whole)(counts)
    return model.PaddedPLNData(counts, offsets, covariates, total, mask), truth
