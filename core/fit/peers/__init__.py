"""Peers: the comparisons users would otherwise make by hand, run and timed like strategies.

- `pyplnmodels`: pyPLNmodels' own `Pln.fit` (PyTorch, eager, Rprop, profiled B and Sigma).
- `torch_eager`: our algorithm (model, initialisation, optimizer) in PyTorch, eager.
- `torch_compile`: the same with the per-iteration step under `torch.compile`.

Every ELBO is the ELBO itself with the exact log Y! (gammaln). This module names and
describes them without importing torch or pyPLNmodels, so that listing what can run
costs nothing; `core.run.peer_timing` times them.
"""

from __future__ import annotations

PEER_NAMES = ("pyplnmodels", "torch_eager", "torch_compile")

_DESCRIPTIONS = {
    "pyplnmodels": (
        "pyplnmodels: pyPLNmodels' own Pln.fit (PyTorch, eager) on the same data, iterations and "
        "device. Its own algorithm whatever the spec says: Rprop(lr=0.01) on M and S from "
        "M = log(Y + (Y == 0)), S = 0.5, with B and Sigma profiled. Its ELBO is re-expressed with "
        "the exact log Y!; its float32-only inputs are cast to the spec's precision. With a tolerance it stops "
        "by the rule every strategy uses (relative ELBO change), not by its own criterion."
    ),
    "torch_eager": (
        "torch_eager: our algorithm line for line in PyTorch (same model, initialisation and "
        "optax optimizer semantics: seed, adam and rprop), run op by op from a Python loop, every "
        "iteration: the PyTorch counterpart of the eager strategy."
    ),
    "torch_compile": (
        "torch_compile: the same PyTorch step under torch.compile (TorchDynamo + Inductor, "
        "mode='default', dynamic=False), one compiled function per iteration driven from a "
        "Python loop, like jit_step. Compilation happens at the first call; compile_s is "
        "estimated as first call minus a steady-state call."
    ),
}


def names() -> list[str]:
    return list(PEER_NAMES)


def describe() -> list[dict[str, str]]:
    """[{"name", "description"}] for every peer, like `core.fit.strategies.describe()`."""
    return [{"name": name, "description": _DESCRIPTIONS[name]} for name in PEER_NAMES]
