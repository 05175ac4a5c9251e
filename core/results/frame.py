"""Runs in hand as one table: what the Run page tabulates and charts from the results it was
just handed, with the columns the store's own frame (`core.store.frames.runs_frame`) adds for
the runs it reads back."""

from __future__ import annotations

import pandas as pd

from core.results.result import RunResult


def results_frame(results: list[RunResult]) -> pd.DataFrame:
    """One row per run, every scalar field of RunResult (no ELBO curve), each repeat's seconds,
    the host, how many repeats were timed, whether the machine was busy and the whole compile
    (trace and lower plus XLA's compile, as the Run page's "Longest compile" counts it)."""
    frame = pd.DataFrame([r.to_dict(with_elbo=False) for r in results])
    if frame.empty:
        return frame
    # The host tells one program's runs on two machines apart (`core.results.significance`).
    frame["host"] = [str(r.versions.get("host", "")) for r in results]
    frame["timed_repeats"] = [len(r.repeat_times) or r.repeats for r in results]
    frame["busy"] = [bool(r.unstable) for r in results]
    frame = frame.drop(columns=["spec", "versions"])
    frame["compile_total_s"] = frame["trace_lower_s"] + frame["compile_s"]
    return frame
