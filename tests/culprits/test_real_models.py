"""find_culprits on the realistic oracle fixtures (clean runs): no culprit, and the reasons are kept.

llama with XNNPACK has multi-output delegate calls: each output is paired with the node that gives
it (the partition's outputs in graph order), so every row is compared and none is blamed. (By the
reference's position rule they paired with AOT outputs of other sizes, or silently with another
output of the same shape.)
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from numdiff import Inspector
from numdiff.culprits import CulpritReport

REALISTIC = Path(__file__).resolve().parent.parent / "fixtures" / "realistic"


def _report(name: str) -> CulpritReport:
    d = REALISTIC / name
    if not (d / "debug_buffer.bin").is_file():
        pytest.skip(f"{name} has no debug buffer")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Inspector(etdump_path=d / "etdump.etdp", etrecord=str(d / "etrecord.bin"),
                         debug_buffer_path=d / "debug_buffer.bin").find_culprits("SNR")


@pytest.mark.parametrize("name", ["real_llama", "real_lstm_gru", "real_mobilenet_xnn_int8",
                                  "real_quant_portable_int8", "real_dynamic"])
def test_clean_real_models_show_no_culprit(name: str) -> None:
    rep = _report(name)
    assert rep.culprits == [] and len(rep) > 0


def test_llama_xnnpack_multi_output_delegates_are_paired_by_their_outputs_and_not_blamed() -> None:
    rep = _report("real_llama_xnn")
    assert rep.culprits == []
    delegate_outputs = [r for r in rep.rows if r.match == "delegate_output"]
    assert len(delegate_outputs) >= 20
    assert all(r.verdict.value == "ok" for r in rep.rows)
    assert not any(r.note and "positions do not line up" in r.note for r in rep.rows)
    # the causal mask's -inf: the replay holds them at the same places, so the device did not make them
    assert rep.first_nonfinite is None and rep.model_nonfinite is not None and rep.model_nonfinite.inputs_nonfinite
    assert str(rep).splitlines()[0].endswith("0 culprits: every local error is within its expected noise; NaN/Inf "
                                             "from row 19 (alias) as the model computes them")
