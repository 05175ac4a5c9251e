"""CSV files as people write them: separators, decimal commas, header lines, row names, zero columns."""

import numpy as np
import pytest

from core.data import csv_counts, csv_layout
from core.data.counts import DataError

COUNTS = np.array([[0, 12, 3], [5, 0, 1], [7, 8, 9]], dtype=float)


def _read(text, header="auto", offsets=None):
    return csv_counts.read_csv_bytes(text.encode(), offsets.encode() if offsets else None, "t.csv",
                                     offsets_name="o.csv", header=header)


@pytest.mark.parametrize("text, separator", [
    ("a,b,c\n0,12,3\n5,0,1\n7,8,9\n", "commas"),
    ("a;b;c\n0;12;3\n5;0;1\n7;8;9\n", "semicolons"),        # spreadsheets in many locales, R's write.csv2
    ("a\tb\tc\n0\t12\t3\n5\t0\t1\n7\t8\t9\n", "tabs"),      # R's write.table(sep = "\t")
])
def test_separators_are_found(text, separator):
    got = _read(text)
    np.testing.assert_array_equal(got.counts, COUNTS)
    if separator != "commas":
        assert f"t.csv: cells separated by {separator}" in got.notes
    assert "t.csv: line 1 read as column names: it holds words (e.g. 'a')" in got.notes


def test_semicolons_with_decimal_commas_in_the_offsets():
    got = _read("a;b;c\n0;12;3\n5;0;1\n7;8;9\n", offsets="a;b;c\n0,5;1;1,25\n0;0;0\n0;0;-2,5\n")
    np.testing.assert_array_equal(got.offsets, [[0.5, 1, 1.25], [0, 0, 0], [0, 0, -2.5]])
    assert "o.csv: cells separated by semicolons, with decimal commas" in got.notes


def test_r_write_table_header_one_cell_short_over_row_names():
    # R's write.table(x, sep = "\t") writes the column names without a corner cell.
    got = _read("1001\t1002\t1003\ns1\t0\t12\t3\ns2\t5\t0\t1\ns3\t7\t8\t9\n")
    np.testing.assert_array_equal(got.counts, COUNTS)
    assert any("one cell fewer than the lines below" in note for note in got.notes)


def test_r_write_csv_numeric_names_quoted_over_row_names():
    # R's write.csv quotes the (numeric) column names and the row names, never the counts.
    text = '"","1001","1002","1003"\n"1",0,12,3\n"2",5,0,1\n"3",7,8,9\n'
    np.testing.assert_array_equal(_read(text).counts, COUNTS)
    # Quoted numbers over unquoted ones, without row names.
    got = _read('"1001","1002","1003"\n0,12,3\n5,0,1\n7,8,9\n')
    np.testing.assert_array_equal(got.counts, COUNTS)
    assert any("quoted like names" in note for note in got.notes)


def test_a_named_first_column_of_text_is_the_rows_names():
    # pandas' reset_index() or a spreadsheet: "sample" over S1, S2, ... (a dead end: "non-numeric cell").
    got = _read("sample,a,b,c\nS1,0,12,3\nS2,5,0,1\nS3,7,8,9\n")
    np.testing.assert_array_equal(got.counts, COUNTS)
    assert got.row_names == ("S1", "S2", "S3") and got.column_names == ("a", "b", "c")
    assert "t.csv: column 1 ('sample') read as the rows' names, not counts" in got.notes
    # A word among the numbers elsewhere is still refused where it is.
    with pytest.raises(DataError, match="line 3, column 3"):
        _read("sample,a,b,c\nS1,0,12,3\nS2,5,x,1\nS3,7,8,9\n")


def test_numeric_header_is_read_as_the_user_says():
    text = "1001,1002,1003\n0,12,3\n5,0,1\n7,8,9\n"
    auto = _read(text)
    # Numbers over numbers: auto cannot tell ids from counts, reads data and says how to change it.
    assert auto.n == 4 and any("choose header: yes" in note for note in auto.notes)
    named = _read(text, header="yes")
    np.testing.assert_array_equal(named.counts, COUNTS)
    assert "t.csv: line 1 read as column names (header: yes)" in named.notes
    plain = _read("0,12,3\n5,0,1\n7,8,9\n", header="no")
    np.testing.assert_array_equal(plain.counts, COUNTS)


def test_header_no_with_words_names_the_cell():
    with pytest.raises(DataError, match=r"non-numeric cell; only numbers are accepted; line 1, column 1 holds 'a'"):
        _read("a,b,c\n0,12,3\n5,0,1\n", header="no")


def test_header_choice_is_checked():
    with pytest.raises(DataError, match="header must be one of auto, yes, no; got 'maybe'"):
        _read("a,b\n1,2\n3,4\n", header="maybe")
    assert csv_layout.HEADER_CHOICES == ("auto", "yes", "no")


def test_a_bad_cell_is_located_whatever_the_separator():
    with pytest.raises(DataError, match=r"line 3, column 2 \('b'\) holds 'x'"):
        _read("a\tb\tc\n0\t12\t3\n5\tx\t1\n")
    with pytest.raises(DataError, match=r"non-integer count; .*line 2, column 3 \('c'\) holds '2.5'"):
        _read("a;b;c\n0;12;2,5\n5;0;1\n")


def test_all_zero_columns_are_dropped_and_named():
    got = _read("a,zero,c,none\n0,0,3,0\n5,0,1,0\n7,0,9,0\n")
    np.testing.assert_array_equal(got.counts, COUNTS[:, [0, 2]])
    assert got.p == 2 and got.offsets.shape == (3, 2)
    (warning,) = got.warnings
    assert warning.startswith("t.csv: dropped 2 all-zero columns (column 2 ('zero'), column 4 ('none')), "
                              "as pyPLNmodels does")
    # The offsets lose the same columns.
    with_offsets = _read("a,zero,c\n0,0,3\n5,0,1\n", offsets="a,zero,c\n1,2,3\n4,5,6\n")
    np.testing.assert_array_equal(with_offsets.offsets, [[1, 3], [4, 6]])
    # Without a header the column is named by its number, as an editor shows it.
    assert _read("1,0,3\n5,0,1\n").warnings[0].startswith("t.csv: dropped 1 all-zero column (column 2),")


def test_all_zero_table_is_refused():
    with pytest.raises(DataError, match="t.csv: every count is 0"):
        _read("a,b\n0,0\n0,0\n")


def test_not_utf8_is_refused_with_what_is_accepted():
    with pytest.raises(DataError, match="not readable as UTF-8 text .* saved as UTF-8, is needed"):
        csv_counts.read_csv_bytes("caf\xe9,b\n1,2\n3,4\n".encode("latin-1"), None, "t.csv")


def test_column_ids_in_increasing_order_are_a_header():
    # Taxa numbered 1000 to 1004: read as data, they were a first sample with counts 1000 to 1004.
    text = "1000,1001,1002,1003,1004\n0,12,3,1,1\n5,0,1,2,2\n7,8,9,3,3\n"
    got = _read(text)
    assert got.n == 3 and got.column_names == ("1000", "1001", "1002", "1003", "1004")
    assert any("whole numbers in increasing order (1000, 1001, ...)" in note for note in got.notes)
    assert _read(text, header="no").n == 4


def test_offsets_are_matched_to_the_counts_by_name_and_refused_as_sizes():
    counts = "a,b,c\n0,12,3\n5,0,1\n7,8,9\n"
    logs = np.log([[2.0, 3, 4], [5, 6, 7], [8, 9, 10]])

    def table(names, order):
        return names + "\n" + "".join(",".join(repr(float(row[j])) for j in order) + "\n" for row in logs)

    # The offsets' columns in another order, named: taken by name.
    got = _read(counts, offsets=table("c,a,b", [2, 0, 1]))
    np.testing.assert_array_equal(got.offsets, logs)
    assert "o.csv: columns matched to t.csv's by their names (the file has them in another order)" in got.notes
    # Named otherwise altogether: by position, said; some names shared and some not: refused.
    assert "o.csv: columns matched to t.csv's by position (their names differ)" in _read(
        counts, offsets=table("x,y,z", [0, 1, 2])).notes
    with pytest.raises(DataError, match="'z' is not a column of t.csv"):
        _read(counts, offsets=table("a,b,z", [0, 1, 2]))
    # Sizes where their logs belong: beyond 50, refused naming the cell; whole numbers, warned of.
    with pytest.raises(DataError) as caught:
        _read(counts, offsets="a,b,c\n1,1,1\n1,73,1\n1,1,1\n")
    assert "an offset beyond ±50" in str(caught.value) and "line 3, column 2 ('b') holds '73'" in str(caught.value)
    sizes = _read(counts, offsets="a,b,c\n2,3,4\n5,6,7\n8,9,10\n")
    assert any("every offset is a whole number, from 2 to 10" in warning for warning in sizes.warnings)
    assert not _read(counts, offsets=table("a,b,c", [0, 1, 2])).warnings
