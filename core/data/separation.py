"""Count columns some of whose coefficients have no finite value.

As in a Poisson regression whose zeros a covariate separates from its counts, a count
column j's coefficients in B have no finite optimum when some direction b of them leaves
the column's rates where it counts unchanged (X_i b = 0 for every sample i with a count
above 0) and lowers them at some of its zeros without raising any (X_i b <= 0 elsewhere,
< 0 somewhere): moving B's column along b raises the ELBO without end, less and less, so a
fit drives those coefficients without bound and stops where exp() of them no longer moves
the ELBO, saying it converged, at entries of B in the hundreds that are no estimates.

The common case is a factor's level at which a column counts nothing (`levels_without_counts`,
said level by level); the general test (`separated`) finds the others, such as a covariate
coded 0/1 as numbers (oaks' tree as two such columns gave B entries of -97 and +88 with no
word) or a column that counts only at the largest value of a measured covariate. Both read
only the design and which counts are zero; nothing here is read at import.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from core.data.covariates import CONSTANT, Design

# Count columns (and a factor's levels) named in a warning; the rest are counted.
_NAMED_COLUMNS = 4
_NAME_CHARS = 16
_WARNING_CHARS = 480
# Relative size under which a singular value of the design's rows where a column counts is
# zero: those rows then leave a direction of the coefficients free. Indicator columns give
# exact zeros (1e-16); a measured covariate's rows are nowhere near.
_RANK = 1e-9
# The same for the Gram matrix's eigenvalues (squares), as a first sieve over all columns.
_GRAM_RANK = 1e-12
# A direction lowers a zero's rate when its X_i b is below this (X's columns scaled to 1 at
# their largest), and raises none when none is above _RAISES, except the rows of the linear
# program that found it, which may read up to its feasibility tolerance (HiGHS's, 1e-7).
_LOWERS = 1e-7
_RAISES = 1e-9
_PROGRAM_ROUNDING = 1e-7
# Count columns whose rows are grouped at once where samples share their covariates (oaks
# replicated): the copy of the counts this takes stays near 128 MB.
_GROUP_CELLS = 1 << 24


def levels_without_counts(design: Design, counts: np.ndarray) -> tuple[tuple[str, str, tuple[int, ...]], ...]:
    """(factor, level, the count columns with no count above 0 where the factor is at that
    level), for every such level of every factor of `design`.

    There such a column's log rate has no finite optimum: the fit drives it down without
    bound through the level's coefficient (or the constant's, for the reference level, with
    every other level's up to match). Oaks' counts with `~ 1 + tree + dist2ground` and its
    offsets gave -183 and +176 for a column with no count under one tree, where
    pyPLNmodels, stopped sooner, had -17.5 and +10.8.
    """
    found = []
    for name, levels in design.factors:
        for level in sorted(set(levels)):
            empty = np.flatnonzero(~counts[levels == level].any(axis=0))
            if empty.size:
                found.append((name, str(level), tuple(int(j) for j in empty)))
    return tuple(found)


def level_coefficients(covariate_names: Sequence[str], factor: str, level: str) -> list[str]:
    """The coefficients that have no finite value for a column that counts nothing where
    `factor` is `level`: that level's own; for the reference level, which has none, the
    constant, and every level's of the factor against it (the others' counts hold the
    columns' rates there: the constant alone runs down, their coefficients up with it)."""
    own = f"{factor}[{level}]"
    if own in covariate_names:
        return [own]
    return [name for name in covariate_names if name == CONSTANT or name.startswith(f"{factor}[")]


def separated(design: Design, counts: np.ndarray, at_levels: Sequence[tuple[str, str, tuple[int, ...]]] = ()
              ) -> tuple[tuple[tuple[str, ...], tuple[int, ...]], ...]:
    """(coefficient names, count columns) for each set of coefficients that a direction
    separating some columns' zeros from their counts moves (see the module), the columns
    grouped by it; columns whose every such coefficient `at_levels` (as
    `levels_without_counts` gives them) already names are left to it."""
    named: dict[int, set[str]] = {}
    for factor, level, columns in at_levels:
        for j in columns:
            named.setdefault(j, set()).update(level_coefficients(design.columns, factor, level))
    found: dict[tuple[str, ...], list[int]] = {}
    for j, direction in _directions(design.matrix, counts):
        moved = tuple(name for name, size in zip(design.columns, direction) if size)
        if not set(moved) <= named.get(j, set()):
            found.setdefault(moved, []).append(j)
    return tuple((moved, tuple(columns)) for moved, columns in found.items())


def _directions(matrix: np.ndarray, counts: np.ndarray):
    """(column, which coefficients move: a bool per covariate) for every count column with a
    direction that separates its zeros from its counts."""
    largest = np.abs(matrix).max(axis=0)
    x = matrix / np.where(largest > 0, largest, 1.0)  # tolerances relative to each covariate's size
    x, counted, zero = _distinct_rows(x, counts)
    d = x.shape[1]
    # Sum_i over a column's counted rows of x_i x_i^T: singular only where a direction is free there.
    gram = (counted.T.astype(np.float64) @ (x[:, :, None] * x[:, None, :]).reshape(len(x), d * d)).reshape(-1, d, d)
    eigenvalues = np.linalg.eigvalsh(gram)
    for j in np.flatnonzero(eigenvalues[:, 0] <= _GRAM_RANK * np.maximum(eigenvalues[:, -1], 1e-300)):
        if not counted[:, j].any():
            continue  # an all-zero column: dropped when the counts are read
        _, values, vectors = np.linalg.svd(x[counted[:, j]])
        free = vectors[int(np.sum(values > _RANK * values[0])):].T  # (d, k): X_i b = 0 where it counts
        if not free.shape[1]:
            continue
        along = _lowering(x[zero[:, j]] @ free)
        if along is not None:
            direction = free @ along
            yield int(j), np.abs(direction) > 1e-6 * np.abs(direction).max()


def _lowering(z: np.ndarray) -> np.ndarray | None:
    """c with z c <= 0 everywhere and < 0 somewhere, or None where there is none."""
    if not len(z):
        return None
    if z.shape[1] == 1:  # one free direction: its sign is the choice
        for sign in (1.0, -1.0):
            if (sign * z[:, 0]).max() <= _RAISES and (sign * z[:, 0]).min() < -_LOWERS:
                return np.array([sign])
        return None
    # Deferred: SciPy's linear programs are needed only where several directions are free.
    from scipy.optimize import linprog

    # Constraint generation: a program over a few of the zeros (each direction's extremes and
    # rows spread through the rest) is a fraction of one over thousands. Where those rows
    # span every direction and none of their c lowers one without raising another, no c
    # lowers the whole set either; a c that lowers them is kept only if it raises no other
    # zero, and the zeros it raises join the program.
    k = z.shape[1]
    active = np.unique(np.r_[z.argmax(axis=0), z.argmin(axis=0),
                             np.linspace(0, len(z) - 1, min(len(z), 8 * k)).astype(int)])
    while True:
        part = z[active]
        spans = np.linalg.svd(part, compute_uv=False)
        if len(active) < len(z) and not (len(spans) == k and spans[-1] > 1e-4 * spans[0]):
            active = np.arange(len(z))  # too few of them to rule a direction out: all of them
            continue
        # Lower these zeros' rates as much as a box on c allows, raising none of them: any c
        # with a lowered zero makes the sum negative, so the optimum finds one if there is one.
        solved = linprog(part.sum(axis=0), A_ub=part, b_ub=np.zeros(len(part)), bounds=[(-1.0, 1.0)] * k,
                         method="highs")
        if solved.status != 0 or not (part @ solved.x).min() < -_LOWERS:
            return None
        moved = z @ solved.x
        # Rows of the program may sit a rounding above 0 (its tolerance is 1e-9 and up):
        # only rows outside it are new constraints, and none left means none is raised.
        raised = np.setdiff1d(np.flatnonzero(moved > _RAISES), active)
        if not raised.size:
            return solved.x if moved.max() <= _PROGRAM_ROUNDING else None
        active = np.union1d(active, raised[np.argsort(moved[raised])[-8 * k:]])


def _distinct_rows(x: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """X's distinct rows, and for each of them and each count column whether some sample of
    those covariates counts above 0 there, and whether some counts 0: all the test reads
    (oaks replicated 1,000 times has 116 such rows for its 116,000 samples)."""
    rows, inverse = _unique_rows(x)
    if len(rows) == len(x):
        order = np.argsort(inverse)
        counted = counts[order] > 0
        return rows, counted, ~counted
    order = np.argsort(inverse, kind="stable")
    starts = np.flatnonzero(np.r_[True, np.diff(inverse[order]) != 0])
    counted = np.empty((len(rows), counts.shape[1]), bool)
    zero = np.empty_like(counted)
    step = max(1, _GROUP_CELLS // max(len(x), 1))
    for first in range(0, counts.shape[1], step):
        block = counts[order, first:first + step] > 0
        counted[:, first:first + step] = np.logical_or.reduceat(block, starts, axis=0)
        zero[:, first:first + step] = ~np.logical_and.reduceat(block, starts, axis=0)
    return rows, counted, zero


def _unique_rows(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """X's distinct rows and each sample's among them, as `np.unique(x, axis=0)` gives them.
    Sorted by a projection of the rows first, a fiftieth of that sort's time at a million
    samples (oaks replicated); checked, and the exact sort where two rows met by chance."""
    projected = x @ np.random.default_rng(0).standard_normal(x.shape[1])
    values, first, inverse = np.unique(projected, return_index=True, return_inverse=True)
    rows = x[first]
    if np.array_equal(rows[inverse], x):
        return rows, inverse.reshape(-1)
    rows, inverse = np.unique(x, axis=0, return_inverse=True)
    return rows, inverse.reshape(-1)


def empty_levels(unbounded: Sequence[tuple[str, str, tuple[int, ...]]], column_names: Sequence[str],
                 constant: bool = True) -> tuple[str, ...]:
    """A warning for each factor at one of whose levels some count columns hold only zeros
    (`unbounded`, as `levels_without_counts` finds them), naming its levels and their first
    columns; `constant`: whether the design has one (else no level is a reference)."""
    by_factor: dict[str, dict[str, list[str]]] = {}
    for name, level, columns in unbounded:
        by_factor.setdefault(name, {})[level] = [str(column_names[j]) for j in columns]
    found = []
    for name, empty in by_factor.items():
        name = _short(name)
        reference = f" (the reference level's: the constant and every {name} coefficient)" if constant else ""
        said = (f"{name}: columns with no count above 0 at a level of it ({{}}) have no finite optimum there "
                f"(complete separation): the level's coefficient{reference} drifts without bound and is no "
                f"estimate, even where the fit converges; merge the level with another, or fit those columns "
                f"without {name}")
        found.append(_listing(said, [(f"at {_short(level)!r}", named) for level, named in empty.items()], "level"))
    return tuple(found)


def separated_warning(found: Sequence[tuple[tuple[str, ...], tuple[int, ...]]],
                      column_names: Sequence[str]) -> tuple[str, ...]:
    """One warning for the columns `separated` finds, naming each set of coefficients and its
    first columns."""
    if not found:
        return ()
    said = ("covariates: some columns count nothing on one side of a combination of them (complete separation: "
            "a covariate 0 wherever a column counts, or counting only at its largest values): the coefficients "
            "named have no finite value for them, drifting without bound even where the fit converges ({}); drop "
            "or merge those covariates")
    groups = [(", ".join(_short(name) for name in moved), [str(column_names[j]) for j in columns])
              for moved, columns in found]
    return (_listing(said, groups, "set of coefficients", "sets of coefficients"),)


def _listing(said: str, groups: list[tuple[str, list[str]]], one: str, many: str = "") -> str:
    """`said` with its {} filled by "head: first columns" for each group, within what the
    store keeps of a warning (500 characters): every group named with fewer of its columns
    before a group is left out ("susceptible" was never named, its level cut), and those left
    out counted."""
    many = many or one + "s"
    for shown in range(_NAMED_COLUMNS, -1, -1):
        text = said.format("; ".join(f"{head}: {_some(names, shown)}" for head, names in groups))
        if len(text) <= _WARNING_CHARS:
            return text
    listed: list[str] = []
    for k, (head, names) in enumerate(groups):
        entry = f"{head}: {_some(names, 1)}"
        more = f"and {len(groups) - k} more {one if len(groups) - k == 1 else many}"
        if len(said) + len("; ".join([*listed, entry, more])) > _WARNING_CHARS:
            listed.append(more)
            break
        listed.append(entry)
    return said.format("; ".join(listed))


def _short(name: str) -> str:
    """A name as a warning shows it: within what the store keeps of a warning, whatever a
    file's header holds."""
    return name if len(name) <= _NAME_CHARS else name[:_NAME_CHARS - 1] + "…"


def _some(names: list[str], most: int = _NAMED_COLUMNS) -> str:
    most = len(names) if len(names) == most + 1 else most  # the one left named: as long as "and 1 more"
    if not most:
        return f"{len(names)} column{'s' * (len(names) != 1)}"
    shown = ", ".join(_short(name) for name in names[:most])
    return shown + (f" (+{len(names) - most})" if len(names) > most else "")
