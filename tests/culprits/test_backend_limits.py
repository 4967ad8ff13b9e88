"""Delegate backends' own verdict limits (``DEFAULT_BACKEND_THRESHOLDS``), measured on clean controls.

The real-artifact cases are the zoo sample's (tests/fixtures/zoo, ExecuTorch 1.5.1): a planted fault
inside an XNNPACK delegate that the general limits call expected noise, and its clean control.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from numdiff import Inspector, Thresholds
from numdiff.cli import main
from numdiff.culprits._noise import (
    DEFAULT_BACKEND_THRESHOLDS,
    DEFAULT_QUANTIZED_THRESHOLDS,
    DEFAULT_THRESHOLDS,
    resolve_thresholds,
)

ZOO = Path(__file__).resolve().parent.parent / "fixtures" / "zoo"


def _files(case: str) -> dict[str, str]:
    run = ZOO / case
    return {"etdump_path": str(run / "etdump.etdp"), "etrecord": str(run.parent / "etrecord.bin"),
            "debug_buffer_path": str(run / "debug_buffer.bin")}


def test_the_backend_defaults_and_how_the_users_limits_replace_them() -> None:
    limits = resolve_thresholds(None)
    assert limits["XnnpackBackend/quantized"].expected == 1 and limits["XnnpackBackend"].expected == 8
    assert limits["quantized"] == DEFAULT_QUANTIZED_THRESHOLDS and limits["default"] == DEFAULT_THRESHOLDS
    # one Thresholds is for every row: no backend keeps its own
    assert set(resolve_thresholds(Thresholds(1, 4, 64))) == {"default", "quantized"}
    # a general "quantized" the user sets replaces the backend's quantized default, not its float one
    loose = resolve_thresholds({"quantized": {"expected": 8}})
    assert "XnnpackBackend/quantized" not in loose and loose["XnnpackBackend"] == DEFAULT_BACKEND_THRESHOLDS["XnnpackBackend"]
    # a backend key starts from the backend's default
    own = resolve_thresholds({"XnnpackBackend/quantized": {"expected": 3}})
    assert own["XnnpackBackend/quantized"] == Thresholds(1.0, 3.0, 512.0)


def test_a_fault_inside_an_int8_xnnpack_delegate_within_sqrt12_is_beyond_xnnpacks_limit() -> None:
    twin = Inspector(**_files("glu/int8_xnnpack/twin0")).find_culprits("SNR")
    (culprit,) = twin.culprits
    assert 1 < culprit.local_noise_units < math.sqrt(12) and culprit.verdict.value == "suspicious"
    assert culprit.noise.endswith(", XnnpackBackend/quantized limits") and culprit.delegate.startswith("XnnpackBackend #")
    clean = Inspector(**_files("glu/int8_xnnpack/clean")).find_culprits("SNR")
    assert not clean.culprits and all(r.local_noise_units == 0 for r in clean.rows)  # bit-exact
    # with the general limits the same row is expected noise: the user can ask for them
    general = Inspector(**_files("glu/int8_xnnpack/twin0")).find_culprits(
        "SNR", thresholds={"XnnpackBackend/quantized": DEFAULT_QUANTIZED_THRESHOLDS})
    assert not general.culprits and general.rows[culprit.index].verdict.value == "expected-noise"


def test_a_fault_inside_an_fp32_xnnpack_delegate_within_64_units_is_beyond_xnnpacks_limit() -> None:
    twin = Inspector(**_files("input_fanout/xnnpack/twin0")).find_culprits("SNR")
    (culprit,) = twin.culprits
    assert 8 < culprit.local_noise_units < 64 and culprit.noise.endswith(", XnnpackBackend limits")
    clean = Inspector(**_files("input_fanout/xnnpack/clean")).find_culprits("SNR")
    assert not clean.culprits and max(r.local_noise_units for r in clean.rows) < 1
    # rows that are not one delegate call keep the general limits
    assert any(r.delegate is None and "limits" not in r.noise for r in clean.rows)


def test_the_cli_takes_a_backend_threshold_and_warns_about_an_absent_backend(capsys: pytest.CaptureFixture[str]) -> None:
    files = _files("glu/int8_xnnpack/twin0")
    argv = ["culprits", "--etdump", files["etdump_path"], "--etrecord", files["etrecord"], "--debug-buffer",
            files["debug_buffer_path"], "--format", "csv"]
    assert main(argv) == 1  # a culprit
    capsys.readouterr()
    assert main([*argv, "--threshold", "XnnpackBackend/quantized:expected=4"]) == 0
    assert capsys.readouterr().err == ""
    assert main([*argv, "--threshold", "CoreMLBackend/quantized:expected=4"]) == 1
    err = capsys.readouterr().err
    assert "--threshold CoreMLBackend/quantized: no compared op is of delegate backend 'CoreMLBackend', so it " \
           "changed nothing" in err and "the delegate backends: XnnpackBackend" in err
