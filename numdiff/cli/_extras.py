"""Commands whose optional packages are missing say which pip extra brings them (exit status 2).

Each command that needs an extra declares it (``EXTRA = "service"`` in its module) and checks its
packages before any work with :func:`require`, so a base install (``pip install -c constraints.txt -e .``)
hears ``pip install -c constraints.txt -e '.[service]'`` (:func:`numdiff.errors.install_command`) at once
rather than after an analysis. ``numdiff.cli.main`` also
turns any later ``ModuleNotFoundError`` of a known optional package into the same message
(:func:`missing_extra`), so no command ends in "internal error" for want of an extra.
"""

from __future__ import annotations

from collections.abc import Iterable
from importlib import import_module

from numdiff.errors import MissingDependencyError

__all__ = ["EXTRA_OF_MODULE", "PACKAGES", "missing_extra", "require"]

#: The packages (top-level import names) each extra brings, as pyproject.toml lists them.
PACKAGES: dict[str, tuple[str, ...]] = {
    "service": ("fastapi", "uvicorn", "sqlalchemy", "alembic", "httpx", "multipart", "jinja2"),
    "client": ("httpx",),  # the client commands need only httpx (part of the service extra)
    "report": ("jinja2", "matplotlib"),
    "batch": ("pyarrow", "yaml"),
    "ray": ("ray",),
    "explorer": ("model_explorer",),
    "tensorboard": ("tensorboardX",),
    "plot": ("matplotlib",),
}

#: The extra to install for a missing top-level module, when the command names none of its own.
EXTRA_OF_MODULE: dict[str, str] = {
    "fastapi": "service", "uvicorn": "service", "sqlalchemy": "service", "alembic": "service",
    "httpx": "service", "multipart": "service", "python_multipart": "service", "psycopg": "service",
    "jinja2": "report", "matplotlib": "report", "pyarrow": "batch", "yaml": "batch", "ray": "ray",
    "model_explorer": "explorer", "tensorboardX": "tensorboard",
}


def _pip_extra(extra: str) -> str:
    return "service" if extra == "client" else extra


def require(command: str, extra: str, packages: Iterable[str] | None = None) -> None:
    """Import ``packages`` (default: all of ``extra``'s); raise :class:`MissingDependencyError` naming the extra.

    Raises:
        MissingDependencyError: A package is not installed (a ``UsageError``: exit status 2).
    """
    for name in PACKAGES[extra] if packages is None else packages:
        try:
            import_module(name)
        except ImportError as e:
            raise MissingDependencyError(command, name, _pip_extra(extra)) from e


def missing_extra(error: ImportError, command: str, extra: str | None) -> MissingDependencyError | None:
    """The error to show for ``error`` raised inside ``command``, or ``None`` when it is not a missing extra."""
    name = getattr(error, "name", None) or ""
    top = name.split(".", 1)[0]
    if not top or top == "numdiff":
        return None
    chosen = extra if extra is not None else EXTRA_OF_MODULE.get(top)
    if chosen is None:
        return None
    return MissingDependencyError(command, top, _pip_extra(chosen))
