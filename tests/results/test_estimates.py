"""What a fit estimates, for the person who brought the counts: B and Sigma at the final
point, named by the data's columns, written as CSV, carried to the caller and never stored."""

import io

import numpy as np
import pandas as pd
import pytest

from core.data import csv_counts, datasets
from core.results import estimates
from core.results.result import Measurement
from core.run import certified, direct


def test_a_fit_estimates_the_b_and_sigma_that_made_the_data():
    # 3,000 draws of a known PLN: the fit's closed forms at its optimum are near the truth
    # (a variational fit shrinks Sigma's off-diagonal a little).
    counts = datasets.simulate(3000, 5, 2, 3)
    fit = direct.fit(counts, "preconditioned_lbfgs", "log_rates_sd", "float64", 500, tol=1e-9)
    # As a run makes them: from the float64 check of its final point.
    measured = certified.certified(Measurement(np.zeros(1), [], (3000, 5, 2), 0.0, 0.0, "cpu", {}, "x", 0.0, "x",
                                               final_latent=(fit.latent_mean, fit.latent_sd)), counts)
    found = measured.estimates
    assert found.covariate_names == ("(intercept)", "x2") and found.column_names == ("y1", "y2", "y3", "y4", "y5")
    np.testing.assert_allclose(found.coef, counts.true_coef, atol=0.06)
    np.testing.assert_allclose(np.diag(found.covariance), np.diag(counts.true_covariance), rtol=0.1)
    np.testing.assert_allclose(found.covariance, counts.true_covariance, atol=0.08)
    np.testing.assert_array_equal(found.covariance, found.covariance.T)


def test_the_files_read_back_as_the_same_numbers_under_the_same_names():
    rng = np.random.default_rng(1)
    made = estimates.Estimates(rng.normal(size=(2, 3)), rng.normal(size=(3, 3)), ("(intercept)", 'site "b", east'),
                               ("a", "b,c", "d"), notes=("site: 2 levels, 'a' the reference",),
                               warnings=("t.csv: dropped 1 all-zero column (column 4 ('e'))",))
    files = made.files("Run 7: a test fit.")
    assert set(files) == {"README.txt", "coefficients.csv", "covariance.csv"}
    readme = files["README.txt"]
    assert readme.startswith("Run 7: a test fit.\n") and "'a' the reference" in readme and "log rate" in readme
    assert "Before reading them:\n  t.csv: dropped 1 all-zero column (column 4 ('e'))" in readme
    coef = pd.read_csv(io.StringIO(files["coefficients.csv"]), index_col=0)
    assert list(coef.index) == ["(intercept)", 'site "b", east'] and list(coef.columns) == ["a", "b,c", "d"]
    np.testing.assert_array_equal(coef.to_numpy(), made.coef)  # every digit: repr of a float64
    sigma = pd.read_csv(io.StringIO(files["covariance.csv"]), index_col=0)
    assert list(sigma.index) == list(sigma.columns) == ["a", "b,c", "d"]
    np.testing.assert_array_equal(sigma.to_numpy(), made.covariance)


def test_coefficients_with_no_finite_value_are_named_every_one():
    names = tuple(f"taxon_{j}" for j in range(60))
    covariates = ("(intercept)", "site[B]", "site[C]", "depth")
    found = estimates.of(np.zeros((4, 60)), np.eye(60), covariates, names,
                         unbounded=(("site", "B", tuple(range(0, 60, 2))), ("site", "A", (1,))))
    readme = found.files()["README.txt"]
    assert "site 'B' (site[B]): " + ", ".join(names[0::2]) in readme  # all 30, where a warning names four
    # A level's own coefficient; the reference level's (A, which has none): the constant and the factor's.
    assert "site 'A' ((intercept), site[B], site[C]): taxon_1" in readme
    assert found.without_value() == {**{name: ["site[B]"] for name in names[0::2]},
                                     "taxon_1": ["(intercept)", "site[B]", "site[C]"]}


def test_coefficients_that_covariates_separate_are_named_with_the_levels_ones():
    names = ("a", "b", "c")
    found = estimates.of(np.zeros((3, 3)), np.eye(3), ("(intercept)", "site[B]", "depth"), names,
                         unbounded=(("site", "B", (0,)),), separated=((("(intercept)", "depth"), (0, 2)),))
    readme = found.files()["README.txt"]
    assert "site 'B' (site[B]): a" in readme and "  (intercept), depth: a, c" in readme
    assert found.without_value() == {"a": ["(intercept)", "site[B]", "depth"], "c": ["(intercept)", "depth"]}


def test_without_a_constant_the_readme_speaks_of_no_reference_level():
    # ~ 0 + tree: a coefficient per level, none against a reference, and no (intercept).
    names = ("(intercept)",), ("tree[a]", "tree[b]")
    with_constant, without = (estimates.Estimates(np.zeros((len(n), 2)), np.eye(2), n, ("y1", "y2")).files()
                              ["README.txt"] for n in names)
    assert "reference level" in with_constant and "(intercept) is the log rate" in with_constant
    assert "reference" not in without and "(intercept)" not in without and "has its own" in without


def test_a_name_a_spreadsheet_would_run_as_a_formula_is_written_as_text():
    made = estimates.Estimates(np.ones((1, 3)), np.eye(3), ("(intercept)",), ("=HYPERLINK(\"x\")", "@a", "b"))
    files = made.files()
    coef = pd.read_csv(io.StringIO(files["coefficients.csv"]), index_col=0)
    assert list(coef.columns) == ["'=HYPERLINK(\"x\")", "'@a", "b"]
    sigma = pd.read_csv(io.StringIO(files["covariance.csv"]), index_col=0)
    assert list(sigma.index) == list(sigma.columns)
    assert not any(line.startswith(("=", "@")) for line in files["covariance.csv"].splitlines())
    assert "behind a single quote" in files["README.txt"]
    assert "behind a single quote" not in estimates.Estimates(np.ones((1, 1)), np.eye(1), ("(intercept)",),
                                                              ("b",)).files()["README.txt"]


@pytest.mark.parametrize("label,name", [
    ("csv counts.csv ~ 1 + group", "plnlab_estimates_counts_group.zip"),
    ("csv counts.csv + cov.csv", "plnlab_estimates_counts_cov.zip"),
    ("csv counts.csv, offsets sizes.csv ~ 1 + site", "plnlab_estimates_counts_site.zip"),
    ("oaks x1 ~ 1 + tree", "plnlab_estimates_oaks_x1_tree.zip"),
    ("csv My Data.TSV ~ 0 + site + depth", "plnlab_estimates_My_Data_site_depth.zip"),
    ("csv counts.csv #3f2a1c ~ 1 + group over samples.csv", "plnlab_estimates_counts_group.zip"),
    ("csv hand over.csv #3f2a1c + cov.csv", "plnlab_estimates_hand_over_cov.zip"),
    ("csv c.csv #3f2a1c, offsets o.csv ~ 1 + site over s.csv", "plnlab_estimates_c_site.zip"),
])
def test_the_download_is_named_by_the_files_and_the_formulas_terms(label, name):
    assert estimates.archive_name(label) == name


def test_each_runs_download_has_a_name_of_its_own():
    label = "csv counts.csv #3f2a1c ~ 1 + group over samples.csv"
    assert estimates.archive_name(label, 50) == "plnlab_estimates_counts_group_run50.zip"
    assert estimates.archive_name(label, 50) != estimates.archive_name(label, 51)


def test_past_the_cap_on_columns_b_travels_alone(monkeypatch):
    monkeypatch.setattr(estimates, "MAX_COVARIANCE_COLUMNS", 2)
    found = estimates.of(np.zeros((1, 3)), np.eye(3), ("(intercept)",), ("a", "b", "c"))
    assert found.covariance is None and found.coef.shape == (1, 3)
    assert set(found.files()) == {"README.txt", "coefficients.csv"}
    assert "Sigma is not written: it is kept for at most 2 columns" in found.files()["README.txt"]


def test_the_archive_unpacks_readable_by_all():
    import zipfile

    made = estimates.Estimates(np.ones((1, 2)), np.eye(2), ("(intercept)",), ("a", "b"))
    with zipfile.ZipFile(io.BytesIO(made.archive("Run 1."))) as archive:
        assert sorted(archive.namelist()) == ["README.txt", "coefficients.csv", "covariance.csv"]
        assert all((entry.external_attr >> 16) & 0o777 == 0o644 for entry in archive.infolist())
        assert archive.read("README.txt").decode().startswith("Run 1.")


@pytest.mark.parametrize("text, header, names", [
    ("a,b,zero,c\n1,2,0,3\n4,5,0,6\n", "auto", ("a", "b", "c")),  # the all-zero column dropped, named as read
    ("1,2,0,3\n4,5,0,6\n", "no", ("column 1", "column 2", "column 4")),  # by position in the file
    (",a,b\nr1,1,2\nr2,3,4\n", "auto", ("a", "b")),  # a column of row names (R's write.csv) is not counts
])
def test_a_csv_names_its_count_columns_as_the_file_does(text, header, names):
    counts = csv_counts.read_csv_bytes(text.encode(), None, "t.csv", header=header)
    assert counts.column_labels() == names
