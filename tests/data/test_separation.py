"""Coefficients with no finite value found wherever covariates separate a column's zeros
from its counts, not only at a factor's levels."""

import numpy as np
import pytest

from core.data import covariates, datasets, separation
from core.data.covariates import CONSTANT, Design
from core.spec import DatasetSpec


def _oaks_tree_as_numbers() -> tuple[np.ndarray, Design]:
    counts = datasets.load(DatasetSpec(kind="oaks")).counts
    tree = covariates.oaks_table()["tree"]
    dummies = np.column_stack([np.ones(len(tree)), tree == "resistant", tree == "susceptible"]).astype(float)
    return counts, Design(dummies, (CONSTANT, "resistant", "susceptible"))


def test_a_factor_coded_as_numbers_is_found_as_its_levels_are():
    # oaks' tree as two 0/1 columns: the fit gave B entries of -97 and +88 with no word. The
    # columns and coefficients must be those the factor's levels name, coded as numbers.
    counts, numbers = _oaks_tree_as_numbers()
    found = separation.separated(numbers, counts)
    by_column = {j: set(moved) for moved, columns in found for j in columns}
    as_factor = datasets.load(DatasetSpec(kind="oaks", formula="~ 1 + tree"))
    expected: dict[int, set[str]] = {}
    for factor, level, columns in as_factor.unbounded:
        named = separation.level_coefficients(as_factor.covariate_names, factor, level)
        for j in columns:
            expected.setdefault(j, set()).update(name.replace("tree[", "").rstrip("]") for name in named)
    assert by_column == expected and len(by_column) == 9
    # The factor's own coding leaves nothing for the general test to add.
    assert as_factor.separated == ()


def test_the_warning_names_coefficients_and_columns_and_fits_the_store():
    counts, numbers = _oaks_tree_as_numbers()
    found = separation.separated(numbers, counts)
    (warning,) = separation.separated_warning(found, [f"y{j + 1}" for j in range(counts.shape[1])])
    assert warning.startswith("covariates: some columns count nothing on one side of a combination of them")
    assert "(intercept), resistant, susceptible: y70, y104" in warning and len(warning) <= 480
    # Every set of coefficients named, with fewer of its columns, before one is left out.
    assert all(f"; {head}: y" in warning for head in ("susceptible", "resistant", "resistant, susceptible"))
    assert separation.separated_warning((), ["y1"]) == ()


def _design(*columns: np.ndarray, names: tuple[str, ...]) -> Design:
    return Design(np.column_stack(columns).astype(float), names)


def test_a_column_that_counts_only_at_the_largest_value_of_a_measurement_is_found():
    # Poisson regression's separation: the slope runs to +inf, the constant to -inf.
    x = np.linspace(0.5, 30.0, 40)
    counts = np.zeros((40, 3))
    counts[-1, 0] = 4  # only at the largest x
    counts[[0, -1], 1] = 2  # at both ends: a finite slope
    counts[::3, 2] = 1  # spread: nothing to find
    found = separation.separated(_design(np.ones(40), x, names=(CONSTANT, "depth")), counts)
    assert found == (((CONSTANT, "depth"), (0,)),)


def test_several_free_directions_are_searched_together():
    # Counted only where both measurements are 0: two free directions, each lowering zeros
    # at one of them; a linear program finds their sum.
    rng = np.random.default_rng(3)
    a, b = rng.uniform(0, 2, 60), rng.uniform(0, 2, 60)
    a[:6], b[:6] = 0.0, 0.0
    counts = np.zeros((60, 2))
    counts[:6, 0] = rng.integers(1, 5, 6)
    counts[:, 1] = rng.poisson(3.0, 60) + 1
    design = _design(np.ones(60), a, b, names=(CONSTANT, "a", "b"))
    assert separation.separated(design, counts) == ((("a", "b"), (0,)),)
    # Where the measurements surround 0 at the zeros, no direction lowers them all: finite.
    around = np.where(np.arange(60) >= 6, 1.0, 0.0)
    design = _design(np.ones(60), a - around, b - around, names=(CONSTANT, "a", "b"))
    assert separation.separated(design, counts) == ()


@pytest.mark.parametrize("seed", range(3))
def test_counts_spread_over_measured_covariates_raise_nothing(seed):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(200, 4))
    design = _design(np.ones(200), *x.T, names=(CONSTANT, "x1", "x2", "x3", "x4"))
    counts = rng.poisson(np.exp(0.3 * x @ rng.normal(size=(4, 50)) - 1.0))
    counts = counts[:, counts.any(axis=0)]
    assert separation.separated(design, counts) == ()


def test_samples_that_share_their_covariates_are_read_once_with_the_same_answer():
    counts, numbers = _oaks_tree_as_numbers()
    replicated = Design(np.repeat(numbers.matrix, 4, axis=0), numbers.columns)
    assert separation.separated(replicated, np.repeat(counts, 4, axis=0)) == separation.separated(numbers, counts)
    # One copy of a row counting where the others do not: counted there, and zero too.
    more = np.repeat(counts, 2, axis=0)
    resistant_row = int(np.flatnonzero(numbers.matrix[:, 1] == 1)[0])
    more[2 * resistant_row, 90] = 1  # y91 had no count under 'resistant'
    found = separation.separated(Design(np.repeat(numbers.matrix, 2, axis=0), numbers.columns), more)
    assert all(90 not in columns for moved, columns in found if moved == ("resistant",))


def test_a_file_of_numeric_dummies_gets_the_warning_and_the_estimates_mark_them():
    counts, numbers = _oaks_tree_as_numbers()
    table = "resistant,susceptible\n" + "".join(f"{int(r)},{int(s)}\n" for r, s in numbers.matrix[:, 1:])
    data = datasets.with_covariates(datasets.load(DatasetSpec(kind="oaks")), table.encode(), "dummies.csv")
    assert any(w.startswith("covariates: some columns count nothing") for w in data.warnings)
    assert dict((j, moved) for moved, columns in data.separated for j in columns)[90] == ("resistant",)


@pytest.mark.parametrize("seed", range(2))
def test_the_programs_over_a_few_zeros_find_what_one_over_all_of_them_finds(seed):
    # Columns that count in a handful of rows leave several directions free; whether one
    # lowers their zeros is decided on a few rows at a time. One program over every zero
    # (SciPy's, with the same tolerances) must agree column by column.
    from scipy.optimize import linprog

    rng = np.random.default_rng(seed)
    n, d = 400, 6
    x = np.column_stack([np.ones(n), rng.normal(size=(n, d - 2)), rng.uniform(0, 1, n) < 0.2]).astype(float)
    counts = (rng.random((n, 300)) < np.where(x[:, -1:] > 0, 0.004, 0.015)).astype(float)
    counts = counts[:, counts.any(axis=0)]
    design = Design(x, tuple(f"x{k}" for k in range(d)))
    found = {j for _, columns in separation.separated(design, counts) for j in columns}
    scaled = x / np.abs(x).max(axis=0)
    expected = set()
    for j in range(counts.shape[1]):
        counted = counts[:, j] > 0
        _, values, vectors = np.linalg.svd(scaled[counted])
        free = vectors[int(np.sum(values > 1e-9 * values[0])):].T
        if not free.shape[1]:
            continue
        z = scaled[~counted] @ free
        solved = linprog(z.sum(axis=0), A_ub=z, b_ub=np.zeros(len(z)), bounds=[(-1, 1)] * free.shape[1])
        if solved.status == 0 and (z @ solved.x).min() < -1e-7:
            expected.add(j)
    assert found == expected and len(expected) >= 5


def test_rows_that_meet_in_the_projection_that_sorts_them_are_still_told_apart(monkeypatch):
    # The rows are sorted by one projection; rows with the same projection (here all of them,
    # the projection made 0) fall back to the exact sort rather than being read as one.
    x = np.array([[1.0, 0.0], [0.0, 0.0], [1.0, 0.0], [1.0, 2.0]])
    for zero in (False, True):
        if zero:
            monkeypatch.setattr(separation.np.random, "default_rng",
                                lambda seed: type("Zero", (), {"standard_normal": lambda self, k: np.zeros(k)})())
        rows, inverse = separation._unique_rows(x)
        np.testing.assert_array_equal(rows[inverse], x)
        assert len(rows) == 3
