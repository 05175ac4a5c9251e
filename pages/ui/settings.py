"""The problem the sidebar describes, as one typed, frozen value, and the specs built from it.

The sidebar (`sidebar.py`) draws one widget per field of `Settings`, under the session
key "sb_" + the field's name; pages read `current()`, never the keys themselves.
"""

from __future__ import annotations

import dataclasses

import streamlit as st

from core.data.counts import CountData
from core.results.result import Remedy
from core.spec import DEFAULTS as FRONT_DOOR
from core.spec import (
    GRADIENT_OPTIMIZERS,
    OAKS_COLUMNS,
    OAKS_ROWS,
    DatasetSpec,
    FitSpec,
    OptimizerSpec,
    SpecError,
    cap,
    default_cap,
    refusal,
)
from pages.ui.text import md, public
from pages.ui.upload import Upload, current_upload

KEY_PREFIX = "sb_"
# The Initialisation box's first choice: the optimizer's own start (`FitSpec.init` None), which
# follows an optimizer switch with no write to the box.
OPTIMIZERS_INIT = "default"
# What each start is, for the Initialisation box's help and the buttons that set it.
START_FORMULAS = {"seed": "M = 0, S = 1 (the tutorial's)",
                  "log_counts": "M = log Y, S = 0.5 (pyPLNmodels')",
                  "log_rates": "M = log Y - O, S = 0.5",
                  "log_rates_sd": "M = log Y - O, S = 1/√(Y + 1)"}


class AwaitingUpload(SpecError):
    """CSV data chosen, no file uploaded yet: a next step to take, not an error."""


def show_refusal(exc: SpecError) -> None:
    """Why the sidebar's problem cannot run: an invitation while a CSV is awaited (nothing has
    gone wrong before the user gave anything), an error otherwise."""
    if isinstance(exc, AwaitingUpload):
        st.info(md(str(exc)), icon=":material/upload_file:")
    else:
        st.error(public(exc), icon=":material/error:")
        # The page's results give way to the error: said, or they read as lost work.
        st.caption(":material/inventory_2: Nothing stored is lost: Compare lists every run, and the earlier "
                   "settings (or files) bring their results back here.")


@dataclasses.dataclass(frozen=True)
class Settings:
    """The sidebar's settings. The defaults are every front door's (`core.spec.DEFAULTS`): a
    fit to convergence (preconditioned L-BFGS from the log_rates_sd start stops at a relative
    ELBO change of 1e-7, about 50 iterations on oaks, within 1e-5 of the optimum).

    Attributes:
        dataset: a kind from `core.spec.DATASET_KINDS` the sidebar offers ("oaks",
            "simulated", "csv").
        replicate: oaks rows repeated (one of `core.spec.OAKS_REPLICATES`).
        formula: oaks covariates from its samples' table (one of `core.spec.OAKS_FORMULAS`;
            "" for an intercept alone).
        sim_n, sim_p, sim_d, sim_seed: the simulated data's shape and seed.
        device, precision, optimizer, lr, iterations, repeats: as in `FitSpec`.
        init: as in `FitSpec`, or `OPTIMIZERS_INIT` for the optimizer's own start.
        tol: as in `FitSpec`; None (the box left empty) is the precision's own default, so
            switching precision moves it with no write to the box.
        upload: the validated CSV upload, for dataset "csv" (None until one is given).
        upload_error: why the files given were refused, for dataset "csv" (None if they were not).

    The whole-number fields hold what their boxes give, a float (see the sidebar's
    `_whole_number_input`); `whole` turns it into an int or refuses a fraction.
    """

    dataset: str = "oaks"
    replicate: int = 1
    formula: str = ""
    sim_n: int = 1000
    sim_p: int = 50
    sim_d: int = 1
    sim_seed: int = 0
    device: str = FRONT_DOOR.device
    precision: str = FRONT_DOOR.precision
    optimizer: str = FRONT_DOOR.optimizer
    lr: float = FRONT_DOOR.lr
    init: str = OPTIMIZERS_INIT
    iterations: int = FRONT_DOOR.iterations
    repeats: int = FRONT_DOOR.repeats
    tol: float | None = None
    upload: Upload | None = dataclasses.field(default=None, compare=False)
    upload_error: str | None = dataclasses.field(default=None, compare=False)

    def dataset_spec(self) -> DatasetSpec:
        """The DatasetSpec of the sidebar's data. Raises SpecError (e.g. no valid upload)."""
        if self.dataset == "oaks":
            return DatasetSpec(kind="oaks", replicate=whole("replicate", self.replicate), formula=self.formula)
        if self.dataset == "simulated":
            return DatasetSpec(kind="simulated", n=whole("n", self.sim_n), p=whole("p", self.sim_p),
                               d=whole("d", self.sim_d), seed=whole("seed", self.sim_seed))
        if self.upload is None and self.upload_error:
            # The sidebar says it too, below the fold of a small screen: the page says which file.
            # "Cannot be used", not "was refused": a formula's typo ends here too, with the files fine.
            raise SpecError(f"the uploaded data cannot be used: {self.upload_error}")
        if self.upload is None:
            raise AwaitingUpload("Upload a counts CSV in the sidebar to fit your own data (or pick oaks or "
                                 "simulated data).")
        return DatasetSpec(kind="csv", counts_path=self.upload.name, offsets_path=self.upload.offsets_name,
                           content_hash=self.upload.content_hash, header=self.upload.header,
                           covariates_path=self.upload.covariates_name, formula=self.upload.formula)

    def fit_spec(self, strategy: str, dataset: DatasetSpec | None = None) -> FitSpec:
        """The FitSpec for `strategy` with these settings (and `dataset` if given).

        `FitSpec` normalises what a strategy ignores (lr, the PyTorch twins' tol), so the
        same computation has the same key as from the command line or a link. Raises
        SpecError for a strategy that cannot run the optimizer (`core.spec.refusal`).
        """
        return FitSpec(
            dataset=dataset or self.dataset_spec(), strategy=strategy, iterations=whole("iterations", self.iterations),
            precision=self.precision, device=self.device, optimizer=OptimizerSpec(self.optimizer, float(self.lr)),
            init=None if self.init == OPTIMIZERS_INIT else self.init, repeats=whole("repeats", self.repeats),
            tol=None if self.tol is None else float(self.tol))

    @property
    def start(self) -> str:
        """The start the fits begin from (`start_of`)."""
        return start_of(self.optimizer, self.init)

    def runnable(self, strategies: list[str]) -> tuple[list[str], list[str]]:
        """`strategies` split into those that can run this optimizer and those that refuse
        it (`core.spec.refusal`: jit_per_function, scan_analytic and the PyTorch twins run
        only the gradient optimizers), each in the given order."""
        refused = [name for name in strategies if refusal(name, self.optimizer) is not None]
        return [name for name in strategies if name not in refused], refused

    def refused_note(self, refused: list[str]) -> str:
        """A sentence (markdown) saying which strategies were not run and how to run them."""
        one = len(refused) == 1
        return (f"Not run: {', '.join(refused)}, which run{'s' * one} only the gradient optimizers "
                f"{', '.join(GRADIENT_OPTIMIZERS)}, not {self.optimizer}. Pick one of those in the sidebar to run "
                f"{'it' if one else 'them'}.")

    @property
    def counts(self) -> CountData | None:
        """The uploaded data to pass to a run (`engine.run(counts=...)`), or None."""
        return self.upload.data if self.dataset == "csv" and self.upload is not None else None

    @property
    def label(self) -> str:
        """`spec_summary` of these settings, or what is missing (markdown)."""
        try:
            counts = self.counts
            return spec_summary(self.fit_spec(FRONT_DOOR.strategy), None if counts is None else (counts.n, counts.p))
        except SpecError as exc:
            return md(exc)


DEFAULTS = Settings()


def whole(name: str, value: float) -> int:
    """A whole-number setting from its box (which holds a float, see the sidebar); SpecError
    naming the setting for a fraction, never a silent truncation."""
    if isinstance(value, float) and not value.is_integer():
        raise SpecError(f"{name} must be a whole number; got {value:g}")
    return int(value)


def set_iterations(value: int) -> None:
    """A button's callback: the sidebar's Iterations box holds `value` when it is drawn next
    (as a float, the box's own type)."""
    st.session_state[key("iterations")] = float(value)


def remedy_label(remedy: Remedy, optimizer: str) -> str:
    """The text of a button that applies `remedy` to a run of `optimizer`."""
    if remedy.setting == "init":
        # Named by what the start is: "Start seed from seed" read as a riddle.
        formula = START_FORMULAS.get(remedy.value, remedy.value)
        if remedy.value == FRONT_DOOR.init_for(optimizer):
            return f"Use {optimizer}'s own start: {formula}"
        return f"Start {optimizer} from {remedy.value}: {formula}"
    if remedy.setting == "lr":
        return f"Set the learning rate to {remedy.value:g}"
    return f"Switch to {remedy.value}"


def remedy_pending(remedy: Remedy, optimizer: str) -> bool:
    """Whether the sidebar does not hold `remedy` (for a run of `optimizer`) yet: a start or a
    learning rate only while the sidebar's optimizer is still the run's."""
    now = current()
    if remedy.setting == "precision":
        return now.precision != remedy.value
    if now.optimizer != optimizer:
        return False
    return now.start != remedy.value if remedy.setting == "init" else float(now.lr) != remedy.value


def apply_remedy(setting: str, value: str | float) -> None:
    """A button's callback: the sidebar's box for `setting` holds `value` when it is drawn next
    (a run's `core.results.result.Remedy`, or the Run page's switch of optimizer). A start that
    is the sidebar optimizer's own is set as "the optimizer's own" (`OPTIMIZERS_INIT`), so that
    it follows a later switch."""
    if setting == "init":
        value = OPTIMIZERS_INIT if start_of(current().optimizer, OPTIMIZERS_INIT) == value else value
    st.session_state[key(setting)] = value


def iterations_cap() -> int:
    """The most iterations a run may take on this server: `core.spec.cap`, or the built-in cap
    where the server's is bad, as the sidebar's Iterations box takes it (which says why)."""
    try:
        return cap("iterations")
    except SpecError:
        return default_cap("iterations")


def start_of(optimizer: str, init: str) -> str:
    """The start the Initialisation box's `init` means for `optimizer`: the one chosen, or the
    optimizer's own (`OPTIMIZERS_INIT`)."""
    return FRONT_DOOR.init_for(optimizer) if init == OPTIMIZERS_INIT else init


def key(field: str) -> str:
    """The session-state key of a `Settings` field's widget."""
    return KEY_PREFIX + field


def current() -> Settings:
    """The sidebar's settings (defaults where the sidebar was not drawn)."""
    values = {field.name: st.session_state.get(key(field.name), getattr(DEFAULTS, field.name))
              for field in dataclasses.fields(Settings) if field.name not in ("upload", "upload_error")}
    csv = values["dataset"] == "csv"
    return Settings(**values, upload=current_upload() if csv else None,
                    upload_error=st.session_state.get("sb_csv_error") if csv else None)


def spec_summary(spec: FitSpec, counts_shape: tuple[int, int] | None = None) -> str:
    """One line naming the settings of a spec, strategy aside (markdown; a file's name escaped).

    `counts_shape` (n, p) of a CSV's counts, which only reading the file tells: named as oaks'
    are (a simulated set's label holds its own)."""
    size = ""
    if spec.dataset.kind == "oaks":
        size = f"(n = {OAKS_ROWS * spec.dataset.replicate:,}, p = {OAKS_COLUMNS})"
    elif spec.dataset.kind == "csv" and counts_shape is not None:
        size = f"(n = {counts_shape[0]:,}, p = {counts_shape[1]:,})"
    until = f"up to {spec.iterations:,} iterations, stopping at a change of {spec.tol:g}" if spec.tol else \
        f"{spec.iterations:,} iterations"
    parts = [f"**{md(spec.dataset.label)}** {size}".strip(), spec.precision, spec.device,
             until, f"first call + at least {spec.repeats} timed repeat{'s' * (spec.repeats > 1)}",
             f"optimizer {spec.optimizer.label}", f"init {spec.init}"]
    return " · ".join(parts)


# The settings `differences` names, as a run's spec and the sidebar hold them.
_COMPARED = {"data": lambda spec: spec.dataset.label, "precision": lambda spec: spec.precision,
             "device": lambda spec: spec.device, "optimizer": lambda spec: spec.optimizer.label,
             "init": lambda spec: spec.init, "iterations": lambda spec: f"{spec.iterations:,}",
             "tol": lambda spec: f"{spec.tol:g}", "repeats": lambda spec: str(spec.repeats)}


def differences(spec: FitSpec, strategy: str) -> list[str]:
    """The settings in which `spec` (a run's) and the sidebar's spec for `strategy` differ,
    each as "name: the run's (sidebar: the sidebar's)" (markdown); [] where the sidebar's
    settings cannot be read."""
    try:
        now = current().fit_spec(strategy)
    except (SpecError, ValueError):
        return []
    return [f"{name} {md(of(spec))} (sidebar: {md(of(now))})" for name, of in _COMPARED.items()
            if of(spec) != of(now)]
