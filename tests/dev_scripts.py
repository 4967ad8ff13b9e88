"""Load a dev script (scripts/, benchmarks/) as a module, for the tests that call its functions."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent


def load_script(relative_path: str, name: str | None = None) -> ModuleType:
    """The script at ``ROOT/relative_path`` imported as a module (registered in sys.modules under ``name``,
    so dataclasses and pickling inside it work)."""
    name = name or "numdiff_dev_" + Path(relative_path).stem
    spec = importlib.util.spec_from_file_location(name, ROOT / relative_path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
