"""Plain, hashable descriptions of a fit: what to fit, how, and where.

Specs are frozen dataclasses of plain Python values so that they can key caches
(`st.cache_data`, the in-process executable cache) and be stored as JSON. They are
validated on construction: a spec that exists is a spec that can be run, short of the
device or the data files being absent, which the engine checks when it runs.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import Any

from core import catalog, config

# "simulated_on_device" is drawn directly on the devices (core.data.on_device), for the
# sharded strategy only: no host array of its rows ever exists.
DATASET_KINDS = ("oaks", "simulated", "csv", "simulated_on_device")
SIMULATED_KINDS = ("simulated", "simulated_on_device")
PRECISIONS = ("float32", "float64")
DEVICES = ("cpu", "gpu", "tpu")
# Optimizers that move B, M and S by the ELBO's gradient (optax transformations; the seed
# tutorial's algorithm), and those that move M and S with B and Sigma at their closed forms
# (the profiled ELBO, as pyPLNmodels fits it): the catalog (`core.catalog`) lists them.
GRADIENT_OPTIMIZERS = catalog.optimizer_names(catalog.GRADIENT)
PROFILED_OPTIMIZERS = catalog.optimizer_names(catalog.PROFILED)
OPTIMIZERS = catalog.optimizer_names()
# Those whose steps scale with `OptimizerSpec.lr`; the others ignore it.
LEARNING_RATE_OPTIMIZERS = tuple(o.name for o in catalog.OPTIMIZERS.values() if o.takes_lr)
INITS = ("seed", "log_counts", "log_rates", "log_rates_sd")
# Whether line 1 of a CSV file names the columns: "auto" decides (core.data.csv_layout).
HEADER_CHOICES = ("auto", "yes", "no")
# pyPLNmodels' oaks data: 116 samples x 114 amplicons; "oaks xK" repeats every row K times.
OAKS_ROWS, OAKS_COLUMNS = 116, 114
# The sizes the dashboard offers (K above); the command line takes any K up to the cap.
OAKS_REPLICATES = (1, 10, 100, 1000)
# The covariates the dashboard offers for oaks, from its samples' table ("" for an intercept
# alone); the command line's --formula takes any formula over tree, dist2ground and orientation.
OAKS_FORMULAS = ("", "~ 1 + tree", "~ 1 + orientation", "~ 1 + dist2ground", "~ 1 + tree + orientation + dist2ground")

# Caps keep a mistyped number from taking a shared server down; they are generous
# enough for the benchmarks (oaks x1000 is n = 116,000). Each can be lowered (or raised)
# per server or shell with its environment variable (`core.config`, which holds the
# defaults): see `cap`. Runs noted as under way (queued or running) at once on a store are
# capped by owner (a session or a signed-in user; Story's warm-up notes its 7 steps at
# once), and for everyone: a script that clicks Run in a loop fills its own share, not the
# server's. An owner's device seconds in the last hour are capped too: a session that
# keeps the device busy leaves others a share of it.
_CAP_VARIABLES = {"replicate": "PLNLAB_MAX_REPLICATE", "rows": "PLNLAB_MAX_ROWS", "columns": "PLNLAB_MAX_COLUMNS",
                  "covariates": "PLNLAB_MAX_COVARIATES", "iterations": "PLNLAB_MAX_ITERATIONS",
                  "repeats": "PLNLAB_MAX_REPEATS", "queued_per_owner": "PLNLAB_MAX_QUEUED_PER_OWNER",
                  "queued": "PLNLAB_MAX_QUEUED", "device_seconds_per_hour": "PLNLAB_MAX_DEVICE_SECONDS_PER_HOUR"}
MAX_REPLICATE = config.variable("PLNLAB_MAX_REPLICATE").default
MAX_ROWS = config.variable("PLNLAB_MAX_ROWS").default
MAX_COLUMNS = config.variable("PLNLAB_MAX_COLUMNS").default
MAX_COVARIATES = config.variable("PLNLAB_MAX_COVARIATES").default
MAX_ITERATIONS = config.variable("PLNLAB_MAX_ITERATIONS").default
MAX_REPEATS = config.variable("PLNLAB_MAX_REPEATS").default
MAX_QUEUED_PER_OWNER = config.variable("PLNLAB_MAX_QUEUED_PER_OWNER").default
MAX_QUEUED = config.variable("PLNLAB_MAX_QUEUED").default
MAX_DEVICE_SECONDS_PER_HOUR = config.variable("PLNLAB_MAX_DEVICE_SECONDS_PER_HOUR").default
# Devices one sharded run may span; 0 means every device of the platform.
MAX_DEVICES = 4096
# A formula is one short line ("~ 1 + tree + dist2ground").
MAX_FORMULA_CHARACTERS = 200
# A learning rate and a tolerance any front door accepts (the sidebar's boxes, links, the
# command line all read these).
LR_RANGE = (1e-6, 10.0)
# The learning rate of a spec whose optimizer has none, and the front doors' default.
DEFAULT_LR = 0.01
TOL_RANGE = (0.0, 0.99)


# A file name in a label is cut to this many characters (its start and its end kept): labels
# are shown in tables and legends, and a stored run keeps at most 500 characters of text.
LABEL_NAME_CHARS = 80
# A CSV data set's label tags its counts' name with this many hex digits of its content
# (`DatasetSpec.data_tag`).
DATA_TAG_CHARS = 6


def _short_name(path: str) -> str:
    name = path.rsplit("/", 1)[-1]
    if len(name) <= LABEL_NAME_CHARS:
        return name
    keep = LABEL_NAME_CHARS - 1
    return name[: keep - 20] + "…" + name[-20:]


@dataclasses.dataclass(frozen=True)
class FrontDoorDefaults:
    """What every front door fits when not told otherwise (the dashboard's sidebar, `run`,
    `solve`, links): a fit that converges. Preconditioned L-BFGS from the log_rates_sd start
    stops at a relative ELBO change of 1e-7 (float64: 1e-9) after 50 to 80 iterations on oaks,
    within 1e-5 of the optimum, in seconds for the compiled strategies.
    """

    strategy: str = "scan"
    optimizer: str = "preconditioned_lbfgs"
    # For the strategies that take only gradient optimizers (jit_per_function, scan_analytic,
    # the PyTorch twins): the seed tutorial's own.
    gradient_optimizer: str = "seed"
    lr: float = DEFAULT_LR
    # Each cell's S from its count: 18% fewer iterations than log_rates over the corpus
    # (docs/accuracy.md). The optimizers that step by a set size have their own start
    # (`catalog.Optimizer.start`): from log_rates_sd's S of 0.03 (a count of 1,000) the
    # tutorial's clipped steps of 0.1 took S through zero, and its second ELBO was -inf.
    init: str = "log_rates_sd"
    iterations: int = 500
    # `solve` fits to convergence, so its cap is there for a fit that never gets there: the
    # default stops within 500 iterations on every set of the corpus but microcosm 921 x 1209,
    # p > n, which float64 reaches at its tolerance after about 1,900 (docs/accuracy.md); a
    # dashboard Run keeps 500, and its "Set Iterations to N" button.
    solve_iterations: int = 5_000
    repeats: int = 3
    tol: float = 1e-7
    tol_float64: float = 1e-9
    precision: str = "float32"
    device: str = "cpu"

    def tol_for(self, precision: str) -> float:
        """The default tolerance in `precision`: float64 resolves a smaller change."""
        return self.tol_float64 if precision == "float64" else self.tol

    def init_for(self, optimizer: str) -> str:
        """The default start of `optimizer`: its own (`catalog.Optimizer.start`), else `init`."""
        return catalog.OPTIMIZERS[optimizer].start or self.init

    def starts(self) -> str:
        """Each optimizer's default start, as one line: "log_rates_sd (lbfgs, ...), seed (seed), ..."."""
        by_start: dict[str, list[str]] = {self.init: []}
        for name in catalog.OPTIMIZERS:
            by_start.setdefault(self.init_for(name), []).append(name)
        return ", ".join(f"{start} ({', '.join(names)})" for start, names in by_start.items())

    def optimizer_for(self, strategy: str) -> str:
        """The default optimizer of `strategy`: `optimizer`, or `gradient_optimizer` for a
        strategy that refuses it."""
        return self.optimizer if refusal(strategy, self.optimizer) is None else self.gradient_optimizer


DEFAULTS = FrontDoorDefaults()


class SpecError(ValueError):
    """A spec, option or input that is not acceptable; the message says what is accepted."""


def cap_variable(name: str) -> str:
    """The environment variable that sets the cap on `name` (see `cap`)."""
    return _CAP_VARIABLES[name]


def default_cap(name: str) -> int:
    """The built-in cap on `name` (see `cap`)."""
    return globals()[f"MAX_{name.upper()}"]  # e.g. MAX_QUEUED_PER_OWNER


def cap(name: str) -> int:
    """The cap on `name` ("replicate", "rows", "columns", "covariates", "iterations",
    "repeats", "queued_per_owner", "queued", "device_seconds_per_hour"): its variable
    (`_CAP_VARIABLES`, e.g. PLNLAB_MAX_ITERATIONS=5000 on a shared server) when set, else the
    module's MAX_<NAME>. Read on every check, so tests and servers can change it without a
    restart of the interpreter."""
    variable = _CAP_VARIABLES[name]
    if not config.raw(variable):
        return default_cap(name)
    try:
        return config.whole(variable)
    except config.ConfigError as exc:
        raise SpecError(str(exc)) from None


def _check_choice(name: str, value: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise SpecError(f"{name} must be one of {', '.join(choices)}; got {value!r}")


def _check_int(name: str, value: int, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise SpecError(f"{name} must be a whole number; got {value!r}")
    if not low <= value <= high:
        raise SpecError(f"{name} must be between {low:,} and {high:,}; got {value:,}")


@dataclasses.dataclass(frozen=True)
class DatasetSpec:
    """Which counts to fit.

    Attributes:
        kind: "oaks" (pyPLNmodels' oaks, 116 x 114, rows repeated `replicate` times),
            "simulated" (PLN draws of size n x p with d covariates from `seed`),
            "csv" (counts, and optionally log-offsets, read from files) or
            "simulated_on_device" (PLN draws of size n x p made directly in row blocks
            on the devices, for the sharded strategy only; JAX's generator, so other
            numbers than "simulated" for the same seed).
        replicate: oaks only: each row is repeated this many times (np.repeat, axis 0).
        n, p, d, seed: simulated and simulated_on_device only.
        counts_path, offsets_path: csv only. `offsets_path` holds log-offsets.
        content_hash: csv only: a hash of the files' bytes, so that a spec names data,
            not a path whose content may change. Filled in by `core.data.datasets`.
        header: csv only: whether line 1 of the files names the columns, one of
            `HEADER_CHOICES` ("auto" decides and says why; see `core.data.csv_layout`).
        covariates_path: csv only: a covariates table (a column per covariate, a header
            line; `core.data.covariates`), or "" for an intercept alone. Its bytes are in
            `content_hash`.
        formula: oaks and csv: which covariates, as pyPLNmodels' formulas say it
            ("~ 1 + tree"), over oaks' sample table or the covariates file; "" for every
            column of the file (csv) or an intercept alone (oaks).
        intercept: csv with a covariates file and no formula: add a constant column (a
            formula says it itself: "~ 0 + ...").
    """

    kind: str = "oaks"
    replicate: int = 1
    n: int = 0
    p: int = 0
    d: int = 1
    seed: int = 0
    counts_path: str = ""
    offsets_path: str = ""
    content_hash: str = ""
    header: str = "auto"
    covariates_path: str = ""
    formula: str = ""
    intercept: bool = True

    def __post_init__(self) -> None:
        _check_choice("dataset", self.kind, DATASET_KINDS)
        _check_choice("header", self.header, HEADER_CHOICES)
        if self.kind != "csv" and self.header != "auto":
            raise SpecError(f"header applies to csv data only; got header {self.header!r} with dataset {self.kind}")
        if not isinstance(self.formula, str) or len(self.formula) > MAX_FORMULA_CHARACTERS or "\n" in self.formula:
            raise SpecError(f"formula must be one line of at most {MAX_FORMULA_CHARACTERS} characters")
        formula = " ".join(self.formula.split())
        if "~" in formula:  # pyPLNmodels' "endog ~ ..." names the counts, which are these anyway
            formula = ("~ " + formula.split("~", 1)[1].strip()).strip()
        elif formula:  # "1 + tree" says what "~ 1 + tree" does: one spelling, one label
            formula = "~ " + formula
        object.__setattr__(self, "formula", formula)  # frozen; one spelling, one key
        if self.kind in SIMULATED_KINDS and self.formula:
            raise SpecError("a formula applies to oaks and csv data; simulated data have d covariates (--d)")
        if self.kind != "csv" and (self.covariates_path or not self.intercept):
            raise SpecError("a covariates file (and --no-intercept) applies to csv data; oaks takes a formula "
                            "over its sample table (tree, dist2ground, orientation)")
        if self.kind == "csv" and not self.covariates_path and (self.formula or not self.intercept):
            raise SpecError("a formula or --no-intercept needs a covariates file (--covariates FILE)")
        if self.kind == "oaks":
            _check_int("replicate", self.replicate, 1, cap("replicate"))
        elif self.kind in SIMULATED_KINDS:
            _check_int("n", self.n, 2, cap("rows"))
            _check_int("p", self.p, 1, cap("columns"))
            _check_int("d", self.d, 1, cap("covariates"))
            _check_int("seed", self.seed, 0, 2**31 - 1)
            if self.d >= self.n:
                raise SpecError(f"d must be smaller than n; got d = {self.d}, n = {self.n}")
        elif not self.counts_path:
            raise SpecError("a csv dataset needs a counts file (--counts)")

    @property
    def shape(self) -> tuple[int, int, int] | None:
        """(n, p, d) known without loading the counts; None for CSV files (only reading tells)
        and for oaks with a formula (d is known once its sample table is coded)."""
        if self.kind == "oaks":
            return (OAKS_ROWS * self.replicate, OAKS_COLUMNS, 1) if not self.formula else None
        if self.kind in SIMULATED_KINDS:
            return self.n, self.p, self.d
        return None

    @property
    def label(self) -> str:
        """A short human name: "oaks x100", "simulated 1000x50 (seed 0)", "csv counts.csv #1f0c3a",
        "csv counts.csv #1f0c3a, offsets sizes.csv ~ 1 + site over samples.csv"."""
        if self.kind == "oaks":
            return f"oaks x{self.replicate}" + (f" {self.formula}" if self.formula else "")
        if self.kind == "simulated":
            return f"simulated {self.n}x{self.p} d={self.d} (seed {self.seed})"
        if self.kind == "simulated_on_device":
            return f"simulated on device {self.n}x{self.p} d={self.d} (seed {self.seed})"
        # Pages and tables tell problems apart by this label: two files of one name (a counts.csv
        # edited and uploaded again) were drawn, ranked and given one best ELBO as one problem. The
        # tag follows the counts' name, not the whole label: a select box at 1024 px cut it off there.
        label = f"csv {_short_name(self.counts_path)}" + (f" #{self.data_tag}" if self.data_tag else "")
        if self.offsets_path:  # a fit with offsets is another problem: Compare drew both as one
            label += f", offsets {_short_name(self.offsets_path)}"
        if self.covariates_path:
            covariates = _short_name(self.covariates_path)
            label += f" {self.formula} over {covariates}" if self.formula else f" + {covariates}"
        return label

    @property
    def data_tag(self) -> str:
        """csv only: six hex digits naming the files' content and how they were read (the
        header, the constant column), "" where no content hash is known."""
        if self.kind != "csv" or not self.content_hash:
            return ""
        read = f"{self.content_hash}|{self.header}|{self.intercept}"
        return hashlib.sha256(read.encode()).hexdigest()[:DATA_TAG_CHARS]


@dataclasses.dataclass(frozen=True)
class OptimizerSpec:
    """Which algorithm moves the parameters (see `core.fit.algorithms`).

    Attributes:
        name: one of `OPTIMIZERS`. On B, M and S by gradient: "seed" (the seed tutorial's
            RAdam, negated and clipped to 0.1; `lr` unused), "adam", "rprop" (optax.rprop:
            not pyPLNmodels' algorithm, its steps lag the gradient by one iteration and it
            moves B by gradient). On M and S with B and Sigma profiled: "pyplnmodels_rprop"
            (pyPLNmodels' own algorithm: torch's Rprop), "lbfgs" (optax.lbfgs and its line
            search), "diagonal_newton" (variational EM, a Newton step per cell) and
            "preconditioned_lbfgs" (L-BFGS started from a model of the curvature, the
            fastest to converge).
        lr: learning rate (the initial step size for the two Rprops), for the optimizers of
            `LEARNING_RATE_OPTIMIZERS`; the others ignore it, and their spec keeps the
            default, so that one computation has one key whatever a front door passed.
    """

    name: str = "seed"
    lr: float = DEFAULT_LR

    def __post_init__(self) -> None:
        _check_choice("optimizer", self.name, OPTIMIZERS)
        if not isinstance(self.lr, (int, float)) or isinstance(self.lr, bool):
            raise SpecError(f"lr must be a number; got {self.lr!r}")
        if not LR_RANGE[0] <= float(self.lr) <= LR_RANGE[1]:
            raise SpecError(f"lr must be between {LR_RANGE[0]:g} and {LR_RANGE[1]:g}; got {self.lr}")
        if self.name not in LEARNING_RATE_OPTIMIZERS:
            object.__setattr__(self, "lr", DEFAULT_LR)  # frozen; unused, so not part of the key

    @property
    def label(self) -> str:
        if self.name == "seed":
            return "seed (the tutorial's RAdam, clip 0.1)"
        return f"{self.name}(lr={self.lr:g})" if self.name in LEARNING_RATE_OPTIMIZERS else self.name


def refusal(strategy: str, optimizer: str) -> str | None:
    """Why `strategy` cannot run `optimizer` (`core.catalog.Runnable.refusal`), or None when it can."""
    found = catalog.RUNNABLES.get(strategy)
    return found.refusal(optimizer) if found is not None else None


@dataclasses.dataclass(frozen=True)
class FitSpec:
    """Everything that determines one timed fit.

    Attributes:
        dataset: the data.
        strategy: a runnable's name (`core.catalog`): a JAX strategy or a peer.
        iterations: the most iterations to run (fewer when the fit stops at `tol`).
        precision: "float32" or "float64"; every array of the fit has this dtype.
        device: platform to run on: "cpu", "gpu" or "tpu".
        optimizer: the algorithm that moves the parameters.
        init: "seed" (M = 0, S = 1, B = 0, Omega = I), "log_counts" (pyPLNmodels'),
            "log_rates" (log_counts less the log-offsets) or "log_rates_sd" (log_rates with
            S = 1 / sqrt(Y + 1)); see `core.fit.model.init_params`. None: the optimizer's
            default (`DEFAULTS.init_for`).
        repeats: steady-state timing repeats after the first call.
        tol: every strategy stops after the first iteration whose relative ELBO change
            |ELBO_k - ELBO_k-1| / |ELBO_k| is under `tol` (or not a number), from the third
            iteration on; 0 runs every iteration. (pyPLNmodels' own `tol` is another criterion; the pyplnmodels peer
            stops by this one.)
        devices: how many devices of the platform the sharded strategy spans (the first
            `devices` of them); 0, the default, means all. Other strategies run on one
            device: for them 1 is accepted and stored as 0, so the same computation keeps
            one key.

    A field not given takes the front doors' default (`DEFAULTS`): `FitSpec()` is the fit the
    sidebar, `run` and `solve` make when told nothing, with the optimizer the strategy takes
    and the tolerance of the precision.

    What a runnable ignores is normalised here, not by each front door, so that the same
    computation from the command line, a link or the sidebar has one `key`: the PyTorch
    twins run every iteration (tol 0), and an optimizer without a learning rate keeps the
    default `lr` (`OptimizerSpec`).
    """

    dataset: DatasetSpec = DatasetSpec()
    strategy: str = DEFAULTS.strategy
    iterations: int = DEFAULTS.iterations
    precision: str = DEFAULTS.precision
    device: str = DEFAULTS.device
    # None: the front doors' default for the strategy and the precision (`DEFAULTS`), set in
    # `__post_init__`; a spec that exists always holds a value.
    optimizer: OptimizerSpec | None = None
    # None: the optimizer's default start (`DEFAULTS.init_for`), set in `__post_init__`.
    init: str | None = None
    repeats: int = DEFAULTS.repeats
    tol: float | None = None
    devices: int = 0

    def __post_init__(self) -> None:
        _check_choice("strategy", self.strategy, tuple(catalog.RUNNABLES))
        _check_int("iterations", self.iterations, 1, cap("iterations"))
        _check_choice("precision", self.precision, PRECISIONS)
        # frozen: set once, here, as the normalisations below are.
        if self.optimizer is None:
            object.__setattr__(self, "optimizer", OptimizerSpec(DEFAULTS.optimizer_for(self.strategy), DEFAULTS.lr))
        if self.tol is None:
            object.__setattr__(self, "tol", DEFAULTS.tol_for(self.precision))
        _check_choice("device", self.device, DEVICES)
        if self.init is None:
            object.__setattr__(self, "init", DEFAULTS.init_for(self.optimizer.name))
        _check_choice("init", self.init, INITS)
        _check_int("repeats", self.repeats, 1, cap("repeats"))
        if not isinstance(self.tol, (int, float)) or isinstance(self.tol, bool):
            raise SpecError(f"tol must be a number; got {self.tol!r}")
        if not TOL_RANGE[0] <= float(self.tol) <= TOL_RANGE[1]:
            raise SpecError(f"tol must be between {TOL_RANGE[0]:g} and {TOL_RANGE[1]:g}; got {self.tol}")
        _check_int("devices", self.devices, 0, MAX_DEVICES)
        if (why := refusal(self.strategy, self.optimizer.name)) is not None:
            raise SpecError(why)
        if not catalog.RUNNABLES[self.strategy].stops_at_tol:
            object.__setattr__(self, "tol", 0.0)  # frozen; it runs every iteration whatever tol says
        if self.strategy != "sharded":
            if self.devices > 1:
                raise SpecError(f"devices > 1 needs the sharded strategy (the others run on one device); "
                                f"got devices = {self.devices} with strategy {self.strategy}")
            object.__setattr__(self, "devices", 0)  # frozen; 1 and 0 are the same run here
            if self.dataset.kind == "simulated_on_device":
                raise SpecError("dataset simulated_on_device is drawn directly on the devices, row-sharded, "
                                f"and only the sharded strategy fits it; got strategy {self.strategy}")

    def to_dict(self) -> dict[str, Any]:
        values = dataclasses.asdict(self)
        # Left out at their defaults so that specs from before the fields existed keep their key.
        if values["devices"] == 0:
            del values["devices"]
        for name, default in (("header", "auto"), ("covariates_path", ""), ("formula", ""), ("intercept", True)):
            if values["dataset"][name] == default:
                del values["dataset"][name]
        return values

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> FitSpec:
        values = dict(values)
        values["dataset"] = DatasetSpec(**values.get("dataset", {}))
        values["optimizer"] = OptimizerSpec(**values.get("optimizer", {}))
        return cls(**values)

    @property
    def key(self) -> str:
        """A stable hash naming this spec, so that stored runs of the same spec are found."""
        text = json.dumps(self.to_dict(), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]
