"""The JIT strategies: one module each, all fitting the same model with the same optimizer.

`get(name)` returns a strategy instance; `names()` lists them in teaching order (from
nothing compiled to the whole loop compiled). What each is called, does and runs is in
the catalog (`core.catalog`), which the registry here must match
(tests/fit/test_catalog.py).
"""

from __future__ import annotations

from core import catalog
from core.fit.strategies.base import FitOutput, FitState, Problem, Strategy, fit_step, init_state
from core.fit.strategies.eager import Eager
from core.fit.strategies.fori_loop import ForiLoop
from core.fit.strategies.jit_per_function import JitPerFunction
from core.fit.strategies.jit_step import JitStep
from core.fit.strategies.scan import Scan
from core.fit.strategies.scan_analytic import ScanAnalytic
from core.fit.strategies.scan_namedtuple import ScanNamedTuple
from core.fit.strategies.scan_pytree_class import ScanPytreeClass
from core.fit.strategies.sharded import Sharded
from core.fit.strategies.while_loop import WhileLoop

_CLASSES: tuple[type[Strategy], ...] = (
    Eager,
    JitPerFunction,
    JitStep,
    Scan,
    ScanNamedTuple,
    ScanPytreeClass,
    ForiLoop,
    WhileLoop,
    ScanAnalytic,
    Sharded,
)
_REGISTRY = {cls.name: cls for cls in _CLASSES}

TUTORIAL_LEVELS = catalog.tutorial_levels()


def names() -> list[str]:
    return list(_REGISTRY)


def get(name: str, devices: int = 0) -> Strategy:
    """The strategy called `name`; `KeyError` names the known ones.

    Args:
        devices: for sharded, how many of the platform's devices it spans (0: all); the
            other strategies run on one device and take no count.
    """
    try:
        cls = _REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown strategy {name!r}; known: {', '.join(_REGISTRY)}") from None
    return cls(devices) if cls is Sharded else cls()


def describe() -> list[dict[str, str]]:
    """[{"name", "description"}] for every strategy, in teaching order."""
    return [{"name": name, "description": catalog.runnable(name).description} for name in _REGISTRY]


__all__ = ["FitOutput", "FitState", "Problem", "Strategy", "fit_step", "init_state", "names", "get", "describe", "TUTORIAL_LEVELS"]
