"""The zoo self-test's committed sample (tests/fixtures/zoo/, written by ``scripts/zoo.py --write-sample``
from the zoo that ``scripts/make_zoo.py`` generates with ExecuTorch 1.5.1), scored by the same code as the
full zoo: every clean control is a control (no culprit, no broken row, not refused) and every planted twin
is named exactly unless the scorer explains why nothing could see it. The full zoo: ``scripts/zoo.py``.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import pytest

from tests.dev_scripts import load_script

SAMPLE = Path(__file__).resolve().parent.parent / "fixtures" / "zoo"
zoo = load_script("scripts/zoo.py")


@functools.lru_cache(maxsize=None)
def scores() -> dict[str, Any]:
    return {f"{s.arch}/{s.backend}/{s.variant}": s for s in zoo.score_zoo(SAMPLE)}


def test_the_sample_is_the_one_the_script_names() -> None:
    named = {f"{a}/{b}/{v}" for a, b, variants in zoo.SAMPLE for v in variants}
    assert set(scores()) == named
    assert len({a for a, _, _ in zoo.SAMPLE}) >= 6 and len({b for _, b, _ in zoo.SAMPLE}) == 4


@pytest.mark.parametrize("case", sorted(f"{a}/{b}/clean" for a, b, v in zoo.SAMPLE if "clean" in v))
def test_clean_controls_get_no_false_verdict(case: str) -> None:
    score = scores()[case]
    assert (score.kind, score.outcome) == ("clean", "ok"), score.detail


@pytest.mark.parametrize("case", sorted(f"{a}/{b}/{t}" for a, b, v in zoo.SAMPLE for t in v if t != "clean"))
def test_planted_twins_are_named_exactly_or_explained(case: str) -> None:
    score = scores()[case]
    assert score.kind == "planted"
    if case == "depthwise_separable/int8_xnnpack/twin0":  # a 0.3% weight change rounded away by int8
        assert score.outcome == "missed-explained" and score.detail.startswith("invisible:")
    else:
        assert score.outcome == "exact", f"{score.outcome}: {score.detail} {score.culprits}"


def test_the_table_reports_every_outcome_and_the_explained_miss() -> None:
    text = zoo.table(list(scores().values()))
    assert "all                7     7              0           0        0" in text  # 7 controls, all ok
    assert "all            all         8      7        0       0          1          0   100.0%" in text
    assert "Wrong or incomplete verdicts" not in text
    assert "depthwise_separable/int8_xnnpack/twin0 [missed-explained]" in text


def _report(case: str) -> Any:
    return zoo._run(SAMPLE / case).report


def test_a_bad_conv_inside_an_int8_xnnpack_delegate_is_named_by_its_compute_ops() -> None:
    truth = json.loads((SAMPLE / "depthwise_separable/int8_xnnpack/twin2/truth.json").read_text())
    (culprit,) = _report("depthwise_separable/int8_xnnpack/twin2").culprits
    assert culprit.runtime_ops == ["DELEGATE_CALL"] and set(truth["closure"]) <= set(culprit.aot_ops)
    assert culprit.module_path == "stem, dw, pw, head"  # not the partition's last dequantize's module
    assert culprit.delegate is not None and culprit.delegate.startswith("XnnpackBackend #1: conv2d (stem, ")
    assert "conv2d_2 (pw, _zoo_models.py:" in culprit.delegate and "F.relu(self.pw(y))" in culprit.delegate


def test_delegate_outputs_of_one_shape_pair_with_their_own_nodes() -> None:
    rep = _report("attention_prenorm/xnnpack/clean")
    outputs = [r for r in rep.rows if r.match == "delegate_output"]
    assert {r.node for r in outputs} >= {"transpose", "transpose_3"}  # q and k transposed, both (1, 2, 6, 8)-sized
    assert all(r.verdict.value == "ok" for r in rep.rows)


def test_a_changed_int8_weight_read_by_a_dequantize_is_judged_without_rounding_noise() -> None:
    rep = _report("conv_bn/int8_portable/twin1")
    (culprit,) = rep.culprits
    assert culprit.op_type == "dequantize_per_tensor" and "floating-point noise only" in culprit.noise
    clean = _report("conv_bn/int8_portable/clean")
    same = next(r for r in clean.rows if r.aot_ops == culprit.aot_ops)
    assert same.verdict.value == "ok" and same.local_noise_units == 0
