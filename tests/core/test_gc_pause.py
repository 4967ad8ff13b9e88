"""numdiff._core.gc_pause: the collector is paused inside, restored after, nesting- and caller-aware."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

from numdiff._core.gc_pause import gc_paused


def test_pauses_and_restores() -> None:
    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_nested_pauses_restore_only_at_the_outermost_exit() -> None:
    with gc_paused():
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()


def test_restored_after_an_exception() -> None:
    with pytest.raises(ValueError, match="boom"):
        with gc_paused():
            raise ValueError("boom")
    assert gc.isenabled()


def test_keeps_a_callers_disabled_collector_disabled() -> None:
    gc.disable()
    try:
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_the_inspector_restores_the_collector_after_loading_and_after_a_failure(tmp_path: Path) -> None:
    from numdiff import Inspector
    from numdiff.errors import ETDumpError
    from tests.conftest import artifact

    with pytest.warns(UserWarning, match="logs tensors but no debug buffer"):
        Inspector(etdump_path=artifact("mlp_fp32", "etdump"), etrecord=artifact("mlp_fp32", "etrecord"))
    assert gc.isenabled()
    bad = tmp_path / "bad.etdp"
    bad.write_bytes(b"\x00" * 64)
    with pytest.raises(ETDumpError):
        Inspector(etdump_path=str(bad))
    assert gc.isenabled()


def test_the_inspectors_warning_points_at_the_callers_line() -> None:
    from numdiff import Inspector
    from tests.conftest import artifact

    with pytest.warns(UserWarning, match="logs tensors but no debug buffer") as record:
        Inspector(etdump_path=artifact("mlp_fp32", "etdump"))
    assert record[0].filename == __file__
