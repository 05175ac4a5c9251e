"""Row sharding: a 1-D mesh of devices named "rows", and data and fit states laid out in equal row blocks.

The sharded strategy (`core.fit.strategies.sharded`) fits on these layouts and the
on-device simulation (`core.data.on_device`) draws into them. The data and the per-row
parameters M and S (with the optimizer's moments for them) are split in equal row
blocks, `NamedSharding(mesh, P("rows", None))`; B, Omega and the optimizer's scalars
are replicated. Rows are padded to a multiple of the device count and masked
(`model.PaddedPLNData`), so sums over rows are those of the real rows.
"""

from __future__ import annotations

import functools

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from core.fit import model
from core.spec import SpecError

ROWS = "rows"


def first_devices(platform: str, count: int = 0) -> list:
    """The first `count` devices of `platform`, of all processes (0: every one).

    Raises:
        SpecError: fewer devices than `count`, saying how many there are and how to get
            more; or, over several processes, a count that would leave a process out.
    """
    found = jax.devices(platform)
    if count == 0 or count == len(found):
        return found
    if count > len(found):
        if platform == "cpu":
            how = ("simulated CPU devices need XLA_FLAGS=--xla_force_host_platform_device_count="
                   f"{count} set in the environment before JAX starts")
        else:
            how = f"run where JAX sees {count} {platform} devices (CUDA_VISIBLE_DEVICES limits which it sees)"
        raise SpecError(f"devices = {count}, but this process has {len(found)} {platform} "
                        f"device{'s' * (len(found) != 1)}: {how}")
    if jax.process_count() > 1:
        # Every process must hold rows of a jax.distributed run, so the mesh spans them all.
        raise SpecError(f"over {jax.process_count()} processes the sharded strategy spans every device "
                        f"({len(found)}): use devices = 0 (all); got {count}")
    return found[:count]


def mesh_for(platform: str, count: int = 0) -> Mesh:
    """A 1-D mesh ("rows",) over the first `count` devices of `platform`, of all processes (0: every one)."""
    return Mesh(np.asarray(first_devices(platform, count)), (ROWS,))


def row_sharding(mesh: Mesh, ndim: int = 2, axis: int = 0) -> NamedSharding:
    """Rows (axis `axis`) split over the mesh; the other axes whole."""
    spec = [None] * ndim
    spec[axis] = ROWS
    return NamedSharding(mesh, P(*spec))


def replicated(mesh: Mesh) -> NamedSharding:
    """A full copy on every device of the mesh."""
    return NamedSharding(mesh, P())


def padded_rows(n: int, devices: int) -> int:
    """n rounded up to a multiple of `devices` (equal row blocks)."""
    return -(-n // devices) * devices


def _rows_from_host(array: np.ndarray, n_padded: int, sharding: NamedSharding) -> jax.Array:
    """An (n, k) host array as an (n_padded, k) row-sharded array, zero-padded.

    Each device's block is cut from the host array and padded on its own, so no padded
    copy of the whole array is made; in several processes each fills its own devices.
    """
    n = array.shape[0]

    def block(index):
        rows = index[0]
        start, stop = rows.start or 0, n_padded if rows.stop is None else rows.stop
        out = np.zeros((stop - start,) + array.shape[1:], array.dtype)
        real = array[start:min(stop, n)]
        out[: real.shape[0]] = real
        return out

    return jax.make_array_from_callback((n_padded,) + array.shape[1:], sharding, block)


def row_mask(n: int, n_padded: int, dtype, sharding: NamedSharding) -> jax.Array:
    """(n_padded,) 1 on the first n rows, 0 on padding, row-sharded."""

    def block(index):
        rows = index[0]
        start, stop = rows.start or 0, n_padded if rows.stop is None else rows.stop
        return (np.arange(start, stop) < n).astype(dtype)

    return jax.make_array_from_callback((n_padded,), sharding, block)


def lay_out(value, sharding: NamedSharding) -> jax.Array:
    """`value` with `sharding`, moving as little as possible.

    A global array (spanning processes) is resharded by XLA; a process-local one is
    copied device to device when the mesh is local, else from its host value, which
    every process holds identically (the initial state is deterministic).
    """
    if isinstance(value, jax.Array):
        if value.sharding.is_equivalent_to(sharding, value.ndim):
            return value
        if not value.is_fully_addressable:
            return jax.jit(lambda x: x, out_shardings=sharding)(value)
    if sharding.is_fully_addressable:
        return jax.device_put(value, sharding)
    host = np.asarray(value)
    return jax.make_array_from_callback(host.shape, sharding, lambda index: host[index])


def state_shardings(state, mesh: Mesh):
    """The layout of a fit state: per-row leaves row-sharded, the rest replicated.

    Per-row leaves are those shaped like M, (n, p), or stacks of such, (k, n, p): M, S and
    what algorithms keep for them (optax's moments and step sizes, gradients, L-BFGS
    memories); they are split on their rows axis (-2). Omega is replicated even when n = p.
    """
    rows = np.shape(state.params.latent_mean)

    def choose(path, leaf):
        shape = np.shape(leaf)
        per_row = len(shape) >= 2 and shape[-2:] == rows and getattr(path[0], "name", None) != "precision"
        return row_sharding(mesh, len(shape), axis=len(shape) - 2) if per_row else replicated(mesh)

    return jax.tree_util.tree_map_with_path(choose, state)


def data_shardings(data, mesh: Mesh):
    """The layout of the data: arrays with rows row-sharded, the scalar replicated."""
    return jax.tree.map(lambda leaf: row_sharding(mesh, np.ndim(leaf)) if np.ndim(leaf) else replicated(mesh), data)


def mesh_of(data) -> Mesh:
    """The mesh the data were placed on; for data on one device (as the strategy tests
    place them), a mesh of that device alone."""
    sharding = data.counts.sharding
    if isinstance(sharding, NamedSharding):
        return sharding.mesh
    return Mesh(np.asarray(sorted(sharding.device_set, key=lambda device: device.id)), (ROWS,))


def place_padded(host: model.PLNData, mesh: Mesh) -> model.PaddedPLNData:
    """Host data -> padded, row-sharded `PaddedPLNData` on `mesh`."""
    n = host.counts.shape[0]
    n_padded = padded_rows(n, mesh.size)
    sharding = row_sharding(mesh)
    rows = functools.partial(_rows_from_host, n_padded=n_padded, sharding=sharding)
    dtype = np.asarray(host.counts).dtype
    log_factorial_sum = np.asarray(host.log_factorial_sum)
    return model.PaddedPLNData(
        counts=rows(np.asarray(host.counts)),
        offsets=rows(np.asarray(host.offsets)),
        covariates=rows(np.asarray(host.covariates)),
        log_factorial_sum=jax.make_array_from_callback((), replicated(mesh), lambda index: log_factorial_sum),
        row_mask=row_mask(n, n_padded, dtype, row_sharding(mesh, 1)),
    )
