"""The profiling view reproduces ExecuTorch 1.5.1's Inspector on real artifacts.

Each fixture under tests/fixtures holds files the real runtime wrote and what the reference
Inspector answered on them (scripts/make_fixtures.py).
"""

from __future__ import annotations

import io
import math
from typing import Any

import pytest

from numdiff.inspector import Inspector
from tests.conftest import artifact, fixture_names, load_expected
from tests.oracle_values import assert_value_matches

LOADABLE = [n for n in fixture_names() if "error" not in load_expected(n)["inspector"]]
PERF = ("p10", "p50", "p90", "avg", "min", "max")


def _inspector(name: str, *, with_etrecord: bool, **kw: Any) -> Inspector:
    return Inspector(etdump_path=artifact(name, "etdump"), debug_buffer_path=artifact(name, "debug_buffer"),
                     etrecord=artifact(name, "etrecord") if with_etrecord else None, **kw)


def _check_blocks(insp: Inspector, expected_blocks: list[dict[str, Any]], *, symbolicated: bool) -> None:
    assert [b.name for b in insp.event_blocks] == [b["name"] for b in expected_blocks]
    for block, xb in zip(insp.event_blocks, expected_blocks, strict=True):
        assert block.bundled_input_index == xb["bundled_input_index"]
        assert len(block.events) == len(xb["events"]), block.name
        if xb["run_output"] is not None:
            assert_value_matches(block.run_output, {"list": xb["run_output"]}, f"{block.name}.run_output")
        if symbolicated and xb["reference_output"] is not None:
            assert_value_matches(block.reference_output, {"list": xb["reference_output"]}, "reference_output")
        for ev, x in zip(block.events, xb["events"], strict=True):
            where = f"{block.name}/{x['name']}"
            assert ev.name == x["name"], where
            assert ev._instruction_id == x["instruction_id"], where
            assert ev.delegate_debug_identifier == x["delegate_debug_identifier"], where
            assert ev.is_delegated_op == x["is_delegated_op"], where
            assert ev.start_time == x["start_time"], where
            if x["perf_data"] is None:
                assert ev.perf_data is None, where
            else:
                assert ev.perf_data is not None, where
                for k in PERF:
                    assert math.isclose(getattr(ev.perf_data, k), x["perf_data"][k], rel_tol=1e-9, abs_tol=1e-12), (where, k)
                assert len(ev.perf_data.raw) == len(x["perf_data"]["raw"])
            assert_value_matches(ev.debug_data, {"list": x["debug_data"]}, f"{where}.debug_data")
            if symbolicated:
                handles = list(ev.debug_handles) if isinstance(ev.debug_handles, tuple) else ev.debug_handles
                assert handles == x["debug_handles"], where
                assert ev.num_outputs == x["num_outputs"], where
                assert ev.op_types == x["op_types"], where
                assert ev.stack_traces == x["stack_traces"], where
                assert list(ev.module_hierarchy) == list(x["module_hierarchy"]), where
                assert ev.delegate_backend_name == x["delegate_backend_name"], where


@pytest.mark.parametrize("name", LOADABLE)
def test_event_blocks_match_without_etrecord(name: str) -> None:
    expected = load_expected(name)["inspector"]["event_blocks"]
    _check_blocks(_inspector(name, with_etrecord=False), expected, symbolicated=False)


WITH_RECORD = [n for n in LOADABLE if artifact(n, "etrecord")]


@pytest.fixture(scope="module")
def symbolicated() -> dict[str, Inspector]:
    pytest.importorskip("numdiff.schema.etrecord", reason="ETRecord reader not built yet")
    return {}


@pytest.mark.parametrize("name", WITH_RECORD)
def test_event_blocks_match_with_etrecord(name: str, symbolicated: dict[str, Inspector]) -> None:
    insp = symbolicated.setdefault(name, _inspector(name, with_etrecord=True))
    _check_blocks(insp, load_expected(name)["inspector"]["event_blocks"], symbolicated=True)


@pytest.mark.parametrize("name", WITH_RECORD)
def test_printed_table_tsv_and_columns_match_exactly(name: str, symbolicated: dict[str, Inspector]) -> None:
    insp = symbolicated.setdefault(name, _inspector(name, with_etrecord=True))
    expected = load_expected(name)["inspector"]
    out = io.StringIO()
    insp.print_data_tabular(file=out)
    assert out.getvalue() == expected["printed_table"]
    tsv = io.StringIO()
    insp.save_data_to_tsv(tsv)
    assert tsv.getvalue() == expected["tsv"]
    assert list(insp.to_dataframe().columns) == expected["dataframe"]["columns"]
    assert list(insp.to_dataframe(include_units=False).columns) == expected["dataframe"]["columns_no_units"]


@pytest.mark.parametrize("name", [n for n in WITH_RECORD if "inspector_module_hierarchy" in load_expected(n)])
def test_module_hierarchy_mode_matches(name: str, symbolicated: dict[str, Inspector]) -> None:
    insp = _inspector(name, with_etrecord=True, enable_module_hierarchy=True)
    _check_blocks(insp, load_expected(name)["inspector_module_hierarchy"]["event_blocks"], symbolicated=True)


def test_no_etrecord_fixture_tables_match() -> None:
    name = "no_etrecord"
    insp = _inspector(name, with_etrecord=False)
    expected = load_expected(name)["inspector"]
    out = io.StringIO()
    insp.print_data_tabular(file=out)
    assert out.getvalue() == expected["printed_table"]


def test_runs_with_different_inputs_load_with_a_warning() -> None:
    """The reference refuses (AssertionError); numdiff loads and keeps every run's values."""
    name = "different_inputs"
    assert load_expected(name)["inspector"]["error"]["type"] == "AssertionError"
    with pytest.warns(UserWarning, match="differ from run 0"):
        insp = _inspector(name, with_etrecord=False)
    logged = [e for b in insp.event_blocks for e in b.events if e.debug_data and e.name != "OPERATOR_CALL"]
    differing = [e for e in logged
                 if any(not a.equal(b) for a, b in zip(e.debug_data_for_run(0), e.debug_data_for_run(1), strict=True))]
    assert differing, "some op must have logged different values in the two runs"
    assert all(e.debug_data_for_run(0)[0].equal(e.debug_data[0]) for e in differing)
    assert any("differ from run 0" in n for n in insp.notes)
