"""Which way the profiled evaluation makes Omega from Sigma = (R^T R + D) / n: through Sigma's
own p x p factor, or through the rows' n x n matrix I + R D^-1 R^T (Woodbury,
`core.fit.profiled.precision_terms`).

Apart from `core.fit.profiled` and free of JAX, so that the memory estimate
(`core.machine.memory_estimate`), which counts what each way keeps, can ask on a server that
never loads XLA.
"""

from __future__ import annotations


def through_rows(rows: int, p: int, precision: str) -> bool:
    """Whether a profiled evaluation of `rows` x `p` data in `precision` ("float32" or
    "float64") works through the rows: where there are fewer rows than columns, and in
    float32 at most half as many. That way runs in float64 whatever the fit's precision, at
    twice float32's cost per product: at 921 x 1209 a float32 iteration took 1.27 times as
    long as with its own p x p factor, at 60 x 150 0.87 times."""
    return 2 * rows <= p if precision == "float32" else rows < p
