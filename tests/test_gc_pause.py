"""numdiff._gc_pause: the collector is paused inside, restored after, nesting- and caller-aware."""

from __future__ import annotations

import gc

import pytest

from numdiff._gc_pause import gc_paused


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
