"""What the command line prints: runs (a summary, or one JSON line), progress on stderr, and
how a CSV was read."""

from __future__ import annotations

import json
import math
import sys
from typing import Any

from core.results import outcome
from core.spec import DatasetSpec


def json_safe(value: Any) -> Any:
    """NaN and infinities are not JSON: write them as null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def elbo_text(elbo: float | None, precision: str) -> str:
    """An ELBO to the digits its precision holds (8 significant in float32, 12 in float64):
    the full repr printed float32's rounding as if it were data. JSON keeps every digit."""
    if elbo is None or not math.isfinite(elbo):
        return str(elbo)
    return f"{elbo:.{8 if precision == 'float32' else 12}g}"


def compile_text(result) -> str:
    """What building the run's program took, as the dashboard counts it (trace, lower and
    compile), and where the program came from: a bare "0.000 s" did not say it was loaded
    from a cache."""
    return f"{result.trace_lower_s + result.compile_s:.3f} s ({result.cache})"


def print_json(value: Any) -> None:
    sys.stdout.write(json.dumps(json_safe(value)) + "\n")
    sys.stdout.flush()


class StderrProgress:
    """A one-line progress bar on stderr (redrawn in place on a terminal)."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.tty = sys.stderr.isatty()
        self.phase = ""
        self.width = 0
        self._shown_s = -1.0

    def __call__(self, progress) -> None:
        if progress.phase == "queued":
            self._queued(progress)
            return
        bar = ""
        if progress.phase == "done":
            # Its count is of timed calls, read as iterations beside a fit of 51 ("done 14/14").
            bar = f"{progress.total} timed call{'s' * (progress.total != 1)}" if progress.total else ""
        elif progress.total:
            filled = int(30 * progress.done / progress.total)
            bar = f"[{'#' * filled}{'.' * (30 - filled)}] {progress.done}/{progress.total}"
        elif progress.phase == "first_call":
            bar = "(one compiled call: nothing to report until it returns)"
        elbo = f" ELBO {progress.elbo:.6g}" if progress.elbo is not None else ""
        line = f"{self.label}: {progress.phase:<10} {bar}{elbo}"
        if self.tty:
            end = "\n" if progress.phase == "done" else ""
            sys.stderr.write("\r" + line.ljust(self.width) + end)
            self.width = len(line)
        elif progress.phase != self.phase:
            # Logs and pipes get one line per phase rather than a stream of redraws.
            sys.stderr.write(line + "\n")
        self.phase = progress.phase
        sys.stderr.flush()

    def _queued(self, progress) -> None:
        # One line when the wait starts, then (on a terminal) a redraw every second.
        ahead = progress.ahead[0].describe() if progress.ahead else "the device"
        line = (f"{self.label}: queued, {len(progress.ahead)} ahead, waited {progress.waited_s:.0f} s; "
                f"now: {ahead}")
        if self.tty and int(progress.waited_s) != int(self._shown_s):
            sys.stderr.write("\r" + line.ljust(self.width))
            self.width, self._shown_s = len(line), progress.waited_s
        elif not self.tty and self.phase != "queued":
            sys.stderr.write(line + "\n")
        self.phase = "queued"
        sys.stderr.flush()


def print_run(result, as_json: bool) -> None:
    """The run on stdout: one JSON line, or a summary with what a reader of its numbers must
    know under it. With JSON, that goes to stderr (`say_on_stderr`)."""
    if as_json:
        say_on_stderr(result)
        print_json(result.to_dict())
        return
    solved = (f"; time to solution {result.time_to_solution_s:.4f} s" if result.time_to_solution_s is not None
              else "")
    # Said in words: a stop at the tolerance was implied only by "time to solution" being there.
    ended = outcome.finished_as(result.status, result.converged, result.stalled, result.short)
    print(f"run {result.id}: {result.strategy} {result.dataset} {result.precision} {ended}; "
          f"compile {compile_text(result)}, first call {result.first_call_s:.3f} s, "
          f"steady {result.run_s:.4f} s = {result.iterations_run} iteration{'s' * (result.iterations_run != 1)} x "
          f"{result.per_iter_ms:.3f} ms"
          f"{solved}; {final_elbo_text(result)}")
    for line in ([result.error] if result.error else []) + convergence(result) + result.warnings:
        print(f"  {line}")


def final_elbo_text(result) -> str:
    """The ELBO the run ended on. A diverged run's is its last finite one, before the
    iteration that went wrong: printed as "final ELBO", a finite number beside "not finite"
    in the error read as a contradiction."""
    value = elbo_text(result.final_elbo, result.precision)
    if result.status == "diverged" and result.final_elbo is not None:
        # Numbered as the error and the ELBO charts number iterations, from 0: "(iteration 1)"
        # beside "not finite at iteration 1" read as one iteration both finite and not.
        return f"last finite ELBO {value} (iteration {result.iterations_run - 1})"
    return f"final ELBO {value}"


def say_on_stderr(result) -> None:
    """How the fit ended and its warnings, on stderr beside a JSON stdout."""
    for line in convergence(result) + list(result.warnings):
        sys.stderr.write(f"{line}\n")


def convergence(result) -> list[str]:
    if result.stalled:
        return [outcome.stall_note(result.final_change, result.precision)]
    if result.short:
        return [outcome.short_note(result.estimated_gap)]
    if result.converged is False:
        return [outcome.capped_note(result.final_change, result.tol, result.iterations_run, result.estimated_gap)]
    return []


def read_csv_saying_how(dataset: DatasetSpec):
    """The CSV data `dataset` names, with how they were read (separator, header) on stderr.
    What was changed (columns dropped) is among the run's warnings, which `print_run` and
    `say_on_stderr` print: printed here too, it was said twice."""
    from core.data import datasets

    counts = datasets.load(dataset)
    for line in counts.notes:
        sys.stderr.write(f"{line}\n")
    return counts
