"""numdiff.testing: one-line SNR assertions with a readable failure."""

from __future__ import annotations

import warnings

import pandas as pd
import pytest

from numdiff import Inspector
from numdiff.testing import assert_snr_at_least, layer_snr
from tests.conftest import artifact


@pytest.fixture(scope="module")
def quantized() -> Inspector:
    name = "pt2e_quant_portable"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Inspector(etdump_path=artifact(name, "etdump"), etrecord=artifact(name, "etrecord"),
                         debug_buffer_path=artifact(name, "debug_buffer"))


def test_passes_and_returns_the_per_layer_table(quantized: Inspector) -> None:
    table = assert_snr_at_least(quantized, min_db=10)
    assert len(table) >= 10 and (table["snr_db"] >= 10).all()


def test_failure_lists_the_worst_layers_with_source_lines(quantized: Inspector) -> None:
    snr = layer_snr(quantized)["snr_db"]
    threshold = float(snr[snr < float("inf")].max()) + 1  # every finite layer fails
    with pytest.raises(AssertionError) as e:
        assert_snr_at_least(quantized, min_db=threshold, show=3)
    message = str(e.value)
    assert f"below {threshold} dB SNR" in message
    assert "_fixture_models.py:" in message  # the model's own line, not a torch frame
    assert "worst first" in message
    assert message.count("\n") < 40


def test_failure_title_counts_shown_failing_and_compared_layers(quantized: Inspector) -> None:
    """It said "3 layers compared" when 10 were compared, 7 failed and 3 were shown."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        df = quantized.calculate_numeric_gap("SNR").copy()
    df["gap"] = [[float(10 * (i + 1))] for i in range(len(df))]  # 10, 20, ... dB
    with pytest.raises(AssertionError) as e:
        assert_snr_at_least(df, min_db=75, show=3)
    lines = str(e.value).splitlines()
    assert lines[0] == f"7 of {len(df)} layers are below 75 dB SNR (lowest: 10 dB)"
    assert lines[1] == f"the worst 3 of the 7 failing layers ({len(df)} compared; SNR dB, worst first)"
    assert lines[2].split() == ["handle", "aot_ops", "source", "gap"]  # the reference's frame has no module paths
    with pytest.raises(AssertionError) as e:
        assert_snr_at_least(df, min_db=35, show=3)
    assert str(e.value).splitlines()[1] == f"the 3 failing layers ({len(df)} compared; SNR dB, worst first)"
    with pytest.raises(AssertionError) as e:
        assert_snr_at_least(df, min_db=15, show=3)
    assert str(e.value).splitlines()[1] == f"the failing layer ({len(df)} compared; SNR dB, worst first)"


def test_works_on_a_gap_dataframe_and_ignores_ops(quantized: Inspector) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        df = quantized.calculate_numeric_gap("SNR")
    low = layer_snr(df)
    worst_ops = low.loc[low["snr_db"].idxmin(), "aot_ops"]
    threshold = float(low["snr_db"].min()) + 0.5
    failing = low[low["snr_db"] < threshold]
    if len(failing) == 1:
        assert_snr_at_least(df, min_db=threshold, ignore_ops=worst_ops)
    with pytest.raises(AssertionError):
        assert_snr_at_least(df, min_db=threshold)


def test_rejects_a_frame_that_is_not_a_gap_table() -> None:
    with pytest.raises(TypeError, match="expected a gap DataFrame"):
        assert_snr_at_least(pd.DataFrame({"x": [1]}), min_db=1)
