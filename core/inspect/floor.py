"""The roofline's arithmetic: the floor a machine's peaks set on one iteration's work, and the
stored runs measured against it. Plain Python: the dashboard's server reads it (the peaks
and XLA's costs come from a worker, `core.inspect.roofline`).
"""

from __future__ import annotations

import dataclasses
import math

from core.inspect.findings import Floor, Peaks


def floor(flops: float, transcendentals: float, bytes_moved: float, machine: Peaks) -> Floor:
    """The roofline floor for work of this size on `machine`."""
    return Floor(
        compute_s=flops / machine.matmul_flops_per_s + transcendentals / machine.exp_per_s,
        memory_s=bytes_moved / machine.bytes_per_s,
    )



def _same(run, spec, fields=None) -> bool:
    """Whether `run` has `spec`'s `fields`; by default every one but `repeats`, which
    leaves an iteration's work alone."""
    # Stored specs are `FitSpec.to_dict()`, which leaves out fields at their defaults
    # (devices, a CSV's header choice): compare like with like.
    wanted = spec.to_dict()
    fields = fields or [field.name for field in dataclasses.fields(spec) if field.name != "repeats"]
    return all(run.spec.get(field) == wanted.get(field) for field in fields)


_PROBLEM = ("strategy", "dataset", "precision", "device", "iterations")


def matching_runs(runs, spec, machine: Peaks) -> list:
    """Finished runs measured where `machine` was, of the same work per iteration as `spec`.

    A run matches on strategy, data, precision, device and iterations, on this host and
    device kind (a time from another machine says nothing about this one's floor).

    Args:
        runs: `RunResult`s, e.g. `RunStore.list()`.
        spec: the `FitSpec` whose floor the times are compared with.
        machine: the peaks of the floor; its host and device kind select the runs.

    Returns:
        The matching runs, those of the very same settings (`repeats` aside) first, then
        fastest first.
    """
    found = [run for run in runs
             if run.status == "ok" and run.per_iter_ms > 0 and _same(run, spec, _PROBLEM)
             and run.versions.get("host") == machine.host and run.device_kind == machine.device_kind]
    return sorted(found, key=lambda run: (not _same(run, spec), run.per_iter_ms))


def times_floor(runs, spec, bound: Floor) -> list[dict]:
    """One row per run (of `matching_runs`): id, created_at, per_iter_ms, same_settings
    (every field of `spec` but repeats) and x_floor, its per-iteration time over the floor."""
    return [{"id": run.id, "created_at": run.created_at, "per_iter_ms": run.per_iter_ms,
             "same_settings": _same(run, spec),
             "x_floor": run.per_iter_ms / 1e3 / bound.seconds if bound.seconds > 0 else math.nan}
            for run in runs]
