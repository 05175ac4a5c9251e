"""Optimizer specs -> optax gradient transformations.

Every strategy builds its optimizer here, so that "same configuration" means the same
transformation whatever is compiled around it.
"""

from __future__ import annotations

import optax

from core.spec import OptimizerSpec

# pyPLNmodels fits with torch.optim.Rprop(lr=0.01, step_sizes=(1e-10, 50)).
RPROP_MIN_STEP = 1e-10
RPROP_MAX_STEP = 50.0
# The tutorial's update is clipped to 0.1 per coordinate; its lr = 1e-4 is never used.
SEED_CLIP = 0.1


def make_optimizer(spec: OptimizerSpec) -> optax.GradientTransformation:
    """The optax transformation for `spec`; updates are to be *added* to the parameters.

    The loss handed to it is -ELBO, so each transformation descends.
    """
    if spec.name == "seed":
        # RAdam's direction, negated to descend, then clipped: the seed tutorial's chain.
        return optax.chain(optax.scale_by_radam(), optax.scale(-1.0), optax.clip(SEED_CLIP))
    if spec.name == "adam":
        return optax.adam(spec.lr)
    if spec.name == "rprop":
        return optax.rprop(spec.lr, min_step_size=RPROP_MIN_STEP, max_step_size=RPROP_MAX_STEP)
    raise ValueError(f"unknown optimizer {spec.name!r}")
