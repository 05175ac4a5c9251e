"""The order runs, groups and labels are listed in: digits read as numbers, so that "x2" comes
before "x10" and "#2 scan" before "#10 scan", on every page and in every chart."""

from __future__ import annotations

import re


def natural_key(text: str) -> tuple:
    """A sort key reading digits as numbers: "#2 scan" before "#10 scan"."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", str(text)))


def natural_order(values) -> list[str]:
    """The distinct values as strings, in `natural_key` order."""
    return sorted({str(v) for v in values}, key=natural_key)


def listed(names) -> str:
    """"eager", "eager and scan", "eager, jit_step and scan": names in a sentence."""
    names = [str(name) for name in names]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + f" and {names[-1]}"
