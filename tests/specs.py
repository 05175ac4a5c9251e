"""FitSpecs for tests: the seed tutorial's short fit of a fixed length, which most tests
time, store or inspect. `FitSpec()` itself is the front doors' default fit (preconditioned
L-BFGS from the log-rates start, until it converges); a test that means that fit builds a
`FitSpec` (tests/test_spec_keys.py)."""

from core.spec import FitSpec, OptimizerSpec

# The tutorial's optimizer and start, every iteration run (tol 0): the same program
# whatever the data's values, a fixed amount of work, and a gradient optimizer every
# strategy takes.
TUTORIAL = {"optimizer": OptimizerSpec("seed"), "init": "seed", "iterations": 150, "tol": 0.0}


def tutorial_spec(**fields) -> FitSpec:
    """A FitSpec of `fields`, the others the tutorial's (`TUTORIAL`) or FitSpec's own."""
    return FitSpec(**(TUTORIAL | fields))
