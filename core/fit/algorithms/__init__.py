"""The fitting algorithms, one per optimizer name (`core.spec.OPTIMIZERS`); see `base` for
what each provides and `core.spec.refusal` for the strategies each runs under."""

from __future__ import annotations

from core.fit.algorithms.base import Algorithm, FitState, Latent, transformation_of
from core.fit.algorithms.diagonal_newton import DiagonalNewton
from core.fit.algorithms.gradient import GradientAlgorithm, ProfiledGradientAlgorithm
from core.fit.algorithms.lbfgs import Lbfgs
from core.fit.algorithms.preconditioned_lbfgs import PreconditionedLbfgs
from core.fit.optim import make_optimizer
from core.spec import GRADIENT_OPTIMIZERS, OptimizerSpec

_OWN_STEPS = {cls.name: cls for cls in (Lbfgs, DiagonalNewton, PreconditionedLbfgs)}


def make(spec: OptimizerSpec) -> Algorithm:
    """The algorithm of `spec` (a fresh object; algorithms hold no state of their own)."""
    if spec.name in GRADIENT_OPTIMIZERS:
        return GradientAlgorithm(spec.name, make_optimizer(spec))
    if spec.name == "pyplnmodels_rprop":  # torch's Rprop on M, S: pyPLNmodels' algorithm
        return ProfiledGradientAlgorithm(spec.name, make_optimizer(spec))
    return _OWN_STEPS[spec.name]()


__all__ = ["Algorithm", "FitState", "Latent", "make", "transformation_of"]
