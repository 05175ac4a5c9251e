"""Everything the engine can run, as one kind of object: the JAX strategies, then the peers.

A `Runnable` is what the engine, the memory estimate, the benchmarks and the pages see:
a name, a description, what it can report and hold, and `measure`, its timing of one
fit. The JAX strategies (`core.fit.strategies`) differ only in what they compile; the
peers (`core.fit.peers`) are pyPLNmodels' own fit and our algorithm in PyTorch, timed
by `core.run.peer_timing`, which loads torch and is imported only when a peer runs.
"""

from __future__ import annotations

import abc
import functools
import threading

from core.data.counts import CountData
from core.fit import peers, strategies
from core.run import jax_timing
from core.run.budget import Budget
from core.run.prepared import ExecutableCache
from core.run.progress import ProgressCallback
from core.run.result import Measurement
from core.spec import FitSpec


class Runnable(abc.ABC):
    """One way of fitting that can be timed.

    Attributes:
        name: as in `FitSpec.strategy`.
        description: what it does, in a paragraph (its first sentence is its summary),
            without the leading "name: " of the module docstrings it comes from.
        python_loop: whether its iterations are driven from Python, so that a run can
            report its ELBO as it goes.
        donates_state: whether the new state is written over the old one (the memory
            estimate counts one state less).
        inspectable: whether XLA compiles its work, so that its jaxpr, HLO, costs and
            roofline can be shown (the peers run outside XLA).
        tag: a word or two for lists: "Python loop", "loop compiled", "peer".
    """

    name: str
    description: str
    python_loop: bool
    donates_state: bool
    inspectable: bool
    tag: str

    @property
    def summary(self) -> str:
        """The description's first sentence."""
        return self.description.split(". ")[0].rstrip(".") + "."

    @abc.abstractmethod
    def measure(self, spec: FitSpec, counts: CountData | None, report: ProgressCallback,
                cancel: threading.Event | None, cache: ExecutableCache | None, watched: bool,
                budget: Budget | None = None, cold: bool = False) -> Measurement:
        """Time one fit of `spec` (already checked); `watched` asks for live ELBO reports;
        past `budget` the fit stops where a cancel would and is marked `timed_out`; `cold`
        asks for compiling from scratch (`core.run.cold_compile`; runnables with no cache of
        their own to skip ignore it)."""


class JaxRunnable(Runnable):
    """A JAX strategy, timed by `core.run.jax_timing`."""

    inspectable = True

    def __init__(self, name: str) -> None:
        strategy = strategies.get(name)
        self.name = name
        self.description = strategy.description().removeprefix(f"{name}: ")
        self.python_loop = strategy.python_loop
        self.donates_state = strategy.donates_state
        self.tag = "Python loop" if strategy.python_loop else "loop compiled"

    def measure(self, spec, counts, report, cancel, cache, watched, budget=None, cold=False):
        return jax_timing.measure(spec, counts, report, cancel, cache, watched, budget, cold)


class PeerRunnable(Runnable):
    """A peer, timed by `core.run.peer_timing`."""

    donates_state = False
    inspectable = False
    tag = "peer"

    def __init__(self, name: str, description: str) -> None:
        self.name = name
        self.description = description.removeprefix(f"{name}: ")
        # pyPLNmodels' loop is its own `fit`; the PyTorch twins run ours from Python.
        self.python_loop = name != "pyplnmodels"

    def measure(self, spec, counts, report, cancel, cache, watched, budget=None, cold=False):
        # torch.compile's caches are process-wide settings with no per-thread bypass: a peer
        # ignores `cold`, and its result says so (from_scratch 0).
        # Deferred: torch and pyPLNmodels take seconds to import, and only a peer's run needs them.
        from core.run import peer_timing

        return peer_timing.measure(spec, counts, report, cancel, watched, budget)


@functools.cache
def _runnables() -> dict[str, Runnable]:
    found: dict[str, Runnable] = {name: JaxRunnable(name) for name in strategies.names()}
    found.update((item["name"], PeerRunnable(item["name"], item["description"])) for item in peers.describe())
    return found


def names() -> list[str]:
    """JAX strategies in teaching order, then peers."""
    return list(_runnables())


def get(name: str) -> Runnable:
    """The runnable called `name`; `KeyError` names the known ones."""
    try:
        return _runnables()[name]
    except KeyError:
        raise KeyError(f"unknown strategy {name!r}; known: {', '.join(_runnables())}") from None


def all_runnables() -> list[Runnable]:
    """Every runnable, in the order of `names()`."""
    return list(_runnables().values())


def describe() -> list[dict[str, str]]:
    """[{"name", "description"}] for every runnable."""
    return [{"name": r.name, "description": r.description} for r in all_runnables()]
