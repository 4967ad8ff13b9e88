"""Every error numdiff defines is in the one NumdiffError tree, and errors.py draws each of them."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import numdiff
from numdiff.errors import NumdiffError

#: Modules that do their work when imported (a command line, Alembic's environment); they define no error.
_NOT_IMPORTED = ("numdiff.service.migrations",)


def _error_classes() -> list[type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for info in pkgutil.walk_packages(numdiff.__path__, "numdiff."):
        if info.name.startswith(_NOT_IMPORTED) or info.name.endswith(".__main__"):
            continue
        module = importlib.import_module(info.name)
        for _, obj in inspect.getmembers(module, inspect.isclass):
            if issubclass(obj, BaseException) and obj.__module__ == module.__name__:
                found[f"{obj.__module__}.{obj.__qualname__}"] = obj
    return [found[k] for k in sorted(found)]


ERRORS = _error_classes()


def test_every_error_numdiff_defines_is_a_numdiff_error() -> None:
    outside = [f"{e.__module__}.{e.__qualname__}" for e in ERRORS if not issubclass(e, NumdiffError)]
    assert len(ERRORS) > 20
    assert outside == []


def test_the_tree_in_errors_py_names_every_error() -> None:
    import numdiff.errors

    drawing = numdiff.errors.__doc__ or ""
    missing = [e.__qualname__ for e in ERRORS if e.__qualname__ not in drawing and not e.__qualname__.startswith("_")]
    assert missing == []
