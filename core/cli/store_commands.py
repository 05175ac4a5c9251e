"""The commands that read or move stored runs: `strategies` (what can run), `list`, `export`,
`import` and `backup`; none of them starts JAX."""

from __future__ import annotations

import os

from core import catalog
from core.cli import EXIT_OK
from core.cli.output import compile_text, elbo_text, print_json
from core.results import outcome
from core.spec import SpecError


def command_list(args) -> int:
    from core.store.run_store import RunStore

    if args.limit is not None and args.limit < 0:
        raise SpecError(f"--limit must be a whole number >= 0; got {args.limit}")
    runs = RunStore(args.db).list(with_elbo=False, limit=args.limit)
    if args.json:
        print_json([r.to_dict(with_elbo=False) for r in runs])
    else:
        for r in runs:
            ended = outcome.finished_as(r.status, r.converged, r.stalled, r.short)
            print(f"{r.id:>5} {r.strategy:<18} {r.dataset:<14} {r.precision:<8} {r.device:<4} {ended:<13} "
                  f"{r.per_iter_ms:>9.3f} ms/it  compile {compile_text(r)}  "
                  f"ELBO {elbo_text(r.final_elbo, r.precision)}")
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
    from core.store.run_store import RunStore

    count = RunStore(args.db).export(args.path, args.ids or None)
    print(f"exported {count} runs to {args.path}")
    return EXIT_OK


def command_import(args) -> int:
    from core.store.run_store import RunStore

    if not os.path.isfile(args.path):
        raise SpecError(f"no such file: {args.path}")
    done = RunStore(args.db).import_file(args.path)
    print(done.summary().replace("Imported", "imported", 1))
    if done.refused:  # the others are stored; bad input all the same
        raise SpecError(done.refusals())
    return EXIT_OK


def command_backup(args) -> int:
    from core.store.run_store import RunStore

    store = RunStore(args.db)
    runs = store.backup(args.path)
    print(f"backed up {store.path} ({runs} runs) to {args.path}")
    return EXIT_OK
