"""What a `solve` process loads and compiles: its start is most of what a user waits for on
a small problem, so the JAX path stays clear of the libraries only other paths need, and
builds no program besides the fit's two."""

from __future__ import annotations

import json
import subprocess
import sys

from project import ROOT

# torch and pyPLNmodels: the peers' (seconds to import); pandas: the dashboard's tables
# and CSV files; Dask: the cluster's.
NOT_ON_THE_SOLVE_PATH = ("torch", "pyPLNmodels", "pandas", "dask", "distributed")

# Solves, then prints the top-level modules loaded and the executables JAX built or loaded.
_SOLVE_AND_REPORT = """
import json, sys
import jax.monitoring

events = []
jax.monitoring.register_event_duration_secs_listener(
    lambda event, duration, **kwargs: events.append("built") if event.endswith("backend_compile_duration") else None)
jax.monitoring.register_event_listener(
    lambda event, **kwargs: events.append("from disk") if event == "/jax/compilation_cache/cache_hits" else None)
from core.__main__ import main
status = main(sys.argv[1:])
loaded = sorted({name.split(".")[0] for name in sys.modules})
print(json.dumps({"status": status, "loaded": loaded, "scipy_special": "scipy.special" in sys.modules,
                  "built": events.count("built"),
                  "from_disk": events.count("from disk")}))
"""


def _solve(tmp_path) -> dict:
    command = [sys.executable, "-c", _SOLVE_AND_REPORT, "solve", "--dataset", "oaks", "--precision", "float32",
               "--iterations", "5", "--repeats", "1", "--db", str(tmp_path / "runs.sqlite3")]
    env = {"PLNLAB_JAX_CACHE": str(tmp_path / "jax-cache"), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["status"] == 5  # stored; five iterations are no solution (`core.cli.EXIT_NOT_SOLVED`)
    return found


def test_solving_oaks_loads_neither_torch_nor_pandas_nor_dask_and_builds_two_programs(tmp_path):
    first, second = _solve(tmp_path), _solve(tmp_path)
    for found in (first, second):
        assert "jax" in found["loaded"]  # the fit ran here, in this process
        assert not set(NOT_ON_THE_SOLVE_PATH) & set(found["loaded"])
        # scipy.special (gammaln) took 0.14 s of a start; sum(log Y!) is NumPy's now. (jaxlib
        # itself loads scipy.linalg's BLAS when its CPU backend starts.)
        assert not found["scipy_special"]
        # The starting state and the fit: no helper programs (a scalar made by jnp, a copy per
        # shape) compiled on the side, each a few tens of milliseconds of every start.
        assert found["built"] == 2, found
    # A second process loads both from the persistent cache instead of compiling them.
    assert (first["from_disk"], second["from_disk"]) == (0, 2)
