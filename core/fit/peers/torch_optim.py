"""The three optimizers of `core.fit.optim`, written in PyTorch to match optax 0.2.8 exactly.

Functional, optax-style: `init(params) -> state` and `update(grads, state) -> (updates,
state)`, with updates to be *added* to the parameters. Parameters, gradients and state
are tuples of tensors so that `torch.compile` traces them as plain inputs; the step
count is a tensor, not a Python int, so a compiled step is not specialised to it.

Scalars follow optax's dtypes: with float64 enabled (`core.machine.runtime.configure`), optax
computes b^t, RAdam's rectification and the bias corrections in float64 and casts the
bias corrections and the rectification to the parameters' dtype before using them.

Semantics copied from optax (transform.scale_by_radam, scale_by_adam, scale_by_rprop):

- "seed": chain(scale_by_radam(), scale(-1), clip(0.1)); RAdam's rectified step
  r m_hat / (sqrt(v_hat) + eps) where rho_t >= 5, else the bias-corrected momentum m_hat.
- "adam": chain(scale_by_adam(), scale(-lr)).
- "rprop": chain(scale_by_rprop(lr, 0.5, 1.2, 1e-10, 50), scale(-1)). optax's rprop
  *returns the previous iteration's step* (its `updates` map reads `state.prev_updates`),
  so its first update is zero and each step lags the gradient by one iteration; unlike
  `torch.optim.Rprop`, which steps with the current sign. Mirrored as is.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import torch

from core.fit.optim import RPROP_MAX_STEP, RPROP_MIN_STEP, SEED_CLIP
from core.spec import OptimizerSpec

# optax defaults for scale_by_radam and scale_by_adam.
B1, B2, EPS, EPS_ROOT, RADAM_THRESHOLD = 0.9, 0.999, 1e-8, 0.0, 5.0
# optax defaults for scale_by_rprop.
ETA_MINUS, ETA_PLUS = 0.5, 1.2
_INT32_MAX = 2**31 - 1

Tensors = tuple  # tuple[torch.Tensor, ...]


class TorchTransformation(NamedTuple):
    """An optax-like pair of pure functions over tuples of tensors."""

    init: Callable[[Tensors], Any]
    update: Callable[[Tensors, Any], tuple[Tensors, Any]]


class MomentState(NamedTuple):
    """optax's ScaleByAdamState: count (int32 scalar), mu and nu (like the params)."""

    count: Any
    mu: Tensors
    nu: Tensors


class RpropState(NamedTuple):
    """optax's ScaleByRpropState."""

    step_sizes: Tensors
    prev_updates: Tensors


def _moment_init(params: Tensors) -> MomentState:

    count = torch.zeros((), dtype=torch.int32, device=params[0].device)
    return MomentState(count, tuple(torch.zeros_like(p) for p in params), tuple(torch.zeros_like(p) for p in params))


def _moments(grads: Tensors, state: MomentState):
    """New mu, nu, count and the float64 count, as optax's update_moment* and safe_increment."""

    mu = tuple((1 - B1) * g + B1 * m for g, m in zip(grads, state.mu))
    nu = tuple((1 - B2) * (g * g) + B2 * v for g, v in zip(grads, state.nu))
    count = torch.where(state.count < _INT32_MAX, state.count + 1, state.count)
    return mu, nu, count, count.to(torch.float64)


def _bias_corrected(moment: Tensors, decay: float, count64) -> Tensors:
    """optax.tree.bias_correction: the correction in float64, cast to the moment's dtype."""

    correction = 1 - torch.pow(decay, count64)
    return tuple(t / correction.to(t.dtype) for t in moment)


def scale_by_radam_neg_clip(clip: float = SEED_CLIP) -> TorchTransformation:
    """chain(scale_by_radam(), scale(-1), clip(clip)): the seed tutorial's optimizer."""

    rho_inf = 2.0 / (1.0 - B2) - 1.0

    def update(grads, state):
        mu, nu, count, t = _moments(grads, state)
        b2t = torch.pow(B2, t)
        rho = rho_inf - 2 * t * b2t / (1 - b2t)
        mu_hat = _bias_corrected(mu, B1, t)
        nu_hat = _bias_corrected(nu, B2, t)
        # NaN where rho < 4; discarded by the `where` below, as in optax.
        r = torch.sqrt((rho - 4.0) * (rho - 2.0) * rho_inf / ((rho_inf - 4.0) * (rho_inf - 2.0) * rho))
        rectified = rho >= RADAM_THRESHOLD
        updates = tuple(
            torch.clamp(
                -torch.where(rectified, r.to(m.dtype) * m / (torch.sqrt(v + EPS_ROOT) + EPS), m), -clip, clip
            )
            for m, v in zip(mu_hat, nu_hat)
        )
        return updates, MomentState(count, mu, nu)

    return TorchTransformation(_moment_init, update)


def adam(lr: float) -> TorchTransformation:
    """optax.adam(lr) = chain(scale_by_adam(), scale(-lr))."""

    def update(grads, state):
        mu, nu, count, t = _moments(grads, state)
        mu_hat = _bias_corrected(mu, B1, t)
        nu_hat = _bias_corrected(nu, B2, t)
        updates = tuple(-lr * (m / (torch.sqrt(v + EPS_ROOT) + EPS)) for m, v in zip(mu_hat, nu_hat))
        return updates, MomentState(count, mu, nu)

    return TorchTransformation(_moment_init, update)


def rprop(lr: float, min_step: float = RPROP_MIN_STEP, max_step: float = RPROP_MAX_STEP) -> TorchTransformation:
    """optax.rprop(lr, min_step_size, max_step_size) = chain(scale_by_rprop(...), scale(-1))."""

    def init(params):
        return RpropState(tuple(torch.full_like(p, lr) for p in params), tuple(torch.zeros_like(p) for p in params))

    def update(grads, state):
        signs = tuple(g * prev for g, prev in zip(grads, state.prev_updates))
        step_sizes = tuple(
            torch.where(
                s == 0, step, torch.clamp(torch.where(s > 0, step * ETA_PLUS, step * ETA_MINUS), min_step, max_step)
            )
            for s, step in zip(signs, state.step_sizes)
        )
        prev_updates = tuple(
            torch.where(s < 0, torch.zeros_like(g), step * torch.sign(g))
            for s, g, step in zip(signs, grads, step_sizes)
        )
        # optax returns the *previous* step here (see the module docstring).
        updates = tuple(
            -torch.where(s < 0, torch.zeros_like(prev), prev) for s, prev in zip(signs, state.prev_updates)
        )
        return updates, RpropState(step_sizes, prev_updates)

    return TorchTransformation(init, update)


# The PyTorch twins of the gradient family's transformations (`core.fit.optim.TRANSFORMATIONS`).
TWINS: dict[str, Callable[[OptimizerSpec], TorchTransformation]] = {
    "seed": lambda spec: scale_by_radam_neg_clip(),
    "adam": lambda spec: adam(float(spec.lr)),
    "rprop": lambda spec: rprop(float(spec.lr)),
}


def make_torch_optimizer(spec: OptimizerSpec) -> TorchTransformation:
    """The PyTorch twin of `core.fit.optim.make_optimizer(spec)`."""
    if spec.name not in TWINS:
        raise ValueError(f"unknown optimizer {spec.name!r}")
    return TWINS[spec.name](spec)
