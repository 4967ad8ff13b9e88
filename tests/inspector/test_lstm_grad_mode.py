"""On a real LSTM/GRU model written by ExecuTorch 1.5.1, every gap row equals the reference's exactly.

The reference captures with grad mode enabled; ``aten.lstm`` gives other numbers under
``torch.no_grad()`` (an SNR of 143.8 dB instead of the reference's 139.7 dB on this model's
``select`` row before numdiff matched the mode).
"""

from __future__ import annotations

import gzip
import json
import math
import warnings

import pytest

from numdiff import Inspector
from tests.conftest import FIXTURES
from tests.oracle_values import same_gap

FOLDER = FIXTURES / "realistic" / "real_lstm_gru"


@pytest.fixture(scope="module")
def inspector() -> Inspector:
    if not (FOLDER / "expected.json.gz").is_file() or not (FOLDER / "etdump.etdp").is_file():
        pytest.skip("the realistic LSTM fixture is not generated (scripts/make_realistic_fixtures.py)")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Inspector(etdump_path=str(FOLDER / "etdump.etdp"), etrecord=str(FOLDER / "etrecord.bin"),
                         debug_buffer_path=str(FOLDER / "debug_buffer.bin"))


@pytest.mark.parametrize("graph", [None])  # the ATen graph: the rows that differed under no_grad
def test_lstm_gap_rows_equal_the_reference(inspector: Inspector, graph: str | None) -> None:
    expected = json.loads(gzip.decompress((FOLDER / "expected.json.gz").read_bytes()))
    rows = expected["gap"][f"{graph or 'default'}/SNR"]["rows"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        df = inspector.calculate_numeric_gap("SNR", reference_graph=graph)
    assert len(df) == len(rows)
    finite = 0
    for want, (_, got) in zip(rows, df.iterrows(), strict=True):
        assert list(got["aot_ops"]) == want["aot_ops"]
        assert same_gap("SNR", list(got["gap"]), list(want["gap"]), got["aot_intermediate_output"]), (
            want["aot_ops"], want["gap"], got["gap"])
        finite += sum(math.isfinite(a) for a in want["gap"])
    assert finite >= 1
