"""The campaign's verdicts: each outcome class is recognised (run_files replaced by a stand-in)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from fuzz import _worker
from fuzz._worker import CaseResult, classify
from numdiff.errors import ETDumpError


def _case(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, behaviour: Any) -> CaseResult:
    files = {"etdump": tmp_path / "etdump.etdp"}
    files["etdump"].write_bytes(b"\x00" * 64)

    def fake_run_files(etdump: Path, etrecord: Path | None, debug_buffer: Path | None, *, gap: bool,
                       progress: list[str] | None = None) -> str:
        behaviour(etdump, tmp_path)
        return "print_data_tabular"

    monkeypatch.setattr(_worker, "run_files", fake_run_files)
    result = CaseResult(0, "etdump", "seed", "strategy", "ok")
    classify(result, files, gap=False, canary=tmp_path / "CANARY")
    return result


def test_success_is_ok(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    r = _case(tmp_path, monkeypatch, lambda etdump, d: None)
    assert (r.outcome, r.stage, r.file_bytes) == ("ok", "print_data_tabular", 64)


def test_numdiff_error_is_counted_by_class(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(etdump: Path, d: Path) -> None:
        raise ETDumpError(etdump, "truncated")

    r = _case(tmp_path, monkeypatch, fail)
    assert (r.outcome, r.detail) == ("error", "ETDumpError")
    assert "truncated" in r.message


def test_other_exceptions_escape_with_their_type(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(etdump: Path, d: Path) -> None:
        {}["run"]  # noqa: B018 - a KeyError, as a bug would raise it

    r = _case(tmp_path, monkeypatch, fail)
    assert (r.outcome, r.detail, r.message) == ("ESCAPE", "KeyError", "'run'")


def test_refused_allocation_is_memory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def hog(etdump: Path, d: Path) -> None:
        bytearray(8 << 30)  # over the per-case address-space guard

    r = _case(tmp_path, monkeypatch, hog)
    assert (r.outcome, r.detail) == ("MEMORY", "MemoryError")


def test_slow_case_is_timeout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_worker, "TIME_LIMIT_S", 0.01)
    r = _case(tmp_path, monkeypatch, lambda etdump, d: time.sleep(0.05))
    assert r.outcome == "TIMEOUT" and r.wall >= 0.05


def test_changed_input_is_modified(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    r = _case(tmp_path, monkeypatch, lambda etdump, d: etdump.write_bytes(b"changed"))
    assert r.outcome == "MODIFIED"


def test_canary_file_is_code_execution(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    r = _case(tmp_path, monkeypatch, lambda etdump, d: (d / "CANARY").touch())
    assert r.outcome == "CANARY"
