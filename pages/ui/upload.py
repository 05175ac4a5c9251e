"""The sidebar's CSV upload: its widgets, and validation of the uploaded bytes.

Counts, optional log-offsets, and optional covariates (a table with a header line: text
columns one-hot coded, a constant column added; a formula such as "~ 1 + group" picks
columns, as pyPLNmodels' `Pln.from_formula` does: `core.data.covariates`).

A parsed upload lives in session state as "sb_csv" (None after a failed validation, with
the message in "sb_csv_error"); `current_upload()` reads it from there. How the file was
read (separator, header line and why) and changed (all-zero columns dropped) is shown
under the uploaders, and so is a float32 refusal, before anyone presses Run.
"""

from __future__ import annotations

import dataclasses

import streamlit as st

from core.data import csv_counts, datasets
from core.data.counts import CountData, DataError, content_hash
from core.fit import precision_guard
from core.spec import HEADER_CHOICES
from pages.ui.text import md, public

HEADER_LABELS = {"auto": "auto", "yes": "yes: column names", "no": "no: data"}
# Tab-separated tables are often saved as .tsv or .txt.
TABLE_TYPES = ["csv", "tsv", "txt"]


@dataclasses.dataclass(frozen=True)
class Upload:
    """A validated counts upload.

    Attributes:
        data: the counts (and log-offsets) as parsed.
        content_hash: of the uploaded bytes, for `DatasetSpec.content_hash`.
        name: the counts file's name; offsets_name: the offsets file's, or "".
        header: the header choice the files were read with (`core.spec.HEADER_CHOICES`).
        covariates_name: the covariates file's name, or "" (an intercept alone).
        formula: which of its columns ("" for all of them).
    """

    data: CountData
    content_hash: str
    name: str
    offsets_name: str = ""
    header: str = "auto"
    covariates_name: str = ""
    formula: str = ""


def current_upload() -> Upload | None:
    """The session's validated upload, or None."""
    return st.session_state.get("sb_csv")


def largest_upload_mb() -> int:
    """The uploaders' limit: the CSV cap (`csv_counts.max_csv_bytes`) in Streamlit's unit,
    MiB, rounded down, so that the browser refuses a file too large before sending it and
    the server never holds more than the cap for one; the server's own limit
    (`server.maxUploadSize`, 47 MiB, under the default 50 MB cap) when the cap's setting
    is bad (a run then says why)."""
    try:
        return max(1, csv_counts.max_csv_bytes() // 2**20)
    except DataError:
        return 47


def csv_inputs() -> None:
    """The counts and log-offsets uploaders, and what became of the upload."""
    largest = largest_upload_mb()
    st.file_uploader("Counts (CSV, one row per sample)", type=TABLE_TYPES, key="sb_upload_counts",
                     on_change=_parse_upload, max_upload_size=largest,
                     help="whole numbers >= 0, cells separated by commas, semicolons or tabs; a header line of "
                          "names and a column of row names are allowed")
    st.file_uploader("Log-offsets (optional CSV, same shape)", type=TABLE_TYPES, key="sb_upload_offsets",
                     on_change=_parse_upload, max_upload_size=largest)
    st.radio("Line 1 names the columns", HEADER_CHOICES, key="sb_csv_header", persist_state="session",
             horizontal=True, format_func=HEADER_LABELS.get, on_change=_parse_upload,
             help="auto: words make line 1 a header, numbers make it data (what was decided, and why, is shown "
                  "below); choose yes when the column names are numbers, such as taxon ids")
    st.file_uploader("Covariates (optional CSV with a header line)", type=TABLE_TYPES, key="sb_upload_covariates",
                     on_change=_parse_upload, max_upload_size=largest,
                     help="one row per sample, a column per covariate; text columns are one-hot coded (the first "
                          "level is the reference) and a constant column is added")
    st.text_input("Formula (optional)", key="sb_csv_formula", on_change=_parse_upload, placeholder="~ 1 + group",
                  max_chars=200, help="which covariate columns, as pyPLNmodels' formulas: '~ 1 + group + dose'; "
                                      "'~ 0 + ...' drops the constant; empty: every column")
    counts_file = st.session_state.get("sb_upload_counts")
    if counts_file is not None and _upload_ids() != st.session_state.get("sb_csv_ids"):
        _parse_upload()
    if st.session_state.get("sb_csv_error"):
        st.error(public(st.session_state["sb_csv_error"]), icon=":material/error:")
    elif st.session_state.get("sb_csv"):
        _describe(st.session_state["sb_csv"])
    else:
        st.info("Upload a counts CSV to fit your own data.", icon=":material/upload_file:")


def _describe(upload: Upload) -> None:
    """What is fitted: its size, how the files were read and changed, and what float32 cannot do."""
    st.caption(f"Using **{md(upload.name)}**: n = {upload.data.n:,} rows, p = {upload.data.p:,} "
               f"columns{', with log-offsets' if upload.offsets_name else ''}"
               f"{f', d = {upload.data.d} covariates' if upload.covariates_name else ''}.")
    for note in upload.data.notes:
        st.caption(md(note))
    for warning in upload.data.warnings:
        st.warning(md(warning), icon=":material/warning:")
    if st.session_state.get("sb_precision") == "float32":
        check = precision_guard.check_float32(upload.data.counts)
        if check.refusal or check.warning:
            st.warning(md(check.refusal or check.warning), icon=":material/warning:")


def load_upload(counts_bytes: bytes, counts_name: str, offsets_bytes: bytes | None = None,
                offsets_name: str = "", header: str = "auto", covariates_bytes: bytes | None = None,
                covariates_name: str = "", formula: str = "") -> Upload:
    """Validates uploaded CSV bytes, read with the `header` choice, and the covariates'
    table with `formula` ("" for every column).

    Raises:
        DataError: saying which file, line and column is wrong and what is accepted.
    """
    formula = " ".join(formula.split())
    if formula and covariates_bytes is None:
        raise DataError("a formula picks columns of a covariates file: upload one, or clear the formula")
    counts = csv_counts.read_csv_bytes(counts_bytes, offsets_bytes, name=counts_name,
                                       offsets_name=offsets_name or "offsets", header=header)
    if covariates_bytes is not None:
        counts = datasets.with_covariates(counts, covariates_bytes, covariates_name or "covariates", formula)
    sources = [counts_bytes] + ([offsets_bytes] if offsets_bytes is not None else [])
    sources += [covariates_bytes] if covariates_bytes is not None else []
    return Upload(counts, content_hash(*sources), counts_name, offsets_name if offsets_bytes is not None else "",
                  header, covariates_name if covariates_bytes is not None else "", formula)


def _upload_ids() -> tuple:
    files = [st.session_state.get(k) for k in ("sb_upload_counts", "sb_upload_offsets", "sb_upload_covariates")]
    return (*(None if f is None else f.file_id for f in files), st.session_state.get("sb_csv_header", "auto"),
            st.session_state.get("sb_csv_formula", ""))


def _parse_upload() -> None:
    counts_file = st.session_state.get("sb_upload_counts")
    offsets_file = st.session_state.get("sb_upload_offsets")
    covariates_file = st.session_state.get("sb_upload_covariates")
    st.session_state["sb_csv_ids"] = _upload_ids()
    st.session_state["sb_csv_error"] = None
    if counts_file is None:  # the user removed the file
        st.session_state["sb_csv"] = None
        return
    try:
        st.session_state["sb_csv"] = load_upload(
            counts_file.getvalue(), counts_file.name,
            offsets_file.getvalue() if offsets_file is not None else None,
            offsets_file.name if offsets_file is not None else "",
            st.session_state.get("sb_csv_header", "auto"),
            covariates_file.getvalue() if covariates_file is not None else None,
            covariates_file.name if covariates_file is not None else "",
            st.session_state.get("sb_csv_formula", "") or "")
    except DataError as exc:
        st.session_state["sb_csv"] = None  # never fit a file that failed validation
        st.session_state["sb_csv_error"] = str(exc)
