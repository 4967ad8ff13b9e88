"""Clean programs run on inputs near, but not equal to, the ETRecord's representative ones (real
oracle artifacts: scripts/make_culprit_fixtures.py, ``run_noise=0.01``: the representative input plus
1% noise, as a device that decodes or resizes its input slightly differently).

The runtime does not log graph inputs, so ops that read one are replayed on the representative
input; with a 1% different input they disagree with their replays by ~40 dB, thousands of noise
units. Before, both fixtures named `broken` culprits on models with nothing wrong.
"""

from __future__ import annotations

from numdiff.cli import main
from tests.culprits.helpers import FIXTURES, inspector


def test_several_ops_reading_one_input_all_disagreeing_are_not_judged() -> None:
    """layer_norm(x) and the residual add(h, x) both read x, both disagree, none agrees: one input the
    run did not share explains both; a fault would have to be in each."""
    rep = inspector("culprit_near_inputs").find_culprits("SNR")
    assert not rep.culprits and rep.inputs_in_doubt == ("x",) and not rep.inputs_assumed
    not_judged = {r.node: r for r in rep.rows if r.verdict.value == "not-judged"}
    assert set(not_judged) == {"layer_norm", "add"}
    for row in not_judged.values():
        assert row.local_noise_units > 1000  # far beyond noise: related, but not alone
        assert row.note.startswith("not judged: this op reads graph input(s) x, which the runtime did not log, and "
                                   "every one of the 2 ops that read x disagrees with its replay on the ETRecord's "
                                   "representative inputs and none agrees")
    assert str(rep).splitlines()[0].endswith("0 culprits: every judged local error is within its expected noise; "
                                             "2 rows not judged (inputs not logged)")


def test_the_run_s_own_inputs_judge_every_op() -> None:
    for name in ("culprit_near_inputs", "culprit_near_inputs_one_reader"):
        rep = inspector(name).find_culprits("SNR", step_inputs=FIXTURES / name / "run_inputs.pt")
        assert not rep.culprits and not rep.inputs_in_doubt and not rep.inputs_assumed, str(rep)
        assert all(r.verdict.value in ("ok", "expected-noise") for r in rep.rows), str(rep)
        # one run on its own inputs is no generation: no decode view, and the summary says nothing of steps
        assert rep.decode is None and "step" not in str(rep).splitlines()[0], str(rep).splitlines()[0]


def test_one_run_s_inputs_from_the_command_line_judge_it_without_a_decode_view(capsys) -> None:  # type: ignore[no-untyped-def]
    folder = FIXTURES / "culprit_near_inputs"
    files = ["--etdump", str(folder / "etdump.etdp"), "--etrecord", str(folder / "etrecord.bin"),
             "--debug-buffer", str(folder / "debug_buffer.bin")]
    assert main(["culprits", *files, "--step-inputs", str(folder / "run_inputs.pt"), "--width", "120"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == ("find_culprits (SNRComparator on exported_program): 5 rows, 0 culprits: every "
                                   "local error is within its expected noise"), out
    assert "decode steps" not in out and "not judged" not in out
    assert main(["culprits", *files, "--step-inputs", str(folder / "run_inputs.pt"), "--decode-steps"]) == 0
    assert "decode steps: 1 step" in capsys.readouterr().out.splitlines()  # asked for: the view of its one step


def test_the_one_op_reading_the_input_is_explained_by_an_input_change(capsys) -> None:  # type: ignore[no-untyped-def]
    """Only fc1 (8 features in, 16 out) reads x. A wrong fc1 would move its output out of reach of any
    input; here the input change that best explains it is ~1% of x and leaves noise: not judged."""
    rep = inspector("culprit_near_inputs_one_reader").find_culprits("SNR")
    assert not rep.culprits and rep.inputs_in_doubt == ("x",) and not rep.inputs_assumed
    (row,) = [r for r in rep.rows if r.verdict.value == "not-judged"]
    assert row.node == "linear" and row.note.startswith(
        "not judged: this op reads graph input(s) x, which the runtime did not log, and its output is what it "
        "computes from an input 1.0")
    folder = FIXTURES / "culprit_near_inputs_one_reader"
    assert main(["culprits", "--etdump", str(folder / "etdump.etdp"), "--etrecord", str(folder / "etrecord.bin"),
                 "--debug-buffer", str(folder / "debug_buffer.bin"), "--width", "120"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == ("find_culprits (SNRComparator on exported_program): 5 rows, 0 culprits: every judged local "
                      "error is within its expected noise; 1 row not judged (inputs not logged)")
    vouched = inspector("culprit_near_inputs_one_reader").find_culprits("SNR", inputs_are_representative=True)
    assert [r.node for r in vouched.culprits] == ["linear"] and not vouched.inputs_assumed  # the user vouches


def test_the_json_output_lists_the_inputs_in_doubt_and_assumed(capsys) -> None:  # type: ignore[no-untyped-def]
    import json

    for name, doubt, assumed in (("culprit_near_inputs", ["x"], []), ("culprit_near_inputs_one_reader", ["x"], [])):
        folder = FIXTURES / name
        main(["culprits", "--etdump", str(folder / "etdump.etdp"), "--etrecord", str(folder / "etrecord.bin"),
              "--debug-buffer", str(folder / "debug_buffer.bin"), "--format", "json"])
        doc = json.loads(capsys.readouterr().out)
        assert (doc["inputs_in_doubt"], doc["inputs_assumed"]) == (doubt, assumed)


def test_a_dynamic_quantization_s_parameters_do_not_confirm_the_input() -> None:
    """A portable choose_qparams of ReLU'd values computed from x keeps its zero point on any input: that
    agreement with its replay does not confirm x, so the ops that read x and disagree are not judged
    (held-out 2's DETR head on dynamic int8 XNNPACK, run on other inputs, named two culprits)."""
    rep = inspector("culprit_other_input_int8dyn_queries").find_culprits("SNR")
    assert not rep.culprits and rep.inputs_in_doubt == ("x",), str(rep)
    chooses = [r for r in rep.rows if r.op_type == "choose_qparams"]
    assert any(r.verdict.value == "ok" and r.input_sources == ("x: representative input",) for r in chooses)
    assert not any(r.verdict.beyond_noise for r in rep.rows if r.verdict.value != "not-judged"), str(rep)
    on_its_inputs = inspector("culprit_other_input_int8dyn_queries").find_culprits(
        "SNR", step_inputs=FIXTURES / "culprit_other_input_int8dyn_queries" / "run_inputs.pt")
    assert not on_its_inputs.culprits and not on_its_inputs.inputs_in_doubt, str(on_its_inputs)
    assert all(r.verdict.value in ("ok", "expected-noise") for r in on_its_inputs.rows), str(on_its_inputs)

