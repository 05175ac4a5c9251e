"""Samples matched by name across a fit's files: counts, offsets and covariates.

A file written from R (`write.csv` of a data frame) names each row, and two files of one
study need not list the samples in one order (one sorted by site, the other by date). Read
by position, each count row was fitted beside another sample's offsets or covariates, with
no word. Where both files name their rows, the rows are matched by name: reordered where
only the order differs, refused where some names differ (which row goes with which is
then not known), by position where no name is shared (numbers beside names), said.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np

from core.data.counts import DataError


def order(names: Sequence[str] | None, count_names: Sequence[str] | None, label: str,
          counts_label: str) -> tuple[np.ndarray | None, tuple[str, ...]]:
    """(the rows of file `label`, named `names`, in the order of the counts' rows, named
    `count_names`; None where they are already in it or cannot be matched by name, and a
    note saying how they were matched where that is not plain).

    Raises:
        DataError: where the two files share some row names but not all: naming one that
            the counts do not have, the samples without a row, names given twice.
    """
    if not names or not count_names or tuple(names) == tuple(count_names):
        return None, ()
    shared = set(names) & set(count_names)
    if not shared:
        return None, (f"{label}: rows matched to {counts_label}'s by position (their row names differ)",)
    if len(set(names)) == len(names) == len(count_names) and shared == set(count_names):
        where = {name: i for i, name in enumerate(names)}
        return np.array([where[name] for name in count_names]), (
            f"{label}: rows matched to {counts_label}'s samples by their names (the file has them in another order)",)
    known, listed = set(count_names), set(names)
    stray = [name for name in names if name not in known]
    missing = [name for name in count_names if name not in listed]
    twice = sorted(name for name, times in Counter(names).items() if times > 1)
    parts = []
    if stray:
        parts.append(f"{len(stray):,} of its row names {'is' if len(stray) == 1 else 'are'} no sample of "
                     f"{counts_label} ({_first(stray)})")
    if missing:
        parts.append(f"{len(missing):,} sample{'s' * (len(missing) != 1)} of {counts_label} "
                     f"{'has' if len(missing) == 1 else 'have'} no row ({_first(missing)})")
    if twice:
        parts.append(f"row names given twice ({_first(twice)})")
    said = "; ".join(parts)
    raise DataError(f"{label}: {said}, where other row names agree; give both files the same samples, once each")


def _first(names: list[str]) -> str:
    shown = ", ".join(f"{name!r:.40}" for name in names[:3])
    return shown + (", ..." if len(names) > 3 else "")
