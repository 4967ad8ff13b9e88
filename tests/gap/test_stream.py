"""stream_numeric_gap: the rows and gap values of calculate_numeric_gap, without the intermediate
outputs, on every oracle fixture with a debug buffer (every method of a multi-method program);
the AOT values held at once stay few."""

from __future__ import annotations

import math
import warnings
from pathlib import Path

import pytest

from numdiff import Inspector
from numdiff.errors import UsageError
from tests.conftest import FIXTURES

FOLDERS = sorted(p.parent for p in FIXTURES.rglob("debug_buffer.bin")
                 if (p.parent / "etrecord.bin").is_file() and (p.parent / "etdump.etdp").is_file())


def _open(folder: Path) -> Inspector:
    return Inspector(etdump_path=folder / "etdump.etdp", etrecord=folder / "etrecord.bin",
                     debug_buffer_path=folder / "debug_buffer.bin")


def _same(a: list[float], b: list[float]) -> bool:
    return len(a) == len(b) and all(x == y or (math.isnan(x) and math.isnan(y)) for x, y in zip(a, b))


@pytest.mark.parametrize("folder", FOLDERS, ids=[str(f.relative_to(FIXTURES)) for f in FOLDERS])
def test_streamed_rows_equal_calculate_numeric_gap(folder: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        inspector = _open(folder)
        try:
            full = inspector.calculate_numeric_gap("MSE")
        except Exception as e:  # noqa: BLE001 - the same error is expected from the streamed path
            with pytest.raises(type(e)):
                _open(folder).stream_numeric_gap("MSE")
            return
        streamed = _open(folder).stream_numeric_gap("MSE")
    methods = ["method"] if "method" in full.columns else []  # a multi-method program: every method, tagged
    assert list(streamed.columns) == ["aot_debug_handle", "aot_ops", "runtime_ops", "runtime_debug_handle", "gap",
                                      "stacktraces", *methods]
    assert len(streamed) == len(full)
    for column in ("aot_debug_handle", "aot_ops", "runtime_ops", "runtime_debug_handle", "stacktraces", *methods):
        assert streamed[column].tolist() == full[column].tolist(), column
    assert all(_same(list(a), list(b)) for a, b in zip(streamed["gap"], full["gap"]))


def test_few_aot_values_are_held_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    from numdiff.gap import stream as gap_stream

    most = [0]
    original = gap_stream._Scorer.on_output

    def watched(self: gap_stream._Scorer, handle: object, node: object, value: object) -> None:
        original(self, handle, node, value)  # type: ignore[arg-type]
        most[0] = max(most[0], len(self.held))

    monkeypatch.setattr(gap_stream._Scorer, "on_output", watched)
    folder = FIXTURES / "realistic" / "real_llama"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rows = len(_open(folder).stream_numeric_gap("SNR"))
    assert rows > 10 and most[0] <= 1  # each output is scored as it is computed, then let go


def test_a_comparator_with_its_own_preprocessing_is_refused() -> None:
    from numdiff.comparators import MSEComparator

    class Scaled(MSEComparator):
        def preprocessing(self, mapping):  # type: ignore[no-untyped-def]
            return mapping

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(UsageError, match="Scaled overrides compare\\(\\) or preprocessing\\(\\)"):
            _open(FIXTURES / "mlp_fp32").stream_numeric_gap(Scaled())
