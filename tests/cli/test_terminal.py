"""What a person sees at the terminal: --version, the profile table, one-line warnings, --quiet, JSON numbers.

Tables are rendered at a fixed width and compared as whole text (Rich's rendering tests are the model).
"""

from __future__ import annotations

import argparse
import json
import warnings
from pathlib import Path

import pandas as pd
import pytest

from numdiff.cli import build_parser, main
from numdiff.examples import example_files
from numdiff.report.profile_table import render_profile_table, shorten_middle
from tests.conftest import FIXTURES

EXAMPLE = example_files("quantized_mlp")


def _strict_json(text: str) -> object:
    def refuse(name: str) -> object:
        raise AssertionError(f"JSON holds {name}, not a number or null")

    return json.loads(text, parse_constant=refuse)


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    import numdiff

    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    assert capsys.readouterr().out == f"numdiff {numdiff.__version__}\n"


def _frame() -> pd.DataFrame:
    def event(block: str, name: str, raw: list[float], backend: str | None = None) -> dict[str, object]:
        ordered = sorted(raw)
        return {"event_block_name": block, "event_name": name, "raw": raw, "p50 (ms)": ordered[len(raw) // 2],
                "avg (ms)": sum(raw) / len(raw), "delegate_backend_name": backend}

    return pd.DataFrame([
        event("Default", "Method::init", [1.5]),
        event("Execute", "DELEGATE_CALL", [0.5, 0.7, 0.6], "XnnpackBackend"),
        event("Execute", "Fully Connected (NC, QS8) GEMM #1", [0.25, 0.25, 0.25], "XnnpackBackend"),
        event("Execute", "native_call_cumsum.out", [0.1, 0.3, 0.2]),
        event("Execute", "OPERATOR_CALL", [0.1, 0.3, 0.2]),
        event("Execute", "Method::execute", [0.9, 1.1, 1.0]),
    ])


def test_profile_table_at_80_columns() -> None:
    assert render_profile_table(_frame(), "ms", width=80) + "\n" == """\
Default (1 run)
op                             calls  p50 (ms)  avg (ms)   share  delegate
─────────────────────────────  ─────  ────────  ────────  ──────  ──────────────
Method::init                       1     1.500     1.500

Execute (3 runs)
op                             calls  p50 (ms)  avg (ms)   share  delegate
─────────────────────────────  ─────  ────────  ────────  ──────  ──────────────
DELEGATE_CALL                      3     0.600     0.600   60.0%  XnnpackBackend
Fully Connecte…, QS8) GEMM #1      3     0.250     0.250   25.0%  XnnpackBackend
native_call_cumsum.out             3     0.200     0.200   20.0%
Method::execute                    3     1.000     1.000  100.0%

share: of the block's Method::execute. --full shows every column (the drop-in's
grid).
"""


def test_profile_table_fits_a_narrow_terminal() -> None:
    text = render_profile_table(_frame(), "ms", width=60)
    assert text + "\n" == """\
Default (1 run)
op              calls  p50 (ms)  avg (ms)   share  delegate
──────────────  ─────  ────────  ────────  ──────  ─────────
Method::init        1     1.500     1.500

Execute (3 runs)
op              calls  p50 (ms)  avg (ms)   share  delegate
──────────────  ─────  ────────  ────────  ──────  ─────────
DELEGATE_CALL       3     0.600     0.600   60.0%  Xnnp…kend
Fully C…EMM #1      3     0.250     0.250   25.0%  Xnnp…kend
native_…um.out      3     0.200     0.200   20.0%
Method:…xecute      3     1.000     1.000  100.0%

share: of the block's Method::execute. --full shows every
column (the drop-in's grid).
"""
    assert max(len(line) for line in text.splitlines()) <= 60


def test_shorten_middle_keeps_both_ends() -> None:
    assert shorten_middle("Fully Connected (NC, QS8) GEMM #1", 14) == "Fully C…EMM #1"
    assert shorten_middle("short", 14) == "short"
    assert len(shorten_middle("x" * 100, 7)) == 7


def test_profile_cli_prints_the_person_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["profile", "--etdump", str(EXAMPLE.etdump), "--etrecord", str(EXAMPLE.etrecord),
                 "--debug-buffer", str(EXAMPLE.debug_buffer), "--width", "80", "--target-time-scale", "us"]) == 0
    captured = capsys.readouterr()
    assert captured.err == ""
    assert captured.out == """\
Default (1 run)
op                             calls  p50 (us)  avg (us)   share  delegate
─────────────────────────────  ─────  ────────  ────────  ──────  ──────────────
Method::init                       1     84.89     84.89
Program::load_method               1     87.37     87.37

Execute (1 run)
op                             calls  p50 (us)  avg (us)   share  delegate
─────────────────────────────  ─────  ────────  ────────  ──────  ──────────────
Convert (NC) #1                    1      1.00      1.00    2.8%  XnnpackBackend
Fully Connecte…, QS8) GEMM #1      1      1.00      1.00    2.8%  XnnpackBackend
Fully Connecte…, QS8) GEMM #2      1         0         0    0.0%  XnnpackBackend
Convert (NC) #2                    1         0         0    0.0%  XnnpackBackend
DELEGATE_CALL                      1     23.05     23.05   63.9%  XnnpackBackend
native_call_cumsum.out             1      6.17      6.17   17.1%
Convert (NC) #1                    1         0         0    0.0%  XnnpackBackend
Fully Connecte…, QS8) GEMM #1      1         0         0    0.0%  XnnpackBackend
Convert (NC) #2                    1         0         0    0.0%  XnnpackBackend
DELEGATE_CALL                      1      4.27      4.27   11.8%  XnnpackBackend
Method::execute                    1     36.06     36.06  100.0%

share: of the block's Method::execute. --full shows every column (the drop-in's
grid).
"""


def test_profile_width_follows_columns(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("COLUMNS", "64")
    assert main(["profile", "--etdump", str(EXAMPLE.etdump), "-q"]) == 0
    assert max(len(line) for line in capsys.readouterr().out.splitlines()) <= 64


@pytest.mark.parametrize("fmt", ["csv", "tsv", "json"])
def test_profile_formats_write_the_grid_rows(fmt: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["profile", "--etdump", str(FIXTURES / "many_runs" / "etdump.etdp"), "--format", fmt]) == 0
    out = capsys.readouterr().out
    if fmt == "json":
        data = _strict_json(out)
        assert isinstance(data, dict) and data["time_unit"] == "ms"
        first = data["events"][0]
        assert isinstance(first["p50 (ms)"], float) and isinstance(first["start_time"], list)
    else:  # the grid's columns, without pandas' row numbers
        sep = "," if fmt == "csv" else "\t"
        assert out.splitlines()[0].split(sep)[:2] == ["event_block_name", "event_name"]
        assert out.splitlines()[1].split(sep)[:2] == ["Default", "Method::init"]


def test_full_and_format_conflict(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["profile", "--etdump", str(EXAMPLE.etdump), "--full", "--format", "csv"]) == 2
    assert "--full and --format csv" in capsys.readouterr().err


def test_missing_debug_buffer_warning_is_one_line_in_cli_terms(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["profile", "--etdump", str(EXAMPLE.etdump), "--width", "80"]) == 0
    assert capsys.readouterr().err == (
        f"numdiff profile: warning: ETDump {str(EXAMPLE.etdump)!r} logs tensors but no debug buffer was given: "
        "their values are unavailable (give --debug-buffer)\n")


def test_quiet_keeps_warnings_off_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["profile", "--etdump", str(EXAMPLE.etdump), "--quiet"]) == 0
    captured = capsys.readouterr()
    assert captured.err == "" and "Method::execute" in captured.out


def _warn_notes(args: argparse.Namespace) -> int:
    warnings.warn("ETDump 'run.etdp': 139 notes:\n  run 'forward' #1: outputs differ\n  two\n  three\n"
                  "  ... and 136 more", stacklevel=2)
    warnings.warn("numdiff: while pairing outputs: 2 fallback_match.\nSee report.notes.", UserWarning, stacklevel=2)
    return 0


def test_a_long_warning_is_one_line(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from numdiff.cli import profile

    monkeypatch.setattr(profile, "run", _warn_notes)
    assert main(["profile", "--etdump", "x"]) == 0
    assert capsys.readouterr().err == (
        "numdiff profile: warning: ETDump 'run.etdp': 139 notes: run 'forward' #1: outputs differ "
        "(and 3 more; --debug shows them)\n"
        "numdiff profile: warning: while pairing outputs: 2 fallback_match. See report.notes.\n")
    assert main(["profile", "--etdump", "x", "--debug"]) == 0
    err = capsys.readouterr().err
    assert "  ... and 136 more" in err and "UserWarning" not in err


def test_culprits_json_has_numbers_or_null_and_ranks_from_1(capsys: pytest.CaptureFixture[str]) -> None:
    d = FIXTURES / "deeper_quant"
    argv = ["culprits", "--etdump", str(d / "etdump.etdp"), "--etrecord", str(d / "etrecord.bin"),
            "--debug-buffer", str(d / "debug_buffer.bin"), "--float-program", str(d / "float_etrecord.bin"), "-q"]
    assert main([*argv, "--format", "json"]) == 0
    data = _strict_json(capsys.readouterr().out)
    assert isinstance(data, dict)
    amplifications = [row["amplification"] for row in data["rows"]]
    assert None in amplifications and "nan" not in amplifications
    assert all(a is None or isinstance(a, (int, float)) for a in amplifications)
    assert [layer["rank"] for layer in data["quantization"]["layers"]] == [1, 2, 3, 4, 5]
    assert main(argv) == 0
    table = capsys.readouterr().out
    assert "  rank  layer" in table and "\n     1  fc2/linear" in table and " nan " not in table


def test_gap_json_has_no_nan_strings(capsys: pytest.CaptureFixture[str]) -> None:
    d = FIXTURES / "mlp_fp32"
    assert main(["gap", "--etdump", str(d / "etdump.etdp"), "--etrecord", str(d / "etrecord.bin"),
                 "--debug-buffer", str(d / "debug_buffer.bin"), "--format", "json"]) == 0
    data = _strict_json(capsys.readouterr().out)
    assert isinstance(data, dict)
    assert all(g is None or isinstance(g, (int, float)) for row in data["rows"] for g in row["gap"])


def test_runs_list_label_help_says_it_filters() -> None:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    runs = sub.choices["runs"]  # type: ignore[index]
    action = next(a for a in runs._actions if a.dest == "action")
    text = action.choices["list"].format_help()  # type: ignore[index]
    assert "only runs with this label" in text and "remember" not in text


def test_quiet_keeps_notes_off_stderr(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run.json"
    assert main(["analyze", "--etdump", str(EXAMPLE.etdump), "-o", str(out), "-q"]) == 0
    assert capsys.readouterr().err == "" and out.is_file()
    assert main(["analyze", "--etdump", str(EXAMPLE.etdump), "-o", str(out)]) == 0
    assert "wrote" in capsys.readouterr().err


def test_a_librarys_deprecation_notice_is_not_shown_as_numdiffs_warning(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """python-multipart's "Please use `import python_multipart` instead" reached users of `numdiff serve`
    as `numdiff serve: warning: ...`: notices for a library's developers stay hidden unless --debug."""
    from numdiff.cli import profile

    def notices(args: argparse.Namespace) -> int:
        warnings.warn("Please use `import python_multipart` instead.", PendingDeprecationWarning, stacklevel=1)
        warnings.warn("old API", DeprecationWarning, stacklevel=1)
        return 0

    monkeypatch.setattr(profile, "run", notices)
    assert main(["profile", "--etdump", "x"]) == 0
    assert capsys.readouterr().err == ""
    assert main(["profile", "--etdump", "x", "--debug"]) == 0
    assert "python_multipart" in capsys.readouterr().err
