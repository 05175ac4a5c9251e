"""The problem the sidebar describes: its settings' defaults, and the specs built from them.

The sidebar (`sidebar.py`) draws these settings under session-state keys prefixed "sb_";
pages read them through `current_problem()`, `dataset_spec()`, `fit_spec()`,
`run_counts()` and `problem_label()`, never through the keys themselves.
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from core.spec import DatasetSpec, FitSpec, OptimizerSpec, SpecError

OAKS_ROWS, OAKS_COLUMNS = 116, 114
REPLICATES = (1, 10, 100, 1000)
# Defaults finish in well under a minute on a laptop CPU for the five tutorial levels.
DEFAULTS: dict[str, Any] = {
    "sb_dataset": "oaks", "sb_replicate": 1, "sb_sim_n": 1000, "sb_sim_p": 50, "sb_sim_d": 1,
    "sb_sim_seed": 0, "sb_device": "cpu", "sb_precision": "float32", "sb_optimizer": "seed",
    "sb_lr": 0.01, "sb_init": "seed", "sb_iterations": 150, "sb_repeats": 3, "sb_tol": 0.0,
}


def current_problem() -> dict[str, Any]:
    """The sidebar's settings as plain values (defaults where the sidebar was not drawn)."""
    values = {key.removeprefix("sb_"): st.session_state.get(key, value) for key, value in DEFAULTS.items()}
    values["csv"] = st.session_state.get("sb_csv") if values["dataset"] == "csv" else None
    return values


def dataset_spec(problem: dict[str, Any] | None = None) -> DatasetSpec:
    """The DatasetSpec of the sidebar's data. Raises SpecError (e.g. no valid upload)."""
    problem = problem or current_problem()
    kind = problem["dataset"]
    if kind == "oaks":
        return DatasetSpec(kind="oaks", replicate=int(problem["replicate"]))
    if kind == "simulated":
        return DatasetSpec(kind="simulated", n=int(problem["sim_n"]), p=int(problem["sim_p"]),
                           d=int(problem["sim_d"]), seed=int(problem["sim_seed"]))
    upload = problem.get("csv")
    if not upload:
        raise SpecError("no valid counts CSV: upload one in the sidebar (or pick oaks or simulated data)")
    return DatasetSpec(kind="csv", counts_path=upload["name"], offsets_path=upload["offsets_name"],
                       content_hash=upload["hash"])


def fit_spec(strategy: str, dataset: DatasetSpec | None = None, problem: dict[str, Any] | None = None) -> FitSpec:
    """The FitSpec for `strategy` with the sidebar's settings (and `dataset` if given).

    Settings a strategy ignores are normalised (lr for the seed optimizer, tol outside
    while_loop) so that the same computation always has the same `FitSpec.key`.
    """
    problem = problem or current_problem()
    name = problem["optimizer"]
    optimizer = OptimizerSpec(name, OptimizerSpec.lr if name == "seed" else float(problem["lr"]))
    return FitSpec(
        dataset=dataset or dataset_spec(problem), strategy=strategy, iterations=int(problem["iterations"]),
        precision=problem["precision"], device=problem["device"], optimizer=optimizer, init=problem["init"],
        repeats=int(problem["repeats"]), tol=float(problem["tol"]) if strategy == "while_loop" else 0.0)


def run_counts(problem: dict[str, Any] | None = None):
    """The uploaded CountData to pass to `engine.run(counts=...)`, or None."""
    problem = problem or current_problem()
    return problem["csv"]["data"] if problem["dataset"] == "csv" and problem.get("csv") else None


def spec_summary(spec: FitSpec) -> str:
    """One line naming the settings of a spec, strategy aside."""
    size = {"oaks": f"(n = {OAKS_ROWS * spec.dataset.replicate:,}, p = {OAKS_COLUMNS})"}.get(spec.dataset.kind, "")
    parts = [f"**{spec.dataset.label}** {size}".strip(), spec.precision, spec.device,
             f"{spec.iterations:,} iterations", f"first call + {spec.repeats} timed repeat{'s' * (spec.repeats > 1)}",
             f"optimizer {spec.optimizer.label}", f"init {spec.init}"]
    return " · ".join(parts)


def problem_label(problem: dict[str, Any] | None = None) -> str:
    """`spec_summary` of the sidebar's settings, or what is missing."""
    try:
        return spec_summary(fit_spec("scan", problem=problem))
    except SpecError as exc:
        return str(exc)
