"""Samples matched by name across counts, offsets and covariates: files written from R name
their rows, and two files of one study need not list the samples in one order."""

import dataclasses

import numpy as np
import pytest

from core.data import covariates, csv_counts, datasets, samples
from core.data.counts import DataError
from core.spec import DatasetSpec


def test_rows_in_another_order_are_put_in_the_counts_order():
    rows, said = samples.order(["b", "c", "a"], ["a", "b", "c"], "x.csv", "counts.csv")
    assert list(rows) == [2, 0, 1]
    assert said == ("x.csv: rows matched to counts.csv's samples by their names (the file has them in another "
                    "order)",)
    assert samples.order(["a", "b"], ["a", "b"], "x.csv", "counts.csv") == (None, ())
    assert samples.order(["a", "b"], (), "x.csv", "counts.csv") == (None, ())


def test_rows_that_share_no_name_are_taken_by_position_and_said():
    rows, said = samples.order(["1", "2"], ["a", "b"], "x.csv", "counts.csv")
    assert rows is None and "by position (their row names differ)" in said[0]


@pytest.mark.parametrize("names,needle", [
    (["a", "b", "z"], "1 of its row names is no sample of counts.csv \\('z'\\); 1 sample of counts.csv has no row "
                      "\\('c'\\)"),
    (["a", "b", "b"], "1 sample of counts.csv has no row \\('c'\\); row names given twice \\('b'\\)"),
    (["a", "b"], "1 sample of counts.csv has no row \\('c'\\), where other row names agree"),
])
def test_rows_whose_names_partly_differ_are_refused(names, needle):
    with pytest.raises(DataError, match=needle):
        samples.order(names, ["a", "b", "c"], "x.csv", "counts.csv")


def _oaks_files(order: np.ndarray) -> tuple[bytes, bytes, bytes, np.ndarray]:
    """oaks' counts (rows named S1, S2, ... as R's write.csv writes them), and its offsets and
    samples' table with their rows in `order`."""
    oaks = datasets.load(DatasetSpec(kind="oaks"))
    table = covariates.oaks_table()
    names = [f"S{i + 1}" for i in range(oaks.n)]
    header = '"",' + ",".join(f'"t{j}"' for j in range(oaks.p)) + "\n"
    counts = header + "".join(f'"{names[i]}",' + ",".join(str(int(v)) for v in oaks.counts[i]) + "\n"
                              for i in range(oaks.n))
    offsets = header + "".join(f'"{names[i]}",' + ",".join(repr(float(v)) for v in oaks.offsets[i]) + "\n"
                               for i in order)
    samples_table = '"","tree","dist2ground"\n' + "".join(
        f'"{names[i]}","{table["tree"][i]}",{float(table["dist2ground"][i])!r}\n' for i in order)
    return counts.encode(), offsets.encode(), samples_table.encode(), oaks.offsets


def test_offsets_and_covariates_in_another_order_are_matched_to_the_counts_by_row_name():
    shuffled = np.random.default_rng(1).permutation(116)
    counts, offsets, table, expected_offsets = _oaks_files(shuffled)
    data = csv_counts.read_csv_bytes(counts, offsets, "counts.csv", "offsets.csv")
    # Read by position, each sample's counts sat beside another sample's offsets.
    np.testing.assert_array_equal(data.offsets, expected_offsets)
    assert "offsets.csv: rows matched to counts.csv's samples by their names" in " ".join(data.notes)
    fitted = datasets.with_covariates(data, table, "samples.csv")
    in_order = datasets.load(DatasetSpec(kind="oaks", formula="~ 1 + tree + dist2ground"))
    np.testing.assert_array_equal(fitted.covariates, in_order.covariates)
    assert fitted.covariate_names == in_order.covariate_names  # the row names are no covariate
    assert any(note.startswith("samples.csv: rows matched to counts.csv's samples") for note in fitted.notes)


def test_r_row_names_are_no_covariate_numbered_or_named():
    oaks = datasets.load(DatasetSpec(kind="oaks"))
    tree = covariates.oaks_table()["tree"]
    for name in (lambda i: str(i + 1), lambda i: f"leaf_{i + 1}"):
        # write.csv's header (an empty first cell) and write.table's (a cell short).
        for header in ('"","tree"\n', '"tree"\n'):
            text = header + "".join(f'"{name(i)}","{tree[i]}"\n' for i in range(oaks.n))
            design = covariates.read(text.encode(), oaks.n, "samples.csv")
            assert design.columns == ("(intercept)", "tree[resistant]", "tree[susceptible]"), (header, design.columns)
            assert "read as the samples' names" in design.notes[0]
            # Not matched (the counts name no rows): said as a warning, the order unchecked.
            said = f"samples.csv names its samples ({name(0)!r}, {name(1)!r}, ...), but the counts have no row names"
            assert said in design.warnings[0]


def test_a_text_column_with_a_value_per_row_is_the_samples_names_never_a_covariate():
    # In file order, shuffled: the message's examples are the file's first rows.
    names = [f"s{(7 * i) % 12}" for i in range(12)]
    text = "sample,depth\n" + "".join(f"{names[i]},{i % 3}\n" for i in range(12))
    for formula in (None, "~ 1 + depth"):
        design = covariates.read(text.encode(), 12, "samples.csv", formula=formula)
        assert design.columns == ("(intercept)", "depth")
        # The counts name no rows, so it cannot match them: a warning, where a formula once hid it.
        assert design.warnings[0].startswith("samples.csv names its samples ('s0', 's7', ...), but the counts "
                                             "have no row names: the rows are taken in the counts' order")
    with pytest.raises(DataError, match="column 'sample' has a different value in every row \\('s0', 's7'"):
        covariates.design({"sample": names}, 12, label="samples.csv")


def test_a_named_column_of_the_counts_row_names_matches_the_rows():
    # "sample" beside tree, in another order: paired by position, each count row was fitted
    # with another sample's tree, "converged" 517 ELBO units below, with no word.
    shuffled = np.random.default_rng(2).permutation(116)
    counts, offsets, _, _ = _oaks_files(np.arange(116))
    tree = covariates.oaks_table()["tree"]
    table = "sample,tree\n" + "".join(f"S{i + 1},{tree[i]}\n" for i in shuffled)
    data = datasets.with_covariates(csv_counts.read_csv_bytes(counts, offsets, "counts.csv", "offsets.csv"),
                                    table.encode(), "samples.csv", formula="~ 1 + tree")
    in_order = datasets.load(DatasetSpec(kind="oaks", formula="~ 1 + tree"))
    np.testing.assert_array_equal(data.covariates, in_order.covariates)
    assert any(note.startswith("samples.csv: column 'sample' read as the samples' names, as counts.csv names its "
                               "rows") for note in data.notes)
    # A stray name among them is refused, not matched by position.
    stray = table.replace("S7,", "S7b,")
    with pytest.raises(DataError, match="1 of its row names is no sample of counts.csv \\('S7b'\\)"):
        datasets.with_covariates(csv_counts.read_csv_bytes(counts, offsets, "counts.csv", "offsets.csv"),
                                 stray.encode(), "samples.csv", formula="~ 1 + tree")


def test_counts_written_a_row_per_taxon_are_said_to_be_transposed():
    # An OTU table (a row per taxon) beside a samples' table: the row counts disagree, and why is said.
    oaks = datasets.load(DatasetSpec(kind="oaks"))
    transposed = dataclasses.replace(oaks, counts=oaks.counts[:, :40].T, offsets=oaks.offsets[:, :40].T,
                                     covariates=np.ones((40, 1)))
    table = "tree\n" + "".join(f"{tree}\n" for tree in covariates.oaks_table()["tree"])
    with pytest.raises(DataError, match="looks written a row per variable .* transpose the counts"):
        datasets.with_covariates(transposed, table.encode(), "samples.csv")


def test_a_column_of_numbers_is_no_sample_name_whatever_it_shares_with_the_row_names():
    # Counts with rows numbered 1..12, a depth of 1..12 in another order: a covariate, fitted as such.
    rows = "".join(f'"{i + 1}",{i % 3},{(i * 7) % 4 + 1}\n' for i in range(12))
    data = csv_counts.read_csv_bytes(f'"",a,b\n{rows}'.encode(), None, "counts.csv")
    assert data.row_names == tuple(str(i + 1) for i in range(12))
    depth = [12 - i for i in range(12)]
    design = covariates.read(("depth\n" + "".join(f"{v}\n" for v in depth)).encode(), 12, "samples.csv",
                             count_rows=data.row_names)
    assert design.columns == ("(intercept)", "depth") and design.matrix[:, 1].tolist() == depth


def test_a_covariates_file_named_as_the_counts_columns_is_said_to_be_no_samples_table():
    # Counts given as covariates, a row per taxon: the counts are right, the covariates are not.
    oaks = datasets.load(DatasetSpec(kind="oaks"))
    taxa = [f"y{j + 1}" for j in range(oaks.p)]
    table = '"","S1","S2"\n' + "".join(f'"{taxon}",1,2\n' for taxon in taxa)
    with pytest.raises(DataError, match="its rows are named as the columns of the counts .* it is no table of the "
                                        "samples' covariates"):
        covariates.read(table.encode(), oaks.n, "samples.csv", count_columns=taxa)
