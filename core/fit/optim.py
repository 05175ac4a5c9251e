"""Optimizer specs -> optax transformations, for the optimizers that are one.

Every strategy builds its optimizer from here (through `core.fit.algorithms`), so that
"same configuration" means the same transformation whatever is compiled around it.
"""

from __future__ import annotations

from typing import Callable

import optax

from core.fit.torch_rprop import STEP_SIZES, torch_rprop
from core.spec import OptimizerSpec

# optax.rprop with pyPLNmodels' step-size bounds (its algorithm is "pyplnmodels_rprop").
RPROP_MIN_STEP, RPROP_MAX_STEP = STEP_SIZES
# The tutorial's update is clipped to 0.1 per coordinate; its lr = 1e-4 is never used.
SEED_CLIP = 0.1


# The optimizers that are an optax transformation of the gradient, by name: "seed", "adam"
# and "rprop" move B, M and S; "pyplnmodels_rprop" is torch's Rprop, for M and S. The loss
# handed to each is -ELBO, so each descends; updates are to be *added* to the parameters.
TRANSFORMATIONS: dict[str, Callable[[OptimizerSpec], optax.GradientTransformation]] = {
    # RAdam's direction, negated to descend, then clipped: the seed tutorial's chain.
    "seed": lambda spec: optax.chain(optax.scale_by_radam(), optax.scale(-1.0), optax.clip(SEED_CLIP)),
    "adam": lambda spec: optax.adam(spec.lr),
    "rprop": lambda spec: optax.rprop(spec.lr, min_step_size=RPROP_MIN_STEP, max_step_size=RPROP_MAX_STEP),
    "pyplnmodels_rprop": lambda spec: torch_rprop(spec.lr),
}


def make_optimizer(spec: OptimizerSpec) -> optax.GradientTransformation:
    """The optax transformation for `spec` (`TRANSFORMATIONS`).

    Raises:
        ValueError: `spec` names an optimizer with its own step (lbfgs, diagonal_newton,
            preconditioned_lbfgs): see `core.fit.algorithms`.
    """
    if spec.name not in TRANSFORMATIONS:
        raise ValueError(f"optimizer {spec.name!r} is not an optax transformation of the gradient")
    return TRANSFORMATIONS[spec.name](spec)
