"""The commands that read or move stored runs: `strategies` (what can run), `list`, `export`,
`import`, `backup`, `delete` and `restore`; none of them starts JAX.

`delete` and `restore` act on any run of a store the user can write: the dashboard's rule on
whose runs a session may delete is about sessions sharing a server, and whoever can write the
store's file could change it anyway."""

from __future__ import annotations

import os
import pathlib
import sys
import time

from core import catalog
from core.cli import EXIT_OK
from core.cli.arguments import not_a_file
from core.cli.output import compile_text, elbo_text, print_json
from core.results import outcome
from core.spec import SpecError


def stored(args):
    """The run store a reading command names, which must exist: a mistyped --db (or
    $PLNLAB_DB) made an empty store there and listed nothing, read as "no runs". Only the
    per-user default may be missing (nothing stored yet): None then."""
    from core import config
    from core.store.run_store import DEFAULT_DB_ENV, RunStore, default_db_path

    named = args.db or config.raw(DEFAULT_DB_ENV)
    path = pathlib.Path(args.db).expanduser() if args.db else default_db_path()
    if not path.is_file():
        if named:
            how = "--db" if args.db else f"${DEFAULT_DB_ENV}"
            raise SpecError(f"no run store at {path} ({how}): nothing is stored there")
        return None
    return RunStore(path)


def command_list(args) -> int:
    if args.limit is not None and args.limit < 0:
        raise SpecError(f"--limit must be a whole number >= 0; got {args.limit}")
    store = stored(args)
    if args.deleted:
        return _list_deleted(store, args)
    runs = store.list(with_elbo=False, limit=args.limit) if store is not None else []
    if args.json:
        print_json([r.to_dict(with_elbo=False) for r in runs])
    elif not runs:
        _say_none(store, "runs stored")
    else:
        # Named columns, the iterations among them: eager's ELBO after its 40 iterations beside
        # scan's after 500 read as a wrong answer. The data's name, of any length, comes last.
        print(f"{'id':>5} {'strategy':<18} {'precision':<9} {'dev':<4} {'ended':<13} {'iterations':>10} "
              f"{'per iteration':>13}  {'compile':<25} {'ELBO':<19} dataset")
        for r in runs:
            ended = outcome.finished_as(r.status, r.converged, r.stalled, r.short)
            timed = r.iterations_run > 0 or r.status == "ok"  # a run that stopped before its first timing has none
            iterations = f"{r.iterations_run:>10,}" if timed else f"{'-':>10}"
            per_iteration = f"{r.per_iter_ms:>10.3f} ms" if timed else f"{'-':>13}"
            compile_ = compile_text(r) if timed else "-"
            elbo = elbo_text(r.final_elbo, r.precision) if r.final_elbo is not None else "-"
            print(f"{r.id:>5} {r.strategy:<18} {r.precision:<9} {r.device:<4} {ended:<13} {iterations} "
                  f"{per_iteration}  {compile_:<25} {elbo:<19} {r.dataset}")
    return EXIT_OK


def _list_deleted(store, args) -> int:
    from core.store.run_store import RESTORE_DAYS

    deleted = store.deleted(limit=args.limit) if store is not None else []
    if args.json:
        print_json([{**run.to_dict(with_elbo=False), "deleted_at": at, "restorable_until": at + RESTORE_DAYS * 86400}
                    for run, at in deleted])
    elif not deleted:
        _say_none(store, "recently deleted runs")
    else:
        print(f"{'id':>5} {'strategy':<18} {'precision':<9} {'dev':<4} {'deleted':<16} {'restorable until':<16} "
              "dataset")
        for run, at in deleted:
            print(f"{run.id:>5} {run.strategy:<18} {run.precision:<9} {run.device:<4} {_local(at):<16} "
                  f"{_local(at + RESTORE_DAYS * 86400):<16} {run.dataset}")
    return EXIT_OK


def _say_none(store, what: str) -> None:
    """An empty listing said, on stderr: nothing printed read as a store that could not be read."""
    where = store.path if store is not None else "the default store (none yet)"
    sys.stderr.write(f"no {what} in {where}\n")


def _local(epoch_s: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(epoch_s))


def _numbered(run_ids) -> str:
    return ", ".join(f"#{run_id}" for run_id in sorted(run_ids))


def _runs(count: int) -> str:
    return f"{count} run" + ("" if count == 1 else "s")


def _held(args, action: str, refusal) -> tuple:
    """(the store, the live and the deleted runs among `args.ids`) for `delete` and `restore`;
    SpecError saying `refusal(store, missing)` when an id is not in the store. All or nothing:
    a mistyped id among several is more likely a slip than a wish to act on the others."""
    store = stored(args)
    if store is None:
        raise SpecError(f"no runs stored yet: nothing to {action}")
    live, deleted = store.which(args.ids)
    if missing := set(args.ids) - live - deleted:
        raise SpecError(refusal(store, missing))
    return store, live, deleted


def _already(run_ids: set[int], state: str) -> str:
    """" (#4 was deleted already)": ids already where they were asked to be, said, not refused."""
    return f" ({_numbered(run_ids)} {'was' if len(run_ids) == 1 else 'were'} {state})" if run_ids else ""


def command_delete(args) -> int:
    from core.store.run_store import RESTORE_DAYS

    store, live, deleted = _held(args, "delete", lambda store, missing:
                                 f"no run {_numbered(missing)} in {store.path}: nothing was deleted")
    store.delete(sorted(live))
    ids = " ".join(str(run_id) for run_id in sorted(live))
    told = (f"deleted {_runs(len(live))} ({_numbered(live)}) from {store.path}; "
            f"`python -m core restore {ids}` brings {'it' if len(live) == 1 else 'them'} back within "
            f"{RESTORE_DAYS} days") if live else "deleted nothing"
    print(told + _already(set(args.ids) & deleted, "deleted already"))
    return EXIT_OK


def command_restore(args) -> int:
    from core.store.run_store import RESTORE_DAYS

    store, live, deleted = _held(args, "restore", lambda store, missing: (
        f"no deleted run {_numbered(missing)} in {store.path} (a deleted run is kept {RESTORE_DAYS} days; "
        "`python -m core list --deleted` lists them): nothing was restored"))
    restored = store.restore(sorted(deleted)) if deleted else 0
    told = f"restored {_runs(restored)} ({_numbered(deleted)}) in {store.path}" if deleted else "restored nothing"
    print(told + _already(live, "not deleted"))
    return EXIT_OK


def command_strategies(args) -> int:
    described = [{"name": r.name, "description": r.description} for r in catalog.RUNNABLES.values()]
    if args.json:
        print_json(described)
    else:
        for item in described:
            print(f"{item['name']}: {item['description']}\n")
    return EXIT_OK


def command_export(args) -> int:
    from core.store.files import check_format

    check_format(pathlib.Path(args.path))  # a bad name first, whatever the store
    store = stored(args)
    if store is None:
        raise SpecError("no runs stored yet: nothing to export")
    replacing = os.path.isfile(args.path)
    count = store.export(args.path, args.ids or None)
    print(f"exported {count} runs to {args.path}" + (" (replacing the file there)" if replacing else ""))
    return EXIT_OK


def command_import(args) -> int:
    from core.store.run_store import RunStore

    if not os.path.isfile(args.path):
        raise SpecError(not_a_file(args.path))
    done = RunStore(args.db).import_file(args.path)
    print(done.summary().replace("Imported", "imported", 1))
    if done.refused:  # the others are stored; bad input all the same
        raise SpecError(done.refusals())
    return EXIT_OK


def command_backup(args) -> int:
    store = stored(args)
    if store is None:
        raise SpecError("no runs stored yet: nothing to back up")
    from core.store.run_store import RunStore

    runs = store.backup(args.path)
    # The copy keeps the recently deleted runs too, restorable from it as from the store.
    deleted = len(RunStore(args.path).deleted())
    print(f"backed up {store.path} ({runs} runs" + (f", and {deleted} recently deleted" if deleted else "")
          + f") to {args.path}")
    return EXIT_OK
