"""sharded: the scan strategy with the rows of Y, O, X, M and S split over every device of the platform (`jax.sharding`), in every process when `jax.distributed` is initialised.

A 1-D mesh named "rows" holds all devices of the platform, or its first k when the run
asks for k (`FitSpec.devices`). The data and the per-row parameters M and S (with the
optimizer's moments for them) are laid out in equal row blocks,
`NamedSharding(mesh, P("rows", None))`; B, Omega and the optimizer's scalars are
replicated. The compiled loop is the scan strategy's: XLA's SPMD partitioner turns every
sum over rows (the ELBO, R^T R, X^T M) into a per-device partial sum and an all-reduce,
so only p x p and d x p blocks cross devices. Rows are padded to a multiple of the device
count and masked (`model.PaddedPLNData`), so the ELBO is that of the real rows.
"""

from __future__ import annotations

import functools

import jax
from jax.sharding import Mesh

from core.fit.sharding import (
    data_shardings,
    first_devices,
    lay_out,
    mesh_for,
    mesh_of,
    place_padded,
    replicated,
    state_shardings,
)
from core.fit.strategies.base import FitOutput, FitState, Strategy, finished, loop_step, scan_loop, start_stop


def _fit(state, data, optimizer, iterations, layout, stopping=None):
    def body(carry, _):
        new_state, value = loop_step(FitState(**carry), data, optimizer)
        # Pin the carry to its input layout so the loop never regathers M or S.
        new_state = jax.lax.with_sharding_constraint(new_state, layout)
        return new_state._asdict(), value

    carry, trace, run, stop = scan_loop(body, state._asdict(), iterations, stopping, data.counts.dtype)
    return FitOutput(finished(FitState(**carry), data, optimizer), trace, run, stop)


class Sharded(Strategy):
    """The strategy over the first `devices` devices of the platform (0, the default: all of them)."""

    name = "sharded"
    donates_state = True  # as the other compiled loops (see CompiledLoopStrategy)
    chunkable = True

    def __init__(self, devices: int = 0) -> None:
        self.devices = devices

    def mesh(self, device) -> Mesh:
        """The mesh a run on `device`'s platform spans; SpecError if it has too few devices."""
        return mesh_for(device.platform, self.devices)

    def place_data(self, host, device):
        return place_padded(host, self.mesh(device))

    def place_state(self, state, device):
        layout = state_shardings(state, self.mesh(device))
        return jax.tree.map(lay_out, state, layout)

    def place_scalar(self, value, device):
        # On every device of the mesh, as the compiled fit expects its scalars: committed to one
        # device of a mesh that spans some of the platform's, it would not match.
        return jax.device_put(value, replicated(self.mesh(device)))

    def device_count(self, device):
        return len(first_devices(device.platform, self.devices))

    def lower(self, problem, state, data, tol):
        mesh = mesh_of(data)
        layout = state_shardings(state, mesh)
        data_layout = data_shardings(data, mesh)
        fit = functools.partial(_fit, optimizer=problem.algorithm, iterations=problem.iterations_per_call,
                                layout=layout)
        whole = replicated(mesh)
        if problem.stops:  # tol and the Stop are scalars, on every device
            jitted = jax.jit(lambda state, data, stopping: fit(state, data, stopping=stopping),
                             in_shardings=(layout, data_layout, whole),
                             out_shardings=FitOutput(layout, whole, whole, whole), donate_argnums=0)
            return {"fit": jitted.lower(state, data, (tol, start_stop(problem.iterations, problem.dtype)))}
        jitted = jax.jit(fit, in_shardings=(layout, data_layout),
                         out_shardings=FitOutput(layout, whole, whole), donate_argnums=0)
        return {"fit": jitted.lower(state, data)}

    def run(self, executables, problem, state, data, tol, on_iteration=None):
        if problem.stops:
            return self.run_calls(lambda start, stop: executables["fit"](start, data, (tol, stop)), problem, state,
                                  start_stop(problem.iterations, problem.dtype), on_iteration)
        return self.run_calls(lambda start, _: executables["fit"](start, data), problem, state, None, on_iteration)
