"""Inspector: argument validation and every bad-input class, each with its message."""

from __future__ import annotations

import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from numdiff import Inspector, TimeScale
from numdiff.errors import MismatchedArtifactsError, MissingDataError, UsageError
from tests.conftest import FIXTURES, artifact, load_expected

MLP = FIXTURES / "mlp_fp32"


def _quiet(**kw: object) -> Inspector:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Inspector(**kw)  # type: ignore[arg-type]


def test_exactly_one_etdump_source() -> None:
    with pytest.raises(UsageError, match="exactly one of etdump_path and etdump_data"):
        Inspector()
    with pytest.raises(UsageError, match="exactly one"):
        Inspector(etdump_path=str(MLP / "etdump.etdp"), etdump_data=b"x")


def test_etdump_data_gives_the_same_blocks() -> None:
    a = _quiet(etdump_path=str(MLP / "etdump.etdp"))
    b = _quiet(etdump_data=(MLP / "etdump.etdp").read_bytes())
    assert [len(x.events) for x in a.event_blocks] == [len(x.events) for x in b.event_blocks]


def test_cycles_must_be_on_both_sides() -> None:
    with pytest.raises(UsageError, match="cycles"):
        Inspector(etdump_path=str(MLP / "etdump.etdp"), source_time_scale=TimeScale.CYCLES)
    insp = _quiet(etdump_path=str(MLP / "etdump.etdp"), source_time_scale="cycles", target_time_scale="cycles")
    assert insp.event_blocks[0].events[0].perf_data is not None


def test_time_scale_conversion() -> None:
    ms = _quiet(etdump_path=str(MLP / "etdump.etdp"))
    us = _quiet(etdump_path=str(MLP / "etdump.etdp"), target_time_scale="us")
    a, b = ms.event_blocks[1].events[0].perf_data, us.event_blocks[1].events[0].perf_data
    assert a is not None and b is not None
    assert b.avg == pytest.approx(a.avg * 1000)


def test_bad_etrecord_type_names_the_type() -> None:
    with pytest.raises(UsageError, match="not int"):
        Inspector(etdump_path=str(MLP / "etdump.etdp"), etrecord=42)


def test_parsed_etrecord_is_accepted() -> None:
    from numdiff import parse_etrecord

    rec = parse_etrecord(MLP / "etrecord.bin")
    insp = _quiet(etdump_path=str(MLP / "etdump.etdp"), etrecord=rec, debug_buffer_path=str(MLP / "debug_buffer.bin"))
    assert insp.get_exported_program() is rec.edge_dialect_program


def test_etrecord_of_another_model_is_refused() -> None:
    with pytest.raises(MismatchedArtifactsError, match=r"(?s)do not describe the same model.*convolution"):
        _quiet(etdump_path=str(MLP / "etdump.etdp"), etrecord=str(FIXTURES / "cnn_nested" / "etrecord.bin"))


def test_gap_without_etrecord_says_how_to_get_one() -> None:
    insp = _quiet(etdump_path=str(MLP / "etdump.etdp"), debug_buffer_path=str(MLP / "debug_buffer.bin"))
    with pytest.raises(MissingDataError, match="(?s)needs an ETRecord.*etrecord="):
        insp.calculate_numeric_gap("SNR")


def test_gap_without_debug_buffer_says_which_file_is_missing() -> None:
    with pytest.warns(UserWarning, match="no debug buffer was given"):
        insp = Inspector(etdump_path=str(MLP / "etdump.etdp"), etrecord=str(MLP / "etrecord.bin"))
    with pytest.raises(MissingDataError, match="(?s)etdump.etdp.*no debug buffer.*debug_buffer_path="):
        insp.calculate_numeric_gap("SNR")


def test_gap_without_representative_inputs() -> None:
    from numdiff import parse_etrecord

    rec = parse_etrecord(MLP / "etrecord.bin")
    rec._representative_inputs = None
    insp = _quiet(etdump_path=str(MLP / "etdump.etdp"), etrecord=rec, debug_buffer_path=str(MLP / "debug_buffer.bin"))
    with pytest.raises(MissingDataError, match="(?s)no representative inputs.*generate_etrecord"):
        insp.calculate_numeric_gap("SNR")


def test_unknown_metric_lists_the_known_ones() -> None:
    insp = _quiet(etdump_path=str(MLP / "etdump.etdp"), etrecord=str(MLP / "etrecord.bin"),
                  debug_buffer_path=str(MLP / "debug_buffer.bin"))
    with pytest.raises(UsageError, match="(?si)psnr.*mse.*snr"):
        insp.calculate_numeric_gap("PSNR")


def test_both_spellings_of_the_validation_keyword() -> None:
    insp = _quiet(etdump_path=str(MLP / "etdump.etdp"), etrecord=str(MLP / "etrecord.bin"),
                  debug_buffer_path=str(MLP / "debug_buffer.bin"))
    a = insp.calculate_numeric_gap("MSE", disable_debug_handle_valdiation=True)
    b = insp.calculate_numeric_gap("MSE", disable_debug_handle_validation=True)
    assert [list(x) for x in a["aot_ops"]] == [list(x) for x in b["aot_ops"]]


def test_find_total_for_module_matches_exact_names() -> None:
    """Exact module keys/paths: equals the reference wherever the reference's substring match is exact."""
    name = "cnn_nested"
    insp = _quiet(etdump_path=artifact(name, "etdump"), etrecord=artifact(name, "etrecord"),
                  debug_buffer_path=artifact(name, "debug_buffer"))
    expected = load_expected(name)["inspector"]["find_total_for_module"]
    keys = {k for b in insp.event_blocks for e in b.events for stack in e.module_hierarchy.values() if stack for k in stack}
    checked = 0
    for module, total in expected.items():
        if module in keys and not any(module in k and module != k for k in keys):
            assert insp.find_total_for_module(module) == pytest.approx(total)
            checked += 1
    assert checked >= 1
    assert insp.find_total_for_module("no_such_module") == 0.0


def test_get_exported_program_without_etrecord_is_none() -> None:
    assert _quiet(etdump_path=str(MLP / "etdump.etdp")).get_exported_program() is None


def test_user_files_are_not_modified(tmp_path: Path) -> None:
    before = {p.name: p.read_bytes() for p in MLP.iterdir() if p.suffix in (".etdp", ".bin")}
    insp = _quiet(etdump_path=str(MLP / "etdump.etdp"), etrecord=str(MLP / "etrecord.bin"),
                  debug_buffer_path=str(MLP / "debug_buffer.bin"))
    for block in insp.event_blocks:
        for ev in block.events:
            for t in ev.debug_data:
                t.add_(1)  # writable views: copy-on-write, the file stays as it was
    insp.calculate_numeric_gap("SNR")
    assert {p.name: p.read_bytes() for p in MLP.iterdir() if p.suffix in (".etdp", ".bin")} == before


def test_import_numdiff_does_not_import_torch() -> None:
    code = "import sys, numdiff; from numdiff import Inspector; assert 'torch' not in sys.modules, 'torch loaded'"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_profiling_needs_no_torch() -> None:
    code = (f"import sys; from numdiff import Inspector; i = Inspector(etdump_path={str(MLP / 'etdump.etdp')!r});"
            "i.to_dataframe(); assert 'torch' not in sys.modules, 'torch loaded'")
    subprocess.run([sys.executable, "-W", "ignore", "-c", code], check=True)
