"""Decode runs read as tokens, on oracle generations of one program (tests/fixtures/runs_decode)."""

from __future__ import annotations

import math

import pytest
import torch

from numdiff.runs_compare import argmax_margin, compare_runs
from tests.runs_compare.conftest import DECODE, DEEPER, decode_run

pytestmark = pytest.mark.filterwarnings("ignore")


@pytest.fixture(scope="module")
def decoded():  # type: ignore[no-untyped-def]
    return compare_runs(DEEPER / "etrecord.bin", {"base": decode_run(DECODE / "base"), "flip": decode_run(DECODE / "flip"),
                                                  "rope": decode_run(DEEPER)})


def test_tokens_per_step_are_the_runtime_argmax(decoded, decode_truth) -> None:  # type: ignore[no-untyped-def]
    truth = decode_truth["argmax_tokens"]
    for name, key in (("flip", "flip"), ("rope", "deeper_decode")):
        view = decoded.runs[name].tokens
        assert view is not None
        assert [s.token for s in view.steps] == truth[key]
        assert [s.base_token for s in view.steps] == truth["base"]


def test_first_token_that_differs_and_first_tensor_divergence(decoded, decode_truth) -> None:  # type: ignore[no-untyped-def]
    flip, rope = decoded.runs["flip"].tokens, decoded.runs["rope"].tokens
    assert flip.first_token_differs == decode_truth["first_token_step_differs"]["flip"] == 3
    assert flip.first_tensor_divergence == decode_truth["first_bad_step"]["flip"]
    assert flip.first_departs_from_reference == 3
    # rope's tensors part at step 4 (its rotary rows), but its tokens never differ
    assert rope.first_token_differs is None is decode_truth["first_token_step_differs"]["deeper_decode"]
    assert rope.first_tensor_divergence == decode_truth["first_bad_step"]["deeper_decode"] == 4
    assert decoded.runs["rope"].diverges  # the tensors do, beyond the tolerance


def test_the_first_divergent_op_is_the_planted_one_with_its_factor(decoded) -> None:  # type: ignore[no-untyped-def]
    for name, factor in (("flip", "3.00×"), ("rope", "1.50×")):
        first = decoded.runs[name].first_divergent
        assert first is not None and first.aot_ops == ("index_select",)
        assert first.fit.words is not None and factor in first.fit.words


def test_reference_on_the_same_inputs(decoded) -> None:  # type: ignore[no-untyped-def]
    """Before the plant every step agrees with the reference; from it, the reference on the same inputs
    keeps the base's token at step 3 (the flip's token is the twin's)."""
    steps = decoded.runs["flip"].tokens.steps
    for s in steps[:3]:
        assert s.reference_token == s.token and s.topk_agreement == 1.0 and s.kl_vs_reference < 1e-9
    assert steps[3].reference_token == steps[3].base_token != steps[3].token
    assert steps[3].kl_vs_reference > 1e-3
    assert decoded.runs["flip"].tokens.first_token_departs_from_reference == 3


def test_tokens_in_json(decoded) -> None:  # type: ignore[no-untyped-def]
    tokens = decoded.to_json()["runs"]["flip"]["tokens"]
    assert tokens["first_token_differs"] == 3 and tokens["k"] == 5 and len(tokens["steps"]) == 6


def test_without_step_inputs_there_is_no_reference_token() -> None:
    result = compare_runs(DEEPER / "etrecord.bin", {"base": decode_run(DECODE / "base")[:2],
                                                    "flip": decode_run(DECODE / "flip")[:2]}, decode_steps=True)
    view = result.runs["flip"].tokens
    assert view is not None and view.first_token_differs == 3
    assert all(s.reference_token is None and math.isnan(s.kl_vs_reference) for s in view.steps)


def test_argmax_margin() -> None:
    assert argmax_margin(torch.tensor([[0.0, 3.0, 1.0], [5.0, 1.0, 4.5]])) == (0, 0.5)  # the last position
    token, margin = argmax_margin(torch.tensor([2.0]))
    assert token == 0 and math.isnan(margin)


def test_decode_outputs_are_the_logits_of_the_step_shown(decoded) -> None:  # type: ignore[no-untyped-def]
    outputs = decoded.runs["flip"].outputs
    assert outputs is not None and outputs.source == "output op, step 3" and outputs.beyond_noise


def test_several_runs_without_decode_compare_run_0_and_say_so() -> None:
    result = compare_runs(DEEPER / "etrecord.bin", {"base": decode_run(DECODE / "base")[:2],
                                                    "flip": decode_run(DECODE / "flip")[:2]})
    run = result.runs["flip"]
    assert run.tokens is None and run.first_divergent is None  # step 0 agrees
    assert any(n.startswith("the ETDumps hold 6 runs that logged different values: run 0 compared") for n in run.notes)


def test_decode_runs_compare_without_the_inspectors_run_0_note() -> None:
    """A decode run's steps log different values by design; the Inspector's note that its drop-in
    debug_data holds run 0's concerns nothing compare_runs reads, so the user does not see it."""
    import warnings

    d, e = DECODE, DEEPER
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        compare_runs(e / "etrecord.bin", {name: (d / name / "etdump.etdp", d / name / "debug_buffer.bin",
                                                 d / name / "step_inputs.pt") for name in ("base", "flip")})
    assert not [w for w in seen if "differ from run 0" in str(w.message)]
