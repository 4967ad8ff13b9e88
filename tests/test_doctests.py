"""Every example in numdiff's docstrings runs and prints what it shows (examples are documentation)."""

from __future__ import annotations

import doctest
import importlib
import pkgutil
import warnings

import pytest

import numdiff

#: Alembic's migration environment runs only inside alembic (it reads alembic's context at import).
SKIP = ("numdiff.service.migrations",)


def _modules() -> list[str]:
    names = [m.name for m in pkgutil.walk_packages(numdiff.__path__, "numdiff.")]
    return sorted(n for n in names if not n.startswith(SKIP) and n.rsplit(".", 1)[-1] not in ("_sums", "__main__"))


@pytest.mark.parametrize("name", _modules())
def test_docstring_examples(name: str) -> None:
    module = importlib.import_module(name)
    tests = [t for t in doctest.DocTestFinder().find(module) if t.examples]
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for test in tests:
            runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} docstring examples in {name} fail (run it with -s)"
