"""`torch.optim.Rprop` as an optax transformation: the same numbers, step for step.

torch 2.x (`torch/optim/rprop.py`, `_single_tensor_rprop`; the multi-tensor path computes
the same numbers), per element, for a loss to minimise, from `prev = 0` and
`step_size = lr`:

    s = sign(g * prev)                          (the product's sign)
    step_size = clamp(step_size * (eta_plus if s > 0, eta_minus if s < 0, else 1),
                      step_min, step_max)
    g = 0 where s < 0                           (no move after a sign change)
    param = param - sign(g) * step_size         (the current sign, at once)
    prev = g

`optax.rprop` differs in when a step lands: its update is the step computed at the
*previous* call, so its first update is zero and every step lags the gradient by one
iteration. pyPLNmodels fits with torch's, `Rprop(lr=0.01, step_sizes=(1e-10, 50))`.

The step sizes live in the parameters' dtype and the etas and bounds are cast to it
before use (as torch writes 1.2 into a tensor of the parameter's dtype), so a float32
state stays float32 with float64 enabled.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax

# torch's default etas; pyPLNmodels' step-size bounds (torch's default minimum is 1e-6).
ETAS = (0.5, 1.2)
STEP_SIZES = (1e-10, 50.0)


class TorchRpropState(NamedTuple):
    """The state of `torch_rprop`.

    Attributes:
        previous: the last gradient, zeroed where its sign changed (torch's `prev`), like
            the parameters.
        step_size: the per-element step sizes, like the parameters.
    """

    previous: optax.Updates
    step_size: optax.Updates


def torch_rprop(learning_rate: float, etas: tuple[float, float] = ETAS,
                step_sizes: tuple[float, float] = STEP_SIZES) -> optax.GradientTransformation:
    """torch.optim.Rprop(lr=learning_rate, etas, step_sizes); updates are *added* to the parameters.

    Args:
        learning_rate: the initial per-element step size (torch's `lr`).
        etas: (eta_minus, eta_plus), torch's defaults.
        step_sizes: (smallest, largest) step size; pyPLNmodels' bounds by default.
    """
    eta_minus, eta_plus = etas
    smallest, largest = step_sizes

    def init(params):
        return TorchRpropState(previous=jax.tree.map(jnp.zeros_like, params),
                               step_size=jax.tree.map(lambda p: jnp.full_like(p, learning_rate), params))

    def leaf(gradient, previous, step_size):
        dtype = gradient.dtype
        sign = jnp.sign(gradient * previous)
        factor = jnp.where(sign > 0, jnp.asarray(eta_plus, dtype),
                           jnp.where(sign < 0, jnp.asarray(eta_minus, dtype), jnp.asarray(1, dtype)))
        step_size = jnp.clip(step_size * factor, jnp.asarray(smallest, dtype), jnp.asarray(largest, dtype))
        gradient = jnp.where(sign < 0, jnp.zeros_like(gradient), gradient)
        return -(jnp.sign(gradient) * step_size), gradient, step_size

    def update(updates, state, params=None):
        del params
        treedef = jax.tree.structure(updates)
        out = treedef.flatten_up_to(jax.tree.map(leaf, updates, state.previous, state.step_size))
        pick = lambda k: treedef.unflatten([item[k] for item in out])  # noqa: E731
        return pick(0), TorchRpropState(previous=pick(1), step_size=pick(2))

    return optax.GradientTransformation(init, update)
