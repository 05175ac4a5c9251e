"""Which part of a fit's iteration each operation of a compiled program belongs to.

An optimized program's HLO keeps, on each instruction, the name of the jitted function or
named scope it was traced in (`op_name="jit(fit)/while/body/closed_call/jit(_safe_search)/…"`),
and a profiler's trace names each op it ran by its instruction. So an op's time can be added
to a part of the algorithm: for `preconditioned_lbfgs`, its descent direction (the L-BFGS
recursion), its line search (the profiled ELBO and gradient at each trial point) and, apart
from the latter, the p x p work (Sigma's factor, Omega and its log-determinant, or the rows'
n x n matrix where p > n), which grows as p^3 and dominates big-p fits. An op traced in no
named part is the rest of the step (the step and the L-BFGS memory's update). Where an
optimizer has none of these functions, only its p x p work is told apart.

Used by the Under-the-hood page's timeline (`core.inspect.timeline`, on a worker) and
`benchmarks/iteration_profile.py`.
"""

from __future__ import annotations

import re

from core.fit import profiled
from core.fit.algorithms import preconditioned_lbfgs
from core.inspect.trace_findings import DIRECTION, LINE_SEARCH, P_BY_P, REST

# (marker in an op's metadata, part), the first that matches wins: the p x p work is inside
# the line search's evaluations, and is timed apart from them.
MARKERS = (
    (profiled.P_BY_P_SCOPE, P_BY_P),
    (f"jit({preconditioned_lbfgs._descent_direction.__name__})", DIRECTION),
    (f"jit({preconditioned_lbfgs._safe_search.__name__})", LINE_SEARCH),
)
_INSTRUCTION = re.compile(r'^\s*(?:ROOT )?%([\w.-]+) = .*?op_name="([^"]*)"')
# Control flow: on a CPU its event spans the ops of its body, which are counted themselves.
_CONTROL_FLOW = re.compile(r'[\])}] (?:while|conditional|call)\(')


def part_of_each_op(hlo_text: str) -> dict[str, str]:
    """{instruction name: part} for every operation of an optimized program's HLO text
    (`Compiled.as_text()`) that carries metadata, control flow left out."""
    parts = {}
    for line in hlo_text.splitlines():
        found = _INSTRUCTION.match(line)
        if found and not _CONTROL_FLOW.search(line):
            name, op_name = found.groups()
            parts[name] = next((part for marker, part in MARKERS if marker in op_name), REST)
    return parts


def names_a_part(parts: dict[str, str]) -> bool:
    """Whether any op of a program falls in a named part: where none does (an optimizer with
    no such functions, on a problem with no p x p work in a scope), a breakdown would be one
    part, the rest, and says nothing."""
    return any(part != REST for part in parts.values())
