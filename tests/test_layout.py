"""The package's layout figures (issue 19), read from the code by scripts/check_layout.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.dev_scripts import ROOT, load_script

CHECK = load_script("scripts/check_layout.py")
FIGURES = CHECK.measure(ROOT)


@pytest.mark.parametrize("figure", sorted(CHECK.LIMITS))
def test_layout_figure_within_its_limit(figure: str) -> None:
    offenders = getattr(FIGURES, figure)
    assert len(offenders) <= CHECK.LIMITS[figure], "\n".join(map(str, offenders))


def test_checker_sees_a_cycle_through_a_function_level_import(tmp_path: Path) -> None:
    """Imports inside functions count (they run); TYPE_CHECKING ones do not."""
    package = tmp_path / "numdiff"
    (package / "a").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "a" / "__init__.py").write_text("")
    (package / "a" / "one.py").write_text("def f():\n    from numdiff.a.two import g\n")
    (package / "a" / "two.py").write_text("from numdiff.a import one\n")
    (package / "a" / "three.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                            "    from numdiff.a.four import x\n")
    (package / "a" / "four.py").write_text("from numdiff.a.three import y\n")
    figures = CHECK.measure(tmp_path)
    assert figures.cycles == [["numdiff.a.one", "numdiff.a.two"]]


def test_checker_sees_private_imports_across_packages_only(tmp_path: Path) -> None:
    package = tmp_path / "numdiff"
    for sub in ("a", "b", "_core"):
        (package / sub).mkdir(parents=True)
        (package / sub / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "a" / "_inner.py").write_text("def _hidden():\n    pass\n")
    (package / "a" / "user.py").write_text("from numdiff.a._inner import _hidden\n")  # same package: fine
    (package / "_core" / "shared.py").write_text("")
    (package / "b" / "user.py").write_text(
        "from numdiff.a._inner import _hidden\nfrom numdiff._core import shared\n")  # private module and name
    figures = CHECK.measure(tmp_path)
    assert figures.private_imports == ["numdiff.b.user imports module numdiff.a._inner"]


def test_checker_counts_plain_any_only(tmp_path: Path) -> None:
    package = tmp_path / "numdiff"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "m.py").write_text("from typing import Any\n"
                                  "def f(a: Any, b: dict[str, Any], *c: Any, **d: 'Any') -> Any:\n    pass\n")
    figures = CHECK.measure(tmp_path)
    assert [item.rsplit(" ", 1)[-1] for item in figures.plain_any] == ["f(a)", "f(c)", "f(d)", "Any"]
    assert figures.loose_modules == ["m.py"]
