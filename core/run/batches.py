"""Which fits of one request are timed together.

A page or the command line asks for several fits at once. JAX strategies of one problem (the
same data, device and repeats) are timed side by side, their repeats in turn
(`core.run.engine.run_together`), so that the ratios between them carry no load of one
moment; a peer (PyTorch, pyPLNmodels), whose timing is its own, runs alone, as does a fit
with no partner.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from core import catalog
from core.spec import DatasetSpec, FitSpec


@dataclasses.dataclass(frozen=True)
class Batch:
    """Fits of a request run as one unit.

    Attributes:
        members: their positions in the request, in its order.
        together: timed side by side (`core.run.engine.run_together`), else one fit alone.
    """

    members: tuple[int, ...]
    together: bool


def problem_key(spec: FitSpec) -> tuple[DatasetSpec, str, int]:
    """What fits timed together must share: their data, device and repeats."""
    return spec.dataset, spec.device, spec.repeats


def plan(specs: Sequence[FitSpec], together: bool = True) -> list[Batch]:
    """The request's batches: each group of two or more JAX strategies of one problem
    together (in the order the groups first appear), then every other fit alone, in the
    request's order. `together=False` runs every fit alone (e.g. fits that each need a
    process of their own)."""
    groups: dict[tuple, list[int]] = {}
    if together:
        for index, spec in enumerate(specs):
            if not catalog.runnable(spec.strategy).is_peer:
                groups.setdefault(problem_key(spec), []).append(index)
    joint = [tuple(members) for members in groups.values() if len(members) > 1]
    grouped = {index for members in joint for index in members}
    return ([Batch(members, True) for members in joint]
            + [Batch((index,), False) for index in range(len(specs)) if index not in grouped])
