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
            members: dict[str, object] = {}
            for base in reversed(obj.__mro__[:-1]):  # own members and those of private mixins (module "._x")
                if base is obj or "._" in base.__module__:
                    members.update(vars(base))
            for attr, member in sorted(members.items()):
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
                      "enable_module_hierarchy", "reference_graph_name"]),
        ("to_dataframe", ["self", "include_units", "include_delegate_debug_data"]),
        ("print_data_tabular", ["self", "file", "include_units", "include_delegate_debug_data"]),
        ("save_data_to_tsv", ["self", "file", "include_units", "include_delegate_debug_data"]),
        ("find_total_for_module", ["self", "module_name"]),
        ("get_exported_program", ["self", "graph"]),
        ("calculate_numeric_gap", ["self", "distance", "disable_debug_handle_valdiation", "reference_graph"]),
        ("get_op_list", ["self", "event_block", "show_delegated_ops"]),
        ("write_tensorboard_artifact", ["self", "path"]),
        ("get_vgf_neural_statistics", ["self"]),
    ],
)
def test_inspector_keeps_the_reference_parameters_in_order(method: str, params: list[str]) -> None:
    got = list(inspect.signature(getattr(numdiff.Inspector, method)).parameters)
    assert got[: len(params)] == params


def test_mypy_strict_passes() -> None:
    result = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


#: ExecuTorch 1.5.1: ``executorch.devtools.inspector.__all__`` and the public names of
#: ``executorch.devtools.Inspector`` (methods and attributes), as listed by dir() on the reference.
REFERENCE_MODULE_ALL = ["Event", "EventBlock", "Inspector", "PerfData", "TimeScale", "compare_results",
                        "parse_vgf_neural_statistics_delegate_metadata", "parse_vgf_neural_statistics_metadata"]
REFERENCE_MODULE_OTHER = ["numerical_comparator", "vgf_neural_statistics"]
REFERENCE_INSPECTOR = ["calculate_numeric_gap", "find_total_for_module", "get_exported_program", "get_op_list",
                       "get_vgf_neural_statistics", "print_data_tabular", "save_data_to_tsv", "to_dataframe",
                       "write_tensorboard_artifact"]
REFERENCE_INSTANCE_ATTRIBUTES = ["event_blocks", "op_graph_dict"]


def test_numdiff_inspector_module_has_every_public_name_of_the_reference_module() -> None:
    import numdiff.inspector as module

    assert sorted(module.__all__) == sorted(REFERENCE_MODULE_ALL)
    for name in REFERENCE_MODULE_ALL + REFERENCE_MODULE_OTHER:
        assert getattr(module, name) is not None, name
    for name in REFERENCE_MODULE_ALL:
        assert name in numdiff.__all__, name
    assert module.vgf_neural_statistics.SCHEMA == "executorch.vgf.neural_statistics"
    assert module.numerical_comparator.SNRComparator is numdiff.SNRComparator


def test_inspector_has_every_public_method_and_attribute_of_the_reference() -> None:
    import warnings

    from tests.conftest import FIXTURES

    for name in REFERENCE_INSPECTOR:
        assert callable(getattr(numdiff.Inspector, name)), name
    mlp = FIXTURES / "mlp_fp32"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        insp = numdiff.Inspector(etdump_path=str(mlp / "etdump.etdp"), etrecord=str(mlp / "etrecord.bin"),
                                 debug_buffer_path=str(mlp / "debug_buffer.bin"))
    public = {n for n in dir(insp) if not n.startswith("_")}
    assert set(REFERENCE_INSPECTOR + REFERENCE_INSTANCE_ATTRIBUTES) <= public
    assert insp.op_graph_dict is not None and "edge_dialect_graph_module" in insp.op_graph_dict
