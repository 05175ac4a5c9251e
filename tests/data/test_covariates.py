"""Covariates as users have them: a table or a formula over one, coded as pyPLNmodels codes
them, and bad covariates refused in one line that names the column."""

import dataclasses

import numpy as np
import pytest
from specs import tutorial_spec

from core.data import covariates, datasets, oaks_file
from core.data.counts import DataError
from core.spec import DatasetSpec, SpecError


def test_the_oaks_samples_table_is_pyplnmodels():
    shipped, theirs = oaks_file.samples(), oaks_file.samples_from_pyplnmodels()
    assert list(shipped) == ["tree", "dist2ground", "orientation"]
    for name in shipped:
        np.testing.assert_array_equal(shipped[name], theirs[name])


def test_oaks_with_tree_is_pyplnmodels_design():
    # Pln.from_formula("endog ~ 1 + tree", data) codes tree with its first level as the reference.
    design = covariates.oaks_design("endog ~ 1 + tree")
    tree = oaks_file.samples()["tree"]
    assert design.columns == ("(intercept)", "tree[resistant]", "tree[susceptible]")
    np.testing.assert_array_equal(design.matrix[:, 0], 1.0)
    np.testing.assert_array_equal(design.matrix[:, 1], tree == "resistant")
    np.testing.assert_array_equal(design.matrix[:, 2], tree == "susceptible")
    assert "'intermediate' the reference" in design.notes[0]


def test_a_formula_without_the_constant_codes_every_level_and_takes_numbers_as_they_are():
    design = covariates.oaks_design("~ 0 + tree + dist2ground", replicate=2)
    assert design.columns == ("tree[intermediate]", "tree[resistant]", "tree[susceptible]", "dist2ground")
    assert design.matrix.shape == (232, 4)
    np.testing.assert_array_equal(design.matrix[:, :3].sum(axis=1), 1.0)
    np.testing.assert_array_equal(design.matrix[::2, 3], oaks_file.samples()["dist2ground"])


def test_the_built_in_oaks_problem_with_tree_has_its_design_and_label():
    spec = DatasetSpec(kind="oaks", formula="~  1 + tree ")
    assert spec.formula == "~ 1 + tree" and spec.label == "oaks x1 ~ 1 + tree"
    assert spec.shape is None  # d is known once the table is coded
    data = datasets.load(spec)
    assert (data.n, data.p, data.d) == (116, 114, 3)
    assert any("tree[resistant]" in note for note in data.notes)
    # Stored runs keep their keys: a spec without covariates writes none of the new fields.
    written = tutorial_spec(dataset=DatasetSpec(kind="oaks")).to_dict()["dataset"]
    assert not {"formula", "covariates_path", "intercept"} & set(written)
    assert tutorial_spec(dataset=spec).to_dict()["dataset"]["formula"] == "~ 1 + tree"


def test_a_covariates_file_is_coded_and_checked(tmp_path):
    table = tmp_path / "samples.csv"
    table.write_text("group;dose\nA;1.5\nB;2\nA;0.5\nC;1\n")
    design = covariates.read(table.read_bytes(), 4, "samples.csv")
    assert design.columns == ("(intercept)", "group[B]", "group[C]", "dose")
    np.testing.assert_allclose(design.matrix[:, 3], [1.5, 2, 0.5, 1])
    picked = covariates.read(table.read_bytes(), 4, "samples.csv", formula="~ 1 + dose")
    assert picked.columns == ("(intercept)", "dose")
    bare = covariates.read(table.read_bytes(), 4, "samples.csv", intercept=False)
    assert bare.columns == ("group[A]", "group[B]", "group[C]", "dose")


@pytest.mark.parametrize("text, rows, formula, says", [
    ("g,x\na,1\nb,2\n", 3, None, "column 'g' has 2 rows; the counts have 3"),
    # Where, as an editor numbers the file's lines (the counts' messages do too), a blank line skipped.
    ("g,x\na,1\nb,\nc,3\n", 3, None, "column 'x' has a missing or infinite value on line 3"),
    ("g,x\n\na,1\n,2\nc,3\n", 3, None, "column 'g' has a missing value on line 4"),
    ("g,x\na,1\n\"b\nc\",nan\nc,3\n", 3, None, "column 'x' has a missing or infinite value at row 2"),
    (",g,x\ns1,a,1\ns2,b,inf\ns3,c,3\n", 3, None, "value on line 3 (sample 's2')"),
    ("", 3, None, "t.csv is empty; a table with a header line naming its columns and a row per sample is needed"),
    (" \n\n", 3, None, "t.csv is empty"),
    ("g,x\na,1\na,2\na,3\n", 3, None, "column 'g' has one level, 'a'"),
    ("x,y\n1,2\n2,4\n3,6\n", 3, None, "column 'y' is a linear combination of the columns before it"),
    ("x,k\n1,5\n2,5\n3,5\n", 3, None, "column 'k' is constant, and the constant column is already there"),
    ("x\n1\n2\n3\n", 3, "~ 1 + height", "formula names 'height', not a column of t.csv; its columns: x"),
    ("x\n1\n2\n3\n", 3, "~ 1 + x:z", "term 'x:z' is not taken here"),
    ("x\n1\n2\n3\n", 3, "~ log(x)", "term 'log(x)' is not taken here"),
    ("x\n1\n2\n3\n", 3, "~ 1 + x +", "has a '+' or '-' with no term after it"),
    ("x\n1\n2\n3\n", 3, "~ 1 + + x", "has a '+' or '-' with no term after it"),
])
def test_bad_covariates_get_one_line_that_names_the_column(text, rows, formula, says):
    with pytest.raises(DataError) as caught:
        covariates.read(text.encode(), rows, "t.csv", formula=formula)
    message = str(caught.value)
    assert says in message and "\n" not in message


def test_a_bad_cell_of_rows_matched_by_name_is_found_on_its_own_line():
    # The rows are put in the counts' order before they are read; the message says the file's.
    with pytest.raises(DataError, match=r"value on line 4 \(sample 's2'\)$"):
        covariates.read(b",g,x\ns3,c,3\ns1,a,1\ns2,b,inf\n", 3, "t.csv", count_rows=("s1", "s2", "s3"))


def test_nearly_collinear_covariates_are_fitted_with_a_warning_that_names_them():
    # Under the rank test's 1e-9 but a thousand times a lone column's variance, or more: a
    # column rounded from twice another (the try-out's temp2) was taken without a word.
    rows = 12
    temp = np.arange(rows) * 0.5
    text = "site,temp,temp2,other\n" + "".join(
        f"{'abc'[i % 3]},{temp[i]},{round(2 * temp[i] + 1e-3 * np.sin(i), 4)},{np.cos(i)}\n" for i in range(rows))
    design = covariates.read(text.encode(), rows, "t.csv")
    (warning,) = design.warnings
    assert warning.startswith("t.csv: covariate columns 'temp")
    assert "'temp'" in warning and "'temp2'" in warning and "'other'" not in warning and "site" not in warning
    assert "\n" not in warning
    # Carried with the data to the run's warnings.
    counts = datasets.with_covariates(_rows_of_oaks(rows), text.encode(), "t.csv")
    assert warning in counts.warnings
    # Covariates that are merely correlated say nothing, nor do oaks' own.
    assert covariates.read(("x,y\n" + "".join(f"{i},{i + np.sin(i)}\n" for i in range(rows))).encode(), rows,
                           "t.csv").warnings == ()
    assert covariates.oaks_design("~ 1 + tree + orientation + dist2ground").warnings == ()


def _rows_of_oaks(rows: int):
    oaks = datasets.load_oaks(1)
    return dataclasses.replace(oaks, counts=oaks.counts[:rows], offsets=oaks.offsets[:rows],
                               covariates=oaks.covariates[:rows])


def test_a_spec_refuses_covariates_where_they_do_not_apply():
    with pytest.raises(SpecError, match="simulated data have d covariates"):
        DatasetSpec(kind="simulated", n=10, p=3, formula="~ 1 + x")
    with pytest.raises(SpecError, match="needs a covariates file"):
        DatasetSpec(kind="csv", counts_path="c.csv", formula="~ 1 + x")
    with pytest.raises(SpecError, match="applies to csv data"):
        DatasetSpec(kind="oaks", covariates_path="x.csv")
    with pytest.raises(SpecError, match="one line"):
        DatasetSpec(kind="oaks", formula="~ 1 +\n tree")


def test_a_csv_spec_with_covariates_loads_them_and_hashes_their_bytes(tmp_path):
    from core.data.counts import content_hash

    counts, table = tmp_path / "c.csv", tmp_path / "s.csv"
    rng = np.random.default_rng(0)
    np.savetxt(counts, rng.poisson(4, (30, 5)), delimiter=",", fmt="%d")
    table.write_text("g\n" + "\n".join(rng.choice(["u", "v"], 30)) + "\n")
    spec = DatasetSpec(kind="csv", counts_path=str(counts), covariates_path=str(table),
                       content_hash=content_hash(counts, table))
    data = datasets.load(spec)
    assert data.d == 2 and spec.label == f"csv c.csv #{spec.data_tag} + s.csv" and len(spec.data_tag) == 6
    table.write_text("g\n" + "\n".join(["u"] * 15 + ["v"] * 15) + "\n")
    with pytest.raises(DataError, match="changed since the run was set up"):
        datasets.load(spec)


def test_a_csv_label_names_the_covariates_file_and_tells_files_of_one_name_apart():
    # Pages rank, draw and give one best ELBO to runs of one label: a counts.csv edited and
    # uploaded again was one problem with the first, and a formula hid which table it read.
    first = DatasetSpec(kind="csv", counts_path="a/counts.csv", covariates_path="a/samples.csv",
                        formula="~ 1 + site", content_hash="1" * 64)
    moved = DatasetSpec(kind="csv", counts_path="b/counts.csv", covariates_path="b/samples.csv",
                        formula="~ 1 + site", content_hash="1" * 64)
    edited = DatasetSpec(kind="csv", counts_path="a/counts.csv", covariates_path="a/samples.csv",
                         formula="~ 1 + site", content_hash="2" * 64)
    assert first.label == moved.label == f"csv counts.csv #{first.data_tag} ~ 1 + site over samples.csv"
    assert edited.label != first.label
    # The same bytes read another way are other data.
    assert DatasetSpec(kind="csv", counts_path="c.csv", content_hash="1" * 64, header="no").data_tag != \
        DatasetSpec(kind="csv", counts_path="c.csv", content_hash="1" * 64, header="yes").data_tag
    assert DatasetSpec(kind="oaks").data_tag == "" and DatasetSpec(kind="oaks").label == "oaks x1"


def test_a_formula_has_one_spelling_whatever_names_the_counts():
    # pyPLNmodels' "endog ~ 1 + tree" and "~ 1 + tree" fit one problem: one key, one label.
    named, bare, untilded = (DatasetSpec(kind="oaks", formula=f) for f in ("endog ~ 1 + tree", "~  1 + tree",
                                                                            "1 + tree"))
    assert named == bare == untilded and named.formula == "~ 1 + tree" and named.label == "oaks x1 ~ 1 + tree"


def test_decimal_commas_in_a_semicolon_table_are_numbers_not_levels():
    # As a spreadsheet in many locales saves it: pH was a factor of three levels, '6,5' the reference.
    text = "tree;ph;site\nA;6,5;x\nB;7;y\nA;7,5;x\nB;6,5;y\nA;8,25;y\n"
    design = covariates.read(text.encode(), 5, "t.csv")
    assert design.columns == ("(intercept)", "tree[B]", "ph", "site[y]")
    np.testing.assert_array_equal(design.matrix[:, 2], [6.5, 7, 7.5, 6.5, 8.25])
    # Commas separate cells in a comma table: a level there is a level ("6,5" quoted).
    quoted = covariates.read('g,x\n"6,5",1\n"7,5",2\n"6,5",4\n'.encode(), 3, "t.csv")
    assert quoted.columns == ("(intercept)", "g[7,5]", "x")


def test_a_level_where_some_columns_count_nothing_is_warned_of_by_name():
    # Oaks with ~ 1 + tree: columns with no count under one tree have no finite coefficient there.
    data = datasets.load(DatasetSpec(kind="oaks", formula="~ 1 + tree"))
    (warning,) = data.warnings
    assert warning.startswith("tree: columns with no count above 0 at a level of it "
                              "(at 'intermediate': y70, y104, y109;")
    assert "no finite optimum" in warning and "is no estimate, even where the fit converges" in warning
    assert len(warning) <= 480
    table = data.counts[data.covariates[:, 1] == 1]  # tree 'resistant'
    assert not table[:, 90].any() and table[:, 89].any()  # y91 empty there, y90 not
    # Every such column, by index, for the estimates to mark: the warning names the first few.
    assert data.unbounded[1] == ("tree", "resistant", (90, 95, 98, 103, 106))
    assert sum(len(columns) for _, _, columns in data.unbounded) == 13
    # A numeric covariate is no level; a file's factor is checked as oaks' is.
    assert datasets.load(DatasetSpec(kind="oaks", formula="~ 1 + dist2ground")).warnings == ()
    rows = 12
    counts = datasets.with_covariates(_rows_of_oaks(rows), ("site\n" + "ab" * (rows // 2)).replace("ab", "a\nb\n")
                                      .encode(), "t.csv")
    assert all(warning.startswith("site: columns with no count above 0") for warning in counts.warnings)


def test_covariates_past_the_servers_cap_are_refused_before_any_fit(monkeypatch):
    monkeypatch.setenv("PLNLAB_MAX_COVARIATES", "2")
    with pytest.raises(DataError) as caught:
        datasets.load(DatasetSpec(kind="oaks", formula="~ 1 + tree"))
    assert "3 columns of X" in str(caught.value) and "PLNLAB_MAX_COVARIATES" in str(caught.value)
    # Before the rank, which a factor of many levels fails first.
    rows = "".join(f"s{i},{i % 2}\n" for i in range(3))
    with pytest.raises(DataError, match="4 columns of X"):
        covariates.read(("sample,x\n" + rows).encode(), 3, "t.csv")


def test_a_column_of_numbers_that_code_levels_is_a_factor_in_c():
    # pyPLNmodels' formulas (patsy's) write C(chrom) for chromosomes numbered 1 and 2.
    text = "chrom,depth\n1,0.5\n2,1.5\n1,2.5\n2,0.25\n3,1\n"
    design = covariates.read(text.encode(), 5, "t.csv", formula="~ 1 + C(chrom) + depth")
    assert design.columns == ("(intercept)", "chrom[2]", "chrom[3]", "depth")
    assert "chrom: 3 levels, '1' the reference" in design.notes
    assert covariates.read(text.encode(), 5, "t.csv", formula="~ 1 + chrom").columns == ("(intercept)", "chrom")
    with pytest.raises(DataError, match="C\\(name\\) for a column of numbers"):
        covariates.read(text.encode(), 5, "t.csv", formula="~ 1 + C(chrom, Sum)")
