"""The README and docs/ hold together: every link leads to a file, and every command they
give names a subcommand, a script and options that exist."""

import pathlib
import re

import pytest

from core.cli import arguments

from project import ROOT

PAGES = [pathlib.Path(ROOT, "README.md"), *sorted(pathlib.Path(ROOT, "docs").glob("*.md"))]
_LINK = re.compile(r"\]\(([^)#\s]+)(#[^)]*)?\)")
_FENCE = re.compile(r"```bash\n(.*?)```", re.S)


def _commands(page: pathlib.Path) -> list[str]:
    """The bash blocks' commands, a line each (continuations joined, comments cut)."""
    lines = []
    for block in _FENCE.findall(page.read_text()):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split(" # ")[0].strip()
            if line and not line.startswith("#"):
                lines.append(line)
    return lines


def _options(text: str) -> set[str]:
    return set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", text))


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_link_leads_to_a_file(page):
    broken = [target for target, _ in _LINK.findall(page.read_text())
              if not target.startswith(("http://", "https://", "mailto:"))
              and not (page.parent / target).exists()]
    assert not broken, broken


def _subcommands() -> dict:
    parser = arguments.build_parser()
    (choices,) = [action.choices for action in parser._actions if getattr(action, "choices", None)
                  and isinstance(action.choices, dict)]
    return choices


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_command_names_what_exists(page):
    subcommands = _subcommands()
    wrong = []
    for line in _commands(page):
        for found in re.finditer(r"-m core (\w+)([^|;&]*)", line):
            name, rest = found.groups()
            if name not in subcommands:
                wrong.append(f"no subcommand {name!r}: {line}")
                continue
            known = set(subcommands[name]._option_string_actions)
            wrong += [f"{name} has no {option}: {line}" for option in _options(rest) - known]
        for found in re.finditer(r"(benchmarks/\w+\.py)([^|;&]*)", line):
            script, rest = found.groups()
            path = pathlib.Path(ROOT, script)
            if not path.exists():
                wrong.append(f"no script {script}: {line}")
                continue
            source = path.read_text()
            wrong += [f"{script} has no {option}: {line}" for option in _options(rest)
                      if f'"{option}"' not in source]
    assert not wrong, wrong


def test_the_readme_starts_with_the_two_commands_and_stays_short():
    readme = PAGES[0].read_text()
    commands = _commands(PAGES[0])
    assert commands[0].endswith("streamlit run app.py")
    assert commands[1].endswith("python -m pytest -q -n 2 --dist loadfile")
    assert len(readme.splitlines()) <= 80
    assert pathlib.Path(ROOT, ".ci", "run").read_text().rstrip().endswith(commands[1])
