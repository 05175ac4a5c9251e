"""Timing one fit of any runnable (`core.catalog`): a JAX strategy by
`core.run.jax_timing`, a peer by `core.run.peer_timing`, which loads torch and is imported
only when a peer runs. To everything above, a strategy and a peer are the same kind of thing."""

from __future__ import annotations

import threading

from core import catalog
from core.coordination.budget import Budget
from core.data.counts import CountData
from core.results.result import Measurement
from core.run import jax_timing
from core.run.prepared import ExecutableCache
from core.run.progress import ProgressCallback
from core.spec import FitSpec


def measure(spec: FitSpec, counts: CountData | None, report: ProgressCallback, cancel: threading.Event | None,
            cache: ExecutableCache | None, watched: bool, budget: Budget | None = None,
            cold: bool = False) -> Measurement:
    """Time one fit of `spec` (already checked); `watched` asks for live ELBO reports; past
    `budget` the fit stops where a cancel would and is marked `timed_out`; `cold` compiles
    from scratch (`core.run.cold_compile`)."""
    if catalog.runnable(spec.strategy).is_peer:
        # torch.compile's caches are process-wide settings with no per-thread bypass: a peer
        # ignores `cold`, and its result says so (from_scratch 0).
        # Deferred: torch and pyPLNmodels take seconds to import, and only a peer's run needs them.
        from core.run import peer_timing

        return peer_timing.measure(spec, counts, report, cancel, watched, budget)
    return jax_timing.measure(spec, counts, report, cancel, cache, watched, budget, cold)
