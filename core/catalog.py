"""Everything the engine can run: the JAX strategies, then the peers they are compared with.

The JAX strategies (`core.strategies`) differ only in what they compile; the peers
(`core.peers`) are pyPLNmodels' own fit and our algorithm in PyTorch. Listing them
together lets the command line and the pages offer one choice without importing torch.
"""

from __future__ import annotations

from core import peers, strategies


def names() -> list[str]:
    """JAX strategies in teaching order, then peers."""
    return strategies.names() + peers.names()


def describe() -> list[dict[str, str]]:
    """[{"name", "description"}] for every runnable name."""
    return strategies.describe() + peers.describe()


def reports_progress(name: str) -> bool:
    """Whether iterations run from Python, so a run can report its ELBO as it goes."""
    if peers.is_peer(name):
        return name != "pyplnmodels"
    return strategies.get(name).python_loop
