"""A `RunResult` as a plain record: its field types, and the checks a record must pass.

Every record is checked before it is stored, whether it comes from this program (`add`)
or from a file someone hands us (`import_file`), so that a bad import fails with a
message naming the record and field instead of leaving a half-readable run in the store;
beyond types, `core.store.record_checks` says what a record must make sense as.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import numbers
import time
import typing
from typing import Any

import numpy as np

from core.results.result import CACHE_STATES, NOT_STORED, STATUSES, RunResult, is_cache_label
from core.spec import FitSpec, SpecError
from core.store import record_checks

# The field types that fit one SQL column each; other fields (dicts, lists) are JSON or bytes.
SCALAR_TYPES = (int, float, str)


class StoreError(Exception):
    """The store file or an import file cannot be used; the message says which and why."""


@functools.cache
def field_kinds() -> dict[str, tuple[type, bool]]:
    """Every stored RunResult field -> (base type, optional), read from its annotation (not
    those the store never keeps, `NOT_STORED`)."""
    hints = typing.get_type_hints(RunResult)
    kinds = {}
    for field in dataclasses.fields(RunResult):
        if field.name in NOT_STORED:
            continue
        args = typing.get_args(hints[field.name])
        optional = type(None) in args
        hint = next(a for a in args if a is not type(None)) if optional else hints[field.name]
        kinds[field.name] = (typing.get_origin(hint) or hint, optional)
    return kinds


def scalar_fields() -> list[str]:
    """RunResult fields holding one int, float or str, in declaration order."""
    return [name for name, (base, _) in field_kinds().items() if base in SCALAR_TYPES]


# List fields of sentences rather than numbers (the ELBO curve).
TEXT_LISTS = ("warnings",)


def _describe(name: str, base: type) -> str:
    if name in TEXT_LISTS:
        return "a list of strings"
    return {int: "a whole number", float: "a number", str: "a string", dict: "an object",
            list: "a list of numbers"}[base]


def _check_value(name: str, base: type, value: Any, where: str) -> Any:
    bad = StoreError(f"{where}: field {name!r} must be {_describe(name, base)}; got {value!r:.80}")
    if name in TEXT_LISTS:
        if isinstance(value, (list, tuple)) and all(isinstance(item, str) for item in value):
            return list(value)
        raise bad
    if isinstance(value, bool) and base is not str:
        raise bad
    if base is int and isinstance(value, numbers.Integral):
        return int(value)
    if base is float and isinstance(value, numbers.Real):
        return float(value)
    if base is str and isinstance(value, str):
        return value
    if base is dict and isinstance(value, dict):
        try:
            return json.loads(json.dumps(value))
        except (TypeError, ValueError) as exc:
            raise StoreError(f"{where}: field {name!r} is not plain JSON: {exc}") from exc
    if base is list and isinstance(value, (list, tuple, np.ndarray)):
        try:
            array = np.asarray(value)
        except ValueError:  # ragged
            raise bad from None
        if array.ndim == 1 and (array.size == 0 or array.dtype.kind in "fiu"):
            return array.astype(float).tolist()
    raise bad


def validate_record(values: Any, where: str) -> RunResult:
    """A checked copy of a record (a dict of RunResult fields).

    Args:
        values: the record, e.g. `RunResult.to_dict()` or one entry of an export file.
        where: names the record in messages, e.g. "runs.json: record 3".

    Raises:
        StoreError: naming `where` and the first field that fails, and why.
    """
    if not isinstance(values, dict):
        raise StoreError(f"{where}: expected a run record (an object); got {type(values).__name__}")
    out: dict[str, Any] = {}
    for field in dataclasses.fields(RunResult):
        if field.name in NOT_STORED:  # never exported; dropped from a file that has it
            continue
        base, optional = field_kinds()[field.name]
        if field.name not in values:
            # Fields added since a file was written have defaults: older exports still import.
            if field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
                raise StoreError(f"{where}: missing field {field.name!r}")
            continue
        value = values[field.name]
        out[field.name] = None if value is None and optional else _check_value(
            field.name, base, value, where)
    if out["status"] not in STATUSES:
        raise StoreError(f"{where}: status must be one of {', '.join(STATUSES)}; got {out['status']!r}")
    if not is_cache_label(out["cache"]):
        raise StoreError(f"{where}: cache must be one of {', '.join(CACHE_STATES)}, or counts of each such as "
                         f"'compiled 1, disk 3'; got {out['cache']!r}")
    if not out["spec_key"]:
        raise StoreError(f"{where}: spec_key is empty")
    if not (math.isfinite(out.get("created_at", 0.0)) and out.get("created_at", 0.0) >= 0):
        raise StoreError(f"{where}: created_at must be epoch seconds; got {out['created_at']}")
    run = RunResult(**out)
    try:
        record_checks.check(run)
    except record_checks.RecordError as exc:
        raise StoreError(f"{where}: {exc}") from None
    return run


def failed_record(values: dict, reason: str) -> dict:
    """A run whose result the store refused (`reason`), as a record that passes: its spec,
    no timings, every text cut to what is kept, status "interrupted" with the reason, so that
    the run is not lost without a trace."""
    spec = values.get("spec") if isinstance(values.get("spec"), dict) else {}
    if len(json.dumps(spec, default=str)) > record_checks.MAX_JSON_TEXT:
        spec = {name: spec.get(name) for name in ("strategy", "precision", "device", "iterations") if name in spec}
    created = float(values.get("created_at") or time.time())
    host = str((values.get("versions") or {}).get("host", "?"))[:record_checks.MAX_TEXT]
    why = f"finished, but the store refused its result: {reason}"[:record_checks.MAX_ERROR_TEXT]
    record = interrupted_result(spec, created, host, 0, reason=why,
                                worker=str(values.get("worker") or ""), owner=str(values.get("owner") or ""))
    record.timed_start = 0.0
    out = record.to_dict()
    return {name: value[:record_checks.MAX_TEXT] if isinstance(value, str) and name != "error" else value
            for name, value in out.items()}


def interrupted_result(spec_dict: dict, started_at: float, host: str, pid: int, reason: str | None = None,
                       worker: str = "", owner: str = "") -> RunResult:
    """The record of a run whose process died before it finished: its spec, no timings;
    `reason` says what happened (default: the process that ran it stopped), `worker` which
    Dask worker it was."""
    try:
        spec = FitSpec.from_dict(spec_dict)
        key, label = spec.key, spec.dataset.label
        n, p, d = spec.dataset.shape or (0, 0, 0)  # known without the data for oaks and simulated
    except (SpecError, TypeError):  # written by another version: keep what can be read
        key, label = "unreadable-spec", str(spec_dict.get("dataset", {}).get("kind", "?"))
        n = p = d = 0
    optimizer = spec_dict.get("optimizer") or {}
    return RunResult(
        spec=spec_dict, spec_key=key, strategy=str(spec_dict.get("strategy", "?")), dataset=label,
        n=n, p=p, d=d, precision=str(spec_dict.get("precision", "?")), device=str(spec_dict.get("device", "?")),
        iterations=int(spec_dict.get("iterations", 0)), optimizer=str(optimizer.get("name", "?")),
        lr=float(optimizer.get("lr", 0.0)), init=str(spec_dict.get("init", "?")),
        repeats=int(spec_dict.get("repeats", 0)), tol=float(spec_dict.get("tol", 0.0)),
        status="interrupted",
        error=reason or f"the process running it (pid {pid} on {host}) stopped before it finished",
        diverged_at=None, iterations_run=0, transfer_s=0.0, trace_lower_s=0.0, compile_s=0.0,
        first_call_s=0.0, run_s=0.0, run_s_min=0.0, run_s_max=0.0, per_iter_ms=0.0, compile_count=0,
        disk_cache_hits=0, recompile_count=0, cache="none", final_elbo=None, elbo=[], devices=0,
        device_kind="", versions={"host": host}, timed_start=started_at, created_at=started_at, worker=worker,
        owner=owner,
    )
