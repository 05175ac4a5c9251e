"""The sidebar's CSV upload: its widgets, and validation of the uploaded bytes.

Counts, optional log-offsets, and optional covariates (a table with a header line: text
columns one-hot coded, a constant column added; a formula such as "~ 1 + group" picks
columns, as pyPLNmodels' `Pln.from_formula` does: `core.data.covariates`).

A parsed upload lives in session state as "sb_csv" (None after a failed validation, with
the message in "sb_csv_error"); `current_upload()` reads it from there. The files it was read
from are held too, by slot: a file uploader forgets its file while another dataset hides it,
so the formula or the header choice, changed after a switch back, reads the held files (the
sidebar names them, and can forget them). How the file was
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


# The uploaders' widget keys, by the file each takes.
_UPLOADERS = {"counts": "sb_upload_counts", "offsets": "sb_upload_offsets", "covariates": "sb_upload_covariates"}
# The files last uploaded, by slot (`_Held`): a file uploader forgets its file when it is not
# drawn (another dataset chosen in the sidebar), and the browser cannot be given it back.
_HELD = "sb_csv_files"
# The slots whose uploader shows its held file (given since the uploaders were last hidden).
_SHOWN = "sb_csv_shown"
# The ids of the files held when the uploaders were last hidden.
_STALE = "sb_csv_stale"


@dataclasses.dataclass(frozen=True)
class _Held:
    """An uploaded file as this session holds it."""

    name: str
    content: bytes
    file_id: str


def csv_inputs() -> None:
    """The counts and log-offsets uploaders, and what became of the upload."""
    _say_held()
    largest = largest_upload_mb()
    st.file_uploader("Counts (CSV, one row per sample)", type=TABLE_TYPES, key=_UPLOADERS["counts"],
                     on_change=_file_changed, args=("counts",), max_upload_size=largest,
                     help="whole numbers >= 0, cells separated by commas, semicolons or tabs; a header line of "
                          f"names and a column of row names are allowed. {_size_cap(largest)}")
    st.file_uploader("Log-offsets (optional CSV, same shape)", type=TABLE_TYPES, key=_UPLOADERS["offsets"],
                     on_change=_file_changed, args=("offsets",), max_upload_size=largest)
    st.radio("Line 1 names the columns", HEADER_CHOICES, key="sb_csv_header", persist_state="session",
             horizontal=True, format_func=HEADER_LABELS.get, on_change=_parse_upload,
             help="auto: words make line 1 a header, numbers make it data (what was decided, and why, is shown "
                  "below); choose yes when the column names are numbers, such as taxon ids")
    st.file_uploader("Covariates (optional CSV with a header line)", type=TABLE_TYPES, key=_UPLOADERS["covariates"],
                     on_change=_file_changed, args=("covariates",), max_upload_size=largest,
                     help="one row per sample, a column per covariate; text columns are one-hot coded (the first "
                          "level is the reference) and a constant column is added")
    # Kept with the files it picks from when another dataset hides it, and sent as the box's
    # default so that the box, drawn again, shows it (`sidebar._shown` says why).
    st.text_input("Formula (optional)", key="sb_csv_formula", on_change=_parse_upload, placeholder="~ 1 + group",
                  max_chars=200, persist_state="session", value=st.session_state.get("sb_csv_formula", ""),
                  help="which covariate columns, as pyPLNmodels' formulas: '~ 1 + group + dose'; "
                       "'~ 0 + ...' drops the constant; 'C(site)' takes a column of numbers as levels; "
                       "empty: every column")
    _take_new_files()
    if _upload_ids() != st.session_state.get("sb_csv_ids"):  # a file taken, or the header or formula changed
        _parse_upload()
    if st.session_state.get("sb_csv_error"):
        st.error(public(st.session_state["sb_csv_error"]), icon=":material/error:")
    elif st.session_state.get("sb_csv"):
        _describe(st.session_state["sb_csv"])
    else:
        st.info("Upload a counts CSV to fit your own data.", icon=":material/upload_file:")


def _say_held() -> None:
    """Above the uploaders, where the eye lands after a switch back to CSV: the files held
    that the boxes below cannot show (`_HELD`), and a way to forget them."""
    unseen = [held.name for slot, held in _held_files().items() if slot not in _shown()]
    if not unseen:
        return
    st.info(f"Still holding {', '.join(f'**{md(name)}**' for name in unseen)} from your upload before another "
            f"dataset was chosen: the boxes below cannot show {'it' if len(unseen) == 1 else 'them'} again. A "
            "file uploaded below replaces its own.", icon=":material/inventory_2:")
    st.button("Forget these files", key="sb_csv_forget", icon=":material/delete:", type="tertiary",
              on_click=_forget_unseen)


def uploaders_hidden() -> None:
    """Another dataset is chosen: the uploaders are not drawn, and forget their files (the
    session holds them). Drawn again, an uploader can still report its old file, though it
    shows none: that file is not taken again (`_take_new_files`)."""
    st.session_state[_SHOWN] = set()
    st.session_state[_STALE] = {held.file_id for held in _held_files().values()}


def _size_cap(largest_mib: int) -> str:
    """The cap on a file in the unit the docs and the command line use, beside the uploader's
    own figure, which Streamlit writes "47MB" for 47 MiB (a cap of 50 MB)."""
    try:
        cap = f"{csv_counts.max_csv_bytes() / 1e6:,.3g} MB"
    except DataError:
        return ""
    return f"At most {cap} a file (the box says {largest_mib}MB: it counts 1,048,576 bytes to a MB)."


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


def _held_files() -> dict[str, _Held]:
    return st.session_state.setdefault(_HELD, {})


def _shown() -> set[str]:
    return st.session_state.setdefault(_SHOWN, set())


def _file_changed(slot: str) -> None:
    """An uploader's own change (a file given, or removed with its x): hold what it now has,
    and read the files again. An uploader drawn again after it was hidden reports its old
    file at first, then none at the next rerun, though no one removed anything (its box
    shows no file to remove): that is not a removal."""
    file = st.session_state.get(_UPLOADERS[slot])
    if file is None:
        if slot not in _shown():
            return
        _held_files().pop(slot, None)
        _shown().discard(slot)
    else:
        _hold(slot, file)
    _parse_upload()


def _hold(slot: str, file) -> None:
    """Hold `file` (an uploader's) in `slot`, shown by its uploader."""
    _held_files()[slot] = _Held(file.name, file.getvalue(), file.file_id)
    _shown().add(slot)


def _forget_unseen() -> None:
    """Drop the held files that no uploader shows, and read what is left."""
    held = _held_files()
    for slot in [slot for slot in held if slot not in _shown()]:
        del held[slot]
    _parse_upload()


def _take_new_files() -> None:
    """Hold any file an uploader has that is not held yet (given without its change being
    reported). An empty uploader leaves its held file alone: it is empty after another
    dataset hid it, and only its own change (`_file_changed`) removes a file."""
    held, stale = _held_files(), st.session_state.get(_STALE, set())
    for slot, key in _UPLOADERS.items():
        file = st.session_state.get(key)
        if file is not None and file.file_id not in stale and (slot not in held or held[slot].file_id != file.file_id):
            _hold(slot, file)


def _upload_ids() -> tuple:
    held = _held_files()
    return (*(held[slot].file_id if slot in held else None for slot in _UPLOADERS),
            st.session_state.get("sb_csv_header", "auto"), st.session_state.get("sb_csv_formula", ""))


def _parse_upload() -> None:
    """Read the held files (with the header choice and formula) into "sb_csv", or say why not."""
    held = _held_files()
    st.session_state["sb_csv_ids"] = _upload_ids()
    st.session_state["sb_csv_error"] = None
    counts, offsets, covariates = (held.get(slot) for slot in _UPLOADERS)
    if counts is None:  # none given, or the user removed it
        st.session_state["sb_csv"] = None
        return
    try:
        st.session_state["sb_csv"] = load_upload(
            counts.content, counts.name,
            offsets.content if offsets is not None else None, offsets.name if offsets is not None else "",
            st.session_state.get("sb_csv_header", "auto"),
            covariates.content if covariates is not None else None,
            covariates.name if covariates is not None else "",
            st.session_state.get("sb_csv_formula", "") or "")
    except DataError as exc:
        st.session_state["sb_csv"] = None  # never fit a file that failed validation
        st.session_state["sb_csv_error"] = str(exc)
