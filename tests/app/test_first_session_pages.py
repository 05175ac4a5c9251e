"""A fresh server's first session is routed by Streamlit's legacy multipage mode, by the files
at the top of pages/ (pages/__init__.py): each address app.py serves has one, and
each runs app.py's router and nothing else. The first session itself, opened at a link, is
tests/app/test_sign_in_link.py's."""

import ast
import pathlib
import re

from project import ROOT
from served_app import ADDRESSES

# Streamlit's own rule for a legacy page's address: a leading number and separators dropped.
LEGACY_NAME = re.compile(r"[0-9]*[_ -]*(.*)\.py")


def _first_session_files():
    return [path for path in sorted(pathlib.Path(ROOT, "pages").glob("*.py")) if path.name != "__init__.py"]


def test_every_address_has_its_first_session_file_capitalised_too():
    # app.py serves each address as the menu spells it too (/Story, /Under_the_hood). A
    # capitalised file's number differs from its lower-case twin's (1_Story.py, 0_story.py):
    # one name apart on a disk that ignores case.
    lower = {path for path in ADDRESSES if path == path.lower()}
    served = lower | {path.capitalize() for path in lower}
    assert {path for path in ADDRESSES if path != path.lower()} <= served
    routed = [LEGACY_NAME.fullmatch(path.name).group(1) for path in _first_session_files()]
    assert sorted(routed) == sorted(served)
    assert len({path.name.lower() for path in _first_session_files()}) == len(routed)


def test_each_first_session_file_runs_the_router_and_nothing_else():
    for path in _first_session_files():
        tree = ast.parse(path.read_text())
        body = [node for node in tree.body if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant))]
        assert [ast.unparse(node) for node in body] == ["from app import main", "main()"], path.name
