"""Where each array of a placed fit lives: its global shape, its sharding, what one device holds.

For the sharded strategy the data and the per-row parameters are split in row blocks and
the small parameters are copied to every device; this turns the placed arrays
(`jax.Array.sharding`, `addressable_shards`) into plain rows a page can show and a cache
can keep. Arrays on one device read as "single device", holding everything.
"""

from __future__ import annotations

import math
from typing import Any

import jax
import numpy as np
from jax.sharding import NamedSharding

from core.inspect.findings import ArrayLayout, table_rows  # noqa: F401


def _describe_sharding(sharding) -> str:
    if isinstance(sharding, NamedSharding):
        mesh = ", ".join(f"{axis}={size}" for axis, size in sharding.mesh.shape.items())
        if not sharding.spec or all(axis is None for axis in sharding.spec):
            return f"replicated over mesh {mesh}"
        return f"{sharding.spec} over mesh {mesh}"
    if len(sharding.device_set) == 1:
        return "single device"
    return "replicated" if sharding.is_fully_replicated else type(sharding).__name__


def array_layouts(tree: Any, prefix: str) -> list[ArrayLayout]:
    """One `ArrayLayout` per array leaf of `tree` (placed data or fit state), named `prefix`.path.

    Blocks of uneven size (not the case here: rows are padded to equal blocks) are
    reported by their largest, which is what a device must hold.
    """
    rows = []
    for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]:
        if not isinstance(leaf, jax.Array):
            continue
        shapes = [tuple(shard.data.shape) for shard in leaf.addressable_shards]
        block = max(shapes, key=math.prod) if shapes else leaf.sharding.shard_shape(leaf.shape)
        rows.append(ArrayLayout(
            name=prefix + jax.tree_util.keystr(path),
            global_shape=tuple(leaf.shape),
            dtype=str(leaf.dtype),
            sharding=_describe_sharding(leaf.sharding),
            devices=len(leaf.sharding.device_set),
            per_device_shape=block,
            bytes_per_device=int(math.prod(block)) * np.dtype(leaf.dtype).itemsize,
        ))
    return rows


def bytes_per_device(tree) -> dict[str, int]:
    """Bytes of `tree`'s arrays held on each of this process's devices, by device name."""
    held: dict[str, int] = {}
    for leaf in jax.tree.leaves(tree):
        for shard in leaf.addressable_shards:
            name = str(shard.device)
            held[name] = held.get(name, 0) + shard.data.nbytes
    return held


def peak_bytes_per_device(devices) -> dict[str, int | None]:
    """The allocator's peak bytes in use per device, where the backend reports it (GPU, TPU;
    CPU reports nothing, hence None)."""
    peaks = {}
    for device in devices:
        stats = device.memory_stats() if hasattr(device, "memory_stats") else None
        peaks[str(device)] = (stats or {}).get("peak_bytes_in_use")
    return peaks
