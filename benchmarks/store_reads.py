"""What the dashboard reads from the run store on every rerun, against the store's size.

Prints figures (best of --repeats, ms); not a test.

    .venv/bin/python benchmarks/store_reads.py --sizes 1000 10000 30000

A shared server's store only grows, and every page rerun (each click, each progress
redraw of every session) reads it. This fits one real run (scan on oaks), stores copies of
it under many specs in a scratch store, and times at each size:
- the sidebar's run count (`RunStore.count`), against reading every run (`len(list())`);
- the Run page's lookup of a spec's newest shown run (`find_by_spec_key(limit=1,
  interrupted=False)`), against all of that spec's runs with their curves;
- the Under-the-hood page's candidates for the floor comparison (`find(...)`);
- the Compare page's table of every run (`frame`), which grows with the store by design.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

STRATEGIES = ("eager", "jit_per_function", "jit_step", "scan", "scan_namedtuple", "scan_pytree_class")


def best_ms(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return 1e3 * min(times)


def spec_of(i: int):
    """The spec of the i-th copy: 600 specs (strategies x iteration counts x precisions) in turn."""
    from core.spec import FitSpec

    return FitSpec(strategy=STRATEGIES[i % len(STRATEGIES)], iterations=20 + i % 50,
                   precision=("float32", "float64")[i // 300 % 2])


def fill(store, template, count: int, start: int) -> None:
    """Adds copies `start` to `start + count` of `template`, each under `spec_of` its number."""
    for i in range(start, start + count):
        spec = spec_of(i)
        store.add(dataclasses.replace(template, id=0, spec=spec.to_dict(), spec_key=spec.key, strategy=spec.strategy,
                                      iterations=spec.iterations, precision=spec.precision,
                                      created_at=template.created_at + i))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 30000])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)

    from core.run import engine
    from core.spec import FitSpec
    from core.store.run_store import RunStore

    template = engine.run(FitSpec(strategy="scan", iterations=50, repeats=1))
    probe = spec_of(3)  # one spec of the store; a 600th of the runs are its
    print(f"{'runs':>7} {'count':>8} {'len(list)':>10} {'newest of spec':>15} {'all of spec':>12} "
          f"{'find':>8} {'frame':>8}   (ms, best of {args.repeats})")
    with tempfile.TemporaryDirectory(prefix="plnlab-store-reads-") as folder:
        store = RunStore(os.path.join(folder, "runs.sqlite3"))
        stored = 0
        for size in sorted(args.sizes):
            fill(store, template, size - stored, stored)
            stored = size
            figures = [
                best_ms(store.count, args.repeats),
                best_ms(lambda: len(store.list()), args.repeats),
                best_ms(lambda: store.find_by_spec_key(probe.key, limit=1, interrupted=False), args.repeats),
                best_ms(lambda: store.find_by_spec_key(probe.key), args.repeats),
                best_ms(lambda: store.find(strategy=probe.strategy, precision=probe.precision, device="cpu",
                                           iterations=probe.iterations, status="ok",
                                           host=template.versions.get("host")), args.repeats),
                best_ms(store.frame, args.repeats),
            ]
            print(f"{store.count():>7} " + " ".join(f"{f:>{w}.2f}" for f, w in zip(figures, (8, 10, 15, 12, 8, 8))),
                  flush=True)


if __name__ == "__main__":
    main()
