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
