"""The seed tutorial's pitfalls (and one any JIT level can fall into) as the pages list
them: titles, what each demonstration shows, its code, and the result type it comes back
as. Plain data: the dashboard's server shows all of it without JAX; the demonstrations
themselves (`core.inspect.pitfalls`) run on a worker.
"""

from __future__ import annotations

import dataclasses
import functools
import pathlib

from core.machine.compile_log import Compile

TITLES = {
    "trace_precedence": "Trace term: operator precedence drops Omega",
    "logdet_overflow": "log(det(Omega)) overflows in float32",
    "pytree_class": "The pytree class whose Omega never updates",
    "fused_reduction": "jaxlib 0.10.2 miscompiles a fused reduction on CPU",
    "recompiles": "A compile every iteration: jit in the loop, a changing static argument",
}
# No bug of the tutorial's: mistakes any JIT level can make. The pages call their first way
# "the wrong way" and what it shows a pitfall, not a bug.
ANY_JIT_LEVEL = frozenset({"recompiles"})
# What each demo shows, before it has run (its result explains the numbers).
SUMMARIES = {
    "trace_precedence": "The seed's `jnp.trace(M.T @ M + jnp.diag(...) @ Omega)` multiplies only the diagonal "
                        "part by Omega, because `@` binds tighter than `+`. The demo compares it with "
                        "tr(Omega (M^T M + D)) on small random data.",
    "logdet_overflow": "The seed's `jnp.log(jnp.linalg.det(Omega))` overflows in float32 when p = 114. The demo "
                       "computes it for an oaks-sized Omega next to the Cholesky and slogdet log-determinants.",
    "pytree_class": "The seed's level-4 class writes Sigma and Omega to a global and drops them in "
                    "`tree_unflatten`. The demo runs it in `lax.scan` next to core's scan_pytree_class.",
    "fused_reduction": "jaxlib 0.10.2's CPU backend miscompiles the jitted Stirling sum of log Y! on oaks "
                       "(jax-ml/jax#39103). The demo computes it live on the installed jaxlib next to NumPy's.",
    "recompiles": "Any JIT level falls back to compiling every iteration when the loop builds a new jitted "
                  "function each time or passes a changing Python number as a static argument. The demo runs "
                  "one small step three ways and shows each compile with JAX's own explanation of why.",
}


@dataclasses.dataclass(frozen=True)
class PitfallResult:
    """What one demonstration showed.

    Attributes:
        key, title: which pitfall.
        explanation: what goes wrong and why, in two or three sentences.
        buggy: {label: value} computed the wrong way (`wrong_way`).
        correct: {label: value} computed the right way.
        reproduced: whether the bug showed here (the buggy and correct values differ).
        note: anything version- or platform-specific the numbers depend on.
        recompiles: the demo's compiles, each with JAX's explanation and its stages' times.
        recompile_ways: which of the demo's ways each of `recompiles` came from.
    """

    key: str
    title: str
    explanation: str
    buggy: dict[str, float]
    correct: dict[str, float]
    reproduced: bool
    note: str = ""
    recompiles: tuple[Compile, ...] = ()
    recompile_ways: tuple[str, ...] = ()

    @property
    def wrong_way(self) -> str:
        """What `buggy`'s values are called: the tutorial's way, or, for a pitfall of any JIT
        level (`ANY_JIT_LEVEL`), the wrong way."""
        return "the wrong way" if self.key in ANY_JIT_LEVEL else "the tutorial's way"

    @property
    def kind(self) -> str:
        """"Bug" (the tutorial's) or "Pitfall" (any JIT level's)."""
        return "Pitfall" if self.key in ANY_JIT_LEVEL else "Bug"


# The code a reader should see for each pitfall: top-level names in core/inspect/pitfalls.py.
CODE = {
    "trace_precedence": ("trace_precedence",),
    "logdet_overflow": ("logdet_overflow",),
    "pytree_class": ("SeedPLN", "pytree_class"),
    "fused_reduction": ("_log_stirling", "fused_reduction"),
    "recompiles": ("_poisson_step", "recompiles"),
}


def compile_rows(result: PitfallResult) -> list[dict[str, str]]:
    """A row per compile of `result`: the way it came from, the function, its call site
    (file name and line), JAX's reason in full, and its stages' milliseconds in words."""
    rows = []
    ways = result.recompile_ways or ("",) * len(result.recompiles)
    for way, c in zip(ways, result.recompiles):
        stages = ", ".join(f"{name} {getattr(c, field) * 1e3:,.1f} ms" for name, field in
                           (("trace", "trace_s"), ("lower", "lower_s"), ("XLA compile", "compile_s"))
                           if getattr(c, field) is not None)
        rows.append({"way": way, "function": c.function, "where": pathlib.PurePath(c.where).name,
                     "why": c.why or "JAX gave no reason", "stages": stages})
    return rows


def keys() -> list[str]:
    """Every pitfall, in the order the tutorial meets them."""
    return list(TITLES)


@functools.cache
def source(key: str) -> str:
    """The Python source of pitfall `key`'s demonstration, read from its module's file without
    importing it (it imports JAX) and without Python's parser (not safe in several threads at
    once in CPython 3.11; a server asks from every session's thread): each top-level
    definition runs from its first decorator or `def`/`class` line to the line before the
    next top-level statement (tests/inspect/test_pitfalls.py holds it to `inspect.getsource`)."""
    lines = (pathlib.Path(__file__).with_name("pitfalls.py")).read_text().splitlines()
    return "\n\n".join(_definition(lines, name) for name in CODE[key])


def _definition(lines: list[str], name: str) -> str:
    head = next(i for i, line in enumerate(lines) if line.startswith((f"def {name}(", f"class {name}(", f"class {name}:")))
    start = head
    while start > 0 and lines[start - 1].startswith("@"):
        start -= 1
    end = next((i for i in range(head + 1, len(lines)) if lines[i] and not lines[i][0].isspace()
                and not lines[i].startswith((")", "]", "}"))), len(lines))
    while end > head and not lines[end - 1].strip():
        end -= 1
    return "\n".join(lines[start:end])
