"""compare_runs leaves a delegate's scratch buffers out (export schema 5.5, pytorch/executorch#21985).

Two runs of the xnnpack fixture, edited to the upstream format by ``tests/upstream_formats.py``:
the ETRecord gains the lowered program with ``scratch_specs``, and each run's ``DELEGATE_CALL``
logs a scratch buffer after its output, holding different bytes in each run (scratch holds
whatever the backend left there). The delegate's output is the same in both runs.
"""

from __future__ import annotations

import warnings
from pathlib import Path

from numdiff.runs_compare import Agreement, compare_runs
from tests.conftest import FIXTURES
from tests.upstream_formats import with_delegate_scratch, with_lowered_program

XNNPACK = FIXTURES / "xnnpack"


def _runs(tmp_path: Path, declared: list[int]) -> tuple[Path, dict[str, tuple[str, str]]]:
    etrecord = tmp_path / "etrecord.bin"
    etrecord.write_bytes(with_lowered_program((XNNPACK / "etrecord.bin").read_bytes(), [declared]))
    runs = {}
    for name, fill in (("a", 0xA5), ("b", 0x5A)):
        etdump, buffer = with_delegate_scratch((XNNPACK / "etdump.etdp").read_bytes(),
                                               (XNNPACK / "debug_buffer.bin").read_bytes(), [[40]], fill=fill)
        (tmp_path / f"{name}.etdp").write_bytes(etdump)
        (tmp_path / f"{name}.bin").write_bytes(buffer)
        runs[name] = (str(tmp_path / f"{name}.etdp"), str(tmp_path / f"{name}.bin"))
    return etrecord, runs


def test_scratch_is_not_compared_as_an_output(tmp_path: Path) -> None:
    etrecord, runs = _runs(tmp_path, [40])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = compare_runs(etrecord, runs)
    assert not result.diverges and result.runs["b"].first_divergent is None
    assert [op.verdict for op in result.runs["b"].ops] == [Agreement.IDENTICAL]


def test_without_scratch_specs_the_scratch_bytes_would_be_compared(tmp_path: Path) -> None:
    """The control: the same runs under an ETRecord that declares no scratch compare the scratch bytes."""
    etrecord, runs = _runs(tmp_path, [])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = compare_runs(etrecord, runs)
    (op,) = result.runs["b"].ops
    assert op.verdict is not Agreement.IDENTICAL and op.fit.offset == 0x5A - 0xA5  # the scratch bytes, compared
