"""The command line: `python -m core strategies|run|solve|list|export|import|bench`.

Headless runs and sweeps go into the same store as the dashboard's (`--db`, else
$PLNLAB_DB, else the per-user default). Exit status: 0 for a stored run (diverged
included), 2 for bad input (one line on stderr, no traceback), 1 for an internal
failure, 3 for a run on a cluster (--scheduler) whose worker died (stored as interrupted).
Progress goes to stderr; with --json the last stdout line is one JSON object.

Each command imports what it needs when it runs: `list`, `export`, `import` and a
refused option answer without starting JAX (about a second), and `main` must set the
native libraries' environment before numpy or JAX loads.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import traceback
from typing import Any

from core.fit import catalog
from core.spec import (
    DATASET_KINDS,
    DEVICES,
    HEADER_CHOICES,
    INITS,
    OPTIMIZERS,
    PRECISIONS,
    SIMULATED_KINDS,
    DatasetSpec,
    FitSpec,
    OptimizerSpec,
    SpecError,
)

EXIT_OK, EXIT_INTERNAL, EXIT_BAD_INPUT = 0, 1, 2
# The worker running the fit died (--scheduler): the run is stored as interrupted.
EXIT_INTERRUPTED = 3
BENCH_TABLES = ("per-iteration", "time-to-solution")


class _BadUsage(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    # argparse prints a usage block and exits; we want exactly one line and exit 2.
    def error(self, message: str):
        raise _BadUsage(message)


def _json_safe(value: Any) -> Any:
    """NaN and infinities are not JSON: write them as null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return value


def _print_json(value: Any) -> None:
    sys.stdout.write(json.dumps(_json_safe(value)) + "\n")
    sys.stdout.flush()


def _add_db(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", help="run store file (default: $PLNLAB_DB or the per-user store)")


def _add_scheduler(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--scheduler", default=None, metavar="ADDRESS",
                        help="run on the workers of the Dask scheduler at ADDRESS (e.g. tcp://host:8786; default "
                             "$PLNLAB_SCHEDULER when set, else in this process); the run is stored here")


def _add_data(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dataset", choices=DATASET_KINDS, default="oaks")
    parser.add_argument("--replicate", type=int, default=1, help="oaks: repeat each row K times")
    parser.add_argument("--n", type=int, default=1000, help="simulated, simulated_on_device: rows")
    parser.add_argument("--p", type=int, default=50, help="simulated, simulated_on_device: columns")
    parser.add_argument("--d", type=int, default=1,
                        help="simulated, simulated_on_device: covariates (intercept included)")
    parser.add_argument("--seed", type=int, default=0, help="simulated, simulated_on_device: random seed")
    parser.add_argument("--counts", default="", help="csv: counts file")
    parser.add_argument("--offsets", default="", help="csv: log-offsets file (optional)")
    parser.add_argument("--header", choices=HEADER_CHOICES, default="auto",
                        help="csv: whether line 1 names the columns; auto decides and says why (default)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m core", description="PLN JIT Lab: fit PLN under JAX JIT strategies, time it, store it.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    listing = sub.add_parser("strategies", help="list the JIT strategies")
    listing.add_argument("--json", action="store_true")

    run = sub.add_parser("run", help="fit, time and store one run")
    _add_data(run)
    run.add_argument("--strategy", default=None,
                     help="default: scan, or sharded with --distributed, --devices K > 1 or "
                          "--dataset simulated_on_device")
    run.add_argument("--devices", type=int, default=0,
                     help="sharded: span the first K devices of --device (default 0: all); simulated CPU "
                          "devices need XLA_FLAGS=--xla_force_host_platform_device_count=K")
    run.add_argument("--iterations", type=int, default=150, help="the most iterations (fewer when --tol stops it)")
    run.add_argument("--precision", choices=PRECISIONS, default="float32")
    run.add_argument("--device", choices=DEVICES, default="cpu")
    run.add_argument("--optimizer", choices=OPTIMIZERS, default="seed")
    run.add_argument("--lr", type=float, default=0.01)
    run.add_argument("--init", choices=INITS, default="seed")
    run.add_argument("--repeats", type=int, default=3)
    run.add_argument("--tol", type=float, default=0.0,
                     help="stop after the first iteration whose relative ELBO change is under this (0: never)")
    run.add_argument("--json", action="store_true", help="print the stored run as one JSON line")
    run.add_argument("--cold", action="store_true",
                     help="compile from scratch: skip the in-memory and persistent compilation caches for this "
                          "run (the new executables are cached afterwards)")
    run.add_argument("--distributed", action="store_true",
                     help="join a jax.distributed run of the sharded strategy over every process's devices; "
                          "process 0 stores the run")
    run.add_argument("--coordinator", default=None, help="--distributed: HOST:PORT of process 0")
    run.add_argument("--num-processes", type=int, default=None, help="--distributed: how many processes")
    run.add_argument("--process-id", type=int, default=None, help="--distributed: this process's index")
    _add_db(run)
    _add_scheduler(run)

    solve = sub.add_parser("solve", help="fit to convergence with the fastest configuration measured here, "
                                         "time and store it")
    _add_data(solve)
    solve.add_argument("--precision", choices=PRECISIONS, default="float32")
    solve.add_argument("--device", choices=DEVICES, default="cpu")
    solve.add_argument("--strategy", default=None, help="default: the fastest measured (else scan)")
    solve.add_argument("--optimizer", choices=OPTIMIZERS, default=None,
                       help="default: the fastest measured (else preconditioned_lbfgs)")
    solve.add_argument("--init", choices=INITS, default=None, help="default: the fastest's (else log_rates)")
    solve.add_argument("--tol", type=float, default=None,
                       help="relative ELBO change to stop at; default: the fastest's (else 1e-7, float64 1e-9)")
    solve.add_argument("--iterations", type=int, default=None, help="the most iterations (default: the "
                                                                     "fastest's, else 1000)")
    solve.add_argument("--repeats", type=int, default=3)
    solve.add_argument("--json", action="store_true", help="print the stored run as one JSON line")
    _add_db(solve)
    _add_scheduler(solve)

    stored = sub.add_parser("list", help="list stored runs")
    stored.add_argument("--json", action="store_true")
    stored.add_argument("--limit", type=int, default=None)
    _add_db(stored)

    export = sub.add_parser("export", help="export runs to .json, .csv or .parquet")
    export.add_argument("path")
    export.add_argument("--ids", type=int, nargs="*", help="run ids (default: all)")
    _add_db(export)

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
    bench.add_argument("--solve-strategies", nargs="+", default=["scan"],
                       help="time-to-solution: the strategies to run each optimizer under")
    bench.add_argument("--solve-optimizers", nargs="+", choices=OPTIMIZERS, default=None,
                       help="time-to-solution: default pyplnmodels_rprop lbfgs diagonal_newton preconditioned_lbfgs")
    _add_db(bench)
    _add_scheduler(bench)

    imported = sub.add_parser("import", help="import runs from .json, .csv or .parquet")
    imported.add_argument("path")
    _add_db(imported)
    return parser


def _check_strategies(names: list[str]) -> None:
    """SpecError naming the known runnables when one of `names` is not one."""
    for name in names:
        if name not in catalog.RUNNABLES:
            raise SpecError(f"strategy must be one of {', '.join(catalog.RUNNABLES)}; got {name!r}")


def _fit_spec(args: argparse.Namespace) -> FitSpec:
    _check_strategies([args.strategy])
    return FitSpec(
        dataset=_dataset_spec(args), strategy=args.strategy, iterations=args.iterations, precision=args.precision,
        device=args.device, optimizer=OptimizerSpec(args.optimizer, args.lr), init=args.init,
        repeats=args.repeats, tol=args.tol, devices=args.devices,
    )


def _dataset_spec(args: argparse.Namespace) -> DatasetSpec:
    from core.data.counts import content_hash

    if args.dataset != "csv" and args.header != "auto":
        raise SpecError(f"--header applies to --dataset csv only; got --dataset {args.dataset}")
    if args.dataset == "oaks":
        dataset = DatasetSpec(kind="oaks", replicate=args.replicate)
    elif args.dataset in SIMULATED_KINDS:
        dataset = DatasetSpec(kind=args.dataset, n=args.n, p=args.p, d=args.d, seed=args.seed)
    else:
        if not args.counts:
            raise SpecError("--dataset csv needs --counts FILE")
        paths = [args.counts] + ([args.offsets] if args.offsets else [])
        for path in paths:
            if not os.path.isfile(path):
                raise SpecError(f"no such file: {path}")
        dataset = DatasetSpec(kind="csv", counts_path=os.path.abspath(args.counts),
                              offsets_path=os.path.abspath(args.offsets) if args.offsets else "",
                              content_hash=content_hash(*paths), header=args.header)
    return dataset


class _StderrProgress:
    """A one-line progress bar on stderr (redrawn in place on a terminal)."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.tty = sys.stderr.isatty()
        self.phase = ""
        self.width = 0
        self._shown_s = -1.0

    def __call__(self, progress) -> None:
        if progress.phase == "queued":
            self._queued(progress)
            return
        bar = ""
        if progress.total:
            filled = int(30 * progress.done / progress.total)
            bar = f"[{'#' * filled}{'.' * (30 - filled)}] {progress.done}/{progress.total}"
        elbo = f" ELBO {progress.elbo:.6g}" if progress.elbo is not None else ""
        line = f"{self.label}: {progress.phase:<10} {bar}{elbo}"
        if self.tty:
            end = "\n" if progress.phase == "done" else ""
            sys.stderr.write("\r" + line.ljust(self.width) + end)
            self.width = len(line)
        elif progress.phase != self.phase:
            # Logs and pipes get one line per phase rather than a stream of redraws.
            sys.stderr.write(line + "\n")
        self.phase = progress.phase
        sys.stderr.flush()

    def _queued(self, progress) -> None:
        # One line when the wait starts, then (on a terminal) a redraw every second.
        ahead = progress.ahead[0].describe() if progress.ahead else "the device"
        line = (f"{self.label}: queued, {len(progress.ahead)} ahead, waited {progress.waited_s:.0f} s; "
                f"now: {ahead}")
        if self.tty and int(progress.waited_s) != int(self._shown_s):
            sys.stderr.write("\r" + line.ljust(self.width))
            self.width, self._shown_s = len(line), progress.waited_s
        elif not self.tty and self.phase != "queued":
            sys.stderr.write(line + "\n")
        self.phase = "queued"
        sys.stderr.flush()


def _command_run(args) -> int:
    from core.data import datasets
    from core.run import distributed, engine
    from core.store import stored_run
    from core.store.run_store import RunStore

    scheduler = _scheduler(args)
    if args.distributed and scheduler:
        raise SpecError("--distributed starts its own processes; it does not go with --scheduler")
    if args.distributed:
        args.strategy = args.strategy or "sharded"
        if args.strategy != "sharded":
            raise SpecError(f"--distributed runs the sharded strategy; got --strategy {args.strategy}")
        distributed.check_options(args.coordinator, args.num_processes, args.process_id)
    elif (args.coordinator, args.num_processes, args.process_id) != (None, None, None):
        raise SpecError("--coordinator, --num-processes and --process-id need --distributed")
    # Only sharded spans devices or fits data drawn on them: a default that always works.
    spans_devices = args.devices > 1 or args.dataset == "simulated_on_device"
    args.strategy = args.strategy or ("sharded" if spans_devices else "scan")
    spec = _fit_spec(args)
    # A CSV is read before the run so that its caps, memory and time are checked before it
    # queues for the device (its shape is unknown until read).
    counts = datasets.load(spec.dataset) if spec.dataset.kind == "csv" else None
    if args.distributed:
        # Before anything touches a JAX backend (engine.run is the first thing that does).
        distributed.initialize(args.coordinator, args.num_processes, args.process_id)
    primary = not args.distributed or distributed.is_primary()
    store = RunStore(args.db) if primary else None
    label = f"{spec.strategy} on {spec.dataset.label}"
    if args.distributed:
        label += f" [process {distributed.process_index()}/{distributed.process_count()}]"
    progress = _StderrProgress(label)
    counts = _read_csv_saying_how(spec) if spec.dataset.kind == "csv" else None
    if scheduler:
        result = _run_on_cluster(scheduler, store, spec, counts, progress, args.cold)
    elif primary:
        result = stored_run.run_and_store(store, spec, counts, on_progress=progress, owner="command line",
                                          cold=args.cold)
    else:
        # Process 0 holds its host's device queue for the whole distributed run; the
        # others join its collectives rather than queue (they would wait for each other).
        result = engine.run(spec, counts, on_progress=progress, hold_device=False, cold=args.cold)
    if not primary:
        # Every process computed the same fit; process 0 alone writes it.
        sys.stderr.write(f"{label}: not stored (process 0 stores the run); final ELBO {result.final_elbo}\n")
        if args.json:
            _print_json(result.to_dict())
        return EXIT_OK
    _print_run(result, args.json)
    return EXIT_OK


def _scheduler(args) -> str:
    """The scheduler to run on: --scheduler, else $PLNLAB_SCHEDULER, else "" (this process)."""
    from core.cluster.connection import SCHEDULER_ENV

    return (args.scheduler or os.environ.get(SCHEDULER_ENV, "")).strip()


def _run_on_cluster(address: str, store, spec: FitSpec, counts, progress, cold: bool):
    """`spec` fitted on a worker of the scheduler at `address` and stored in `store`."""
    from core.cluster import connection, stored

    cluster = connection.join(address)
    try:
        sys.stderr.write(f"running on the cluster at {address}\n")
        return stored.run_and_store(cluster, store, spec, counts, on_progress=progress, owner="command line",
                                    cold=cold)
    finally:
        cluster.close()


def _print_run(result, as_json: bool) -> None:
    if as_json:
        _print_json(result.to_dict())
        return
    solved = (f"; time to solution {result.time_to_solution_s:.4f} s" if result.time_to_solution_s is not None
              else "")
    print(f"run {result.id}: {result.strategy} {result.dataset} {result.precision} {result.status}; "
          f"compile {result.compile_s:.3f} s ({result.cache}), first call {result.first_call_s:.3f} s, "
          f"steady {result.run_s:.4f} s = {result.iterations_run} iterations x {result.per_iter_ms:.3f} ms"
          f"{solved}; final ELBO {result.final_elbo}")
    for line in ([result.error] if result.error else []) + _convergence(result) + result.warnings:
        print(f"  {line}")


def _command_solve(args) -> int:
    from core.bench import solve
    from core.data import datasets
    from core.store import stored_run
    from core.store.run_store import RunStore

    if args.strategy is not None:
        _check_strategies([args.strategy])
    if args.tol is not None and not args.tol > 0:
        raise SpecError(f"solve stops at a tolerance: --tol must be > 0; got {args.tol}")
    dataset = _dataset_spec(args)
    counts = datasets.load(dataset) if dataset.kind == "csv" else None
    store = RunStore(args.db)
    given = {"strategy": args.strategy, "optimizer": args.optimizer, "init": args.init, "tol": args.tol,
             "iterations": args.iterations}
    choice = solve.choose(store.frame(), dataset, args.precision, args.device, given)
    spec = solve.solve_spec(dataset, args.precision, args.device, args.repeats, choice)
    sys.stderr.write(f"solving {dataset.label} with {spec.strategy}, {spec.optimizer.label}, init {spec.init}, "
                     f"tol {spec.tol:g}, at most {spec.iterations:,} iterations: {choice.why}\n")
    progress = _StderrProgress(f"{spec.strategy} on {dataset.label}")
    scheduler = _scheduler(args)
    if scheduler:
        result = _run_on_cluster(scheduler, store, spec, counts, progress, cold=False)
    else:
        result = stored_run.run_and_store(store, spec, counts, on_progress=progress, owner="command line")
    if result.time_to_solution_s is None and result.status == "ok":
        sys.stderr.write(f"not converged: the relative ELBO change stayed above {spec.tol:g} for "
                         f"{spec.iterations:,} iterations (raise --iterations or --tol)\n")
    _print_run(result, args.json)
    return EXIT_OK


def _read_csv_saying_how(spec: FitSpec):
    """The CSV data of `spec`, with how they were read (separator, header) and changed
    (columns dropped) on stderr."""
    from core.data import datasets

    counts = datasets.load(spec.dataset)
    for line in (*counts.notes, *counts.warnings):
        sys.stderr.write(f"{line}\n")
    return counts


def _convergence(result) -> list[str]:
    if result.converged is False:
        return [f"not converged: the last relative ELBO change, {result.final_change:.1e}, is above "
                f"--tol {result.tol:g}; run more iterations"]
    return []


def _command_list(args) -> int:
    from core.store.run_store import RunStore

    if args.limit is not None and args.limit < 0:
        raise SpecError(f"--limit must be a whole number >= 0; got {args.limit}")
    runs = RunStore(args.db).list(with_elbo=False, limit=args.limit)
    if args.json:
        _print_json([r.to_dict(with_elbo=False) for r in runs])
    else:
        for r in runs:
            print(f"{r.id:>5} {r.strategy:<18} {r.dataset:<14} {r.precision:<8} {r.device:<4} {r.status:<9} "
                  f"{r.per_iter_ms:>9.3f} ms/it  compile {r.compile_s:.3f} s  ELBO {r.final_elbo}")
    return EXIT_OK


def _command_strategies(args) -> int:
    described = [{"name": r.name, "description": r.description} for r in catalog.RUNNABLES.values()]
    if args.json:
        _print_json(described)
    else:
        for item in described:
            print(f"{item['name']}: {item['description']}\n")
    return EXIT_OK


def _command_export(args) -> int:
    from core.store.run_store import RunStore

    count = RunStore(args.db).export(args.path, args.ids or None)
    print(f"exported {count} runs to {args.path}")
    return EXIT_OK


def _command_import(args) -> int:
    from core.store.run_store import RunStore

    if not os.path.isfile(args.path):
        raise SpecError(f"no such file: {args.path}")
    done = RunStore(args.db).import_file(args.path)
    print(done.summary().replace("Imported", "imported", 1))
    if done.refused:  # the others are stored; bad input all the same
        raise SpecError(done.refusals())
    return EXIT_OK


def _command_bench(args) -> int:
    from core.bench import suite
    from core.bench import time_to_solution as tts
    from core.store.run_store import RunStore

    names = args.strategies or list(catalog.RUNNABLES)
    _check_strategies(names + args.solve_strategies)
    bench = suite.Bench(
        sizes=tuple(args.sizes), strategies=tuple(names),
        iterations=tuple(args.iterations or [400 if size == 1 else 100 for size in args.sizes]),
        precision=args.precision, repeats=args.repeats, device=args.device, cold=args.cold, tables=tuple(args.tables),
        solve_strategies=tuple(args.solve_strategies),
        solve_optimizers=tuple(args.solve_optimizers or tts.DEFAULT_OPTIMIZERS))
    bench.check()
    store = RunStore(args.db)

    def progress(result) -> None:
        sys.stderr.write(f"  {result.strategy} ({result.optimizer}) on {result.dataset}: {result.iterations_run} "
                         f"iterations, {result.per_iter_ms:.3f} ms/iteration\n")

    scheduler = _scheduler(args)
    if scheduler:
        tables = _bench_on_cluster(scheduler, bench, store, progress)
    else:
        tables = suite.run(bench, store, progress)
    for table in tables:
        print(table)
    return EXIT_OK


def _bench_on_cluster(address: str, bench, store, progress) -> list[str]:
    """`bench` run on one worker of the scheduler at `address` (every run side by side in one
    process, as here), its runs stored in `store`; its tables."""
    from core.cluster import connection, submit, tasks

    cluster = connection.join(address)
    try:
        sys.stderr.write(f"running the benchmark on a worker of {address}\n")
        tables, runs = submit.call(cluster, tasks.benchmark, bench, platform=bench.device, label="benchmark",
                                   owner="command line")
    finally:
        cluster.close()
    for run in runs:
        store.add(run)
        progress(run)
    return tables


COMMANDS = {
    "bench": _command_bench,
    "strategies": _command_strategies, "run": _command_run, "solve": _command_solve, "list": _command_list,
    "export": _command_export, "import": _command_import,
}


def main(argv: list[str] | None = None) -> int:
    from core.run.host import native_settings

    native_settings()  # before anything loads numpy, scipy or jax
    from core.cluster.errors import RunInterrupted
    from core.run.progress import Cancelled
    from core.store.run_store import StoreError

    try:
        args = build_parser().parse_args(argv)
        return COMMANDS[args.command](args)
    except (_BadUsage, SpecError, StoreError, KeyError) as error:
        message = error.args[0] if error.args else str(error)
        sys.stderr.write(f"python -m core: error: {message}\n")
        return EXIT_BAD_INPUT
    except RunInterrupted as interrupted:
        sys.stderr.write(f"python -m core: {interrupted}\n")
        return EXIT_INTERRUPTED
    except KeyboardInterrupt:
        sys.stderr.write("python -m core: interrupted; nothing was stored\n")
        return 130
    except Cancelled:  # asked through the run store, e.g. from the dashboard's Runs under way
        sys.stderr.write("python -m core: cancelled; nothing was stored\n")
        return 130
    except Exception as error:  # noqa: BLE001 - the last line of defence of a CLI
        if os.environ.get("PLNLAB_DEBUG"):
            traceback.print_exc()
        sys.stderr.write(f"python -m core: internal error: {type(error).__name__}: {error} "
                         "(set PLNLAB_DEBUG=1 for a traceback)\n")
        return EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())
