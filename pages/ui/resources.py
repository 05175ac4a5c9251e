"""Resources shared by every session of the server: the run store, compiled executables,
the devices found here and the catalog of runnables.

Nothing heavy happens at import: devices are probed and the catalog is built once per
server process, through `st.cache_resource`, when a page first asks.
"""

from __future__ import annotations

import os
from importlib import metadata
from typing import Any, Iterable

import jax
import streamlit as st

from core.fit.strategies import TUTORIAL_LEVELS
from core.run import catalog, runtime
from core.run.catalog import Runnable
from core.run.prepared import ExecutableCache
from core.spec import DEVICES, SpecError
from core.store.run_store import RunStore, StoreError, default_db_path
from pages.ui.text import public


@st.cache_resource(show_spinner=False)
def _open_store(path: str) -> RunStore:
    return RunStore(path)


def run_store() -> RunStore:
    """The run store at $PLNLAB_DB (or the per-user default), shared with the CLI.

    Raises:
        StoreError: the file is not a usable run store.
    """
    return _open_store(str(default_db_path()))


def store_or_stop() -> RunStore:
    """`run_store()`, or an error message and the end of this page's run."""
    try:
        return run_store()
    except StoreError as exc:
        st.error(f"The run store cannot be used: {public(exc)}")
        st.stop()


@st.cache_resource(show_spinner=False)
def executable_cache() -> ExecutableCache:
    """One `ExecutableCache` for every session of this server."""
    return ExecutableCache()


@st.cache_resource(show_spinner="Looking for devices…")
def devices() -> dict[str, Any]:
    """Platforms JAX offers here, their device kinds, and why absent ones are absent.

    Returns:
        {"available": ["cpu", ...], "kinds": {platform: "NVIDIA H100 80GB HBM3 x1"},
         "missing": {platform: reason}}.
    """
    runtime.configure()
    available = runtime.available_platforms()
    kinds = {}
    for platform in available:
        found = jax.devices(platform)
        kinds[platform] = f"{found[0].device_kind} x{len(found)}" if platform != "cpu" else \
            f"{os.cpu_count()} cores"
    plugins = _accelerator_plugins()
    missing = {}
    for platform in DEVICES:
        if platform in available:
            continue
        if platform == "gpu":
            missing[platform] = ("not available on this server: a GPU jaxlib plugin is installed "
                                 "but no GPU is visible") if plugins["gpu"] else \
                "not available on this server (no CUDA jaxlib / no device)"
        else:
            missing[platform] = "not available on this server (no TPU runtime / no device)"
    return {"available": available, "kinds": kinds, "missing": missing}


def _accelerator_plugins() -> dict[str, bool]:
    names = {(dist.metadata["Name"] or "").lower().replace("_", "-") for dist in metadata.distributions()}
    return {"gpu": any(n.startswith(("jax-cuda", "jax-rocm")) for n in names),
            "tpu": any(n.startswith("libtpu") for n in names)}


def check_device(platform: str) -> None:
    """SpecError when `platform` has no device here (before anything runs)."""
    available = devices()["available"]
    if platform not in available:
        raise SpecError(f"device {platform!r} is not available here; available: {', '.join(available)}")


@st.cache_resource(show_spinner=False)
def runnables() -> list[Runnable]:
    """Every runnable in teaching order: the JAX strategies, then the peers."""
    return catalog.all_runnables()


def tutorial_levels() -> tuple[str, ...]:
    """The seed tutorial's five levels, the Run page's default selection."""
    return TUTORIAL_LEVELS


def strategy_help(names: Iterable[str] | None = None) -> str:
    """Markdown list of runnables and their one-line summaries (for `help=`)."""
    wanted = None if names is None else set(names)
    return "\n".join(f"- **{r.name}**: {r.summary}" for r in runnables() if wanted is None or r.name in wanted)
