"""Runs repeated in one process stay bounded: a repeated run compiles nothing and adds no
memory mappings, for every strategy (eager included), in both precisions.

Eager used to compile a new program at every iteration for the line-search optimizers (a
`lax.while_loop` closing over the iteration's arrays is a new program each call), and JAX's
cache of primitive executables kept them all: about 4,700 memory mappings a run, until the
process met vm.max_map_count and crashed (a server after 6 to 10 clicks; a compile from
scratch followed by a normal run sooner). The subprocess test repeats that scenario.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from specs import tutorial_spec

from core import catalog
from core.machine.compilations import CompileCounter
from core.run import engine
from core.spec import DatasetSpec, OptimizerSpec, refusal

from project import ROOT

DATA = DatasetSpec(kind="simulated", n=30, p=4)


def _maps() -> int:
    with open("/proc/self/maps", "rb") as maps:
        return sum(1 for _ in maps)


def _rss_mb() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _specs(precision: str):
    """Eager under every optimizer (op by op, an optimizer's own control flow is what could
    compile anew each iteration); in float32, every other strategy under a gradient and a
    profiled one too (a compiled strategy's program does not depend on the dtype's width)."""
    for strategy in catalog.strategy_names() if precision == "float32" else ["eager"]:
        optimizers = catalog.optimizer_names() if strategy == "eager" else ("seed", "preconditioned_lbfgs")
        for optimizer in optimizers:
            if refusal(strategy, optimizer) is None:
                yield tutorial_spec(dataset=DATA, strategy=strategy, iterations=6, precision=precision, repeats=1,
                                    optimizer=OptimizerSpec(optimizer), init="log_rates", tol=1e-12)


@pytest.mark.parametrize("precision", ["float32", "float64"])
def test_a_repeated_run_compiles_nothing_and_adds_no_mappings(precision):
    specs = list(_specs(precision))
    for spec in specs:
        engine.run(spec)
    before, rss_before = _maps(), _rss_mb()
    grown = {}
    for spec in specs:
        with CompileCounter() as counter:
            engine.run(spec)
        if counter.backend_compiles:
            grown[(spec.strategy, spec.optimizer.name)] = counter.backend_compiles
    assert not grown, f"compiled (or loaded from disk) again on a repeated run: {grown}"
    assert _maps() - before < 50  # allocator noise, not an executable per iteration
    # A leak of executables (their code and buffers) per run would show here; the
    # allocator's own arenas settle within a few MB.
    assert _rss_mb() - rss_before < 40, f"RSS grew {_rss_mb() - rss_before:.1f} MB over a round of every run"


SCENARIO = """
import sys
from core.machine.host import native_settings
native_settings()
from core.machine import runtime
from core.run import engine
from core.spec import DatasetSpec, FitSpec, OptimizerSpec
runtime.configure()
spec = FitSpec(dataset=DatasetSpec(kind="simulated", n=60, p=8), strategy="eager", iterations=40, repeats=2,
               optimizer=OptimizerSpec(sys.argv[1]), init="log_rates", tol=1e-12)
def maps():
    with open("/proc/self/maps", "rb") as f:
        return sum(1 for _ in f)
engine.run(spec, cold=True)
after_cold = maps()
engine.run(spec)
engine.run(spec)
print(maps() - after_cold)
"""


@pytest.mark.parametrize("optimizer", ["preconditioned_lbfgs", "lbfgs"])
def test_a_cold_compile_then_normal_runs_stay_bounded(optimizer, tmp_path):
    done = subprocess.run([sys.executable, "-c", SCENARIO, optimizer], cwd=ROOT, capture_output=True, text=True,
                          timeout=600, env={**os.environ, "PLNLAB_JAX_CACHE": str(tmp_path / "jax")})
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Error reading persistent compilation cache" not in done.stderr
    # Before the fix: about 120 mappings an iteration, 40 iterations x 3 calls x 2 runs.
    assert int(done.stdout.strip().splitlines()[-1]) < 100


FRESH_PROCESS = """
from core.machine.host import native_settings
native_settings()
from core.machine import runtime
from core.machine.compilations import CompileCounter
from core.run import engine
from core.spec import DatasetSpec, FitSpec, OptimizerSpec
runtime.configure()
with CompileCounter() as counter:
    for strategy in ("eager", "scan"):
        engine.run(FitSpec(dataset=DatasetSpec(kind="simulated", n=60, p=8), strategy=strategy, iterations=20,
                           repeats=1, optimizer=OptimizerSpec("preconditioned_lbfgs"), init="log_rates", tol=1e-12))
print(counter.disk_hits, counter.compiles)
"""


def test_a_fresh_process_reads_the_persistent_cache_without_errors_or_a_flood(tmp_path):
    """Eager's one-primitive programs stay out of the persistent cache (`runtime.MIN_PERSISTED_BYTES`):
    loaded back one by one they flooded the log (on some CPUs XLA's AOT loader warns four lines
    a load, hundreds a run) and each mapped memory of its own. A second process sharing the
    cache loads only the fits' own executables (JAX's cache-hit events, counted), with no error
    and no flood of loader lines, with XLA's logging on."""
    env = {**os.environ, "PLNLAB_JAX_CACHE": str(tmp_path / "jax"), "TF_CPP_MIN_LOG_LEVEL": "0"}
    runs = [subprocess.run([sys.executable, "-c", FRESH_PROCESS], cwd=ROOT, capture_output=True, text=True,
                           timeout=600, env=env) for _ in range(2)]
    for done in runs:
        assert done.returncode == 0, done.stderr[-2000:]
        assert "Error reading persistent compilation cache" not in done.stderr
    first_hits, first_compiles = map(int, runs[0].stdout.split()[-2:])
    hits, _ = map(int, runs[1].stdout.split()[-2:])
    assert first_hits == 0 and first_compiles > 0
    # The fits' own executables (the scan fit, eager's jitted steps): a handful, not one per primitive.
    assert 0 < hits <= 8, f"{hits} executables loaded from the persistent cache by a second process"
    assert runs[1].stderr.count("cpu_aot_loader") <= 4 * hits
