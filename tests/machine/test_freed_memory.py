"""`keep_freed_memory`: a block freed and allocated again is served from memory already
touched, so a compiled loop's scratch buffer does not fault its pages in at every call."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.project import ROOT

# Allocates and frees a 64 MB block ten times (numpy takes it from malloc) and prints the
# minor page faults of the last nine: the first allocation faults its pages in either way.
_FAULTS = """
import json, resource, sys
from core.machine.host import keep_freed_memory
kept = keep_freed_memory() if sys.argv[1] == "keep" else False
import numpy as np
np.ones(8 << 20).sum()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(9):
    np.ones(8 << 20).sum()
print(json.dumps({"kept": kept, "faults": resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before}))
"""


def _faults(mode: str) -> dict:
    done = subprocess.run([sys.executable, "-c", _FAULTS, mode], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc only")
def test_a_freed_block_is_served_again_without_new_page_faults():
    default, kept = _faults("default"), _faults("keep")
    # Each 64 MB block mapped afresh faults in at least its 32 huge pages (numpy asks for
    # them on large blocks; 16,384 pages of 4 KB without).
    assert default["faults"] >= 9 * 32
    assert kept["kept"] and kept["faults"] < 9  # not one fault a block


# A fit process as the command line and the Dask workers set it up, running the same
# chunked fit again and again, then a larger one and the first again: prints its RSS (MB)
# after each run.
_REPEATED_FITS = """
import json
from core.machine.host import keep_freed_memory, native_settings
native_settings()
keep_freed_memory()
from core.machine import runtime
from core.run import engine, prepared
from core.spec import DatasetSpec, FitSpec, OptimizerSpec
runtime.configure()
prepared.CHUNK_WORK = 2000 * 40 * 3  # calls of 3 iterations: a scratch buffer allocated per call
def rss():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) / 1024 for line in status if line.startswith("VmRSS:"))
def fit(n):
    engine.run(FitSpec(dataset=DatasetSpec(kind="simulated", n=n, p=40), strategy="scan", iterations=30, repeats=2,
                       optimizer=OptimizerSpec("preconditioned_lbfgs"), init="log_rates", tol=0.0))
    return rss()
print(json.dumps([fit(2000) for _ in range(6)] + [fit(8000)] + [fit(2000) for _ in range(4)]))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc only")
def test_a_process_that_keeps_freed_memory_stays_at_its_high_water_mark(tmp_path):
    """Kept memory is reused, not added to: repeated fits leave the RSS where the first left
    it, and after a larger fit the smaller ones fit in what it freed."""
    done = subprocess.run([sys.executable, "-c", _REPEATED_FITS], cwd=ROOT, capture_output=True, text=True,
                          timeout=600, env={**__import__("os").environ, "PLNLAB_JAX_CACHE": str(tmp_path / "jax")})
    assert done.returncode == 0, done.stderr[-2000:]
    rss = json.loads(done.stdout.strip().splitlines()[-1])
    small, large, after = rss[:6], rss[6], rss[7:]
    # It settles within three fits (its compilations' allocations come first), then stays.
    assert max(small[3:]) - small[2] < 10, f"RSS grew over repeated fits: {small}"
    assert max(after) - large < 10, f"RSS grew after the larger fit: {rss}"
