"""Comparing stored runs like with like: runs of one problem size together, a baseline of that size.

A timing of oaks x100 next to one of oaks x1 is a hundred times larger for reasons that
have nothing to do with compiling, so the Compare page groups by problem first and
divides only by a baseline of the same problem; these are its defaults and rules.
"""

from __future__ import annotations

import pandas as pd

from core import catalog
from core.results import significance, spread
from core.results.ordering import natural_key

# What makes two runs the same problem size: the data (its label names the size) and its shape.
PROBLEM = ("dataset", "n", "p")
# Like with like: one problem size, one strategy, one algorithm (optimizers take different
# numbers of iterations, and a run of a fixed number of them has no time to solution), one
# start (log_rates_sd and log_rates take 44 and 97 iterations on microcosm's data), one
# precision (a float64 fit takes about twice a float32 one's time: one group of both was a
# spread that no repeat had). A column every run shares is left out of the labels.
DEFAULT_GROUPS = ["dataset", "strategy", "optimizer", "init", "precision"]
# The timings a run measures at every repeat (the others once): those a test can compare.
REPEATED = ("run_s", "per_iter_ms", "time_to_solution_s")


def group_names(runs: pd.DataFrame, by: list[str]) -> pd.Series:
    """Each run's group: its values of `by` joined, "oaks x100 · scan · seed"."""
    if runs.empty:
        return pd.Series("", index=runs.index, dtype=str)
    return runs[by].astype(str).agg(" · ".join, axis=1)


def same_problem(runs: pd.DataFrame, run_id: int) -> pd.Series:
    """True per row of `runs` whose problem is that of run `run_id` (False everywhere if absent)."""
    pinned = runs[runs["id"] == run_id]
    if pinned.empty:
        return pd.Series(False, index=runs.index)
    mask = pd.Series(True, index=runs.index)
    for column in PROBLEM:
        if column in runs:
            mask &= runs[column].astype(str) == str(pinned[column].iloc[0])
    return mask


def default_baseline(runs: pd.DataFrame, metric: str | None = None) -> int | None:
    """The run to divide by when none is pinned: of the newest run's problem, its newest
    finished eager run, else its slowest finished run (every bar then reads as a speed-up);
    among the runs that have a value of `metric` when some do (an eager run for a fixed
    number of iterations has no time to solution: dividing by it draws nothing).

    A problem is passed over for the next newest where its finished runs all ran one compiled
    program (the scan strategies of a first Run on an upload: each bar read "same program" and
    the chart drew none), where one run of it finished (the others diverged: the chart showed
    the baseline beside a column of "diverged"), or where none of them has a value of `metric`
    that other runs have (fits that did not converge: "Run #9 has no time to solution")."""
    if runs.empty:
        return None
    by_age = runs.sort_values(["created_at", "id"], ascending=False)
    newest = by_age.iloc[0]
    timed_somewhere = metric is not None and metric in runs and bool(_timed(runs, metric).any())
    # Each problem once, newest first (by its newest run).
    for _, run in by_age.drop_duplicates([c for c in PROBLEM if c in runs]).iterrows():
        finished = _finished(runs[same_problem(runs, int(run["id"]))])
        if timed_somewhere and not _timed(finished, metric).any():
            continue  # no run of it has the timing shown: its chart would say so and draw nothing
        if len(finished) >= 2 and _programs(finished) > 1:
            newest = run
            break
    # (Else the newest problem's: no problem has two programs that finished to compare.)
    finished = _finished(runs[same_problem(runs, int(newest["id"]))])
    if metric is not None and metric in finished:
        timed = finished[_timed(finished, metric)]
        finished = timed if not timed.empty else finished
    if finished.empty:
        return int(newest["id"])
    eager = finished[finished["strategy"] == "eager"].sort_values(["created_at", "id"], ascending=False)
    if not eager.empty:
        return int(eager["id"].iloc[0])
    return int(finished.loc[finished["per_iter_ms"].idxmax(), "id"])


def _finished(runs: pd.DataFrame) -> pd.DataFrame:
    """The rows of `runs` that finished (status ok), or all where there is no status."""
    return runs[runs["status"] == "ok"] if "status" in runs else runs


def _timed(runs: pd.DataFrame, metric: str) -> pd.Series:
    """Per row of `runs`, whether it has a value of `metric` (a fit of fixed iterations has no
    time to solution)."""
    return pd.to_numeric(runs[metric], errors="coerce") > 0


def _programs(runs: pd.DataFrame) -> int:
    """How many compiled programs `runs` ran (`significance.program_identity`); a run without a
    fingerprint (eager, a peer) is one of its own."""
    if "program" not in runs:
        return len(runs)
    return len({significance.program_identity(row) or f"run {row['id']}" for _, row in runs.iterrows()})


def labelling_columns(runs: pd.DataFrame, by: list[str]) -> tuple[list[str], dict[str, str]]:
    """(the columns of `by` whose values differ among `runs`, {column: value} of the others).

    A column with one value splits no group, so the groups by the first are those by `by`;
    named in every label ("oaks x1 · scan · preconditioned_lbfgs · float32" on each row) it
    only made the labels three lines long. With no column that differs (one group), `by`
    names the group whole and nothing is left out."""
    constant = {column: str(runs[column].iloc[0]) for column in by
                if column in runs and runs[column].astype(str).nunique() == 1}
    varying = [column for column in by if column not in constant]
    return (varying, constant) if varying else (list(by), {})


def unmeasured_groups(runs: pd.DataFrame, by: list[str], metric: str) -> list[str]:
    """The groups of `runs` by `by` (as `group_names` names them) in which no finished run
    has a value of `metric`: e.g. runs for a fixed number of iterations have no time to
    solution. The grouped chart leaves them out; the page says which."""
    if runs.empty or not by or metric not in runs:
        return []
    finished = runs[runs["status"] != "diverged"] if "status" in runs else runs
    measured = set(group_names(finished[pd.to_numeric(finished[metric], errors="coerce") > 0], by))
    return sorted(set(group_names(finished, by)) - measured, key=natural_key)


# What a run's one-line name adds to "#id strategy" where the runs on offer differ in it.
DISTINGUISHING = ("optimizer", "init", "lr", "dataset", "precision", "device")


def run_names(runs: pd.DataFrame) -> dict[int, str]:
    """One line per run id, "#12 scan", followed by those of `DISTINGUISHING` in which the
    runs differ ("#12 scan · seed · oaks x100"): what tells the runs apart, short enough
    for a select box a third of a projector's column wide."""
    shown = {c: [_value(c, row) for _, row in runs.iterrows()] for c in DISTINGUISHING if c in runs}
    varying = [c for c, values in shown.items() if len(set(values)) > 1]
    return {int(row["id"]): " · ".join([f"#{int(row['id'])} {row['strategy']}",
                                        *(shown[c][i] for c in varying if shown[c][i])])
            for i, (_, row) in enumerate(runs.iterrows())}


def _value(column: str, row: pd.Series) -> str:
    """A `DISTINGUISHING` value as a run's name shows it: a learning rate named ("lr 10"), and
    only for an optimizer that takes one (the others' is a placeholder)."""
    if column != "lr":
        return str(row[column])
    optimizer = catalog.OPTIMIZERS.get(str(row.get("optimizer", "")))
    return f"lr {float(row[column]):g}" if optimizer is not None and optimizer.takes_lr else ""


def retest(run: pd.Series, baseline: pd.Series, metric: str) -> str:
    """The significance test (`core.results.significance`) of run `run` against `baseline` (rows
    of a runs frame, with their stored repeats) on `metric`, as one markdown sentence: the
    ratio with its interval, the verdict, and the test with its p-value."""
    if metric not in REPEATED:
        return "This timing is measured once per run: there are no repeats to test. Choose a steady-state timing."
    if not (pd.notna(run[metric]) and pd.notna(baseline[metric]) and float(baseline[metric]) > 0):
        return f"Run #{int(run['id'])} or #{int(baseline['id'])} has no value of this timing to test."
    for row in (run, baseline):
        if str(row.get("status", "ok")) != "ok":
            return (f"Run #{int(row['id'])} {row['status']}: its times are of a fit that stopped early, not a speed "
                    "to test. Pin or pick a finished run.")
    found = spread.ratio(spread.Spread.of_run(run, metric), spread.Spread.of_run(baseline, metric))
    if found.same_program:
        verdict = "**the same program**: one speed, differences are noise"
    elif found.significant is None:
        verdict = "**unknown** (a single repeat)"
    elif found.untested:
        verdict = f"**{spread.NOT_TOLD_APART}**: {spread.TOO_FEW_REPEATS}"
    elif not found.significant:
        verdict = f"**{spread.NOT_SIGNIFICANT}**"
    elif found.value < 1:  # said as a speed-up too: a talk's slides (Story, Run) say speed-ups
        verdict = f"**faster**, a speed-up of {spread.times(1 / found.value)}"
    else:
        verdict = "**slower**"
    kind = "95% interval" if found.test is not None and found.test.p_value is not None else "range"
    interval = "" if found.same_program else f" ({kind} {found.span})"
    algorithms = ""
    if metric != "time_to_solution_s" and str(run.get("optimizer", "")) != str(baseline.get("optimizer", "")):
        # Per iteration, or per whole run of a set length, two optimizers compare unlike steps.
        algorithms = (f" Different optimizers ({run.get('optimizer')} against {baseline.get('optimizer')}): "
                      "this compares their iterations, not how soon each reaches the optimum (time to solution "
                      "does).")
    lengths = ""
    counts = [pd.to_numeric(row.get("iterations_run"), errors="coerce") for row in (run, baseline)]
    if metric == "run_s" and all(pd.notna(c) for c in counts) and counts[0] != counts[1]:
        # From other starts, or to other tolerances, one algorithm stops after other counts.
        lengths = (f" The runs took {int(counts[0]):,} and {int(counts[1]):,} iterations: a whole run's time counts "
                   "them; time per iteration compares the strategies' speed.")
    return (f"Run #{int(run['id'])} against #{int(baseline['id'])}: {spread.times(found.value)} the baseline's "
            f"time{interval}, {verdict}. Decided by {found.why}.{algorithms}{lengths}")
