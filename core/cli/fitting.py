"""The commands that fit: `run`, `solve` and `bench`, in this process or, with --scheduler
(or $PLNLAB_SCHEDULER), on the workers of a Dask scheduler, the runs stored here."""

from __future__ import annotations

import sys

from core import catalog, config
from core.cli import EXIT_NOT_SOLVED, EXIT_OK
from core.cli.arguments import check_strategies, dataset_spec, fit_spec
from core.cli.output import StderrProgress, elbo_text, print_json, print_run, read_csv_saying_how
from core.spec import DEFAULTS, TOL_RANGE, FitSpec, OptimizerSpec, SpecError


def command_run(args) -> int:
    from core.machine import distributed
    from core.run import engine, stored_run
    from core.store.run_store import RunStore

    scheduler = scheduler_address(args)
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
    args.strategy = args.strategy or ("sharded" if spans_devices else DEFAULTS.strategy)
    spec = fit_spec(args)
    # Before the fit: a folder that cannot be written is said now, not after a long fit.
    folder = estimates_folder(args.estimates) if args.estimates is not None else None
    # A CSV is read before the run so that its caps, memory and time are checked before it
    # queues for the device (its shape is unknown until read), and before a distributed run's
    # processes meet.
    counts = read_csv_saying_how(spec.dataset) if spec.dataset.kind == "csv" else None
    if args.distributed:
        # Before anything touches a JAX backend (engine.run is the first thing that does).
        distributed.initialize(args.coordinator, args.num_processes, args.process_id)
    primary = not args.distributed or distributed.is_primary()
    store = RunStore(args.db) if primary else None
    label = f"{spec.strategy} on {spec.dataset.label}"
    if args.distributed:
        label += f" [process {distributed.process_index()}/{distributed.process_count()}]"
    if store is not None:
        say_planned_time(store, spec, counts, args.cold)
    progress = StderrProgress(label)
    if scheduler:
        result = run_on_cluster(scheduler, store, spec, counts, progress, args.cold)
    elif primary:
        result = stored_run.run_and_store(store, spec, counts, on_progress=progress, owner="command line",
                                          cold=args.cold)
    else:
        # Process 0 holds its host's device queue for the whole distributed run; the
        # others join its collectives rather than queue (they would wait for each other).
        result = engine.run(spec, counts, on_progress=progress, hold_device=False, cold=args.cold)
    if not primary:
        # Every process computed the same fit; process 0 alone writes it.
        sys.stderr.write(f"{label}: not stored (process 0 stores the run); "
                         f"final ELBO {elbo_text(result.final_elbo, result.precision)}\n")
        if args.json:
            print_json(result.to_dict())
        return EXIT_OK
    print_run(result, args.json)
    if folder is not None:
        write_estimates(result, folder)
    return EXIT_OK


def say_planned_time(store, spec: FitSpec, counts, cold: bool = False) -> None:
    """On stderr, how long `spec` (compiled from scratch where `cold`) will hold the device
    where the store's runs tell and it is long (`core.run.time_estimate`), as the Run page says it."""
    from core.coordination import budget
    from core.run import time_estimate

    planned = time_estimate.plan_note([spec], counts, store, budget.max_run_seconds(), cold)
    if planned:
        sys.stderr.write(planned[0] + "\n")


def scheduler_address(args) -> str:
    """The scheduler to run on: --scheduler, else $PLNLAB_SCHEDULER, else "" (this process)."""
    from core.cluster import SCHEDULER_ENV  # not `connection`: that imports Dask, a second of a start

    return (args.scheduler or config.raw(SCHEDULER_ENV)).strip()


def run_on_cluster(address: str, store, spec: FitSpec, counts, progress, cold: bool):
    """`spec` fitted on a worker of the scheduler at `address` and stored in `store`."""
    from core.cluster import connection, stored

    cluster = connection.join(address)
    try:
        sys.stderr.write(f"running on the cluster at {address}\n")
        return stored.run_and_store(cluster, store, spec, counts, on_progress=progress, owner="command line",
                                    cold=cold)
    finally:
        cluster.close()


def command_solve(args) -> int:
    from core.bench import solve
    from core.data import datasets
    from core.run import stored_run
    from core.store.run_store import RunStore

    if args.strategy is not None:
        check_strategies([args.strategy])
    if args.tol is not None and not 0 < args.tol <= TOL_RANGE[1]:
        raise SpecError(f"solve stops at a tolerance: --tol must be > 0 and at most {TOL_RANGE[1]:g}; got {args.tol}")
    dataset = dataset_spec(args)
    # The flags given, checked as the run's spec will check them, before any file is read: a
    # bad --tol was said under a line about how the CSV's header was read.
    FitSpec(dataset=dataset, strategy=args.strategy or DEFAULTS.strategy, precision=args.precision,
            device=args.device, iterations=args.iterations or DEFAULTS.solve_iterations, tol=args.tol,
            repeats=args.repeats, init=args.init,
            optimizer=OptimizerSpec(args.optimizer, DEFAULTS.lr) if args.optimizer else None)
    # Before the fit: a folder that cannot be written is said now, not after a long fit.
    folder = estimates_folder(args.estimates) if args.estimates is not None else None
    # Read (and a formula over oaks' sample table coded) before the line that says what is
    # solved, so that bad input is one line; how a CSV was read is said (its header decided).
    counts = read_csv_saying_how(dataset) if dataset.kind == "csv" else None
    if dataset.kind == "oaks" and dataset.formula:
        datasets.load(dataset)
    store = RunStore(args.db)
    given = {"strategy": args.strategy, "optimizer": args.optimizer, "init": args.init, "tol": args.tol,
             "iterations": args.iterations}
    stored = store.find(dataset=dataset.label, precision=args.precision)
    choice = solve.choose(stored, dataset, args.precision, args.device, given, any_host=args.any_host)
    spec = solve.solve_spec(dataset, args.precision, args.device, args.repeats, choice)
    sys.stderr.write(f"solving {dataset.label} with {spec.strategy}, {spec.optimizer.label}, init {spec.init}, "
                     f"tol {spec.tol:g}, at most {spec.iterations:,} iterations: {choice.why}\n")
    say_planned_time(store, spec, counts)
    progress = StderrProgress(f"{spec.strategy} on {dataset.label}")
    scheduler = scheduler_address(args)
    if scheduler:
        result = run_on_cluster(scheduler, store, spec, counts, progress, cold=False)
    else:
        result = stored_run.run_and_store(store, spec, counts, on_progress=progress, owner="command line")
    print_run(result, args.json)
    solved = result.status == "ok" and bool(result.converged)
    if folder is not None:
        try:
            write_estimates(result, folder)
        except SpecError as nothing:
            if solved:
                raise
            # No solution, so no estimates: that the run is no solution is what the status says.
            sys.stderr.write(f"python -m core: {nothing}\n")
    return EXIT_OK if solved else EXIT_NOT_SOLVED


def estimates_folder(directory: str):
    """`directory` as a folder the estimates can be written to, made only when they are
    written (a refused file or a failed fit left empty folders behind); SpecError naming it
    otherwise, before any fit."""
    import os
    import pathlib

    folder = pathlib.Path(directory)
    blocking = next((path for path in (folder, *folder.parents) if path.exists() and not path.is_dir()), None)
    if blocking is not None:
        raise SpecError(f"--estimates {directory}: {blocking} is a file, not a folder")
    nearest = next(path for path in (folder, *folder.parents, pathlib.Path(".")) if path.exists())
    if not os.access(nearest, os.W_OK | os.X_OK):
        raise SpecError(f"--estimates {directory}: {'that folder' if nearest == folder else nearest} cannot be "
                        "written to")
    return folder


def write_estimates(result, folder) -> None:
    """B and Sigma of `result` as CSV files in `folder` (made now), each file named on stderr
    (and said where it replaces an earlier one); SpecError where the fit left none to write (it
    failed or diverged: the run is stored all the same), no folder made."""
    from core.results import estimates

    if result.estimates is None or result.status != "ok" or result.diverged_at is not None:
        why = ("diverged, so its final point estimates nothing" if result.diverged_at is not None else
               f"ended {result.status}, so its final point estimates nothing" if result.status != "ok" else
               f"ran {result.strategy}, which hands back no final point to estimate from")
        raise SpecError(f"no estimates written to {folder}: run {result.id} {why}")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise SpecError(f"--estimates {folder}: cannot make that folder: {exc.strerror or exc}") from None
    try:
        for name, text in result.estimates.files(estimates.about(result)).items():
            path = folder / name
            replacing = path.exists()
            path.write_text(text)
            sys.stderr.write(f"wrote {path}" + (" (replacing the file there)" if replacing else "") + "\n")
    except OSError as exc:
        raise SpecError(f"cannot write the estimates to {folder}: {exc.strerror or exc}") from None
    if result.estimates.covariance is None:
        sys.stderr.write(f"covariance.csv not written: Sigma is kept for at most "
                         f"{estimates.MAX_COVARIANCE_COLUMNS:,} columns, and these data have {result.p:,}\n")
    if not result.converged:
        sys.stderr.write("these estimates are where the fit stopped, which is not its optimum (above)\n")


def command_bench(args) -> int:
    from core.bench import suite
    from core.bench import time_to_solution as tts
    from core.store.run_store import RunStore

    names = args.strategies or list(catalog.RUNNABLES)
    check_strategies(names + args.solve_strategies)
    bench = suite.Bench(
        sizes=tuple(args.sizes), strategies=tuple(names),
        iterations=tuple(args.iterations or [400 if size == 1 else 100 for size in args.sizes]),
        precision=args.precision, repeats=args.repeats, device=args.device, cold=args.cold, tables=tuple(args.tables),
        solve_strategies=tuple(args.solve_strategies),
        solve_optimizers=tuple(args.solve_optimizers or tts.DEFAULT_OPTIMIZERS), trajectory_cap=args.trajectory_cap)
    bench.check()
    store = RunStore(args.db)

    def progress(result) -> None:
        sys.stderr.write(f"  {result.strategy} ({result.optimizer}) on {result.dataset}: {result.iterations_run} "
                         f"iterations, {result.per_iter_ms:.3f} ms/iteration\n")

    scheduler = scheduler_address(args)
    if scheduler:
        tables = bench_on_cluster(scheduler, bench, store, progress)
    else:
        tables = suite.run(bench, store, progress)
    for table in tables:
        print(table)
    return EXIT_OK


def bench_on_cluster(address: str, bench, store, progress) -> list[str]:
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
