"""The machine's state while a run is timed, kept with the run as pyperf keeps it: what the CPU
is and how it is set, which cores the process may use, which code and JAX settings ran, and
how busy the machine was with other work.

How busy is measured, not guessed from the load average (whose one-minute mean counts the
run's own compile and the runs before it): over the timed window, the CPU time every process
used (/proc/stat) less this process's own (its threads included), as a share of the cores it
may use. A run during which other processes took more than a quarter of them is marked
"unstable" (`core.results.stability`): its timings carry someone else's load.

Everything here is read from files Linux provides and is left out where they are absent
(another system, a container that hides them); nothing here imports JAX.
"""

from __future__ import annotations

import os
import pathlib
import re
import time
from typing import Any

# The variables that change what JAX and XLA compile or how they run.
_FLAG_PREFIXES = ("JAX_", "XLA_")
_PROJECT = pathlib.Path(__file__).resolve().parents[2]


def _read(path: str | pathlib.Path) -> str | None:
    try:
        return pathlib.Path(path).read_text().strip()
    except OSError:
        return None


def _cpu_model() -> str | None:
    info = _read("/proc/cpuinfo") or ""
    found = re.search(r"^(?:model name|Model|Hardware)\s*:\s*(.+)$", info, re.MULTILINE)
    return found.group(1).strip() if found else None


def _frequency_mhz(cores: list[int]) -> float | None:
    """The mean current frequency of the usable cores, in MHz, where the kernel says it."""
    found = []
    for core in cores:
        khz = _read(f"/sys/devices/system/cpu/cpu{core}/cpufreq/scaling_cur_freq")
        if khz and khz.isdigit():
            found.append(int(khz) / 1e3)
    if found:
        return round(sum(found) / len(found), 1)
    info = _read("/proc/cpuinfo") or ""  # virtual machines often give it only here
    speeds = [float(v) for v in re.findall(r"^cpu MHz\s*:\s*([\d.]+)$", info, re.MULTILINE)]
    return round(sum(speeds) / len(speeds), 1) if speeds else None


def commit() -> str | None:
    """The project's git commit (read from .git, without running git), or None outside a clone."""
    git = _PROJECT / ".git"
    head = _read(git / "HEAD")
    if not head:
        return None
    if not head.startswith("ref: "):
        return head[:40]
    ref = head[5:]
    direct = _read(git / ref)
    if direct:
        return direct[:40]
    for line in (_read(git / "packed-refs") or "").splitlines():
        if line.endswith(" " + ref):
            return line.split()[0][:40]
    return None


def usable_cores() -> list[int]:
    """The cores this process may run on (its affinity), in order."""
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return list(range(os.cpu_count() or 1))


def facts() -> dict[str, Any]:
    """What does not change during a run: the CPU's model, frequency and governor, the usable
    cores, the project's commit and the JAX and XLA variables; None where unreadable."""
    cores = usable_cores()
    governor = _read(f"/sys/devices/system/cpu/cpu{cores[0]}/cpufreq/scaling_governor") if cores else None
    flags = {name: value for name, value in sorted(os.environ.items()) if name.startswith(_FLAG_PREFIXES)}
    return {"cpu_model": _cpu_model(), "cpu_mhz": _frequency_mhz(cores), "governor": governor,
            "usable_cores": len(cores), "affinity": _ranges(cores), "commit": commit(), "jax_flags": flags}


def _ranges(cores: list[int]) -> str:
    """"0-3,8" for cores 0, 1, 2, 3 and 8."""
    parts, start = [], None
    for index, core in enumerate(cores):
        if start is None:
            start = core
        if index + 1 == len(cores) or cores[index + 1] != core + 1:
            parts.append(str(start) if start == core else f"{start}-{core}")
            start = None
    return ",".join(parts)


def _busy_jiffies() -> int | None:
    """CPU time every process used since boot, in clock ticks (user, nice, system, irq,
    softirq, steal), or None without /proc/stat."""
    line = (_read("/proc/stat") or "").split("\n", 1)[0].split()
    if len(line) < 8 or line[0] != "cpu":
        return None
    user, nice, system, _idle, _iowait, irq, softirq, *rest = (int(v) for v in line[1:])
    return user + nice + system + irq + softirq + (rest[0] if rest else 0)


class Watch:
    """Context manager around a timed window: how busy the machine was with other work.

    `state()` then gives the load averages before and after, the window's length, and
    `others_cpu_share`: the CPU time of every other process over the window as a share of the
    usable cores (None where /proc/stat is absent).
    """

    def __enter__(self) -> Watch:
        self._load_before = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
        self._busy = _busy_jiffies()
        self._own = _own_cpu_s()
        self._start = time.monotonic()
        return self

    def __exit__(self, *exc) -> None:
        self._elapsed = time.monotonic() - self._start
        busy = _busy_jiffies()
        own = _own_cpu_s() - self._own
        self._share = None
        cores = len(usable_cores())
        if busy is not None and self._busy is not None and self._elapsed > 0:
            everyone = (busy - self._busy) / os.sysconf("SC_CLK_TCK")
            self._share = round(max(0.0, everyone - own) / (self._elapsed * cores), 3)
        self._load_after = os.getloadavg()[0] if hasattr(os, "getloadavg") else None

    def state(self) -> dict[str, Any]:
        return {"load_before": self._load_before, "load_after": self._load_after,
                "timed_s": round(self._elapsed, 3), "others_cpu_share": self._share}


def _own_cpu_s() -> float:
    """This process's CPU seconds, every thread included (XLA's and torch's pools)."""
    times = os.times()
    return times.user + times.system


def resident_mb(pid: int | None = None) -> float:
    """The resident memory (VmRSS) of process `pid` (default: this one) in MB; NaN where
    Linux's /proc does not say. What the long-running checks watch for growth without
    bound (benchmarks/soak.py, benchmarks/corpus.py)."""
    status = _read(f"/proc/{pid or 'self'}/status") or ""
    found = re.search(r"^VmRSS:\s+(\d+)\s+kB", status, re.MULTILINE)
    return int(found.group(1)) / 1024 if found else float("nan")
