"""What must be settled before the native libraries load, and where this host keeps its files.

Nothing here imports numpy, scipy or JAX: `native_settings()` must run before any of them
loads its native library, and the device queue finds its folder without starting JAX.
"""

from __future__ import annotations

import os
import pathlib

from core import config

CACHE_DIR_ENV = "PLNLAB_JAX_CACHE"


def native_settings() -> None:
    """Environment for the native libraries; call before numpy, scipy or jax is imported.

    - TF_CPP_MIN_LOG_LEVEL=3: every load from the persistent cache on CPU logs a
      screenful of "Target machine feature +prefer-no-gather is not supported" errors
      (jax-ml/jax#38445): those are LLVM tuning flags, not instruction sets, and the
      executable runs. Real failures still raise Python exceptions.
    - OPENBLAS_NUM_THREADS=1: jaxlib's CPU triangular solves (Cholesky, cho_solve) call
      scipy's OpenBLAS, whose spinning threads fight XLA's own for the cores; on 2 cores
      that made small fits up to ten times slower. The solves are p x p, too small to
      gain from threads.
    Values already set in the environment win.
    """
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def default_cache_dir() -> pathlib.Path:
    """$PLNLAB_JAX_CACHE, else ~/.cache/plnlab/jax (XDG_CACHE_HOME honoured)."""
    if (chosen := config.path(CACHE_DIR_ENV)) is not None:
        return chosen
    base = os.environ.get("XDG_CACHE_HOME") or pathlib.Path.home() / ".cache"
    return pathlib.Path(base) / "plnlab" / "jax"
