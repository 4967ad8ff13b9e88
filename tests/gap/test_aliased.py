"""Slices the program aliases (pytorch/executorch#21552) are listed as "aliased, not logged" in numdiff's views.

The artifact is the real ``multi_output`` oracle fixture (ExecuTorch 1.5.1) edited to the upstream
format by ``tests/upstream_formats.py``: its ``slice_copy`` (instruction 9, debug handle 11)
becomes an ``executorch.exir.memory.slice`` alias, which emits no instruction, so its events leave
the ETDump and its entries leave the ETRecord's debug-handle and output-count maps. No released
ExecuTorch writes this yet. The drop-in ``calculate_numeric_gap`` must still give exactly the
reference's rows (here: the reference's rows on the unedited files without the slice's row).
"""

from __future__ import annotations

import math
import warnings
from pathlib import Path

import pytest

from numdiff.gap.aliased import ALIAS_TARGET, ALIASED, ALIASED_NOTE, emitted_handle_ids, is_aliased
from numdiff.inspector import Inspector
from tests.conftest import FIXTURES, load_expected
from tests.oracle_values import same_gap
from tests.upstream_formats import with_aliased_slice

FIXTURE = FIXTURES / "multi_output"
SLICE_INSTRUCTION, SLICE_HANDLE = 9, [11]


def _inspector(folder: Path) -> Inspector:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Inspector(etdump_path=str(folder / "etdump.etdp"), etrecord=str(folder / "etrecord.bin"),
                         debug_buffer_path=str(folder / "debug_buffer.bin"))


@pytest.fixture(scope="module")
def aliased(tmp_path_factory: pytest.TempPathFactory) -> Inspector:
    folder = tmp_path_factory.mktemp("aliased")
    etrecord, etdump = with_aliased_slice((FIXTURE / "etrecord.bin").read_bytes(),
                                          (FIXTURE / "etdump.etdp").read_bytes(), SLICE_INSTRUCTION)
    (folder / "etrecord.bin").write_bytes(etrecord)
    (folder / "etdump.etdp").write_bytes(etdump)
    (folder / "debug_buffer.bin").write_bytes((FIXTURE / "debug_buffer.bin").read_bytes())
    return _inspector(folder)


@pytest.mark.parametrize("key", sorted(load_expected("multi_output")["gap"]))
def test_drop_in_gap_is_the_reference_without_the_aliased_row(aliased: Inspector, key: str) -> None:
    expected = load_expected("multi_output")["gap"][key]
    graph, metric = key.rsplit("/", 1)
    want = [row for row in expected["rows"] if row["aot_debug_handle"] != SLICE_HANDLE]
    assert len(want) == len(expected["rows"]) - 1  # the reference compared the slice on the unedited files
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        df = aliased.calculate_numeric_gap(metric, reference_graph=None if graph == "default" else graph)
    assert list(df.columns) == expected["columns"] and len(df) == len(want)
    for (_, row), exp in zip(df.iterrows(), want, strict=True):
        assert list(row["aot_debug_handle"]) == exp["aot_debug_handle"]
        assert list(row["aot_ops"]) == exp["aot_ops"] and list(row["runtime_ops"]) == exp["runtime_ops"]
        assert same_gap(metric, list(row["gap"]), list(exp["gap"]), row["aot_intermediate_output"])


@pytest.mark.parametrize(("graph", "node"), [(None, "slice_1"), ("edge_dialect_exported_program", "aten_slice_copy_tensor")])
def test_numdiff_gap_report_lists_the_aliased_slice(aliased: Inspector, graph: str | None, node: str) -> None:
    df = aliased.numeric_gap_report("MSE", reference_graph=graph).to_dataframe()
    rows = df[df["note"] == ALIASED_NOTE]
    assert len(rows) == 1
    row = rows.iloc[0]
    assert list(row["aot_ops"]) == [node] and list(row["aot_debug_handle"]) == SLICE_HANDLE
    assert not row["matched"] and list(row["runtime_ops"]) == [] and math.isnan(row["gap"][0])
    logged = next(r for r in load_expected("multi_output")["gap"]["default/MSE"]["rows"]
                  if r["aot_debug_handle"] == SLICE_HANDLE)  # the reference's row on the unedited files
    assert list(row["aot_intermediate_output"].shape) == logged["aot_intermediate_output"]["shape"]
    assert ALIASED_NOTE.startswith("aliased, not logged: ") and ALIAS_TARGET in ALIASED_NOTE


def test_culprits_say_the_slice_is_aliased_and_replay_it_in_its_reader(aliased: Inspector) -> None:
    report = aliased.find_culprits("SNR")
    record = next(m for m in report.matching if m.name == "slice_1")
    assert (record.status, record.handle) == (ALIASED, tuple(SLICE_HANDLE))
    assert "1 op aliased, not logged" in str(report) and "slice_1 (handle (11,))" in str(report)
    reader = next(r for r in report.rows if "slice_1" in r.replayed_ops)
    assert reader.aot_ops == ["mul"]


def test_a_logged_slice_is_not_listed() -> None:
    """The unedited fixture: the slice ran a kernel (slice_copy) and was logged, so numdiff's views are unchanged."""
    inspector = _inspector(FIXTURE)
    assert ALIASED_NOTE not in set(inspector.numeric_gap_report("MSE").to_dataframe()["note"].dropna())
    assert all(m.status != ALIASED for m in inspector.find_culprits("SNR").matching)


def test_which_ops_count_as_aliased() -> None:
    emitted = emitted_handle_ids({"0": [1, 2], "3": 4, "5": None, "6": [True]})
    assert emitted == frozenset({1, 2, 4})
    assert is_aliased("aten.slice_copy.Tensor", (11,), emitted)
    assert is_aliased("slice.Tensor", (11,), emitted)
    assert not is_aliased("slice.Tensor", (2,), emitted)  # an instruction carries its handle: not aliased
    assert not is_aliased("aten.relu.default", (11,), emitted)  # only slices become aliases
    assert not is_aliased("slice.Tensor", (11,), None)  # no debug_handle_map: nothing says it emitted nothing
    assert not is_aliased("slice.Tensor", (0,), emitted)  # the unset handle
    assert is_aliased(ALIAS_TARGET, (11,), None)  # the alias node itself, in a program after to_executorch
    assert emitted_handle_ids(None) is None
