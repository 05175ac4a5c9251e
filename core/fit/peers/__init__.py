"""Peers: the comparisons users would otherwise make by hand, run and timed like strategies.

- `pyplnmodels`: pyPLNmodels' own `Pln.fit` (PyTorch, eager, Rprop, profiled B and Sigma).
- `torch_eager`: our algorithm (model, initialisation, optimizer) in PyTorch, eager.
- `torch_compile`: the same with the per-iteration step under `torch.compile`.

Every ELBO is the ELBO itself with the exact log Y! (gammaln). This module names and
describes them (from the catalog, `core.catalog`) without importing torch or
pyPLNmodels, so that listing what can run costs nothing; `core.run.peer_timing` times them.
"""

from __future__ import annotations

from core import catalog

PEER_NAMES = catalog.peer_names()


def names() -> list[str]:
    return list(PEER_NAMES)


def describe() -> list[dict[str, str]]:
    """[{"name", "description"}] for every peer, like `core.fit.strategies.describe()`."""
    return [{"name": name, "description": catalog.runnable(name).description} for name in PEER_NAMES]
