"""The catalog (`core.catalog`) is the one list of strategies, optimizers and peers: the
registries that build them match it, and no name it does not know is written anywhere."""

from __future__ import annotations

import ast
import importlib
import pathlib

import pytest
from specs import tutorial_spec

from core import catalog
from core.fit import algorithms, peers, strategies
from core.fit.peers.torch_optim import TWINS
from core.spec import OptimizerSpec, SpecError

from project import ROOT


def test_the_registries_build_what_the_catalog_lists():
    assert tuple(strategies.names()) == catalog.strategy_names()
    assert tuple(peers.names()) == catalog.peer_names()
    assert tuple(catalog.RUNNABLES) == catalog.strategy_names() + catalog.peer_names()
    for name in catalog.strategy_names():
        strategy, entry = strategies.get(name), catalog.runnable(name)
        assert strategy.python_loop == (entry.loop == "python"), name
        assert strategy.donates_state == entry.donates_state, name
        assert entry.description and entry.summary.endswith("."), name
    for name, optimizer in catalog.OPTIMIZERS.items():
        assert algorithms.make(OptimizerSpec(name)).family == optimizer.family
    # The PyTorch twins run every optimizer the gradient family has, as the peers promise.
    assert set(TWINS) == set(catalog.optimizer_names(catalog.GRADIENT))


def test_the_least_compiled_strategy_is_the_first_in_teaching_order_whatever_the_order_given():
    assert catalog.least_compiled(["scan", "eager", "jit_step"]) == "eager"
    assert catalog.least_compiled(["scan_pytree_class", "jit_step"]) == "jit_step"
    # A strategy this version does not know (an imported run) comes last.
    assert catalog.least_compiled(["from_elsewhere", "scan"]) == "scan"
    assert catalog.least_compiled(["from_elsewhere"]) == "from_elsewhere"


def test_descriptions_are_the_strategy_modules_docstrings():
    # Read from the files without Python's parser (not thread-safe in CPython 3.11).
    for runnable in catalog.RUNNABLES.values():
        if runnable.source:
            module = importlib.import_module("core.fit." + runnable.source.removesuffix(".py").replace("/", "."))
            assert runnable.description == " ".join(module.__doc__.split()).removeprefix(f"{runnable.name}: ")


def test_a_spec_refuses_a_name_the_catalog_does_not_know():
    with pytest.raises(SpecError, match="strategy must be one of eager, "):
        tutorial_spec(strategy="scan_with_typo")
    with pytest.raises(SpecError, match="optimizer must be one of seed, "):
        OptimizerSpec("newton")
    with pytest.raises(KeyError, match="unknown strategy 'nope'; known: eager"):
        catalog.runnable("nope")
    assert catalog.colour("from_another_version") == catalog.UNKNOWN_COLOUR


def test_every_refusal_names_what_the_strategy_needs():
    refused = [(name, optimizer) for name in catalog.RUNNABLES for optimizer in catalog.OPTIMIZERS
               if catalog.runnable(name).refusal(optimizer)]
    assert ("jit_per_function", "lbfgs") in refused and ("scan_analytic", "preconditioned_lbfgs") in refused
    assert ("scan", "lbfgs") not in refused and ("eager", "preconditioned_lbfgs") not in refused
    for name, optimizer in refused:
        assert catalog.runnable(name).needs in catalog.runnable(name).refusal(optimizer)


# Calls whose first argument, or whose `strategy=` / `optimizer=` keyword, is a runnable's
# or an optimizer's name.
_NAMED_BY_FIRST = {"Step": "runnable", "fit_spec": "runnable", "OptimizerSpec": "optimizer", "Contender": "runnable"}


def _is_strategy(node) -> bool:
    """`strategy`, `x.strategy` or `x["strategy"]`."""
    if isinstance(node, ast.Name):
        return node.id == "strategy"
    if isinstance(node, ast.Attribute):
        return node.attr == "strategy"
    return isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and node.slice.value == "strategy"


def _constants(node):
    items = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
    return [item.value for item in items if isinstance(item, ast.Constant) and isinstance(item.value, str)]


def _literal_names(path: pathlib.Path):
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and _is_strategy(node.left):  # strategy == "scan", strategy in (...)
            for comparator in node.comparators:
                for name in _constants(comparator):
                    yield node.lineno, "runnable", name
        if not isinstance(node, ast.Call):
            continue
        called = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        if called in _NAMED_BY_FIRST and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str):
            yield node.lineno, _NAMED_BY_FIRST[called], node.args[0].value
        for keyword in node.keywords:
            if keyword.arg in ("strategy", "optimizer") and isinstance(keyword.value, ast.Constant) \
                    and isinstance(keyword.value.value, str):
                yield node.lineno, "runnable" if keyword.arg == "strategy" else "optimizer", keyword.value.value


def test_no_code_names_a_runnable_or_optimizer_the_catalog_does_not_know():
    known = {"runnable": set(catalog.RUNNABLES), "optimizer": set(catalog.OPTIMIZERS)}
    unknown = []
    for folder in ("core", "pages", "benchmarks"):
        for path in sorted(pathlib.Path(ROOT, folder).rglob("*.py")):
            for line, kind, name in _literal_names(path):
                if name not in known[kind]:
                    unknown.append(f"{path.relative_to(ROOT)}:{line} names {kind} {name!r}")
    assert not unknown, unknown
