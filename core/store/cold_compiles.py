"""The compile a cached run did not pay: the latest stored run that compiled the same
program (or the same problem) in the same environment.

A run whose executable came from memory or disk shows (almost) no compile time; shown
beside it, the latest run that compiled its program (one fingerprint, `RunResult.program`:
another strategy's run may have made it, as scan makes scan_namedtuple's) or its spec says
what compiling it cost when it was made, so the compile part of the story never silently
disappears. The same environment means the same host, jax and jaxlib versions and device
kind: a compile measured elsewhere says little about this one.
"""

from __future__ import annotations

from typing import Iterable

from core.results.compile_cost import CACHED
from core.results.result import RunResult
from core.store.run_store import RunStore

__all__ = ["CACHED", "latest_for", "makers", "paid_when_made", "same_environment"]
# What must match, besides the spec, for one compile to stand for another.
ENVIRONMENT = ("host", "jax", "jaxlib")


def same_environment(first: RunResult, second: RunResult) -> bool:
    """Whether two runs ran on the same host, with the same jax, jaxlib and device kind."""
    return first.device_kind == second.device_kind and all(
        first.versions.get(key) == second.versions.get(key) for key in ENVIRONMENT)


# The statuses of runs whose compile was measured whole: a fit that diverged, or ran past its
# time budget, did so after its program was compiled (a diverged scan beside the
# scan_namedtuple that loaded its program left the page saying no compile time was known).
COMPILED_WHOLE = ("ok", "diverged", "timed_out")


def latest_for(store: RunStore, run: RunResult) -> RunResult | None:
    """The newest run (`COMPILED_WHOLE`), in `run`'s environment, that compiled its program
    (or its spec); None when `run` compiled itself, compiles nothing (eager, peers) or no
    such run is stored."""
    if run.cache not in CACHED:
        return None
    candidates = store.find(spec_key=run.spec_key, cache="compiled")
    if run.program:  # the run that made its program, whichever strategy asked for it
        candidates = [*candidates, *store.find(program=run.program, cache="compiled")]
    candidates = sorted((found for found in candidates if found.status in COMPILED_WHOLE),
                        key=lambda found: found.created_at, reverse=True)
    return next((found for found in candidates if found.id != run.id and same_environment(found, run)), None)


def makers(store: RunStore, runs: Iterable[RunResult]) -> dict[int, RunResult]:
    """By run id, `latest_for` each of `runs` that has one (a run loaded from a cache)."""
    return {run.id: made for run in runs if (made := latest_for(store, run)) is not None}


def paid_when_made(made_by: dict[int, RunResult]) -> dict[int, float]:
    """By run id, trace + lower + compile of the run that made each one's program (`latest_for`):
    where a run loaded from a cache starts on a wall clock from a cold start."""
    return {run_id: made.trace_lower_s + made.compile_s for run_id, made in made_by.items()}
