"""torch_rprop is torch.optim.Rprop, number for number; optax.rprop is not."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from core.fit.torch_rprop import STEP_SIZES, torch_rprop
from core.machine.runtime import configure

STEPS = 40


def _gradients(dtype, seed=0):
    # Gradients whose signs flip often, with exact zeros (torch's sign(0) case) mixed in.
    rng = np.random.default_rng(seed)
    values = rng.normal(size=(STEPS, 6, 5)) + 0.3 * np.sin(np.arange(STEPS))[:, None, None]
    values[rng.random(values.shape) < 0.1] = 0.0
    return values.astype(dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_matches_torch_rprop_bit_for_bit(dtype):
    torch = pytest.importorskip("torch")
    configure()
    gradients = _gradients(dtype)
    start = np.linspace(-1, 1, 30, dtype=dtype).reshape(6, 5)
    tensor = torch.tensor(start.copy(), requires_grad=True)
    reference = torch.optim.Rprop([tensor], lr=0.01, step_sizes=STEP_SIZES)
    transformation = torch_rprop(0.01)
    params = jnp.asarray(start)
    state = transformation.init(params)
    update = jax.jit(transformation.update)
    for gradient in gradients:
        tensor.grad = torch.tensor(gradient)
        reference.step()
        updates, state = update(jnp.asarray(gradient), state)
        params = optax.apply_updates(params, updates)
        assert params.dtype == np.dtype(dtype) and state.step_size.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(np.asarray(params), tensor.detach().numpy())


def test_optax_rprop_lags_one_step_behind():
    # The difference that made `rprop` + log_counts not pyPLNmodels' algorithm: optax's
    # first update is zero, torch's is lr * sign(gradient).
    configure()
    gradient = jnp.asarray([1.0, -2.0, 0.0])
    ours, _ = torch_rprop(0.01).update(gradient, torch_rprop(0.01).init(jnp.zeros(3)))
    lagging, _ = optax.rprop(0.01).update(gradient, optax.rprop(0.01).init(jnp.zeros(3)), jnp.zeros(3))
    np.testing.assert_allclose(np.asarray(ours), [-0.01, 0.01, 0.0])
    np.testing.assert_array_equal(np.asarray(lagging), [0.0, 0.0, 0.0])
