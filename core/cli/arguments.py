"""The command line's arguments: the parser (one line and exit 2 on a mistake, never a usage
block) and the specs built from what was parsed. Defaults are the front doors' own
(`core.spec.DEFAULTS`): a run converges unless told otherwise."""

from __future__ import annotations

import argparse
import os

from core import catalog
from core.spec import (
    DATASET_KINDS,
    DEFAULTS,
    DEVICES,
    HEADER_CHOICES,
    INITS,
    LR_RANGE,
    OPTIMIZERS,
    PRECISIONS,
    SIMULATED_KINDS,
    TOL_RANGE,
    DatasetSpec,
    FitSpec,
    OptimizerSpec,
    SpecError,
)

BENCH_TABLES = ("per-iteration", "time-to-solution")
REPEATS_HELP = (f"timed calls after the first, at least (default {DEFAULTS.repeats}): a quick fit is timed more "
                "often, for PLNLAB_MIN_MEASURED_S in all (core.run.repeats)")


class BadUsage(Exception):
    pass


class Parser(argparse.ArgumentParser):
    # argparse prints a usage block and exits; we want exactly one line and exit 2.
    def error(self, message: str):
        raise BadUsage(message)

    def parse_known_args(self, args=None, namespace=None):
        parsed, rest = super().parse_known_args(args, namespace)
        if getattr(parsed, "dataset", "") is None:
            # --counts names the data: without --dataset csv beside it, oaks was fitted and its
            # estimates written in the user's folder, without a word.
            parsed.dataset = "csv" if parsed.counts else "oaks"
        return parsed, rest


def add_db(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", help="run store file (default: $PLNLAB_DB or the per-user store)")


def add_scheduler(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--scheduler", default=None, metavar="ADDRESS",
                        help="run on the workers of the Dask scheduler at ADDRESS (e.g. tls://host:8786; default "
                             "$PLNLAB_SCHEDULER when set, else in this process); the run is stored here")


def add_data(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dataset", choices=DATASET_KINDS, default=None,
                        help="default: csv with --counts, else oaks")
    parser.add_argument("--replicate", type=int, default=1, help="oaks: repeat each row K times")
    parser.add_argument("--n", type=int, default=1000, help="simulated, simulated_on_device: rows")
    parser.add_argument("--p", type=int, default=50, help="simulated, simulated_on_device: columns")
    parser.add_argument("--d", type=int, default=1,
                        help="simulated, simulated_on_device: covariates (intercept included)")
    parser.add_argument("--seed", type=int, default=0, help="simulated, simulated_on_device: random seed")
    parser.add_argument("--counts", default="", help="csv: counts file (implies --dataset csv)")
    parser.add_argument("--offsets", default="", help="csv: log-offsets file (optional)")
    parser.add_argument("--header", choices=HEADER_CHOICES, default="auto",
                        help="csv: whether line 1 names the columns; auto decides and says why (default)")
    parser.add_argument("--covariates", default="", metavar="FILE",
                        help="csv: covariates, a column each with a header line; text columns are one-hot coded "
                             "and a constant column is added (default: an intercept alone)")
    parser.add_argument("--formula", default="", metavar="'~ 1 + tree'",
                        help="oaks: covariates from its sample table (tree, dist2ground, orientation); csv: which "
                             "columns of --covariates; '~ 0 + ...' drops the constant")
    parser.add_argument("--no-intercept", action="store_true",
                        help="csv with --covariates and no --formula: add no constant column")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="python -m core",
                    description="PLN JIT Lab: fit PLN under JAX JIT strategies, time it, store it.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)

    listing = sub.add_parser("strategies", help="list the JIT strategies")
    listing.add_argument("--json", action="store_true")

    run = sub.add_parser("run", help="fit, time and store one run")
    add_data(run)
    run.add_argument("--strategy", default=None,
                     help="default: scan, or sharded with --distributed, --devices K > 1 or "
                          "--dataset simulated_on_device")
    run.add_argument("--devices", type=int, default=0,
                     help="sharded: span the first K devices of --device (default 0: all); simulated CPU "
                          "devices need XLA_FLAGS=--xla_force_host_platform_device_count=K")
    run.add_argument("--iterations", type=int, default=DEFAULTS.iterations,
                     help=f"the most iterations (fewer when --tol stops it; default {DEFAULTS.iterations})")
    run.add_argument("--precision", choices=PRECISIONS, default=DEFAULTS.precision)
    run.add_argument("--device", choices=DEVICES, default=DEFAULTS.device)
    run.add_argument("--optimizer", choices=OPTIMIZERS, default=None,
                     help=f"default {DEFAULTS.optimizer} ({DEFAULTS.gradient_optimizer} for the strategies that "
                          "run only gradient optimizers)")
    run.add_argument("--lr", type=float, default=DEFAULTS.lr,
                     help=f"learning rate of adam, rprop and pyplnmodels_rprop, {LR_RANGE[0]:g} to {LR_RANGE[1]:g}")
    run.add_argument("--init", choices=INITS, default=None, help=f"default: the optimizer's: {DEFAULTS.starts()}")
    run.add_argument("--repeats", type=int, default=DEFAULTS.repeats,
                     help=REPEATS_HELP)
    run.add_argument("--tol", type=float, default=None,
                     help=f"stop after the first iteration whose relative ELBO change is under this, {TOL_RANGE[0]:g} "
                          f"to {TOL_RANGE[1]:g} (0: run every iteration; default {DEFAULTS.tol:g}, float64 "
                          f"{DEFAULTS.tol_float64:g})")
    run.add_argument("--json", action="store_true", help="print the stored run as one JSON line")
    run.add_argument("--estimates", metavar="DIR", default=None,
                     help="write what the fit estimates into DIR, as solve --estimates does")
    run.add_argument("--cold", action="store_true",
                     help="compile from scratch: skip the in-memory and persistent compilation caches for this "
                          "run (the new executables are cached afterwards)")
    run.add_argument("--distributed", action="store_true",
                     help="join a jax.distributed run of the sharded strategy over every process's devices; "
                          "process 0 stores the run")
    run.add_argument("--coordinator", default=None, help="--distributed: HOST:PORT of process 0")
    run.add_argument("--num-processes", type=int, default=None, help="--distributed: how many processes")
    run.add_argument("--process-id", type=int, default=None, help="--distributed: this process's index")
    add_db(run)
    add_scheduler(run)

    solve = sub.add_parser("solve", help="fit to convergence with the fastest configuration measured here, "
                                         "time and store it")
    add_data(solve)
    solve.add_argument("--precision", choices=PRECISIONS, default=DEFAULTS.precision)
    solve.add_argument("--device", choices=DEVICES, default=DEFAULTS.device)
    solve.add_argument("--strategy", default=None, help=f"default: the fastest measured (else {DEFAULTS.strategy})")
    solve.add_argument("--optimizer", choices=OPTIMIZERS, default=None,
                       help=f"default: the fastest measured (else {DEFAULTS.optimizer})")
    solve.add_argument("--init", choices=INITS, default=None,
                       help=f"default: the fastest's (else the optimizer's: {DEFAULTS.starts()})")
    solve.add_argument("--tol", type=float, default=None,
                       help=f"relative ELBO change to stop at; default: the fastest's (else {DEFAULTS.tol:g}, float64 "
                            f"{DEFAULTS.tol_float64:g})")
    solve.add_argument("--iterations", type=int, default=None,
                       help=f"the most iterations (default: the fastest's, else {DEFAULTS.solve_iterations:,}: "
                            "solve fits to convergence)")
    solve.add_argument("--repeats", type=int, default=DEFAULTS.repeats,
                       help=REPEATS_HELP)
    solve.add_argument("--any-host", action="store_true",
                       help="choose among the runs of every host in the store (default: this host's only: a "
                            "time measured elsewhere, or imported, says nothing of this machine)")
    solve.add_argument("--json", action="store_true", help="print the stored run as one JSON line")
    solve.add_argument("--estimates", metavar="DIR", default=None,
                       help="write what the fit estimates into DIR: coefficients.csv (B, a row per covariate) and "
                            "covariance.csv (Sigma), named by the files' columns")
    add_db(solve)
    add_scheduler(solve)

    stored = sub.add_parser("list", help="list stored runs")
    stored.add_argument("--json", action="store_true")
    stored.add_argument("--limit", type=int, default=None)
    stored.add_argument("--deleted", action="store_true",
                        help="the recently deleted runs instead, restorable with `restore` until the date shown")
    add_db(stored)

    export = sub.add_parser("export", help="export runs to .json, .csv or .parquet")
    export.add_argument("path")
    export.add_argument("--ids", type=int, nargs="*", help="run ids (default: all)")
    add_db(export)

    bench = sub.add_parser("bench", help="run strategies side by side on oaks and print a table")
    bench.add_argument("--sizes", type=int, nargs="+", default=[1, 100], help="oaks replication factors")
    bench.add_argument("--iterations", type=int, nargs="+", default=None,
                       help="iterations per size (default: 400 at x1, 100 above)")
    bench.add_argument("--strategies", nargs="+", default=None, help="default: all")
    bench.add_argument("--precision", choices=PRECISIONS, default="float32")
    bench.add_argument("--device", choices=DEVICES, default="cpu")
    bench.add_argument("--repeats", type=int, default=5)
    bench.add_argument("--cold", action="store_true", help="compile every run from scratch (see run --cold)")
    bench.add_argument("--tables", nargs="+", choices=BENCH_TABLES, default=list(BENCH_TABLES),
                       help="per-iteration: every strategy for a fixed number of iterations; time-to-solution: "
                            "iterations and seconds to within 1e-5 of the best ELBO, against pyPLNmodels")
    bench.add_argument("--solve-strategies", nargs="+", default=[DEFAULTS.strategy],
                       help="time-to-solution: the strategies to run each optimizer under")
    bench.add_argument("--solve-optimizers", nargs="+", choices=OPTIMIZERS, default=None,
                       help="time-to-solution: default pyplnmodels_rprop lbfgs diagonal_newton preconditioned_lbfgs")
    bench.add_argument("--trajectory-cap", type=int, default=None, metavar="N",
                       help="time-to-solution: iterations of every contender's first pass, which finds the optimum "
                            "(default: a few times what each optimizer needs on oaks; pyPLNmodels 1000)")
    add_db(bench)
    add_scheduler(bench)

    imported = sub.add_parser("import", help="import runs from .json, .csv or .parquet")
    imported.add_argument("path")
    add_db(imported)

    backup = sub.add_parser("backup", help="copy the whole run store, consistently, to a new file")
    backup.add_argument("path", help="the copy (a file that does not exist yet)")
    add_db(backup)

    delete = sub.add_parser("delete", help="delete runs (restorable with `restore` for a while)")
    delete.add_argument("ids", type=int, nargs="+", metavar="ID", help="run ids, as `list` shows them")
    add_db(delete)

    restore = sub.add_parser("restore", help="bring recently deleted runs back")
    restore.add_argument("ids", type=int, nargs="+", metavar="ID", help="run ids, as `list --deleted` shows them")
    add_db(restore)

    tls = sub.add_parser("tls", help="make a CA and certificates for a team's cluster (mutual TLS)")
    tls.add_argument("folder", help="where to write them (a new folder, or one without a CA)")
    tls.add_argument("--host", action="append", default=None, metavar="NAME",
                     help="a name or address the scheduler is reached at (repeat; default: this machine's name, "
                          "localhost and 127.0.0.1)")
    return parser


def check_strategies(names: list[str]) -> None:
    """SpecError naming the known runnables when one of `names` is not one."""
    for name in names:
        if name not in catalog.RUNNABLES:
            raise SpecError(f"strategy must be one of {', '.join(catalog.RUNNABLES)}; got {name!r}")


def fit_spec(args: argparse.Namespace) -> FitSpec:
    check_strategies([args.strategy])
    return FitSpec(
        dataset=dataset_spec(args), strategy=args.strategy, iterations=args.iterations, precision=args.precision,
        device=args.device, optimizer=OptimizerSpec(args.optimizer or DEFAULTS.optimizer_for(args.strategy), args.lr),
        init=args.init,
        repeats=args.repeats, tol=args.tol, devices=args.devices,
    )


def dataset_spec(args: argparse.Namespace) -> DatasetSpec:
    from core.data.counts import content_hash

    if args.dataset != "csv" and (args.counts or args.offsets):
        raise SpecError(f"--counts and --offsets apply to --dataset csv only (the default with --counts); got "
                        f"--dataset {args.dataset}")
    if args.dataset != "csv" and args.header != "auto":
        raise SpecError(f"--header applies to --dataset csv only; got --dataset {args.dataset}")
    if args.dataset != "csv" and (args.covariates or args.no_intercept):
        raise SpecError(f"--covariates and --no-intercept apply to --dataset csv only; got --dataset {args.dataset}"
                        + (" (oaks takes --formula over its sample table)" if args.dataset == "oaks" else ""))
    if args.dataset == "oaks":
        dataset = DatasetSpec(kind="oaks", replicate=args.replicate, formula=args.formula)
    elif args.dataset in SIMULATED_KINDS:
        if args.formula:
            raise SpecError(f"--formula applies to --dataset oaks and csv; {args.dataset} data have --d covariates")
        dataset = DatasetSpec(kind=args.dataset, n=args.n, p=args.p, d=args.d, seed=args.seed)
    else:
        if not args.counts:
            raise SpecError("--dataset csv needs --counts FILE")
        paths = [path for path in (args.counts, args.offsets, args.covariates) if path]
        for path in paths:
            if not os.path.isfile(path):
                raise SpecError(not_a_file(path, "CSV"))
        dataset = DatasetSpec(kind="csv", counts_path=os.path.abspath(args.counts),
                              offsets_path=os.path.abspath(args.offsets) if args.offsets else "",
                              content_hash=content_hash(*paths), header=args.header,
                              covariates_path=os.path.abspath(args.covariates) if args.covariates else "",
                              formula=args.formula, intercept=not args.no_intercept)
    return dataset


def not_a_file(path: str, kind: str = "") -> str:
    """Why `path`, named as a file, cannot be read: a folder is said to be one (with the
    `kind` of file to name in it), not "no such file"."""
    if os.path.isdir(path):
        return f"{path} is a folder, not a file" + (f": name the {kind} file in it" if kind else "")
    return f"no such file: {path}"
