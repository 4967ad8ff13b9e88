"""Shared helpers for the culprit tests: known-truth fixtures and their Inspectors (cached)."""

from __future__ import annotations

import functools
import json
import warnings
from pathlib import Path
from typing import Any

from numdiff import Inspector

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
EXAMPLES = Path(__file__).resolve().parent.parent.parent / "numdiff" / "examples"

#: Runs on the representative inputs (``culprit_near_inputs*`` ran on other inputs: test_near_inputs.py).
KNOWN_TRUTH = sorted(p.name for p in FIXTURES.glob("culprit_*") if (p / "truth.json").is_file()
                     and "run_noise" not in json.loads((p / "truth.json").read_text()))
#: Existing oracle fixtures (no planted error) that must show no culprit either.
CLEAN_ORACLE = ("mlp_fp32", "cnn_nested", "xnnpack", "pt2e_quant", "pt2e_quant_portable", "attention_view",
                "multi_output", "different_inputs")


def folder(name: str) -> Path:
    return EXAMPLES / name if (EXAMPLES / name).is_dir() else FIXTURES / name


def truth(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / name / "truth.json").read_text())  # type: ignore[no-any-return]


def inspector(name: str) -> Inspector:
    d = folder(name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Inspector(etdump_path=d / "etdump.etdp", etrecord=str(d / "etrecord.bin"),
                         debug_buffer_path=d / "debug_buffer.bin")


#: Fixtures whose planted ops are every op that reads the graph input, all badly wrong: from the files
#: alone that is a run on other inputs as much as wrong ops, so their runs are declared to have used
#: the representative inputs (as they did).
ON_REPRESENTATIVE = frozenset({"culprit_two"})


@functools.lru_cache(maxsize=None)
def report(name: str) -> Any:
    """``find_culprits("SNR")`` on a fixture, computed once per test session."""
    return inspector(name).find_culprits("SNR", inputs_are_representative=name in ON_REPRESENTATIVE)
