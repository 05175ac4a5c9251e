"""Every PLNLAB_* variable is read through one table (`core.config`), and the
documentation's configuration table is that table."""

import ast
import os
import pathlib
import re

import pytest

from core import config

from project import ROOT

_NAME = re.compile(r"PLNLAB_[A-Z0-9_]*[A-Z0-9]")


def _sources():
    for folder in ("core", "pages"):
        yield from sorted(pathlib.Path(ROOT, folder).rglob("*.py"))
    yield pathlib.Path(ROOT, "app.py")


def test_every_variable_the_code_names_is_in_the_table_and_every_one_in_the_table_is_used():
    named: dict[str, set] = {}
    for path in _sources():
        for found in _NAME.findall(path.read_text()):
            named.setdefault(found, set()).add(str(path.relative_to(ROOT)))
    unknown = {name: sorted(where) for name, where in named.items() if name not in config.BY_NAME}
    assert not unknown, f"named in the code but not in core/config.py: {unknown}"
    used = {name for name, where in named.items() if where - {"core/config.py"}}
    assert set(config.BY_NAME) <= used, f"in the table but read nowhere: {set(config.BY_NAME) - used}"


def _reads_environment(node: ast.AST) -> bool:
    """os.environ.get(...), os.environ[...], os.getenv(...), os.environ.pop(...)."""
    text = ast.unparse(node)
    return text.startswith(("os.environ.get(", "os.environ[", "os.getenv(", "os.environ.pop("))


def test_no_module_reads_a_plnlab_variable_but_through_the_table():
    wrong = []
    for path in _sources():
        if path.name == "config.py" and path.parent.name == "core":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.Call, ast.Subscript)) and _reads_environment(node):
                text = ast.unparse(node)
                if "PLNLAB" in text or re.search(r"\b[A-Z_]*_ENV\b", text):
                    wrong.append(f"{path.relative_to(ROOT)}:{node.lineno} {text}")
    assert not wrong, wrong


def test_the_documented_table_is_the_table():
    readme = pathlib.Path(ROOT, "docs", "configuration.md").read_text()
    block = readme.split("<!-- config table: generated from core/config.py -->\n", 1)[1]
    block = block.split("\n<!-- end of config table -->", 1)[0]
    assert block == config.table(), "docs/configuration.md's table differs: paste core.config.table()"


def test_typed_readers_give_defaults_values_and_one_line_refusals(monkeypatch):
    monkeypatch.delenv("PLNLAB_MAX_ROWS", raising=False)
    assert config.whole("PLNLAB_MAX_ROWS") == 10_000_000
    monkeypatch.setenv("PLNLAB_MAX_ROWS", " 12_000 ")
    assert config.whole("PLNLAB_MAX_ROWS") == 12_000
    for bad in ("0", "-3", "1.5", "lots"):
        monkeypatch.setenv("PLNLAB_MAX_ROWS", bad)
        with pytest.raises(config.ConfigError, match=f"PLNLAB_MAX_ROWS must be a whole number >= 1; got '{bad}'"):
            config.whole("PLNLAB_MAX_ROWS")
    monkeypatch.setenv("PLNLAB_MIN_MEASURED_S", "0")
    assert config.seconds("PLNLAB_MIN_MEASURED_S", zero_allowed=True) == 0.0
    with pytest.raises(config.ConfigError, match="seconds > 0"):
        config.seconds("PLNLAB_MIN_MEASURED_S")
    monkeypatch.setenv("PLNLAB_ALLOW_PLAINTEXT", "Yes")
    assert config.switch("PLNLAB_ALLOW_PLAINTEXT") is True
    monkeypatch.setenv("PLNLAB_ALLOW_PLAINTEXT", "maybe")
    with pytest.raises(config.ConfigError, match="1 or 0"):
        config.switch("PLNLAB_ALLOW_PLAINTEXT")
    monkeypatch.setenv("PLNLAB_WORKER_PLATFORMS", "gpu, ,cpu")
    assert config.listed("PLNLAB_WORKER_PLATFORMS") == ["gpu", "cpu"]
    monkeypatch.setenv("PLNLAB_DB", "~/runs.sqlite3")
    assert config.path("PLNLAB_DB") == pathlib.Path("~/runs.sqlite3").expanduser()
    with pytest.raises(KeyError, match="not in core.config.VARIABLES"):
        config.raw("PLNLAB_NOT_A_SETTING")


def test_a_variable_that_is_no_setting_is_named_with_the_one_meant(monkeypatch):
    for name in [key for key in os.environ if key.startswith("PLNLAB_")]:
        monkeypatch.delenv(name)
    assert config.unknown() == []
    monkeypatch.setenv("PLNLAB_DB", "runs.sqlite3")  # a setting: nothing to say
    monkeypatch.setenv("PLNLAB_STORE", "/tmp/runs.sqlite3")
    monkeypatch.setenv("PLNLAB_MAX_ITERATION", "5")
    monkeypatch.setenv("PLNLAB_FROBNICATE", "1")
    said = config.unknown()
    assert [line.split()[0] for line in said] == ["PLNLAB_FROBNICATE", "PLNLAB_MAX_ITERATION", "PLNLAB_STORE"]
    assert "did you mean" not in said[0]
    assert "(did you mean PLNLAB_MAX_ITERATIONS?)" in said[1] and "(did you mean PLNLAB_DB?)" in said[2]
    assert all("is ignored" in line and "docs/configuration.md" in line for line in said)


def test_a_secret_is_taken_out_of_the_environment(monkeypatch):
    monkeypatch.setenv("PLNLAB_PASSWORD", "s3cret")
    assert config.take("PLNLAB_PASSWORD") == "s3cret" and config.raw("PLNLAB_PASSWORD") == ""
