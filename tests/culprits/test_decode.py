"""Decode steps (``find_culprits(step_inputs=...)``) on a real oracle generation.

``tests/fixtures/deeper_decode`` (scripts/make_deeper_fixtures.py): a tiny Llama-style decoder
step with an explicit KV cache, run one token per run (2 prompt tokens, 4 decode steps); the
program that ran is a twin whose rotary cos/sin rows for positions >= 4 are scaled by 1.5, so
nothing is wrong before step 4.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from numdiff.cli import main
from numdiff.culprits import CulpritReport
from numdiff.culprits.decode import load_step_inputs
from numdiff.errors import InputError, UsageError
from numdiff.report import Analysis
from numdiff.analysis.storage import load_analysis
from tests.culprits.helpers import folder, inspector, truth

NAME = "deeper_decode"
STEPS = folder(NAME) / "step_inputs.pt"


@pytest.fixture(scope="module")
def report() -> CulpritReport:
    return inspector(NAME).find_culprits(step_inputs=str(STEPS))


def test_first_divergent_step_and_its_op_are_named(report: CulpritReport) -> None:
    known = truth(NAME)
    view = report.decode
    assert view is not None and view.with_step_inputs and len(view.steps) == known["runs"]
    first = view.first_divergent_step
    assert first is not None and first.step == known["first_bad_step"]
    assert sorted(op for ops in first.culprit_ops for op in ops) == sorted(known["planted_aot_ops"])
    assert all(not s.diverges for s in view.steps[: known["first_bad_step"]])
    assert all(s.diverges for s in view.steps[known["first_bad_step"]:])
    # the output is clean (float noise) before, tens of dB worse from the planted step on
    clean = [s.output_gap for s in view.steps[: known["first_bad_step"]]]
    bad = [g for _, g in view.growth]
    assert min(clean) > 100 and max(bad) < 60 and len(bad) == known["runs"] - known["first_bad_step"]
    assert f"first divergent step: {known['first_bad_step']}, culprit index_select" in str(report)


def test_per_op_aggregation_over_steps(report: CulpritReport) -> None:
    assert report.decode is not None
    frame = report.decode.per_op_dataframe()
    beyond = frame[frame["steps_beyond_noise"] > 0]
    assert sorted(o[0] for o in beyond["aot_ops"]) == sorted(truth(NAME)["planted_aot_ops"])
    assert set(beyond["first_step_beyond_noise"]) == {truth(NAME)["first_bad_step"]}
    assert (frame["steps_with_figure"] == truth(NAME)["runs"]).all()
    steps = report.decode.to_dataframe()
    assert list(steps["diverges"]) == [s >= truth(NAME)["first_bad_step"] for s in range(truth(NAME)["runs"])]
    assert report.runs and report.runs[4].culprits == report.decode.steps[4].culprits


def test_without_step_inputs_the_view_says_what_it_cannot_see() -> None:
    report = inspector(NAME).find_culprits(decode_steps=True)
    assert report.decode is not None and not report.decode.with_step_inputs
    # the planted op consumes a graph input (the position): unseen after step 0 without step inputs
    assert report.decode.first_divergent_step is None
    assert any("pass step_inputs" in n for n in report.decode.notes)
    assert all(math.isnan(s.output_gap) for s in report.decode.steps[1:])
    assert "0 row(s)" not in " ".join(s.note or "" for s in report.decode.steps)


def test_step_inputs_as_a_list_and_bad_step_inputs(tmp_path: Path) -> None:
    steps = load_step_inputs(str(STEPS))
    assert len(steps) == truth(NAME)["runs"] and all(len(s) == 4 for s in steps)
    with pytest.raises(UsageError, match=r"step_inputs has 2 entries but the ETDump holds 6 runs.*\n.*one input tuple per run"):
        inspector(NAME).find_culprits(step_inputs=steps[:2])
    with pytest.raises(UsageError, match="step_inputs must be a list with one input tuple per run.*not dict"):
        load_step_inputs({"a": 1})
    bad = tmp_path / "steps.pt"
    bad.write_bytes(b"not a torch file")
    with pytest.raises(InputError, match="steps.pt"):
        load_step_inputs(str(bad))
    torch.save({"x": torch.zeros(1)}, tmp_path / "dict.pt")
    with pytest.raises(InputError, match=r"the step inputs '.*dict\.pt' hold no list of input tuples.*not dict\n"
                                         r"Write it with torch\.save\(\[inputs_of_run_0"):
        load_step_inputs(str(tmp_path / "dict.pt"))  # the file is wrong, not an argument


def test_cli_and_saved_analysis(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    d = folder(NAME)
    args = ["culprits", "--etdump", str(d / "etdump.etdp"), "--etrecord", str(d / "etrecord.bin"),
            "--debug-buffer", str(d / "debug_buffer.bin"), "--step-inputs", str(STEPS), "--format", "json"]
    assert main(args) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["decode"]["first_divergent_step"] == truth(NAME)["first_bad_step"]
    analysis = Analysis.from_inspector(inspector(NAME), culprit_options={"step_inputs": str(STEPS)})
    analysis.save(tmp_path / "a.json")
    section = load_analysis(tmp_path / "a.json").culprits.decode
    assert section is not None and section.first_divergent_step == truth(NAME)["first_bad_step"]
    assert [s.diverges for s in section.steps].count(True) == truth(NAME)["runs"] - truth(NAME)["first_bad_step"]


def test_without_step_inputs_ops_reading_unlogged_inputs_get_no_verdict_after_step_0() -> None:
    """Issue 20, item 7: no claim the figures cannot support (before: embedding, both rotary
    index_selects and the two cache muls were `broken` in steps 1-5, at up to 1e30 noise units)."""
    report = inspector(NAME).find_culprits(decode_steps=True)
    assert report.decode is not None
    frame = report.decode.per_op_dataframe()
    assert (frame["steps_beyond_noise"] == 0).all(), frame[frame["steps_beyond_noise"] > 0]
    first = report.decode.per_step[0]
    readers = [r.index for r in first.rows if r.input_source != "runtime"]
    assert len(readers) == 7 and first.rows[0].op_type == "embedding" and 0 in readers
    for step in report.decode.per_step[1:]:
        for row in step.rows:
            if row.index in readers:
                assert row.verdict.value == "not-judged" and math.isnan(row.local_noise_units)
                assert "not judged: graph input(s)" in (row.note or "") and "pass step_inputs" in (row.note or "")
            else:
                assert row.verdict.value in ("ok", "expected-noise"), (row.node, row.verdict)
    assert (frame.loc[readers, "steps_with_figure"] == 1).all()
