"""The README's Python examples run as written (and its pytest example passes)."""

from __future__ import annotations

import re
import warnings
from pathlib import Path
from typing import Any

import pytest

README = Path(__file__).parent.parent / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), re.DOTALL)


def test_readme_has_examples() -> None:
    assert len(BLOCKS) >= 2


@pytest.mark.parametrize("block", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_readme_block_runs(block: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(README.parent)  # examples name files relative to a clone
    namespace: dict[str, Any] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exec(compile(block, str(README), "exec"), namespace)
        for name, value in list(namespace.items()):
            if name.startswith("test_") and callable(value):
                value()


def test_readme_commands_match_ci() -> None:
    ci = (Path(__file__).parent.parent / ".ci" / "run").read_text()
    test_command = next(line for line in README.read_text().splitlines() if "pytest" in line and "python3 -m venv" in line)
    assert test_command in ci


TEXT = README.read_text()


def _section(title: str) -> str:
    start = TEXT.index(f"\n## {title}\n")
    end = TEXT.find("\n## ", start + 1)
    return TEXT[start:end if end >= 0 else None]


def test_set_up_leaves_numdiff_on_the_path() -> None:
    setup = _section("Set-up and run")
    assert ". .venv/bin/activate" in setup and ".venv/bin/numdiff" in setup
    commands = [m.end() for m in re.finditer(r"```sh\n(?:[^`]*\n)?numdiff ", TEXT)]
    assert commands and TEXT.index(". .venv/bin/activate") < min(commands)  # activated before any bare `numdiff`


@pytest.mark.parametrize("name", ["Thresholds", "register_comparator", "NumericalComparatorBase", "Client"])
def test_every_name_used_has_its_import_shown(name: str) -> None:
    imports = re.findall(r"from (numdiff[\w.]*) import ([\w, ]+)", TEXT)
    module = next((m for m, names in imports if name in [n.strip() for n in names.split(",")]), None)
    assert module is not None, f"README uses {name} without showing its import"
    import importlib

    assert hasattr(importlib.import_module(module), name)


def test_every_extra_a_command_needs_is_in_the_set_up_table() -> None:
    from numdiff.cli import _commands

    setup = _section("Set-up and run")
    for command, module in _commands().items():
        extra = getattr(module, "EXTRA", None)
        if extra is not None:
            row = next(line for line in setup.splitlines() if f"'.[{extra}]'" in line)
            assert command in row, (command, extra)
    assert "'.[report]'" in _section("Reports, traces and the CI gate")
    assert "'.[batch]'" in _section("Fleet: many runs in one command")
    assert not re.search(r"pip install (?!-q )(?!-c constraints.txt)", TEXT), "every install line uses constraints.txt"


def test_client_keywords_are_documented() -> None:
    import inspect

    from numdiff.client import Client

    documented = TEXT[TEXT.index("from numdiff.client import Client"):]
    for method in ("submit", "wait", "runs", "set_baseline", "compare", "fetch_report"):
        params = [p for p in inspect.signature(getattr(Client, method)).parameters.values()
                  if p.name != "self" and p.kind is not p.VAR_KEYWORD]
        call = re.search(rf"client\.{method}\(([^)]*)\)", documented)
        assert call is not None, method
        for p in params:
            shown = f"{p.name}={p.default!r}" if p.default is not p.empty else p.name
            assert shown in call.group(1).replace("\n", " "), (method, shown)
    assert "timeout=120.0" in documented


def test_baseline_is_set_with_the_cli_not_raw_http() -> None:
    assert "numdiff runs baseline mlp 1" in TEXT
    assert "PUT /api/v1/models" not in TEXT


def test_the_decode_example_warns_once_on_one_line_as_the_readme_shows(monkeypatch: pytest.MonkeyPatch) -> None:
    """Loading the decode fixture warns once (its runs logged different values), on one line: the README shows
    that line. It printed a 7-line warning listing five of 139 notes that the README did not show."""
    from numdiff import Inspector

    monkeypatch.chdir(README.parent)  # the README's paths are relative to the clone
    d = Path("tests/fixtures/deeper_decode")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        inspector = Inspector(etdump_path=d / "etdump.etdp", etrecord=d / "etrecord.bin",
                              debug_buffer_path=d / "debug_buffer.bin")
    [w] = caught
    message = str(w.message)
    assert "\n" not in message and message.startswith(f"ETDump {str(d / 'etdump.etdp')!r}: {len(inspector.notes)} notes")
    assert f"the first: {inspector.notes[0]}" in message
    assert f"\n{type(w.message).__name__}: {message}\n" in TEXT


def test_every_install_hint_is_the_readmes_command(monkeypatch: pytest.MonkeyPatch) -> None:
    """An error naming a missing extra says the README's own command for it (install_command), for every extra
    pyproject.toml declares; nothing in numdiff says `pip install 'numdiff[...]'`, which would fetch an
    unrelated project of that name from PyPI instead of installing from the clone."""
    from numdiff.errors import MissingDependencyError, install_command

    monkeypatch.chdir(README.parent)
    pyproject = (README.parent / "pyproject.toml").read_text(encoding="utf-8")
    block = pyproject[pyproject.index("[project.optional-dependencies]"):pyproject.index("[project.scripts]")]
    extras = [name for name in re.findall(r"^([a-z]+) = \[", block, flags=re.M) if name != "test"]
    assert {"report", "batch", "ray", "service", "explorer", "tensorboard", "plot"} <= set(extras)
    setup = _section("Set-up and run")
    for extra in extras:
        command = install_command(extra)
        assert command == f"pip install -c constraints.txt -e '.[{extra}]'"
        assert f"| `{command}` |" in setup, extra
        assert str(MissingDependencyError("x", "m", extra)).endswith(f"Install it with: {command}")
    sources = [p for p in (README.parent / "numdiff").rglob("*") if p.suffix in (".py", ".html")]
    said = [str(p) for p in sources if re.search(r"pip install -?\S*\s*'?numdiff\[", p.read_text(encoding="utf-8"))]
    assert said == [] and not re.search(r"pip install '?numdiff\[", TEXT), said
