"""Every `PLNLAB_*` environment variable in one table: its name, kind, default and meaning.

No module reads a `PLNLAB_*` variable from the environment but through here
(`tests/test_config.py` holds the code to it), and docs/configuration.md's table is this
table (`table()` writes it; the test compares). Values are read when
asked, not at import: a server's operator, and the tests, change them without restarting
the interpreter. A value that does not parse raises `ConfigError`, naming the variable and
what it accepts; the module that reads it says so in its own error type.

This is the ground floor: it imports nothing of this project.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import os
import pathlib
from typing import Any

YES = ("1", "yes", "true", "on")
NO = ("0", "no", "false", "off")


class ConfigError(ValueError):
    """A variable holds what its kind does not accept; the message names it."""


@dataclasses.dataclass(frozen=True)
class Variable:
    """One setting.

    Attributes:
        name: the environment variable.
        kind: what it holds: "path", "whole" (a whole number >= 1), "seconds",
            "megabytes", "switch" (1/0, yes/no...), "address", "text" or "list" (comma
            separated).
        default: the value when unset (None: unset means off, or a default derived
            elsewhere, which `unset` describes).
        meaning: what it changes, one sentence.
        unset: what unset means, where `default` does not say it.
        section: the page of docs/ that tells more.
    """

    name: str
    kind: str
    default: Any
    meaning: str
    unset: str = ""
    section: str = ""

    @property
    def default_text(self) -> str:
        if self.unset:
            return self.unset
        if isinstance(self.default, int) and not isinstance(self.default, bool):
            return f"{self.default:,}"
        return str(self.default)


_STORE = "sharing.md"
_CLUSTER = "team-cluster.md"
_SECURITY = "security.md"
VARIABLES: tuple[Variable, ...] = (
    # Where things are kept.
    Variable("PLNLAB_DB", "path", None, "the run store (SQLite; on a local disk)",
             "$XDG_DATA_HOME/plnlab/runs.sqlite3", _STORE),
    Variable("PLNLAB_JAX_CACHE", "path", None, "JAX's persistent compilation cache",
             "$XDG_CACHE_HOME/plnlab/jax", "benchmarks.md"),
    Variable("PLNLAB_QUEUE_DIR", "path", None, "the host's device queue (a file per waiter)",
             "queue/ beside the compilation cache", _STORE),
    # Caps on what one run may ask for.
    Variable("PLNLAB_MAX_ITERATIONS", "whole", 1_000_000, "the most iterations a run may ask for", section=_STORE),
    Variable("PLNLAB_MAX_REPEATS", "whole", 100, "the most timed repeats a run may ask for", section=_STORE),
    Variable("PLNLAB_MAX_ROWS", "whole", 10_000_000, "the most rows (samples) of a data set", section=_STORE),
    Variable("PLNLAB_MAX_COLUMNS", "whole", 2_000, "the most count columns of a data set", section=_STORE),
    Variable("PLNLAB_MAX_COVARIATES", "whole", 50, "the most covariates (with the intercept)", section=_STORE),
    Variable("PLNLAB_MAX_REPLICATE", "whole", 100_000, "the most times oaks' rows may be repeated", section=_STORE),
    Variable("PLNLAB_MAX_CSV_MB", "megabytes", 50.0, "the largest CSV file read", section=_STORE),
    Variable("PLNLAB_MAX_RUN_SECONDS", "seconds", 300.0, "how long one run may hold the device", section=_STORE),
    Variable("PLNLAB_MIN_MEASURED_S", "seconds", 0.25,
             "a short fit is repeated until timed this long in all (0: exactly the repeats asked)",
             section="talks.md"),
    # Caps on what everyone together may ask for.
    Variable("PLNLAB_MAX_QUEUED_PER_OWNER", "whole", 16, "runs one session or user may have queued",
             section=_STORE),
    Variable("PLNLAB_MAX_QUEUED", "whole", 64, "runs the server may have queued", section=_STORE),
    Variable("PLNLAB_MAX_DEVICE_SECONDS_PER_HOUR", "whole", 2_700,
             "device seconds one owner's runs may take in an hour", section=_STORE),
    Variable("PLNLAB_MAX_UPLOADS_MB", "whole", 512, "megabytes of uploads the server holds at once",
             section=_SECURITY),
    Variable("PLNLAB_MAX_STORED_RUNS", "whole", 100_000, "runs the store keeps", section=_STORE),
    # Who may do what.
    Variable("PLNLAB_PASSWORD_FILE", "path", None, "a file holding the server's password",
             "no password (or PLNLAB_PASSWORD, or secrets.toml)", _STORE),
    Variable("PLNLAB_PASSWORD", "text", None, "the server's password (a file is safer)",
             "no password", _STORE),
    Variable("PLNLAB_ALLOW_DELETE", "switch", None, "whether others' runs may be deleted",
             "yes for sessions, no behind SSO", _STORE),
    Variable("PLNLAB_TRUSTED_PROXY", "address", None, "the server's own proxy, whose forwarded address is believed",
             "none: the peer's address counts", _STORE),
    # The cluster.
    Variable("PLNLAB_SCHEDULER", "address", None, "a team's Dask scheduler (tls://HOST:PORT)",
             "the embedded cluster", _CLUSTER),
    Variable("PLNLAB_TLS_CA_FILE", "path", None, "the team's CA certificate", "Dask's own TLS settings", _CLUSTER),
    Variable("PLNLAB_TLS_CERT", "path", None, "this client's certificate", "Dask's own TLS settings", _CLUSTER),
    Variable("PLNLAB_TLS_KEY", "path", None, "this client's key", "in the certificate's file", _CLUSTER),
    Variable("PLNLAB_ALLOW_PLAINTEXT", "switch", False, "accept a plain tcp:// scheduler beyond this machine",
             section=_CLUSTER),
    Variable("PLNLAB_WORKER_MEMORY", "text", None, "each embedded worker's memory limit (e.g. 8GiB)",
             "an even share of the machine's memory", _CLUSTER),
    Variable("PLNLAB_WORKER_MAX_RUNS", "whole", 100, "runs a worker serves before a fresh process replaces it",
             section=_CLUSTER),
    Variable("PLNLAB_WORKER_PLATFORMS", "list", None, "the platforms a team's worker serves (e.g. gpu)",
             "every platform JAX finds", _CLUSTER),
    Variable("PLNLAB_WORKER_KEEP_THREAD_LIMITS", "switch", False,
             "keep Dask's one-thread limits on a worker (the PyTorch peers then run single-threaded)",
             section=_CLUSTER),
    Variable("PLNLAB_LOCAL_PLATFORMS", "list", None, "set by the embedded cluster: the platform of worker i",
             "(internal)", _CLUSTER),
    # Diagnostics.
    Variable("PLNLAB_DEBUG", "switch", False, "the command line prints a traceback with an internal error",
             section="command-line.md"),
)
BY_NAME = {variable.name: variable for variable in VARIABLES}


def variable(name: str) -> Variable:
    """The table's entry for `name`; KeyError for a name it does not hold."""
    try:
        return BY_NAME[name]
    except KeyError:
        raise KeyError(f"{name} is not in core.config.VARIABLES") from None


def unknown() -> list[str]:
    """A line for each `PLNLAB_*` variable of this process's environment that is no setting
    of this table, with the name it is nearest to: a store named by a variable of another name
    ("..._STORE") was not read, and the runs went to the per-user store without a word."""
    lines = []
    for name in sorted(key for key in os.environ if key.startswith("PLNLAB_") and key not in BY_NAME):
        near = difflib.get_close_matches(name, BY_NAME, n=1, cutoff=0.8)
        if any(word in name for word in ("STORE", "DATABASE", "SQLITE")) and "STORED" not in name:
            near = ["PLNLAB_DB"]  # the run store's variable, which no spelling of "store" is near
        lines.append(f"{name} is no setting of PLN JIT Lab and is ignored"
                     + (f" (did you mean {near[0]}?)" if near else "")
                     + "; docs/configuration.md lists them")
    return lines


def raw(name: str) -> str:
    """$name, stripped; "" when unset."""
    variable(name)
    return os.environ.get(name, "").strip()


def take(name: str) -> str:
    """$name, removed from this process's environment (a secret its children must not
    inherit); "" when unset."""
    variable(name)
    return (os.environ.pop(name, None) or "").strip()


def whole(name: str) -> int:
    """A whole number >= 1, its default when unset."""
    text = raw(name)
    if not text:
        return variable(name).default
    try:
        value = int(text)  # as Python writes them: "20_000" too
    except ValueError:
        value = 0
    if value < 1:
        raise ConfigError(f"{name} must be a whole number >= 1; got {text!r}")
    return value


def _number(name: str, unit: str, zero_allowed: bool) -> float:
    """A finite number of `unit` > 0 (>= 0 where `zero_allowed`), its default when unset."""
    text = raw(name)
    if not text:
        return variable(name).default
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and (value >= 0 if zero_allowed else value > 0)):
        raise ConfigError(f"{name} must be a number of {unit} {'>=' if zero_allowed else '>'} 0; got {text!r}")
    return value


def seconds(name: str, zero_allowed: bool = False) -> float:
    """A finite number of seconds > 0 (>= 0 where `zero_allowed`), its default when unset."""
    return _number(name, "seconds", zero_allowed)


def megabytes(name: str) -> float:
    """A number of megabytes > 0, its default when unset."""
    return _number(name, "megabytes", False)


def switch(name: str) -> bool | None:
    """True for 1/yes/true/on, False for 0/no/false/off, its default when unset."""
    text = raw(name).lower()
    if not text:
        return variable(name).default
    if text in YES:
        return True
    if text in NO:
        return False
    raise ConfigError(f"{name} must be 1 or 0 (or yes/no, true/false, on/off); got {text!r}")


def path(name: str) -> pathlib.Path | None:
    """A path, `~` expanded; None when unset."""
    text = raw(name)
    return pathlib.Path(text).expanduser() if text else None


def listed(name: str) -> list[str]:
    """A comma-separated list, its empty items dropped; [] when unset."""
    return [item.strip() for item in raw(name).split(",") if item.strip()]


def table() -> str:
    """docs/configuration.md's table, in Markdown."""
    rows = ["| variable | holds | unset | what it changes | more |", "|---|---|---|---|---|"]
    rows += [f"| `{v.name}` | {v.kind} | {v.default_text} | {v.meaning} | [{v.section}]({v.section}) |"
             for v in VARIABLES]
    return "\n".join(rows)
