"""No upload the CSV cap would refuse is ever held whole by the server: Streamlit's limits are
in MiB, the cap in MB."""

import pathlib
import tomllib

from core.data import csv_counts
from pages.ui.upload import largest_upload_mb

from project import ROOT


def test_no_upload_is_larger_than_the_csv_cap(monkeypatch):
    server = tomllib.loads(pathlib.Path(ROOT, ".streamlit", "config.toml").read_text())["server"]
    assert server["maxUploadSize"] * 2**20 <= csv_counts.MAX_CSV_BYTES
    monkeypatch.delenv(csv_counts.MAX_CSV_MB_ENV, raising=False)
    assert 40 * 2**20 <= largest_upload_mb() * 2**20 <= csv_counts.MAX_CSV_BYTES
    monkeypatch.setenv(csv_counts.MAX_CSV_MB_ENV, "5")
    assert largest_upload_mb() * 2**20 <= 5_000_000
