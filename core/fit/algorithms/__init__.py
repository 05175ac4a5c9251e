"""The fitting algorithms, one per optimizer name (`core.spec.OPTIMIZERS`); see `base` for
what each provides and `core.spec.refusal` for the strategies each runs under."""

from __future__ import annotations

from core.fit.algorithms.base import Algorithm, FitState, Latent, transformation_of
from core.fit.algorithms.diagonal_newton import DiagonalNewton
from core.fit.algorithms.gradient import GradientAlgorithm, ProfiledGradientAlgorithm
from core.fit.algorithms.lbfgs import Lbfgs
from core.fit.algorithms.preconditioned_lbfgs import PreconditionedLbfgs
from core.fit.optim import TRANSFORMATIONS, make_optimizer
from core.spec import GRADIENT_OPTIMIZERS, OptimizerSpec

_OWN_STEPS = {cls.name: cls for cls in (Lbfgs, DiagonalNewton, PreconditionedLbfgs)}


def make(spec: OptimizerSpec) -> Algorithm:
    """The algorithm of `spec` (a fresh object; algorithms hold no state of their own): a
    transformation of the gradient (`core.fit.optim.TRANSFORMATIONS`) on B, M and S for the
    gradient family, on M and S with B and Sigma profiled for the other (pyPLNmodels' Rprop);
    else an algorithm with a step of its own."""
    if spec.name in TRANSFORMATIONS:
        family = GradientAlgorithm if spec.name in GRADIENT_OPTIMIZERS else ProfiledGradientAlgorithm
        return family(spec.name, make_optimizer(spec))
    return _OWN_STEPS[spec.name]()


__all__ = ["Algorithm", "FitState", "Latent", "make", "transformation_of"]
