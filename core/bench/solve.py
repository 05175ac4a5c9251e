"""`python -m core solve`: fit to convergence with the fastest configuration this machine has
measured, or with the one given.

The fastest configuration is read from the store: among the finished runs of the same
problem (the same data, by their files' content rather than their names, and precision)
measured on this host and device (not imported), by a JAX strategy, that stopped at their
tolerance (`time_to_solution_s`) within `reach.SOLVED` of the best ELBO stored for the
problem, the one with the least time to solution. A loop driven from Python (eager,
jit_step, ...) counts only where the default configuration was measured beside it, or the
caller names the strategy: one stored eager run of an upload was solve's choice, the slowest
way there is. What the caller gives (strategy, optimizer, init, tol, iterations) narrows the
search and overrides the choice; with nothing stored that qualifies, `DEFAULTS` are used (the
configuration that measures fastest on oaks in the time-to-solution benchmark).
"""

from __future__ import annotations

import dataclasses
import math
import socket
from typing import Any, Iterable, NamedTuple

from core import catalog
from core.fit import strategies
from core.results import reach, significance
from core.results.ordering import listed
from core.results.result import RunResult
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


def choose(runs: Iterable[RunResult], dataset: DatasetSpec, precision: str, device: str, given: dict[str, Any],
           host: str | None = None, any_host: bool = False) -> Choice:
    """The fastest stored configuration for the problem (see the module docstring), with
    `given` (settings the caller fixed, None for free) applied over it.

    Args:
        runs: stored runs, without their curves; those of other problems are passed over
            (`RunStore.find(dataset=..., precision=...)` gives just the problem's, without
            the pandas a frame needs: `solve` starts sooner).
        host: whose runs count (default: this machine's: a time measured elsewhere, or
            imported, says nothing of this machine's speed).
        any_host: count every host's runs (the caller asked to trust them).
    """
    fixed = {name: value for name, value in given.items() if value is not None}
    host = host or socket.gethostname()
    finished = [run for run in runs if run.dataset == dataset.label and same_data(run.spec, dataset)
                and run.precision == precision and run.status == "ok" and _finite(run.final_elbo)]
    if finished:
        best = max(run.final_elbo for run in finished)
        mine = [run for run in finished
                if _finite(run.time_to_solution_s) and run.device == device
                and ((run.versions.get("host") == host and run.owner != IMPORTED) or any_host)
                and run.strategy in strategies.names()
                and (best - run.final_elbo) / abs(best) <= reach.SOLVED
                and all(getattr(run, name) == value for name, value in fixed.items())]
        # A loop driven from Python is timed, not chosen, unless asked for or measured beside
        # the lab's default: the one stored run of an upload, eager's, had solve fit it eagerly.
        default_measured = any(run.strategy == DEFAULTS.strategy and run.optimizer == DEFAULTS.optimizer
                               for run in mine)
        if not default_measured and "strategy" not in fixed:
            mine = [run for run in mine if catalog.RUNNABLES[run.strategy].loop == "compiled"]
        if mine:
            # The first of equal times, as the store lists them (newest first).
            run = min(mine, key=lambda run: run.time_to_solution_s)
            # Strategies that ran its very program are one speed: which of them timed least is
            # noise, so the first in the catalog's order is named (scan, not scan_pytree_class).
            identity = significance.program_identity(run)
            alike = [other for other in mine
                     if significance.same_program(significance.program_identity(other), identity)]
            order = strategies.names()
            run = min(alike or [run], key=lambda other: order.index(other.strategy))
            one_program = sorted({other.strategy for other in alike} - {run.strategy}, key=order.index)
            settings = {name: getattr(run, name) for name in CHOSEN} | {"lr": float(run.lr)}
            where = "on any host" if any_host else "on this machine"
            counted = f"the fastest of {len(mine)} stored runs" if len(mine) > 1 else "the one stored run"
            return Choice(settings | fixed, f"{counted} that reached the best ELBO "
                                            f"within {reach.SOLVED:g} {where}: run #{run.id}, "
                                            f"{run.time_to_solution_s:.4g} s to solution"
                                            + (f" (one compiled program with {listed(one_program)}: one speed)"
                                               if one_program else ""))
    settings = {"strategy": DEFAULTS.strategy, "optimizer": DEFAULTS.optimizer, "init": None,
                "iterations": DEFAULTS.solve_iterations, "tol": DEFAULTS.tol_for(precision), "lr": DEFAULTS.lr} | fixed
    return Choice(settings, "no stored run of this problem on this machine qualifies: the lab's default "
                            "(the fastest to converge on oaks)")


# Where a data set's files are says nothing of what they hold (their bytes are in content_hash):
# left out when two data sets are compared.
_PATHS = ("counts_path", "offsets_path", "covariates_path")


def same_data(spec: dict[str, Any], dataset: DatasetSpec) -> bool:
    """Whether a stored run's spec (`FitSpec.to_dict`) fitted `dataset`'s data: for CSV files
    their content and how they were read, not their names (the label, "csv x.csv", names two
    files of one name alike: an unrelated file's 15-iteration run once set solve's cap)."""
    try:
        stored = DatasetSpec(**spec.get("dataset", {}))
    except (TypeError, ValueError):  # a spec from a version with other fields: not this problem
        return False
    if (stored.kind == "csv") != (dataset.kind == "csv"):
        return False
    if stored.kind == "csv" and (not stored.content_hash or not dataset.content_hash):
        return False  # no content to compare: nothing says it is the same data

    def identity(found: DatasetSpec) -> dict[str, Any]:
        return {name: value for name, value in dataclasses.asdict(found).items() if name not in _PATHS}

    return identity(stored) == identity(dataset) and bool(stored.covariates_path) == bool(dataset.covariates_path)


def _finite(value) -> bool:
    return value is not None and math.isfinite(value)


def solve_spec(dataset: DatasetSpec, precision: str, device: str, repeats: int, choice: Choice) -> FitSpec:
    """The FitSpec that solves `dataset` with `choice`."""
    settings = choice.settings
    return FitSpec(dataset=dataset, strategy=settings["strategy"], iterations=int(settings["iterations"]),
                   precision=precision, device=device,
                   optimizer=OptimizerSpec(settings["optimizer"], float(settings["lr"])), init=settings["init"],
                   repeats=repeats, tol=float(settings["tol"]))
