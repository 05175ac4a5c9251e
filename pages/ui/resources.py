"""Resources shared by every session of the server: the run store, compiled executables,
the devices found here and the strategy catalog.

Nothing heavy happens at import: JAX is imported by `strategy_catalog()` and `devices()`,
each once per server process through `st.cache_resource`.
"""

from __future__ import annotations

import os
from typing import Any, Iterable

import streamlit as st

from core.spec import SpecError
from core.store import RunStore, StoreError, default_db_path

PLATFORMS = ("cpu", "gpu", "tpu")


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
        st.error(f"The run store cannot be used: {exc}")
        st.stop()


@st.cache_resource(show_spinner=False)
def executable_cache():
    """One `engine.ExecutableCache` for every session of this server."""
    from core import engine

    return engine.ExecutableCache()


@st.cache_resource(show_spinner="Looking for devices…")
def devices() -> dict[str, Any]:
    """Platforms JAX offers here, their device kinds, and why absent ones are absent.

    Returns:
        {"available": ["cpu", ...], "kinds": {platform: "NVIDIA H100 80GB HBM3 x1"},
         "missing": {platform: reason}}.
    """
    import jax

    from core import runtime

    runtime.configure()
    available = runtime.available_platforms()
    kinds = {}
    for platform in available:
        found = jax.devices(platform)
        kinds[platform] = f"{found[0].device_kind} x{len(found)}" if platform != "cpu" else \
            f"{os.cpu_count()} cores"
    plugins = _accelerator_plugins()
    missing = {}
    for platform in PLATFORMS:
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
    from importlib import metadata

    names = {(dist.metadata["Name"] or "").lower().replace("_", "-") for dist in metadata.distributions()}
    return {"gpu": any(n.startswith(("jax-cuda", "jax-rocm")) for n in names),
            "tpu": any(n.startswith("libtpu") for n in names)}


def check_device(platform: str) -> None:
    """SpecError when `platform` has no device here (before anything runs)."""
    available = devices()["available"]
    if platform not in available:
        raise SpecError(f"device {platform!r} is not available here; available: {', '.join(available)}")


@st.cache_resource(show_spinner=False)
def strategy_catalog() -> list[dict[str, Any]]:
    """Every strategy in teaching order, then the peers.

    Each entry: name, one-line summary, description, python_loop, and kind ("jax" for a JAX
    strategy, "peer" for pyPLNmodels and the PyTorch versions, which have nothing for XLA).
    """
    from core import catalog, peers

    out = []
    for item in catalog.describe():
        text = item["description"].removeprefix(f"{item['name']}: ")
        summary = text.split(". ")[0].rstrip(".") + "."
        out.append({"name": item["name"], "summary": summary, "description": text,
                    "python_loop": catalog.reports_progress(item["name"]),
                    "kind": "peer" if peers.is_peer(item["name"]) else "jax"})
    return out


def tutorial_levels() -> tuple[str, ...]:
    from core.strategies import TUTORIAL_LEVELS

    return TUTORIAL_LEVELS


def strategy_help(names: Iterable[str] | None = None) -> str:
    """Markdown list of strategies and their one-line summaries (for `help=`)."""
    wanted = None if names is None else set(names)
    return "\n".join(f"- **{s['name']}**: {s['summary']}" for s in strategy_catalog()
                     if wanted is None or s["name"] in wanted)
