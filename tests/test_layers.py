"""The house rules on imports: core's wings import one way (down the list below), never
streamlit or the pages, and nothing is imported inside a function except where a comment
on the line before says why (start-up time); the command line (core/cli) says why once, in
its package docstring."""

import ast
import pathlib

from project import ROOT

# A wing may import itself and the wings before it, never one after it, with no exemptions.
# The ground floor, plain data that imports nothing above it: config (every environment
# variable), the catalog of runnables (what can be fitted, named once) and the spec (what a
# fit is, its defaults and its limits).
# results: what a run produced, read by everything above it (the store and charts read only it);
# machine: the machine a run is on; coordination: who holds the device, across processes;
# store: keeps results; run: runs and times a fit, and stores it;
# access and upload_bounds: who may do what, and how much they may send.
ORDER = ("config", "catalog", "spec", "access", "upload_bounds", "fit", "data", "results", "machine", "coordination", "store", "run",
         "inspect", "charts", "bench", "cluster", "cli", "__main__")


def _modules(folder: str):
    for path in sorted(pathlib.Path(ROOT, folder).rglob("*.py")):
        yield path, ast.parse(path.read_text(), str(path))


def _wing(path: pathlib.Path) -> str:
    return path.relative_to(ROOT).parts[1].removesuffix(".py")


def _imports(tree):
    """(node, module name, inside a function) for each import."""
    def visit(node, in_function):
        for child in ast.iter_child_nodes(node):
            inner = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
            if isinstance(child, ast.ImportFrom) and child.module and child.level == 0:
                names = [child.module] + [f"{child.module}.{a.name}" for a in child.names]
                yield child, names, inner
            elif isinstance(child, ast.Import):
                yield child, [a.name for a in child.names], inner
            yield from visit(child, inner)
    for node, names, inner in visit(tree, False):
        for name in names:
            yield node, name, inner


def test_core_wings_import_one_way_and_never_streamlit():
    wrong = []
    for path, tree in _modules("core"):
        mine = ORDER.index(_wing(path))
        for node, name, _ in _imports(tree):
            parts = name.split(".")
            if parts[0] == "streamlit" or parts[0] == "pages":
                wrong.append(f"{path.name}:{node.lineno} imports {name}")
            elif len(parts) > 1 and parts[1] in ORDER and ORDER.index(parts[1]) > mine:
                wrong.append(f"{path.relative_to(ROOT)}:{node.lineno} imports {name}, a later wing")
    assert not wrong, wrong


def test_imports_inside_functions_say_why():
    unexplained = []
    for folder in ("core", "pages"):
        for path, tree in _modules(folder):
            lines = path.read_text().splitlines()
            for node, name, inner in _imports(tree):
                if not inner:
                    continue
                # The line above the block of imports this one belongs to.
                above = node.lineno - 2
                while above >= 0 and lines[above].strip().startswith(("import ", "from ")):
                    above -= 1
                command_line = "__main__" in path.name or "cli" in path.relative_to(ROOT).parts
                if not lines[above].strip().startswith("#") and not command_line:
                    unexplained.append(f"{path.relative_to(ROOT)}:{node.lineno} imports {name}")
    assert not unexplained, unexplained
