"""Which compiled program a fit ran: a fingerprint of what XLA was given to compile.

Two strategies that differ only in how their Python is written (a tuple, a NamedTuple or a
pytree class as the scan's carry) may lower to the same StableHLO; XLA then compiles one
program, and the second strategy loads the first's executable. Timings of one program are
one speed: a difference between them is noise, not a speed-up (`core.results.spread`).

The fingerprint hashes what decides the executable, as JAX's persistent-cache key does
(`jax._src.cache_key`): the lowered modules without their debug information (source
locations differ between two strategies' files), the jaxlib that compiles them, and the
devices. Unlike JAX's key it leaves out the module's name, which is the traced function's
(`jit__fit`, `jit_fit_step`) and says nothing about the program. It is read from the
lowered modules, before XLA, so a program loaded from a cache has the fingerprint it had
when it was compiled: XLA's own fingerprint of an executable differs between one just
compiled and the same one loaded from disk.
"""

from __future__ import annotations

import hashlib
import io
from typing import Any

import jaxlib
from jax._src.lib.mlir import ir, passmanager

# Long enough that two programs never share one among a store's runs, short enough to show.
SHOWN_DIGITS = 16


def _module_digest(lowered: Any) -> bytes:
    """The SHA-256 of one lowered function's StableHLO, without debug information or name."""
    module = lowered.compiler_ir("stablehlo")
    with module.context:
        clone = module.operation.clone()  # the passes below change what they run on
        clone.attributes["sym_name"] = ir.StringAttr.get("program")
        passmanager.PassManager.parse("builtin.module(strip-debuginfo)").run(clone)
        out = io.BytesIO()
        clone.write_bytecode(file=out)
    return hashlib.sha256(out.getvalue()).digest()


def fingerprint(lowered: dict[str, Any], device_kind: str, devices: int) -> str:
    """The fingerprint of the programs `lowered` ({name: jax.stages.Lowered}) compile to on
    `devices` devices of `device_kind`: hex digits, "" when nothing is compiled ahead."""
    if not lowered:
        return ""
    digest = hashlib.sha256()
    digest.update(f"jaxlib {jaxlib.__version__}; {device_kind} x {devices}".encode())
    # By position in name order, not by name: a strategy's names for its functions are its own.
    for name in sorted(lowered):
        digest.update(_module_digest(lowered[name]))
    return digest.hexdigest()[:SHOWN_DIGITS]

