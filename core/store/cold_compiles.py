"""The compile a cached run did not pay: the latest stored run that compiled the same
problem from scratch in the same environment.

A run whose executable came from memory or disk shows (almost) no compile time; shown
beside it, the latest run of the same spec that did compile says what compiling costs
here, so the compile part of the story never silently disappears. The same environment
means the same host, jax and jaxlib versions and device kind: a compile measured
elsewhere says little about this one.
"""

from __future__ import annotations

from typing import Iterable

from core.results.result import RunResult
from core.store.run_store import RunStore

CACHED = ("memory", "disk")
# What must match, besides the spec, for one compile to stand for another.
ENVIRONMENT = ("host", "jax", "jaxlib")


def same_environment(first: RunResult, second: RunResult) -> bool:
    """Whether two runs ran on the same host, with the same jax, jaxlib and device kind."""
    return first.device_kind == second.device_kind and all(
        first.versions.get(key) == second.versions.get(key) for key in ENVIRONMENT)


def latest_for(store: RunStore, run: RunResult) -> RunResult | None:
    """The newest finished run of `run`'s spec that compiled, in its environment; None when
    `run` compiled itself, compiles nothing (eager, peers) or no such run is stored."""
    if run.cache not in CACHED:
        return None
    candidates = store.find(spec_key=run.spec_key, cache="compiled", status="ok")
    return next((found for found in candidates if found.id != run.id and same_environment(found, run)), None)


def latest_for_each(store: RunStore, runs: Iterable[RunResult]) -> list[RunResult]:
    """`latest_for` each run, without the runs that have none."""
    found = (latest_for(store, run) for run in runs)
    return [run for run in found if run is not None]
