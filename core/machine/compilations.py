"""Counting XLA compilations and persistent-cache loads with `jax.monitoring` events.

JAX records `/jax/core/compile/backend_compile_duration` for every executable it
builds or loads, and `/jax/compilation_cache/cache_hits` when the executable came from
the persistent cache. A `CompileCounter` counts both while it is active, so the engine
can report compilations per phase of a run and tell a disk-cache hit from a compile.
"""

from __future__ import annotations

import threading

import jax.monitoring

_BACKEND_COMPILE = "/jax/core/compile/backend_compile_duration"
_DISK_HIT = "/jax/compilation_cache/cache_hits"

_lock = threading.Lock()
_active: list["CompileCounter"] = []
_installed = False


class CompileCounter:
    """Context manager counting compilations that happen while it is open.

    Attributes:
        backend_compiles: executables built or loaded from the persistent cache.
        disk_hits: of those, loaded from the persistent cache.
    """

    def __init__(self) -> None:
        self.backend_compiles = 0
        self.disk_hits = 0

    @property
    def compiles(self) -> int:
        """Executables actually compiled (persistent-cache loads excluded)."""
        return self.backend_compiles - self.disk_hits

    def __enter__(self) -> "CompileCounter":
        install()
        with _lock:
            _active.append(self)
        return self

    def __exit__(self, *exc) -> None:
        with _lock:
            _active.remove(self)


def _on_event(event: str, **kwargs) -> None:
    if event == _DISK_HIT:
        with _lock:
            for counter in _active:
                counter.disk_hits += 1


def _on_duration(event: str, duration: float, **kwargs) -> None:
    if event == _BACKEND_COMPILE:
        with _lock:
            for counter in _active:
                counter.backend_compiles += 1


def install() -> None:
    """Register the listeners once per process."""
    global _installed
    with _lock:
        if _installed:
            return
        jax.monitoring.register_event_listener(_on_event)
        jax.monitoring.register_event_duration_secs_listener(_on_duration)
        _installed = True
