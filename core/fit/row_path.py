"""Which way the profiled evaluation makes Omega from Sigma = (R^T R + D) / n: through Sigma's
own p x p factor, or through the rows' n x n matrix I + R D^-1 R^T (Woodbury,
`core.fit.profiled.precision_terms`).

Apart from `core.fit.profiled` and free of JAX, so that the memory estimate
(`core.machine.memory_estimate`), which counts what each way keeps, can ask on a server that
never loads XLA. `benchmarks/row_path.py` times the two ways side by side on a machine.
"""

from __future__ import annotations


def through_rows(rows: int, p: int, precision: str, platform: str = "cpu") -> bool:
    """Whether a profiled evaluation of `rows` x `p` data in `precision` ("float32" or
    "float64") on `platform` (JAX's: "cpu", "gpu", "tpu") works through the rows: where there
    are fewer rows than columns, and in float32 off a GPU at most half as many.

    That way runs in float64 whatever the fit's precision. On a CPU that is twice float32's
    cost per product: at 921 x 1209 a float32 iteration took 1.27 times as long as with its
    own p x p factor, at 60 x 150 0.87 times. A GPU's float64 is not the CPU's trade-off: on
    an H200 the float32 fits to the stop at 150 x 235, 921 x 1209 and 2000 x 3000 took 0.84,
    0.75 and 0.66 times the milliseconds an iteration through the rows, and ended as close to
    the optimum or closer (docs/accuracy.md, "On a GPU"). A TPU emulates float64, so it keeps
    the CPU's rule."""
    if precision == "float32" and platform != "gpu":
        return 2 * rows <= p
    return rows < p
