"""What a `solve` process loads: its start is most of what a user waits for on a small
problem, so the JAX path stays clear of the libraries only other paths need."""

from __future__ import annotations

import json
import subprocess
import sys

from project import ROOT

# torch and pyPLNmodels: the peers' (seconds to import); pandas: the dashboard's tables
# and CSV files; Dask: the cluster's.
NOT_ON_THE_SOLVE_PATH = ("torch", "pyPLNmodels", "pandas", "dask", "distributed")

_SOLVE_AND_LIST_MODULES = """
import json, sys
from core.__main__ import main
status = main(sys.argv[1:])
loaded = sorted({name.split(".")[0] for name in sys.modules})
print(json.dumps({"status": status, "loaded": loaded}))
"""


def test_solving_oaks_loads_neither_torch_nor_pandas_nor_dask(tmp_path):
    command = [sys.executable, "-c", _SOLVE_AND_LIST_MODULES, "solve", "--dataset", "oaks", "--precision", "float32",
               "--iterations", "5", "--repeats", "1", "--db", str(tmp_path / "runs.sqlite3")]
    env = {"PLNLAB_JAX_CACHE": str(tmp_path / "jax-cache"), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["status"] == 0
    assert "jax" in found["loaded"]  # the fit ran here, in this process
    assert not set(NOT_ON_THE_SOLVE_PATH) & set(found["loaded"])
