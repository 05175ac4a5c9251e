"""torch_eager / torch_compile: our algorithm, line for line, in PyTorch, eager or under `torch.compile`.

The same model, initialisation and optimizer semantics as the JAX strategies (see
`core.fit.model`, `core.fit.strategies.base.fit_step`, `core.fit.peers.torch_optim`), so that
"JAX JIT vs PyTorch JIT" is measured on the same trajectory: the gradient of -ELBO with
respect to B, M, S comes from PyTorch autograd (`torch.autograd.grad` eagerly,
`torch.func.grad_and_value` under compile; see `make_step`), the optimizer is the
optax transformation rewritten in torch (`core.fit.peers.torch_optim`), and Omega is the
Cholesky inverse of the closed-form Sigma. torch_compile compiles the
per-iteration step with `torch.compile(mode="default", dynamic=False)` (TorchDynamo +
Inductor); the loop stays in Python, as in our jit_step strategy.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, NamedTuple

import numpy as np
import torch
import torch._dynamo
from scipy.special import gammaln

from core.fit.peers.torch_optim import make_torch_optimizer
from core.spec import FitSpec, OptimizerSpec

# Compiled steps per (optimizer, dtype, device, shapes), reused across runs in this
# process as the engine reuses XLA executables; Dynamo also guards on shapes itself.
_COMPILED: dict[tuple, Callable] = {}
_COMPILED_LOCK = threading.Lock()
# Dynamo keeps every specialisation of one code object under a limit (8 by default) and
# silently falls back to eager beyond it; every shape a server sees is a specialisation.
_RECOMPILE_LIMIT = 256


class TorchData(NamedTuple):
    """Y, O, X (n, p), (n, p), (n, d) of the fit's dtype and sum(log Y!) (0-d, exact, float64
    as in `core.fit.model.PLNData`)."""

    counts: Any
    offsets: Any
    covariates: Any
    log_factorial_sum: Any


class TorchState(NamedTuple):
    """params = (B, M, S), precision = Omega (p, p), opt_state: the optimizer's state."""

    params: tuple
    precision: Any
    opt_state: Any


def host_data(counts: np.ndarray, offsets: np.ndarray, covariates: np.ndarray, precision: str) -> TorchData:
    """Host arrays of the fit's dtype (NumPy), sum(log Y!) with scipy's gammaln in float64."""
    dtype = np.dtype(precision)
    log_factorial_sum = np.sum(gammaln(np.asarray(counts, dtype=np.float64) + 1.0))
    # Own, writable copies: torch.as_tensor shares a NumPy array's memory (and warns on
    # read-only ones, such as the cached oaks arrays).
    return TorchData(*(np.array(a, dtype=dtype, order="C") for a in (counts, offsets, covariates)),
                     np.array(log_factorial_sum, dtype=np.float64))


def place_data(host: TorchData, device) -> TorchData:
    """`host_data`'s arrays as tensors on `device` (the timed transfer)."""

    return TorchData(*(torch.as_tensor(a, device=device) for a in host))


def make_data(counts: np.ndarray, offsets: np.ndarray, covariates: np.ndarray, precision: str, device) -> TorchData:
    """Host arrays -> `TorchData` on `device`, all of `precision`."""
    return place_data(host_data(counts, offsets, covariates, precision), device)


def _cholesky(matrix):
    """Lower Cholesky factor without the error check, like JAX's (NaN where not SPD): the
    check would sync the device every call and is a side effect that keeps Inductor
    from caching the compiled graph."""

    return torch.linalg.cholesky_ex(matrix).L


def _logdet_spd(matrix):

    return 2.0 * torch.sum(torch.log(torch.diagonal(_cholesky(matrix))))


def _wide_sum(terms):
    """`core.fit.model.wide_sum` in torch: the sum of (n, p) ELBO terms, accumulated in float64."""

    return torch.sum(terms, dtype=torch.float64)


def elbo(params: tuple, precision, data: TorchData):
    """`core.fit.model.elbo` in torch: the ELBO at any B, M, S and Omega, with its large sums
    accumulated and its terms assembled in float64, returned in the fit's dtype."""

    B, M, S = params
    Y, O, X, log_factorial_sum = data
    n, p = Y.shape
    S2 = S * S
    A = torch.exp(O + M + 0.5 * S2)
    R = M - X @ B
    trace = (_wide_sum((R @ precision) * R)
             + torch.sum(torch.diagonal(precision) * torch.sum(S2, dim=0)).to(torch.float64))
    value = (
        0.5 * n * _logdet_spd(precision).to(torch.float64)
        + _wide_sum(Y * (O + M) - A + 0.5 * torch.log(S2))
        - 0.5 * trace
        - log_factorial_sum
        + 0.5 * n * p
    )
    return value.to(Y.dtype)


def negative_elbo(params: tuple, precision, data: TorchData):
    return -elbo(params, precision, data)


def closed_form_coef(latent_mean, covariates):
    """B = (X^T X)^-1 X^T M by a Cholesky solve."""

    X = covariates
    return torch.cholesky_solve(X.T @ latent_mean, _cholesky(X.T @ X))


def closed_form_precision(params: tuple, data: TorchData):
    """Omega = Sigma^-1 at Sigma = (R^T R + D) / n, by Cholesky solve, symmetrised."""

    B, M, S = params
    R = M - data.covariates @ B
    n = M.shape[0]
    sigma = (R.T @ R + torch.diag(torch.sum(S * S, dim=0))) / n
    eye = torch.eye(sigma.shape[0], dtype=sigma.dtype, device=sigma.device)
    omega = torch.cholesky_solve(eye, _cholesky(sigma))
    # Row-major like the initial identity, so a compiled step's stride guards hold.
    return (0.5 * (omega + omega.T)).contiguous()


def init_state(data: TorchData, init: str, optimizer) -> TorchState:
    """`core.fit.model.init_params` in torch, plus the optimizer's initial state."""

    Y, X = data.counts, data.covariates
    n, p = Y.shape
    d = X.shape[1]
    like = dict(dtype=Y.dtype, device=Y.device)
    if init == "seed":
        params = (torch.zeros((d, p), **like), torch.zeros((n, p), **like), torch.ones((n, p), **like))
        precision = torch.eye(p, **like)
    elif init in ("log_counts", "log_rates", "log_rates_sd"):
        M = torch.log(Y + (Y == 0).to(Y.dtype))
        if init != "log_counts":
            M = M - data.offsets
        S = 1.0 / torch.sqrt(Y + 1.0) if init == "log_rates_sd" else torch.full((n, p), 0.5, **like)
        params = (closed_form_coef(M, X), M, S)
        precision = closed_form_precision(params, data)
    else:
        raise ValueError(f"init must be 'seed', 'log_counts', 'log_rates' or 'log_rates_sd'; got {init!r}")
    return TorchState(params, precision, optimizer.init(params))


def make_step(optimizer, gradient: str = "autograd") -> Callable:
    """One iteration, as `fit_step`: (state, data) -> (state, ELBO at the old state).

    Args:
        optimizer: a `core.fit.peers.torch_optim.TorchTransformation`.
        gradient: "autograd" (`torch.autograd.grad` on leaf copies of B, M, S: what an
            eager PyTorch user writes, and ~20% faster eagerly than torch.func on oaks) or
            "func" (`torch.func.grad_and_value`, which TorchDynamo traces into one graph,
            where `torch.autograd.grad` breaks the step into three). Same values.
    """

    def update(state, grads, loss, data):
        updates, opt_state = optimizer.update(grads, state.opt_state)
        params = tuple(p + u for p, u in zip(state.params, updates))
        precision = closed_form_precision(params, data)
        return TorchState(params, precision, opt_state), -loss

    if gradient == "func":
        value_and_grad = torch.func.grad_and_value(negative_elbo, argnums=0)

        def step(state: TorchState, data: TorchData):
            grads, loss = value_and_grad(state.params, state.precision, data)
            return update(state, grads, loss, data)

        return step
    if gradient != "autograd":
        raise ValueError(f"gradient must be 'autograd' or 'func'; got {gradient!r}")

    def autograd_step(state: TorchState, data: TorchData):
        params = tuple(p.detach().requires_grad_(True) for p in state.params)
        loss = negative_elbo(params, state.precision, data)
        grads = torch.autograd.grad(loss, params)
        with torch.no_grad():
            return update(state._replace(params=tuple(p.detach() for p in params)), grads, loss.detach(), data)

    return autograd_step


def compiled_step(optimizer_spec: OptimizerSpec, key: tuple) -> Callable:
    """The `torch.compile`d step for `key`, built once per process (compilation happens
    lazily, at its first call)."""

    with _COMPILED_LOCK:
        found = _COMPILED.get(key)
        if found is None:
            config = torch._dynamo.config
            limit = "recompile_limit" if hasattr(config, "recompile_limit") else "cache_size_limit"
            setattr(config, limit, max(getattr(config, limit), _RECOMPILE_LIMIT))
            step = make_step(make_torch_optimizer(optimizer_spec), gradient="func")
            found = torch.compile(step, mode="default", dynamic=False)
            _COMPILED[key] = found
        return found


def has_compiled(key: tuple) -> bool:
    """Whether a compiled step for `key` was built in this process."""
    with _COMPILED_LOCK:
        return key in _COMPILED


def run_loop(step: Callable, state: TorchState, data: TorchData, iterations: int, on_iteration=None):
    """Run `iterations` steps from `state`; returns (final state, (iterations,) ELBO tensor).

    ELBOs stay on the device until the end (no per-iteration sync), unless `on_iteration`
    asks to see them; a true return from it stops the loop after that iteration.
    """

    trace = []
    for i in range(iterations):
        state, value = step(state, data)
        trace.append(value)
        if on_iteration is not None and on_iteration(i, value):
            break
    return state, torch.stack(trace)


def fit(spec: FitSpec, counts, device, compiled: bool):
    """Untimed convenience: the whole fit for `spec` on `counts` -> (state, float64 ELBO array)."""

    data = make_data(counts.counts, counts.offsets, counts.covariates, spec.precision, device)
    optimizer = make_torch_optimizer(spec.optimizer)
    step = compiled_step(spec.optimizer, step_key(spec, counts, device)) if compiled else make_step(optimizer)
    state, trace = run_loop(step, init_state(data, spec.init, optimizer), data, spec.iterations)
    return state, trace.detach().cpu().numpy().astype(np.float64)


def step_key(spec: FitSpec, counts, device) -> tuple:
    return (spec.optimizer, spec.precision, str(device), counts.n, counts.p, counts.d)
