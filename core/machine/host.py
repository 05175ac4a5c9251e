"""What must be settled before the native libraries load, and where this host keeps its files.

Nothing here imports numpy, scipy or JAX: `native_settings()` must run before any of them
loads its native library, and the device queue finds its folder without starting JAX.
"""

from __future__ import annotations

import os
import pathlib

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


def keep_freed_memory() -> bool:
    """Have glibc's malloc keep freed memory for the next allocation; call once in a process
    that runs fits (the command line, a Dask worker). Returns whether it took effect.

    XLA's CPU runtime allocates an executable's scratch buffer afresh at every call (53 MB
    for the fit's loop at oaks x100, 0.5 GB at x1000). malloc serves blocks that large by
    mmap and hands them back at free, so every call touched new pages: 13,000 page faults a
    call at x100, 35 ms where the iteration itself took 25. A fit split into calls of one
    iteration (a prime iteration count, `core.run.prepared.chunk_iterations`) ran at 40-60 ms
    an iteration instead of 23-25. Served from the heap and kept there, the same call took
    150 faults and no longer cost more than its iteration. The process keeps its high-water
    mark rather than returning each block to the system: a process fitting 2,000 x 40 then
    8,000 x 40 held 410-540 MB where it held 285-360 MB before, and it stays there
    (`tests/machine/test_freed_memory.py`).
    """
    import ctypes

    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:  # not glibc (macOS, musl): their allocators make their own choices
        return False
    m_trim_threshold, m_mmap_max = -1, -4  # <malloc.h>
    # The largest value a C int holds: never trim (Dask's nanny asks workers to trim at 64 KB).
    return bool(libc.mallopt(m_mmap_max, 0)) and bool(libc.mallopt(m_trim_threshold, 2**31 - 1))


def default_cache_dir() -> pathlib.Path:
    """$PLNLAB_JAX_CACHE, else ~/.cache/plnlab/jax (XDG_CACHE_HOME honoured)."""
    if os.environ.get(CACHE_DIR_ENV):
        return pathlib.Path(os.environ[CACHE_DIR_ENV]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or pathlib.Path.home() / ".cache"
    return pathlib.Path(base) / "plnlab" / "jax"
