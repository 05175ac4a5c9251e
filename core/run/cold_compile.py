"""Compiling from scratch on demand: XLA compiles again although an executable is cached.

Once a shape has run, every later run of it loads its executables from memory or from
JAX's persistent compilation cache, and the compile cost disappears from the timings. A
cold run (`--cold`, the pages' "compile from scratch") skips both caches for itself only:

- the engine's `ExecutableCache` is not read (`core.run.prepared.prepare(cold=True)`);
- JAX's persistent cache is not *read* in the thread doing the run: `from_scratch()`
  wraps `jax._src.compiler._cache_read`, the single place JAX looks an executable up,
  so that it misses there. JAX then compiles and writes the new executable to the cache
  as usual, and both caches hold it afterwards.

JAX's settings are process-wide (turning `jax_enable_compilation_cache` off would
disable the cache for every session of a shared server, and JAX reads it once anyway),
so the bypass is per thread: other sessions' compilations, in other threads, still read
the cache. A timed run holds the device queue while it compiles, so no other timed run
compiles during a cold one. The wrapper is installed once per process, the first time a
cold run asks for it; jax is pinned (requirements.txt), and `install()` fails loudly if
the private name it wraps ever moves.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Iterator

from jax._src import compiler

_local = threading.local()
_install_lock = threading.Lock()


def active() -> bool:
    """Whether the calling thread is inside `from_scratch()`."""
    return getattr(_local, "depth", 0) > 0


def install() -> None:
    """Wrap JAX's persistent-cache lookup once per process (idempotent, thread-safe).

    Raises:
        RuntimeError: this JAX has no `jax._src.compiler._cache_read` to wrap.
    """
    with _install_lock:
        original = getattr(compiler, "_cache_read", None)
        if original is None:
            raise RuntimeError("this JAX release has no jax._src.compiler._cache_read: "
                               "compiling from scratch is not supported with it")
        if getattr(original, "_plnlab_cold", False):
            return

        def cache_read(*args, **kwargs):
            if active():
                return None, None  # a miss: JAX compiles, then writes the cache as usual
            return original(*args, **kwargs)

        cache_read._plnlab_cold = True
        compiler._cache_read = cache_read


@contextlib.contextmanager
def from_scratch(enabled: bool = True) -> Iterator[None]:
    """Within the block, compilations in this thread do not read the persistent cache."""
    if not enabled:
        yield
        return
    install()
    _local.depth = getattr(_local, "depth", 0) + 1
    try:
        yield
    finally:
        _local.depth -= 1
