"""numdiff against ExecuTorch 1.5.1's Inspector on realistic models (issue 8).

The artifacts and the reference's answers are in ``tests/fixtures/realistic/<name>/`` (written
by ``scripts/make_realistic_fixtures.py`` with the oracle). Every recorded answer is compared:
event blocks, the printed table / TSV / DataFrame columns, module totals, and each gap table
(per metric, per reference graph). Where the reference raised, numdiff's own answer is checked
for sanity instead. Cases numdiff still gets wrong are strict xfails naming the issue-8 item.
"""

from __future__ import annotations

import gzip
import io
import json
import math
import warnings
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import torch

from numdiff.errors import MissingDataError
from numdiff.inspector import Inspector
from tests.oracle_values import assert_value_matches, same_gap

ROOT = Path(__file__).parent / "fixtures" / "realistic"
PERF = ("p10", "p50", "p90", "avg", "min", "max")
GRAPHS = {"default": None, "edge_dialect_exported_program": "edge_dialect_exported_program"}


@cache
def expected(name: str) -> dict[str, Any]:
    return json.loads(gzip.decompress((ROOT / name / "expected.json.gz").read_bytes()))  # type: ignore[no-any-return]


NAMES = sorted(d.name for d in ROOT.iterdir() if (d / "expected.json.gz").is_file()) if ROOT.is_dir() else []
BUILT = [n for n in NAMES if "build_error" not in expected(n)]
REFERENCE_LOADS = [n for n in BUILT if "error" not in expected(n)["inspector"]]
REFERENCE_FAILS = [n for n in BUILT if "error" in expected(n)["inspector"]]

#: (fixture, what) -> the issue-8 item numdiff still gets wrong there.
KNOWN: dict[tuple[str, str], str] = {}


def _param(name: str, what: str, *values: Any) -> Any:
    reason = KNOWN.get((name, what))
    marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
    return pytest.param(name, *values, id=f"{name}-{what}", marks=marks)


def _path(name: str, kind: str) -> str | None:
    f = expected(name)["files"].get(kind)
    return None if not f else str(ROOT / name / f)


_CACHE: dict[str, Inspector] = {}


def inspector(name: str) -> Inspector:
    if name not in _CACHE:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _CACHE[name] = Inspector(etdump_path=_path(name, "etdump"), etrecord=_path(name, "etrecord"),
                                     debug_buffer_path=_path(name, "debug_buffer"))
    return _CACHE[name]


def test_fixtures_are_present_and_small() -> None:
    assert {"real_llama", "real_lstm_gru", "real_mobilenet_xnn_int8", "real_two_methods"} <= set(NAMES)
    for name in NAMES:
        size = sum(f.stat().st_size for f in (ROOT / name).iterdir())
        assert size < 1_500_000, (name, size)


# ----------------------------------------------------------------------------- events and tables


def _check_event(ev: Any, x: dict[str, Any], where: str) -> None:
    assert ev.name == x["name"], where
    assert ev._instruction_id == x["instruction_id"], where
    assert ev.delegate_debug_identifier == x["delegate_debug_identifier"], where
    assert ev.is_delegated_op == x["is_delegated_op"], where
    assert ev.delegate_backend_name == x["delegate_backend_name"], where
    assert ev.start_time == x["start_time"], where
    handles = list(ev.debug_handles) if isinstance(ev.debug_handles, tuple) else ev.debug_handles
    assert handles == x["debug_handles"], where
    assert ev.num_outputs == x["num_outputs"], where
    assert ev.op_types == x["op_types"], where
    assert ev.stack_traces == x["stack_traces"], where
    assert list(ev.module_hierarchy) == list(x["module_hierarchy"]), where
    if x["perf_data"] is None:
        assert ev.perf_data is None, where
    else:
        assert ev.perf_data is not None, where
        for k in PERF:
            assert math.isclose(getattr(ev.perf_data, k), x["perf_data"][k], rel_tol=1e-9, abs_tol=1e-12), (where, k)
    assert_value_matches(ev.debug_data, {"list": x["debug_data"]}, f"{where}.debug_data")


@pytest.mark.parametrize("name", [_param(n, "events") for n in REFERENCE_LOADS])
def test_event_blocks_match_the_reference(name: str) -> None:
    blocks = expected(name)["inspector"]["event_blocks"]
    insp = inspector(name)
    assert [b.name for b in insp.event_blocks] == [b["name"] for b in blocks]
    for block, xb in zip(insp.event_blocks, blocks, strict=True):
        assert len(block.events) == len(xb["events"]), block.name
        if xb["run_output"] is not None:
            assert_value_matches(block.run_output, {"list": xb["run_output"]}, f"{block.name}.run_output")
        if xb["reference_output"] is not None:
            assert_value_matches(block.reference_output, {"list": xb["reference_output"]}, "reference_output")
        for i, (ev, x) in enumerate(zip(block.events, xb["events"], strict=True)):
            _check_event(ev, x, f"{block.name}[{i}]/{x['name']}")


@pytest.mark.parametrize("name", [_param(n, "tables") for n in REFERENCE_LOADS])
def test_printed_table_tsv_and_columns_match_exactly(name: str) -> None:
    exp = expected(name)["inspector"]
    insp = inspector(name)
    out = io.StringIO()
    insp.print_data_tabular(file=out)
    assert out.getvalue() == exp["printed_table"]
    tsv = io.StringIO()
    insp.save_data_to_tsv(tsv)
    assert tsv.getvalue() == exp["tsv"]
    assert list(insp.to_dataframe().columns) == exp["dataframe"]["columns"]
    assert list(insp.to_dataframe(include_units=False).columns) == exp["dataframe"]["columns_no_units"]


@pytest.mark.parametrize("name", [_param(n, "find_total_for_module") for n in REFERENCE_LOADS])
def test_module_totals_match_the_reference(name: str) -> None:
    totals = expected(name)["inspector"]["find_total_for_module"]
    got = {k: inspector(name).find_total_for_module(k) for k in totals}
    bad = {k: (got[k], v) for k, v in totals.items() if not math.isclose(got[k], v, rel_tol=1e-9, abs_tol=1e-12)}
    assert not bad


# ----------------------------------------------------------------------------- gap tables


def _gap_cases() -> list[Any]:
    out = []
    for name in REFERENCE_LOADS:
        for key, exp in expected(name)["gap"].items():
            graph, metric = key.rsplit("/", 1)
            if "error" not in exp:
                out.append(_param(name, f"gap {key}", GRAPHS[graph], metric, exp))
    return out


def _gap_list(v: Any) -> list[float]:
    return [float(x) for x in v] if isinstance(v, (list, tuple)) else [float(v)]


@pytest.mark.parametrize(("name", "graph", "metric", "exp"), _gap_cases())
def test_gap_rows_match_the_reference(name: str, graph: str | None, metric: str, exp: dict[str, Any]) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        df = inspector(name).calculate_numeric_gap(metric, reference_graph=graph)
    assert list(df.columns) == exp["columns"]
    assert len(df) == len(exp["rows"])
    for i, ((_, row), x) in enumerate(zip(df.iterrows(), exp["rows"], strict=True)):
        where = f"row {i} {x['aot_ops']}"
        assert list(row["aot_debug_handle"]) == x["aot_debug_handle"], where
        assert list(row["runtime_debug_handle"]) == x["runtime_debug_handle"], where
        assert list(row["aot_ops"]) == x["aot_ops"], where
        assert list(row["runtime_ops"]) == x["runtime_ops"], where
        assert row["stacktraces"] == x["stacktraces"], where
        assert_value_matches(row["runtime_intermediate_output"], x["runtime_intermediate_output"], where)
        assert same_gap(metric, _gap_list(row["gap"]), _gap_list(x["gap"]), row["aot_intermediate_output"]), (
            where, row["gap"], x["gap"])


def _no_debug_buffer_gap_cases() -> list[Any]:
    return [_param(n, f"gap {k}", GRAPHS[k.rsplit("/", 1)[0]], k.rsplit("/", 1)[1])
            for n in REFERENCE_LOADS for k, e in expected(n)["gap"].items()
            if e.get("error", {}).get("type") == "IndexError"]


@pytest.mark.parametrize(("name", "graph", "metric"), _no_debug_buffer_gap_cases())
def test_profile_only_dump_gap_names_the_missing_data(name: str, graph: str | None, metric: str) -> None:
    """The reference crashes with IndexError (REFERENCE-NOTES 14); numdiff says what is missing."""
    with pytest.raises(MissingDataError, match="(?s)no intermediate outputs.*intermediate-output logging"):
        inspector(name).calculate_numeric_gap(metric, reference_graph=graph)


# ----------------------------------------------------------------------------- reference raised, numdiff answers


def _value_error_gap_cases() -> list[Any]:
    return [_param(n, f"gap {k}", GRAPHS[k.rsplit("/", 1)[0]], k.rsplit("/", 1)[1])
            for n in REFERENCE_LOADS for k, e in expected(n)["gap"].items()
            if e.get("error", {}).get("type") == "ValueError"]


def _numel(v: Any) -> list[int]:
    if isinstance(v, torch.Tensor):
        return [v.numel()]
    if isinstance(v, (list, tuple)):
        return [n for x in v for n in _numel(x)]
    return []


@pytest.mark.parametrize(("name", "graph", "metric"), _value_error_gap_cases())
def test_gap_where_the_reference_aborts_scores_only_corresponding_shapes(
    name: str, graph: str | None, metric: str
) -> None:
    """REFERENCE-NOTES 18: the reference aborts the whole table on one shape mismatch; numdiff answers,
    and a finite gap only ever compares tensors that hold the same number of elements."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        df = inspector(name).calculate_numeric_gap(metric, reference_graph=graph)
    assert len(df) > 0
    scored = 0
    for _, row in df.iterrows():
        aot, runtime = _numel(row["aot_intermediate_output"]), _numel(row["runtime_intermediate_output"])
        for i, g in enumerate(_gap_list(row["gap"])):
            if math.isnan(g):
                continue
            scored += 1
            assert i < len(aot) and i < len(runtime) and aot[i] == runtime[i], (
                f"{list(row['aot_ops'])}: output {i} scored {g} between {aot} and {runtime} elements")
    assert scored > 0


@pytest.mark.parametrize("name", [_param(n, "fp32-snr-floor") for n in ("real_llama", "real_llama_xnn")
                                  if n in REFERENCE_LOADS])
def test_fp32_rows_the_reference_could_not_score_show_no_false_alarm(name: str) -> None:
    """An fp32 program (portable or XNNPACK) agrees with eager PyTorch to about 1e-6, far above 40 dB;
    a scored row below that pairs tensors that do not correspond."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        df = inspector(name).calculate_numeric_gap("SNR")
    low = [(list(r["aot_ops"])[-1], g) for _, r in df.iterrows() for g in _gap_list(r["gap"])
           if not math.isnan(g) and g < 40.0]
    assert not low


def _other_error_gap_cases() -> list[Any]:
    return [_param(n, f"gap {k}", GRAPHS[k.rsplit("/", 1)[0]], k.rsplit("/", 1)[1], e["error"]["type"])
            for n in REFERENCE_LOADS for k, e in expected(n)["gap"].items()
            if e.get("error", {}).get("type") not in (None, "IndexError", "ValueError")]


@pytest.mark.parametrize(("name", "graph", "metric", "ref_error"), _other_error_gap_cases())
def test_gap_where_the_reference_crashes_is_answered(name: str, graph: str | None, metric: str, ref_error: str) -> None:
    """The reference crashes (e.g. KeyError 'debug_handle' on the ATen graph of a torch.cond model);
    numdiff gives a table whose rows carry ops and handles."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        df = inspector(name).calculate_numeric_gap(metric, reference_graph=graph)
    assert len(df) > 0, ref_error
    assert all(len(ops) > 0 for ops in df["aot_ops"])


@pytest.mark.parametrize("name", [_param(n, "reference-failed") for n in REFERENCE_FAILS])
def test_numdiff_loads_where_the_reference_failed(name: str) -> None:
    err = expected(name)["inspector"]["error"]
    assert err["type"] in {"AttributeError", "RuntimeError", "AssertionError"}
    insp = inspector(name)
    assert insp.event_blocks
    events = [e for b in insp.event_blocks for e in b.events]
    assert any(e.perf_data is not None for e in events)
    out = io.StringIO()
    insp.print_data_tabular(file=out)
    assert out.getvalue()


@pytest.mark.parametrize("name", [_param("real_two_methods", "method-names")] if "real_two_methods" in BUILT else [])
def test_two_method_blocks_are_told_apart(name: str) -> None:
    # `name` stays the runtime's ("Execute" for both, as in the reference); method_name tells them apart.
    blocks = [b for b in inspector(name).event_blocks if b.name == "Execute"]
    assert sorted(b.method_name or "" for b in blocks) == ["encode", "forward"]
