"""Serve ExecuTorch's Inspector-facing names from numdiff, leaving artifact building to ExecuTorch.

Dev-only (oracle virtualenv), used by ``scripts/run_et_devtools_tests.py`` to run ExecuTorch
1.5.1's own devtools tests against numdiff. ``install()`` adds an import hook: when one of the
modules in ``REDIRECTS`` is imported (the real ExecuTorch module, so everything that builds
artifacts keeps working), the hook replaces the listed names in it by numdiff's objects. Names
that numdiff does not provide are replaced by a placeholder that raises ``NotImplementedError``
when used, so a test that needs them fails on its own instead of breaking the import of its
whole file. Every other name (ExecuTorch-internal helpers, the ETDump schema classes,
``generate_etrecord``, the ``ETRecord`` class used to write records) stays ExecuTorch's.

Usage: ``PYTHONPATH=scripts/et_shim:. python ...`` (the ``sitecustomize`` next to this file
calls ``install()``), or ``import numdiff_et_shim; numdiff_et_shim.install()`` before the
first ``executorch.devtools`` import.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
from types import ModuleType
from typing import Any, Sequence

_INSPECTOR = "executorch.devtools.inspector"
_NC = "executorch.devtools.inspector.numerical_comparator"
_VGF_NAMES = ("parse_vgf_neural_statistics_metadata", "parse_vgf_neural_statistics_delegate_metadata")

#: Where numdiff's public objects are looked up, in order (the first module that has the name wins).
NUMDIFF_MODULES = ("numdiff", "numdiff.inspector", "numdiff.comparators", "numdiff.schema.etrecord",
                   "numdiff.vgf_neural_statistics", "numdiff.profile.vgf")

#: ExecuTorch module -> the names in it that are served from numdiff.
REDIRECTS: dict[str, tuple[str, ...]] = {
    "executorch.devtools": ("Inspector", "parse_etrecord"),
    "executorch.devtools.etrecord": ("parse_etrecord",),
    _INSPECTOR: ("Event", "EventBlock", "Inspector", "PerfData", "TimeScale", "compare_results", *_VGF_NAMES),
    f"{_INSPECTOR}._inspector": ("Event", "EventBlock", "Inspector", "PerfData", "TimeScale"),
    f"{_INSPECTOR}._inspector_utils": ("TimeScale", "compare_results"),
    f"{_INSPECTOR}.vgf_neural_statistics": _VGF_NAMES,
    _NC: ("L1Comparator", "MSEComparator", "SNRComparator", "NumericalComparatorBase"),
    f"{_NC}.l1_numerical_comparator": ("L1Comparator",),
    f"{_NC}.mse_numerical_comparator": ("MSEComparator",),
    f"{_NC}.snr_numerical_comparator": ("SNRComparator",),
    f"{_NC}.numerical_comparator_base": ("NumericalComparatorBase",),
}

#: Names served as placeholders because numdiff has no such public object -> why (filled on import).
MISSING: dict[str, str] = {}


class _Missing:
    """Stands in for a public reference name numdiff lacks; any use raises NotImplementedError."""

    def __init__(self, name: str, why: str) -> None:
        self._name = name
        self._why = why

    def _fail(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"numdiff provides no public {self._name!r} ({self._why})")

    __call__ = _fail

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        self._fail()

    def __repr__(self) -> str:
        return f"<numdiff lacks {self._name}>"


def resolve(name: str) -> Any:
    """numdiff's object for a public reference name, or a placeholder saying why there is none."""
    problems = []
    for module in NUMDIFF_MODULES:
        try:
            mod = importlib.import_module(module)
        except ImportError as e:
            if getattr(e, "name", None) == module:
                continue  # no such numdiff module (yet)
            problems.append(f"{module} does not import: {type(e).__name__}: {e}")
            continue
        if hasattr(mod, name):
            return getattr(mod, name)
    MISSING[name] = "; ".join(problems) or f"not in {', '.join(NUMDIFF_MODULES)}"
    return _Missing(name, MISSING[name])


def _patch(module: ModuleType) -> None:
    for name in REDIRECTS.get(module.__name__, ()):
        setattr(module, name, resolve(name))


class _PatchingLoader(importlib.abc.Loader):
    def __init__(self, inner: importlib.abc.Loader) -> None:
        self._inner = inner

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self._inner.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._inner.exec_module(module)
        _patch(module)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None) -> Any:
        if fullname not in REDIRECTS:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None and spec.loader is not None:
                spec.loader = _PatchingLoader(spec.loader)
                return spec
        return None


def install() -> None:
    """Add the hook (once); modules already imported are patched now."""
    if any(isinstance(f, _Finder) for f in sys.meta_path):
        return
    sys.meta_path.insert(0, _Finder())
    for name in REDIRECTS:
        if name in sys.modules:
            _patch(sys.modules[name])
