"""The public API: frozen signatures (the drop-in contract) and strict typing."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
from pathlib import Path

import pytest

import numdiff

GOLDEN = Path(__file__).parent / "data" / "api_signatures.txt"
ROOT = Path(__file__).parent.parent


def _signatures() -> str:
    lines = []
    for name in sorted(numdiff.__all__):
        obj = getattr(numdiff, name)
        if inspect.isclass(obj):
            if issubclass(obj, BaseException):
                lines.append(f"class {name}({', '.join(b.__name__ for b in obj.__bases__)})")
                continue
            lines.append(f"class {name}{_sig(obj)}")
            for attr, member in sorted(vars(obj).items()):
                if attr.startswith("_") and attr != "__init__":
                    continue
                if inspect.isfunction(member):
                    lines.append(f"    def {attr}{_sig(member)}")
                elif isinstance(member, property):
                    lines.append(f"    property {attr}")
        elif callable(obj):
            lines.append(f"def {name}{_sig(obj)}")
    return "\n".join(lines) + "\n"


def _sig(obj: object) -> str:
    try:
        return str(inspect.signature(obj))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return "(...)"


def test_public_signatures_match_the_golden_file() -> None:
    """A change here changes the drop-in contract: regenerate with NUMDIFF_UPDATE_GOLDEN=1 and review."""
    current = _signatures()
    if os.environ.get("NUMDIFF_UPDATE_GOLDEN"):
        GOLDEN.write_text(current)
    assert current == GOLDEN.read_text()


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("__init__", ["self", "etdump_path", "etdump_data", "etrecord", "source_time_scale", "target_time_scale",
                      "debug_buffer_path", "delegate_metadata_parser", "delegate_time_scale_converter",
                      "enable_module_hierarchy"]),
        ("to_dataframe", ["self", "include_units", "include_delegate_debug_data"]),
        ("print_data_tabular", ["self", "file", "include_units", "include_delegate_debug_data"]),
        ("save_data_to_tsv", ["self", "file", "include_units", "include_delegate_debug_data"]),
        ("find_total_for_module", ["self", "module_name"]),
        ("get_exported_program", ["self", "graph"]),
        ("calculate_numeric_gap", ["self", "distance", "disable_debug_handle_valdiation", "reference_graph"]),
    ],
)
def test_inspector_keeps_the_reference_parameters_in_order(method: str, params: list[str]) -> None:
    got = list(inspect.signature(getattr(numdiff.Inspector, method)).parameters)
    assert got[: len(params)] == params


def test_mypy_strict_passes() -> None:
    result = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
