"""Process-wide JAX settings and the environment a run is recorded with.

`configure()` is called once at startup by the command line and the app (never at
import): it enables float64 (so that a float64 spec really is float64; float32 specs
stay float32 because every array is created with an explicit dtype) and points JAX's
persistent compilation cache at a per-user directory, so a second process or a
restarted server loads executables instead of recompiling them.
"""

from __future__ import annotations

import functools
import os
import pathlib
import platform
import socket
import sys

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
    if os.environ.get(CACHE_DIR_ENV):
        return pathlib.Path(os.environ[CACHE_DIR_ENV]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or pathlib.Path.home() / ".cache"
    return pathlib.Path(base) / "plnlab" / "jax"


@functools.lru_cache(maxsize=None)
def configure() -> pathlib.Path:
    """Enable float64 and the persistent compilation cache; idempotent. Returns the cache dir."""
    import jax

    from core import compilations

    jax.config.update("jax_enable_x64", True)
    cache_dir = default_cache_dir()
    cache_dir.mkdir(parents=True, exist_ok=True)
    jax.config.update("jax_compilation_cache_dir", str(cache_dir))
    # JAX only persists compilations slower than 1 s by default; every executable of a
    # fit should be reusable by the next process, however quick it was to build.
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    compilations.install()
    return cache_dir


def available_platforms() -> list[str]:
    """Platforms with at least one device in this process, e.g. ["cpu"] or ["cpu", "gpu"]."""
    import jax

    found = []
    for name in ("cpu", "gpu", "tpu"):
        try:
            if jax.devices(name):
                found.append(name)
        except RuntimeError:
            pass
    return found


def environment(device) -> dict:
    """Versions and machine facts stored with every run."""
    import jax
    import jaxlib
    import numpy
    import optax

    return {
        "jax": jax.__version__,
        "jaxlib": jaxlib.__version__,
        "optax": optax.__version__,
        "numpy": numpy.__version__,
        "python": sys.version.split()[0],
        "platform": device.platform,
        "device_kind": device.device_kind,
        "os": platform.platform(),
        "cpu_count": os.cpu_count(),
        "host": socket.gethostname(),
    }
