"""Agreement per optimizer (float64): strategies follow eager to rounding over the first
iterations, and those that converge meet at the same optimum even where rounding made them drift.

A new optimizer is one more entry of `CASES`, saying what holds for it (and why, when it
is not the usual: follows eager, does not drift, converges). The data are a 40 x 40 corner of oaks (with
its offsets): small enough for eager's op-by-op loop and for thousands of compiled
iterations, large enough for rprop's drift to show.
"""

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from core.data.counts import CountData
from core.data.datasets import load_oaks
from core.fit import model, strategies
from core.machine.runtime import configure
from core.spec import OptimizerSpec

# Float64 rounding (1e-16 per operation, ordered differently by each compilation) keeps two
# runs within 1e-12 of each other's ELBO until an optimizer amplifies it.
ROUNDING = 1e-10
# "The same converged ELBO", relative.
SAME_OPTIMUM = 1e-7
FIRST = 40
CONVERGED = 3000


@dataclasses.dataclass(frozen=True)
class Case:
    """One optimizer from one start, and what holds for it.

    Attributes:
        follows_eager: iterations over which every strategy's ELBO is eager's to ROUNDING.
        drifts: whether, after those, the strategies part by more than rounding (by up to
            1e-2 here) before they meet.
        converges: whether the optimizer comes to rest in CONVERGED iterations, so that the
            strategies' final ELBOs are one optimum.
    """

    optimizer: OptimizerSpec
    init: str
    follows_eager: int = FIRST
    drifts: bool = False
    converges: bool = True


CASES = {
    # RAdam's normalised step, clipped at 0.1 and never scaled down, keeps every coordinate
    # moving: the tutorial's optimizer circles the optimum (its ELBO moves by 1e-3 per
    # iteration after thousands) and has no converged ELBO to compare.
    "seed": Case(OptimizerSpec("seed"), "seed", converges=False),
    # Adam at a fixed learning rate does not settle here: its steps stay about lr in size
    # wherever the gradient is small, and after 6,000 iterations on this corner its ELBO still
    # moves by 1e-6 to 1e-4 per iteration for lr from 0.01 to 0.1 (on smaller data it settles,
    # then kicks out again). Its strategies are compared where they are comparable: above.
    "adam": Case(OptimizerSpec("adam", 0.01), "log_counts", converges=False),
    "rprop": Case(OptimizerSpec("rprop", 0.01), "seed"),
    # From log_counts B starts at its closed form, where its gradient is rounding noise, and
    # rprop steps by the sign of that noise: from the first step (iteration 2; optax's first
    # update is 0) each strategy moves B its own way, and rprop's sign tests amplify that
    # (one ulp in M moves the trace by 6e-3 on oaks). The strategies part by up to 6e-3 of
    # the ELBO, then meet at the optimum.
    "rprop from log_counts": Case(OptimizerSpec("rprop", 0.01), "log_counts", follows_eager=2, drifts=True),
}


@functools.cache
def _corner() -> CountData:
    oaks = load_oaks()
    return CountData(oaks.counts[:40, :40], oaks.offsets[:40, :40], oaks.covariates[:40], "oaks corner")


@functools.cache
def _trace(name: str, case: str, iterations: int) -> np.ndarray:
    configure()
    counts, spec = _corner(), CASES[case]
    data = jax.device_put(model.make_data(counts.counts, counts.offsets, counts.covariates, "float64"))
    problem = strategies.Problem(counts.n, counts.p, counts.d, "float64", iterations, spec.optimizer)
    state = strategies.init_state(data, spec.init, problem.transformation)
    strategy = strategies.get(name)
    tol = jnp.asarray(0.0, "float64")
    output = strategy.run(strategy.compile(strategy.lower(problem, state, data, tol)), problem, state, data, tol)
    return np.asarray(jax.block_until_ready(output.elbo), dtype=np.float64)


def _apart(trace: np.ndarray, reference: np.ndarray) -> np.ndarray:
    return np.abs(trace - reference) / np.abs(reference)


@pytest.mark.parametrize("case", CASES)
def test_strategies_follow_eager_to_rounding_over_the_first_iterations(case):
    spec = CASES[case]
    eager = _trace("eager", case, FIRST)
    widest = 0.0
    for name in strategies.names():
        apart = _apart(_trace(name, case, FIRST), eager)
        assert apart[:spec.follows_eager].max() <= ROUNDING, f"{name}: {apart[:spec.follows_eager].max():.1e}"
        widest = max(widest, apart.max())
    # Where the case says rounding is amplified, it is, and by far: not a bug, rprop itself.
    assert (widest > 1e3 * ROUNDING) == spec.drifts, f"{case}: widest {widest:.1e}"


# Eager runs op by op, about 50 ms an iteration: thousands of them would take minutes. The
# Python-loop strategies run the same operations, jitted; eager itself is held to the first
# iterations above.
@pytest.mark.parametrize("case", CASES)
def test_strategies_that_converge_meet_at_the_same_optimum(case):
    spec = CASES[case]
    if not spec.converges:
        # Stated, not skipped: were this optimizer to come to rest, its case should say so.
        trace = _trace("scan", case, CONVERGED)
        assert abs(trace[-1] - trace[-2]) / abs(trace[-1]) > SAME_OPTIMUM, f"{case} came to rest"
        return
    traces = {name: _trace(name, case, CONVERGED) for name in strategies.names() if name != "eager"}
    finals = np.array([trace[-1] for trace in traces.values()])
    last_change = max(abs(trace[-1] - trace[-2]) / abs(trace[-1]) for trace in traces.values())
    assert last_change < SAME_OPTIMUM
    spread = (finals.max() - finals.min()) / np.abs(finals).max()
    assert spread <= SAME_OPTIMUM, f"{case}: final ELBOs spread by {spread:.1e}"
    if spec.drifts:
        reference = traces["scan"]
        along = max(_apart(trace, reference).max() for trace in traces.values())
        assert along > 1e-3, f"{case}: the strategies never drifted ({along:.1e})"
