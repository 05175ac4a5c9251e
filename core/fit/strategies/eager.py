"""eager: nothing is compiled ahead; every JAX operation is dispatched one by one from a Python loop.

Each primitive (a matmul, an exp, each step of the optimizer) becomes its own tiny
XLA computation, dispatched from Python with its own launch overhead, and nothing is
fused, so intermediate arrays are written to memory and read back. It is the seed
tutorial's level 0 and the baseline every speed-up is measured against.
"""

from __future__ import annotations

from core.fit.strategies.base import PythonLoopStrategy, fit_step


class Eager(PythonLoopStrategy):
    name = "eager"
    compiled_ahead = False

    def lower(self, problem, state, data, tol):
        return {}

    def step(self, executables, problem, state, data):
        return fit_step(state, data, problem.algorithm)
