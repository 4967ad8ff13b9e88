"""calculate_numeric_gap reproduces ExecuTorch 1.5.1's gap tables on real artifacts."""

from __future__ import annotations

import warnings
from typing import Any

import pytest

from numdiff.errors import MissingDataError
from numdiff.inspector import Inspector
from tests.conftest import artifact, fixture_names, load_expected
from tests.oracle_values import same_gap

GAP_FIXTURES = [n for n in fixture_names(need=("etrecord", "debug_buffer")) if load_expected(n).get("gap")]
_CACHE: dict[str, Inspector] = {}


def _inspector(name: str) -> Inspector:
    if name not in _CACHE:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _CACHE[name] = Inspector(etdump_path=artifact(name, "etdump"), etrecord=artifact(name, "etrecord"),
                                     debug_buffer_path=artifact(name, "debug_buffer"))
    return _CACHE[name]


def _cases() -> list[Any]:
    out = []
    for name in GAP_FIXTURES:
        for key, expected in load_expected(name)["gap"].items():
            graph, metric = key.rsplit("/", 1)
            out.append(pytest.param(name, None if graph == "default" else graph, metric, expected, id=f"{name}-{key}"))
    return out


@pytest.mark.parametrize(("name", "graph", "metric", "expected"), _cases())
def test_gap_table_matches_the_reference(name: str, graph: str | None, metric: str, expected: dict[str, Any]) -> None:
    if expected.get("error", {}).get("type") == "IndexError":
        # REFERENCE-NOTES #14: a dump with program outputs only crashes the reference; numdiff names it.
        with pytest.raises(MissingDataError, match="(?s)no intermediate outputs.*intermediate-output logging"):
            _inspector(name).calculate_numeric_gap(metric, reference_graph=graph)
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        df = _inspector(name).calculate_numeric_gap(metric, reference_graph=graph)
    if "error" in expected:
        # REFERENCE-NOTES #13: the reference aborts the whole table on a view-shaped pair; numdiff answers.
        assert expected["error"]["type"] == "ValueError"
        assert len(df) > 0
        return
    assert list(df.columns) == expected["columns"]
    assert len(df) == len(expected["rows"])
    for (_, row), exp in zip(df.iterrows(), expected["rows"], strict=True):
        assert list(row["aot_debug_handle"]) == exp["aot_debug_handle"]
        assert list(row["runtime_debug_handle"]) == exp["runtime_debug_handle"]
        assert list(row["aot_ops"]) == exp["aot_ops"]
        assert list(row["runtime_ops"]) == exp["runtime_ops"]
        assert row["stacktraces"] == exp["stacktraces"]
        gap = row["gap"] if isinstance(row["gap"], list) else [row["gap"]]
        exp_gap = exp["gap"] if isinstance(exp["gap"], list) else [exp["gap"]]
        assert same_gap(metric, gap, exp_gap, row["aot_intermediate_output"]), (row["aot_ops"], gap, exp_gap)
