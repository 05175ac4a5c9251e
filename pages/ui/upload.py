"""The sidebar's CSV upload: its widgets, and validation of the uploaded bytes.

A parsed upload lives in session state as "sb_csv" (None after a failed validation, with
the message in "sb_csv_error"); `current_upload()` reads it from there.
"""

from __future__ import annotations

import dataclasses

import streamlit as st

from core.data import csv_counts
from core.data.counts import CountData, DataError, content_hash
from pages.ui.text import md, public


@dataclasses.dataclass(frozen=True)
class Upload:
    """A validated counts upload.

    Attributes:
        data: the counts (and log-offsets) as parsed.
        content_hash: of the uploaded bytes, for `DatasetSpec.content_hash`.
        name: the counts file's name; offsets_name: the offsets file's, or "".
    """

    data: CountData
    content_hash: str
    name: str
    offsets_name: str = ""


def current_upload() -> Upload | None:
    """The session's validated upload, or None."""
    return st.session_state.get("sb_csv")


def csv_inputs() -> None:
    """The counts and log-offsets uploaders, and what became of the upload."""
    st.file_uploader("Counts (CSV, one row per sample)", type=["csv"], key="sb_upload_counts",
                     on_change=_parse_upload, help="whole numbers >= 0; a header row of names is allowed")
    st.file_uploader("Log-offsets (optional CSV, same shape)", type=["csv"], key="sb_upload_offsets",
                     on_change=_parse_upload)
    counts_file = st.session_state.get("sb_upload_counts")
    if counts_file is not None and _upload_ids() != st.session_state.get("sb_csv_ids"):
        _parse_upload()
    if st.session_state.get("sb_csv_error"):
        st.error(public(st.session_state["sb_csv_error"]), icon=":material/error:")
    elif st.session_state.get("sb_csv"):
        upload = st.session_state["sb_csv"]
        st.caption(f"Using **{md(upload.name)}**: n = {upload.data.n:,} rows, p = {upload.data.p:,} "
                   f"columns{', with log-offsets' if upload.offsets_name else ''}.")
    else:
        st.info("Upload a counts CSV to fit your own data.", icon=":material/upload_file:")


def load_upload(counts_bytes: bytes, counts_name: str, offsets_bytes: bytes | None = None,
                offsets_name: str = "") -> Upload:
    """Validates uploaded CSV bytes.

    Raises:
        DataError: saying which file, line and column is wrong and what is accepted.
    """
    counts = csv_counts.read_csv_bytes(counts_bytes, offsets_bytes, name=counts_name,
                                       offsets_name=offsets_name or "offsets")
    sources = [counts_bytes] + ([offsets_bytes] if offsets_bytes is not None else [])
    return Upload(counts, content_hash(*sources), counts_name, offsets_name if offsets_bytes is not None else "")


def _upload_ids() -> tuple:
    files = [st.session_state.get(k) for k in ("sb_upload_counts", "sb_upload_offsets")]
    return tuple(None if f is None else f.file_id for f in files)


def _parse_upload() -> None:
    counts_file = st.session_state.get("sb_upload_counts")
    offsets_file = st.session_state.get("sb_upload_offsets")
    st.session_state["sb_csv_ids"] = _upload_ids()
    st.session_state["sb_csv_error"] = None
    if counts_file is None:  # the user removed the file
        st.session_state["sb_csv"] = None
        return
    try:
        st.session_state["sb_csv"] = load_upload(
            counts_file.getvalue(), counts_file.name,
            offsets_file.getvalue() if offsets_file is not None else None,
            offsets_file.name if offsets_file is not None else "")
    except DataError as exc:
        st.session_state["sb_csv"] = None  # never fit a file that failed validation
        st.session_state["sb_csv_error"] = str(exc)
