"""Replayed inputs are exactly the producer's tensor (issue 20, item 1), on real oracle artifacts.

``culprit_clean_input_readers`` / ``culprit_input_readers`` (scripts/make_culprit_fixtures.py): a
portable fp32 model whose graph input ``x`` is read by a ``layer_norm`` (the runtime's
``native_layer_norm.out`` logs ``[out, mean, rstd]``) and by a residual ``add``. The runtime logs
no graph input there; the replay used to take "what the delegate logged" from the layer_norm's own
logged tensors (same shape as ``x``), and named two false ``broken`` culprits on the clean model.
"""

from __future__ import annotations

import pytest

from tests.culprits.helpers import inspector, report


@pytest.mark.parametrize("graph", [None, "edge_dialect_exported_program"])
def test_clean_model_reading_its_input_twice_has_no_culprit(graph: str | None) -> None:
    rep = inspector("culprit_clean_input_readers").find_culprits("SNR", reference_graph=graph)
    assert rep.culprits == [] and not [r for r in rep.rows if r.verdict.value == "broken"], str(rep)
    for row in rep.rows:
        assert row.local_gap > 120  # replay on the right tensors: float noise (before: 12 and 8 dB)
        assert "delegate" not in (row.note or "")  # no delegate in this program
    norm = rep.rows[0]
    assert norm.op_type in ("layer_norm", "native_layer_norm") and norm.input_source == "aot"
    assert norm.input_sources == ("x: representative input",)
    assert "taken from the representative inputs (input_source=aot" in (norm.note or "")
    add = next(r for r in rep.rows if r.op_type == "add")
    assert add.input_source == "runtime+aot"
    assert add.input_sources[-1] == "x: representative input"
    assert add.input_sources[0].endswith(f"runtime output (row {add.index - 1})")


def test_planted_layer_norm_reading_the_input_is_the_only_culprit() -> None:
    rep = report("culprit_input_readers")
    (culprit,) = rep.culprits
    assert culprit.aot_ops == ["layer_norm"] and culprit.local_gap == pytest.approx(culprit.accumulated_gap)
    add = next(r for r in rep.rows if r.op_type == "add")
    assert add.verdict.value == "ok" and not add.is_culprit


def test_a_delegate_argument_is_the_graph_input_it_was_given() -> None:
    rep = report("culprit_xnnpack")
    first = rep.rows[0]
    assert first.input_sources == ("x: argument 0 of the delegate call logged under handle (1, 2, 3)",)
    assert rep.rows[2].input_sources == ("cumsum: runtime output (row 1)",)
    assert "input_sources" in rep.to_dataframe().columns
