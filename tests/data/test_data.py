"""Tests for core.data.datasets: oaks matches pyPLNmodels, simulation is PLN, bad CSVs fail clearly."""

import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from core.data import csv_counts, oaks_file
from core.data import datasets as data
from core.data.counts import DataError, content_hash, validate
from core.spec import DatasetSpec, SpecError

from project import ROOT


def test_import_is_light():
    # No torch (pyPLNmodels), jax or streamlit at import: core.data.datasets is host-side NumPy.
    code = "import sys, core.data.datasets, core.data.csv_counts; print(sorted({'jax', 'torch', 'streamlit'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, check=True)
    assert out.stdout.strip() == "[]"


def test_oaks_facts():
    oaks = data.load_oaks()
    assert (oaks.n, oaks.p, oaks.d) == (116, 114, 1)
    assert oaks.counts.dtype == oaks.offsets.dtype == np.float64
    assert (oaks.counts == 0).mean() == pytest.approx(0.344, abs=5e-4)
    assert oaks.counts.max() == 2228
    np.testing.assert_array_equal(oaks.offsets, np.log(oaks_file.from_pyplnmodels()[1].astype(float)))
    np.testing.assert_array_equal(oaks.covariates, np.ones((116, 1)))
    assert oaks.name == "oaks x1"


# pyPLNmodels imports pkg_resources and leaves its csv streams open: its warnings, not ours.
@pytest.mark.filterwarnings("ignore:pkg_resources is deprecated")
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_oaks_matches_pyplnmodels():
    from pyPLNmodels import load_oaks  # imports torch (~3 s); only here

    theirs = load_oaks()
    ours = data.load_oaks()
    np.testing.assert_array_equal(ours.counts, theirs["endog"].to_numpy(float))
    np.testing.assert_array_equal(ours.offsets, np.asarray(theirs["offsets"], float))


def test_the_oaks_file_made_again_from_pyplnmodels_is_the_shipped_one(tmp_path):
    made = oaks_file.write(tmp_path / "oaks.npz")
    for again, shipped in zip(oaks_file.read(made), oaks_file.read()):
        np.testing.assert_array_equal(again, shipped)


def test_oaks_replicate_is_np_repeat():
    base, grown = data.load_oaks(), data.load_oaks(3)
    assert grown.counts.shape == (348, 114) and grown.covariates.shape == (348, 1)
    np.testing.assert_array_equal(grown.counts, np.repeat(base.counts, 3, axis=0))
    np.testing.assert_array_equal(grown.offsets, np.repeat(base.offsets, 3, axis=0))
    grown.counts[0, 0] = -1.0  # a caller's copy must not reach the cache
    assert data.load_oaks().counts[0, 0] >= 0


@pytest.mark.parametrize("replicate", [0, -2, 1.5, True])
def test_oaks_bad_replicate(replicate):
    with pytest.raises(DataError, match="replicate"):
        data.load_oaks(replicate)


def test_simulate_shapes_and_determinism():
    a, b, c = data.simulate(300, 7, 3, seed=1), data.simulate(300, 7, 3, seed=1), data.simulate(300, 7, 3, seed=2)
    np.testing.assert_array_equal(a.counts, b.counts)
    np.testing.assert_array_equal(a.covariates, b.covariates)
    assert not np.array_equal(a.counts, c.counts)
    assert a.counts.shape == a.offsets.shape == (300, 7) and a.covariates.shape == (300, 3)
    assert a.true_coef.shape == (3, 7) and a.true_covariance.shape == (7, 7)
    assert a.counts.dtype == np.float64
    assert (a.counts >= 0).all() and (a.counts == np.round(a.counts)).all()
    np.testing.assert_array_equal(a.covariates[:, 0], 1.0)
    np.testing.assert_array_equal(a.offsets, 0.0)
    np.testing.assert_allclose(a.true_covariance, a.true_covariance.T)
    assert np.linalg.eigvalsh(a.true_covariance).min() > 0
    validate(a.counts, a.offsets, a.covariates)


def test_simulate_recovers_latent_covariance_by_moments():
    # For intercept-only PLN: E Y_j = mu_j = exp(B_j + S_jj / 2), and
    # Cov(Y) = diag(mu) + mu mu^T (exp(S) - 1), so S = log(1 + (Cov(Y) - diag(mu)) / mu mu^T).
    sim = data.simulate(50_000, 5, 1, seed=0)
    mu = sim.counts.mean(axis=0)
    cov = np.cov(sim.counts, rowvar=False)
    estimate = np.log1p((cov - np.diag(mu)) / np.outer(mu, mu))
    np.testing.assert_allclose(estimate, sim.true_covariance, atol=0.15)
    truth = sim.true_coef[0] + np.diag(sim.true_covariance) / 2
    np.testing.assert_allclose(np.log(mu), truth, atol=0.05)


def test_simulate_rejects_bad_sizes():
    with pytest.raises(SpecError, match="n must be"):
        data.simulate(1, 3)


def _write(path, text):
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return path


GOOD = "a,b,c\n1,0,3\n4,5,6\n"

BAD_CSVS = [
    # (counts text, offsets text or None, message substring)
    ("", None, "is empty"),
    ("a,b\n", None, "no data rows"),
    ("a,b\n1,x\n2,3\n", None, "non-numeric cell; only numbers are accepted; line 2, column 2 ('b') holds 'x'"),
    ("a,b\n1,2\n,3\n", None, "missing value"),
    ("a,b\n1,2\n3,NA\n", None, "line 3, column 2"),
    ("a,b\n1,-2\n3,4\n", None, "negative count"),
    ("a,b\n1,2.5\n3,4\n", None, "non-integer count"),
    ("a,b\n1,inf\n3,4\n", None, "non-finite"),
    ("a,b\n1,2\n", None, "has 1 row;"),
    ("a\n1\n2\n", None, "has 1 column;"),
    ("1 2\n3 4\n", None, "has 1 column; at least 2 variables (columns) are needed, in a table of counts with "
                          "cells separated by commas, semicolons or tabs"),
    ("a,b\n1,2\n3,4,5\n", None, "not a readable table: line 3 has 3 fields where line 2 has 2"),
    ("a,b\n1,2\n3\n", None, "line 3 has 1 field where line 2 has 2; every row needs the same number"),
    ("a;b;c\n1;2;3\n\n4;5;6\n7;8\n", None, "line 5 has 2 fields where line 2 has 3"),
    ('"",a,b\n"s1",1,2\n"s2",3\n', None, "line 3 has 2 fields where line 2 has 3"),
    # A header with a third width: the line the others are held to is named, not "the lines before it".
    ("a,b,c\n1,2\n4,5,6,7\n", None, "line 3 has 4 fields where line 2 has 2"),
    # A short line before a long one: the first to fix is named, not the long one pandas stops at.
    ("a,b,c\n1,2,3\n4,5\n\n6,7,8,9\n", None, "line 3 has 2 fields where line 2 has 3"),
    ("a,b\n1,2\n,3\n", None, "missing value (empty cell or NA); every cell needs a number; line 3, column 1"),
    ('"",a,b\n"s1",1,2\n"s2",3,x\n', None, "line 3, column 3 ('b') holds 'x'"),
    ("1,2\n3,-4\n", None, "negative count; counts must be whole numbers >= 0; line 2, column 2 holds '-4'"),
    (GOOD, "a,b\n0,0\n0,0\n", "offsets have shape 2 x 2 but the counts in counts.csv are 2 x 3"),
    (GOOD, "a,b,c\n0,0,0\n0,nan,0\n", "missing value"),
    (GOOD, "a,b,c\n0,0,0\n0,-inf,0\n", "non-finite value"),
]


@pytest.mark.parametrize("counts, offsets, message", BAD_CSVS)
def test_bad_csv_raises_clear_error(tmp_path, counts, offsets, message):
    counts_path = _write(tmp_path / "counts.csv", counts)
    offsets_path = _write(tmp_path / "offsets.csv", offsets) if offsets is not None else None
    with pytest.raises(DataError, match="offsets.csv" if offsets else "counts.csv") as err:
        csv_counts.read_csv(counts_path, offsets_path)
    assert message in str(err.value)
    # The upload path gives the same verdict.
    with pytest.raises(DataError) as err:
        csv_counts.read_csv_bytes(counts.encode(), offsets.encode() if offsets else None,
                                  name="counts.csv", offsets_name="offsets.csv")
    assert message in str(err.value)


def test_csv_error_deep_in_a_long_file_is_located():
    # Cells are read as text only around the first failure; its line must still be exact.
    lines = ["a,b"] + [f"{i},{i % 7}" for i in range(10_000)]
    lines[9_001] = "9000,oops"
    with pytest.raises(DataError, match=r"line 9002, column 2 \('b'\) holds 'oops'"):
        csv_counts.read_csv_bytes(("\n".join(lines) + "\n").encode(), None, "long.csv")


def test_csv_with_byte_order_mark_and_no_header():
    got = csv_counts.read_csv_bytes("\ufeff1,2\r\n3,4\r\n".encode(), None, "bom.csv")
    np.testing.assert_array_equal(got.counts, [[1, 2], [3, 4]])


def test_csv_over_size_cap(tmp_path):
    path = _write(tmp_path / "big.csv", GOOD)
    with pytest.raises(DataError, match="big.csv is 0.0 MB, larger than"):
        csv_counts.read_csv(path, max_bytes=10)
    with pytest.raises(DataError, match="larger than"):
        csv_counts.read_csv_bytes(GOOD.encode(), None, "big.csv", max_bytes=10)


def _wide(rows: int = 4, columns: int = 10_000) -> bytes:
    """The issue's 139 KB file: 4 samples of 10,000 counts, whose fit holds p x p matrices of 1e8 cells."""
    return b"".join(",".join(str((i * 7 + j) % 10) for j in range(columns)).encode() + b"\n" for i in range(rows))


def test_a_wide_csv_is_refused_with_the_cap_named(tmp_path, monkeypatch):
    message = r"wide.csv has 10,000 columns; this server fits at most 2,000 \(PLNLAB_MAX_COLUMNS\)"
    with pytest.raises(DataError, match=message):
        csv_counts.read_csv_bytes(_wide(), None, "wide.csv")
    path = tmp_path / "wide.csv"
    path.write_bytes(_wide())
    with pytest.raises(DataError, match=message):
        csv_counts.read_csv(path)
    monkeypatch.setenv("PLNLAB_MAX_COLUMNS", "20_000")
    assert csv_counts.read_csv(path).p == 10_000  # a server may raise it


def test_a_tall_csv_is_refused_with_the_cap_named(monkeypatch):
    monkeypatch.setenv("PLNLAB_MAX_ROWS", "3")
    with pytest.raises(DataError, match=r"tall.csv has 4 rows; this server fits at most 3 \(PLNLAB_MAX_ROWS\)"):
        csv_counts.read_csv_bytes(b"a,b\n1,2\n3,4\n5,6\n7,8\n", None, "tall.csv")
    with pytest.raises(DataError, match=r"tall.csv has 40,000 rows; this server fits at most 3"):
        csv_counts.read_csv_bytes(b"1,2\n" * 40_000, None, "tall.csv")  # refused before parsing


def test_csv_missing_file(tmp_path):
    with pytest.raises(DataError, match="cannot read"):
        csv_counts.read_csv(tmp_path / "nope.csv")


def test_csv_round_trip(tmp_path):
    counts = np.array([[0, 12, 3, 2228], [5, 0, 0, 1], [7, 8, 9, 0]], dtype=float)
    offsets = np.log(np.array([[8315.0] * 4, [662.0] * 4, [1000.0] * 4]))
    pd.DataFrame(counts.astype(int), columns=["w", "x", "y", "z"]).to_csv(tmp_path / "c.csv", index=False)
    pd.DataFrame(offsets, columns=["w", "x", "y", "z"]).to_csv(tmp_path / "o.csv", index=False)
    got = csv_counts.read_csv(tmp_path / "c.csv", tmp_path / "o.csv")
    np.testing.assert_array_equal(got.counts, counts)
    np.testing.assert_allclose(got.offsets, offsets, rtol=1e-15)
    assert (got.n, got.p, got.d) == (3, 4, 1) and got.name == "csv c.csv"
    # Headerless, and a pandas/R row-name column, read the same counts.
    np.savetxt(tmp_path / "plain.csv", counts, fmt="%d", delimiter=",")
    np.testing.assert_array_equal(csv_counts.read_csv(tmp_path / "plain.csv").counts, counts)
    pd.DataFrame(counts.astype(int), columns=list("wxyz")).to_csv(tmp_path / "indexed.csv")
    np.testing.assert_array_equal(csv_counts.read_csv(tmp_path / "indexed.csv").counts, counts)
    np.testing.assert_array_equal(csv_counts.read_csv(tmp_path / "plain.csv").offsets, 0.0)


def test_load_dispatch_and_content_hash(tmp_path):
    assert data.load(DatasetSpec(kind="oaks", replicate=2)).n == 232
    sim = data.load(DatasetSpec(kind="simulated", n=20, p=3, d=2, seed=4))
    np.testing.assert_array_equal(sim.counts, data.simulate(20, 3, 2, 4).counts)
    path = _write(tmp_path / "counts.csv", GOOD)
    digest = content_hash(path)
    assert len(digest) == 64 and digest != content_hash(path, path)
    assert digest == content_hash(GOOD.encode())  # an upload hashes like its file
    spec = DatasetSpec(kind="csv", counts_path=str(path), content_hash=digest)
    np.testing.assert_array_equal(data.load(spec).counts, [[1, 0, 3], [4, 5, 6]])
    _write(path, GOOD + "7,8,9\n")
    with pytest.raises(DataError, match="changed since"):
        data.load(spec)


@pytest.mark.parametrize(
    "counts, offsets, covariates, message",
    [
        (np.ones(3), np.ones(3), np.ones((3, 1)), r"2-D \(n x columns\) array; got shape \(3,\)"),
        (np.ones((3, 2)), np.zeros((3, 3)), np.ones((3, 1)), r"offsets \(3, 3\)"),
        (np.ones((3, 2)), np.zeros((3, 2)), np.ones((4, 1)), r"covariates \(4, 1\)"),
        (np.array([[1.0, np.nan], [0, 1]]), np.zeros((2, 2)), np.ones((2, 1)), "counts must be finite"),
        (np.array([[1.0, -1], [0, 1]]), np.zeros((2, 2)), np.ones((2, 1)), r"element \[0, 1\] is -1.0"),
        (np.array([[1.0, 0.5], [0, 1]]), np.zeros((2, 2)), np.ones((2, 1)), "whole numbers"),
        (np.ones((2, 2)), np.array([[0.0, np.inf], [0, 0]]), np.ones((2, 1)), "offsets must be finite"),
        (np.ones((3, 2)), np.zeros((3, 2)), np.ones((3, 2)), "full column rank"),
    ],
)
def test_validate(counts, offsets, covariates, message):
    with pytest.raises(DataError, match=message):
        validate(counts, offsets, covariates)


HUGE_CELL = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (2 * 2**30, 2 * 2**30))
from core.data import csv_counts, oaks_file
from core.data.counts import DataError
try:
    csv_counts.read_csv(sys.argv[1])
except DataError as exc:
    print(exc)
"""


def test_a_huge_bad_cell_is_diagnosed_in_bounded_memory(tmp_path):
    """The bad cell is found and quoted without copying every cell to the width of the widest
    (NumPy's fixed-width strings made one 200,000-character cell cost 14 GB)."""
    path = tmp_path / "huge.csv"
    path.write_text("a,b\n" + "1,2\n" * 3000 + "1," + "x" * 200_000 + "\n")
    done = subprocess.run([sys.executable, "-c", HUGE_CELL, str(path)], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-1000:]
    assert "non-numeric cell" in done.stdout and "(200,000 characters)" in done.stdout
