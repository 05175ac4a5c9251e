"""Process-wide JAX settings, the devices of this process, and the environment a run is recorded with.

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

import jax
import jaxlib
import numpy
import optax

from core.machine import compilations
from core.machine.host import default_cache_dir
from core.spec import SpecError


# Smaller executables are compiled again rather than loaded from disk (see `configure`).
MIN_PERSISTED_BYTES = 8 * 1024


@functools.lru_cache(maxsize=None)
def configure() -> pathlib.Path:
    """Enable float64, full-precision float32 products and the persistent compilation cache;
    idempotent. Returns the cache dir."""
    jax.config.update("jax_enable_x64", True)
    # A float32 matrix product on an NVIDIA GPU otherwise runs in TF32 (10 bits of mantissa):
    # on an H100 the profiled ELBO then came out up to 1.5e-4 above the optimum, preconditioned
    # L-BFGS stalled at oaks x100 after 26 iterations, 1.5e-4 short of it, and no float32 fit
    # was what it says it is. CPUs compute float32 products in float32 whatever this says.
    jax.config.update("jax_default_matmul_precision", "highest")
    cache_dir = default_cache_dir()
    cache_dir.mkdir(parents=True, exist_ok=True)
    jax.config.update("jax_compilation_cache_dir", str(cache_dir))
    # JAX only persists compilations slower than 1 s by default; every executable of a
    # fit should be reusable by the next process, however quick it was to build...
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    # ...but not the one-primitive programs of op-by-op dispatch (eager, and the helpers
    # around a compiled fit: 3 to 7 KB each, where a fit's loop is 30 to 110 KB). Persisted,
    # a fresh process loaded dozens of them through XLA's CPU AOT loader, each load mapping
    # sections of its own and logging "+prefer-no-gather is not supported" (a flood of
    # thousands of lines per eager run), and the mappings added up towards vm.max_map_count.
    # Compiling such a program again costs milliseconds.
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", MIN_PERSISTED_BYTES)
    compilations.install()
    return cache_dir


def available_platforms() -> list[str]:
    """Platforms with at least one device in this process, e.g. ["cpu"] or ["cpu", "gpu"]."""
    found = []
    for name in ("cpu", "gpu", "tpu"):
        try:
            if jax.devices(name):
                found.append(name)
        except RuntimeError:
            pass
    return found


def resolve_device(platform_name: str):
    """The first device of `platform_name` in this process; SpecError naming the available ones if absent."""
    try:
        # local_devices: under jax.distributed, device 0 of the platform may be another process's.
        return jax.local_devices(backend=platform_name)[0]
    except RuntimeError:
        available = ", ".join(available_platforms()) or "none"
        raise SpecError(f"device {platform_name!r} is not available here; available: {available}") from None


def environment(device) -> dict:
    """Versions and machine facts stored with every run."""
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
