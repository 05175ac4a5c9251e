"""`python -m core solve`: fit to convergence with the fastest configuration this machine has
measured, or with the one given.

The fastest configuration is read from the store: among the finished runs of the same
problem (data and precision) measured on this host and device (not imported), by a JAX
strategy, that stopped at their tolerance (`time_to_solution_s`) within `reach.SOLVED` of
the best ELBO stored for the problem, the one with the least time to solution. What the caller gives (strategy,
optimizer, init, tol, iterations) narrows the search and overrides the choice; with
nothing stored that qualifies, `DEFAULTS` are used (the configuration that measures
fastest on oaks in the time-to-solution benchmark).
"""

from __future__ import annotations

import math
import socket
from typing import Any, NamedTuple

from core.fit import strategies
from core.results import reach
from core.spec import DEFAULTS, DatasetSpec, FitSpec, OptimizerSpec
from core.store.run_store import IMPORTED

CHOSEN = ("strategy", "optimizer", "init", "tol", "iterations")


class Choice(NamedTuple):
    """A configuration to solve with, and why it was chosen.

    Attributes:
        settings: strategy, optimizer, lr, init, tol, iterations.
        why: one line saying where they come from.
    """

    settings: dict[str, Any]
    why: str


def choose(frame, dataset: DatasetSpec, precision: str, device: str, given: dict[str, Any],
           host: str | None = None, any_host: bool = False) -> Choice:
    """The fastest stored configuration for the problem (see the module docstring), with
    `given` (settings the caller fixed, None for free) applied over it.

    Args:
        frame: the store's runs (`RunStore.frame()`).
        host: whose runs count (default: this machine's: a time measured elsewhere, or
            imported, says nothing of this machine's speed).
        any_host: count every host's runs (the caller asked to trust them).
    """
    fixed = {name: value for name, value in given.items() if value is not None}
    host = host or socket.gethostname()
    same = frame[(frame["dataset"] == dataset.label) & (frame["precision"] == precision)]
    if not same.empty:
        best = same.loc[same["status"] == "ok", "final_elbo"].max()
        mine = same[(same["status"] == "ok") & same["time_to_solution_s"].notna() & (same["device"] == device)
                    & (((same["host"] == host) & (same["owner"] != IMPORTED)) | any_host)
                    & same["strategy"].isin(strategies.names())
                    & ((best - same["final_elbo"]) / abs(best) <= reach.SOLVED)]
        for name, value in fixed.items():
            mine = mine[mine[name] == value]
        if not mine.empty and math.isfinite(best):
            run = mine.loc[mine["time_to_solution_s"].idxmin()]
            settings = {name: run[name] for name in CHOSEN} | {"lr": float(run["lr"])}
            where = "on any host" if any_host else "on this machine"
            return Choice(settings | fixed, f"the fastest of {len(mine)} stored runs that reached the best ELBO "
                                            f"within {reach.SOLVED:g} {where}: run #{int(run['id'])}, "
                                            f"{run['time_to_solution_s']:.4g} s to solution")
    settings = {"strategy": DEFAULTS.strategy, "optimizer": DEFAULTS.optimizer, "init": DEFAULTS.init,
                "iterations": DEFAULTS.iterations, "tol": DEFAULTS.tol_for(precision), "lr": DEFAULTS.lr} | fixed
    return Choice(settings, "no stored run of this problem on this machine qualifies: the lab's default "
                            "(the fastest to converge on oaks)")


def solve_spec(dataset: DatasetSpec, precision: str, device: str, repeats: int, choice: Choice) -> FitSpec:
    """The FitSpec that solves `dataset` with `choice`."""
    settings = choice.settings
    return FitSpec(dataset=dataset, strategy=settings["strategy"], iterations=int(settings["iterations"]),
                   precision=precision, device=device,
                   optimizer=OptimizerSpec(settings["optimizer"], float(settings["lr"])), init=settings["init"],
                   repeats=repeats, tol=float(settings["tol"]))
