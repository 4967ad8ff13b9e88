"""The zoo self-test's committed sample (tests/fixtures/zoo/, written by ``scripts/zoo.py --write-sample``
from the zoo that ``scripts/make_zoo.py`` generates with ExecuTorch 1.5.1), scored by the same code as the
full zoo: every clean control is a control (no culprit, no broken row, not refused) and every planted twin
is named exactly unless the scorer explains why nothing could see it. The full zoo: ``scripts/zoo.py``.
"""

from __future__ import annotations

import functools
import json
import re
import warnings
from pathlib import Path
from typing import Any

import pytest

from numdiff import Inspector
from numdiff.errors import MismatchedArtifactsError

from tests.dev_scripts import load_script

SAMPLE = Path(__file__).resolve().parent.parent / "fixtures" / "zoo"
zoo = load_script("scripts/zoo.py")


@functools.lru_cache(maxsize=None)
def crossed_pairs() -> tuple[Any, ...]:
    """Every sample run with other files (computed once: two tests read it)."""
    return tuple(zoo.crossed_pairs(SAMPLE, 20))


@functools.lru_cache(maxsize=None)
def scores() -> dict[str, Any]:
    return {f"{s.arch}/{s.backend}/{s.variant}": s for s in zoo.score_zoo(SAMPLE)}


def test_the_sample_is_the_one_the_script_names() -> None:
    named = {f"{a}/{b}/{v}" for a, b, variants in zoo.SAMPLE for v in variants}
    assert set(scores()) == named
    assert len({a for a, _, _ in zoo.SAMPLE}) >= 6 and len({b for _, b, _ in zoo.SAMPLE}) == len(zoo.BACKENDS)


@pytest.mark.parametrize("case", sorted(f"{a}/{b}/clean" for a, b, v in zoo.SAMPLE if "clean" in v))
def test_clean_controls_get_no_false_verdict(case: str) -> None:
    score = scores()[case]
    if case == "manual_rnn/int8_xnnpack/clean":  # the runtime itself is wrong: not a control
        assert (score.kind, score.outcome) == ("clean", "runtime-fault"), score.detail
        assert score.detail.startswith("the runtime's program output is -7.") and "DELEGATE_CALL" not in score.detail
        assert len(score.culprits) == 1
    else:
        assert (score.kind, score.outcome) == ("clean", "ok"), score.detail


@pytest.mark.parametrize("case", sorted(f"{a}/{b}/{t}" for a, b, v in zoo.SAMPLE for t in v if t.startswith("twin")))
def test_planted_twins_are_named_exactly_or_explained(case: str) -> None:
    score = scores()[case]
    if case == "manual_rnn/int8_xnnpack/twin0":  # a twin of a program the runtime already computes wrongly
        assert (score.kind, score.outcome) == ("dropped", "runtime-fault-control"), score
        return
    assert score.kind == "planted"
    if case == "depthwise_separable/int8_xnnpack/twin0":  # a 0.3% weight change rounded away by int8
        assert score.outcome == "no-effect" and not score.culprits
        assert score.detail.startswith("every value the runtime logged, the outputs included, equals the control's")
    else:
        assert score.outcome == "exact", f"{score.outcome}: {score.detail} {score.culprits}"


@pytest.mark.parametrize("case", sorted(f"{a}/{b}/{t}" for a, b, v in zoo.SAMPLE for t in v if t == "other_input"))
def test_clean_programs_on_other_inputs_get_no_false_verdict(case: str) -> None:
    """The clean program run on another draw of inputs than the ETRecord's representative ones."""
    score = scores()[case]
    assert score.kind == "other-input" and score.outcome in ("ok", "cannot-judge"), score.detail


def test_an_op_reading_another_input_than_the_representative_one_is_not_judged() -> None:
    rep = _report("conv_bn/int8_portable/other_input")
    assert not rep.culprits
    (row,) = [r for r in rep.rows if r.verdict.value == "not-judged"]
    assert row.input_source == "aot" and row.note.startswith("not judged: this op reads graph input(s) x, which the "
                                                             "runtime did not log, and its output is unrelated")
    assert all(r.verdict.value in ("ok", "expected-noise") for r in rep.rows if r is not row)
    # the same run with its own inputs: every op judged, none wrong
    run = SAMPLE / "conv_bn/int8_portable/other_input"
    own = Inspector(etdump_path=run / "etdump.etdp", etrecord=str(run.parent / "etrecord.bin"),
                    debug_buffer_path=run / "debug_buffer.bin").find_culprits("SNR", step_inputs=run / "run_inputs.pt")
    assert not own.culprits and all(r.verdict.value in ("ok", "expected-noise") for r in own.rows)


def test_a_run_whose_every_op_reads_another_input_is_refused_naming_both_causes() -> None:
    run = SAMPLE / "input_fanout/xnnpack/other_input"
    files = {"etdump_path": run / "etdump.etdp", "etrecord": str(run.parent / "etrecord.bin"),
             "debug_buffer_path": run / "debug_buffer.bin"}
    with pytest.raises(MismatchedArtifactsError) as info:
        Inspector(**files).find_culprits("SNR")
    text = str(info.value)
    assert "no op could be judged: every op that computes from its inputs reads graph input(s) x" in text
    assert "The run used other inputs than the representative ones (pass the run's own inputs: step_inputs=[inputs], " \
           "CLI --step-inputs), or the debug buffer" in text
    own = Inspector(**files).find_culprits("SNR", step_inputs=run / "run_inputs.pt")
    assert not own.culprits and all(r.verdict.value in ("ok", "expected-noise") for r in own.rows)


def test_a_delegate_input_logged_with_scalar_constants_is_found_by_shape_and_dtype() -> None:
    rep = _report("resnet_tiny/int8dyn_xnnpack/other_input")
    (row,) = rep.rows
    assert row.input_source == "runtime" and row.verdict.value == "ok"
    assert "(the only logged input of its shape and dtype; the call logged 1 inputs" in row.input_sources[0]


def test_a_culprit_no_nearby_input_explains_rests_on_no_assumption() -> None:
    """temperature_softmax portable, twin1: a changed weight in the only op that reads the graph input
    (a linear to more features than it reads). No input near the representative one gives what the
    runtime logged (the closest leaves thousands of noise units), so the op is named, and the verdict
    does not assume the run used the representative inputs."""
    rep = _report("temperature_softmax/portable/twin1")
    (culprit,) = rep.culprits
    assert culprit.index == 0 and culprit.input_source == "aot" and not rep.inputs_assumed
    assert culprit.note.startswith("no input near the representative x explains its output (the closest leaves ")
    assert "noise units): the op computes something else" in culprit.note


def test_dynamic_quantization_is_replayed_as_xnnpack_computes_it_and_small_changes_are_named() -> None:
    """deep_mlp (nine dynamically quantized linears in one XNNPACK delegate) and upsample_decoder (a
    pointwise and a 3x3 dynamically quantized conv): replayed on XNNPACK's own grids, the clean delegates
    match their replay to float32 rounding (the graph's per-tensor grid left 55 and 43 dB), so a 3% and a
    0.3% weight change that hid below that noise are named."""
    clean = _report("deep_mlp/int8dyn_xnnpack/clean")
    assert not clean.culprits
    assert all("dynamic quantization(s) replayed as XNNPACK computes them" in r.noise and "per-tensor grid" not in r.noise
               and "XnnpackBackend limits" in r.noise for r in clean.rows)
    assert min(r.local_gap for r in clean.rows) > 120 and max(r.local_noise_units for r in clean.rows) < 1
    convs = _report("upsample_decoder/int8dyn_xnnpack/clean")
    (row,) = [r for r in convs.rows if "replayed as XNNPACK" in r.noise]
    assert not convs.culprits and row.noise.startswith("K=85, 2 dynamic quantization(s)") and row.local_gap > 120
    for case in ("deep_mlp/int8dyn_xnnpack/twin0", "deep_mlp/int8dyn_xnnpack/twin1", "upsample_decoder/int8dyn_xnnpack/twin0"):
        assert scores()[case].outcome == "exact", (case, scores()[case].detail)


def test_the_table_reports_every_outcome_and_the_explained_miss() -> None:
    text = zoo.table(list(scores().values()))
    assert "all                18    17              0           0        0            1/1" in text  # 1 runtime fault
    assert "all             all        14     14        0       0          0          0          0   100.0%" in text
    assert "int8dyn_xnnpack all         3      3        0       0          0          0          0   100.0%" in text
    assert "int8_xnnpack    small       1      1        0       0          0          0          0   100.0%" in text
    assert "no effect (not counted above): 1 twin(s)" in text and "a culprit named in one is false: 0" in text
    assert "all                 3     2             1              0           0        0              0" in text
    assert "Wrong or incomplete verdicts" not in text
    controls = [s for s in scores().values() if s.outcome == "ok" and s.kind == "clean"]
    assert len(controls) == 17 and "largest local error on the 17 controls:" in text
    assert "all                 2     1             0                1              0           0        0" in text
    assert max(s.noise_float for s in controls) < 1 and max(s.noise_quantized for s in controls) < 1  # all "ok"
    assert "depthwise_separable/int8_xnnpack/twin0 [no-effect]" in text


def _report(case: str) -> Any:
    return zoo._run(SAMPLE / case).report


def test_a_one_percent_scale_change_inside_the_noise_units_is_named_by_the_rounding_check() -> None:
    """autoencoder int8 portable, twin0: a quantize scale 1% larger. 2.3 noise units is within the
    quantized allowance (sqrt(12)); the rounding check sees elements a step off far from any tie."""
    truth = json.loads((SAMPLE / "autoencoder/int8_portable/twin0/truth.json").read_text())
    (culprit,) = _report("autoencoder/int8_portable/twin0").culprits
    assert set(truth["closure"]) & set(culprit.aot_ops)
    assert culprit.verdict.value == "suspicious" and 1 < culprit.local_noise_units < 12**0.5
    assert culprit.note.startswith("not rounding: 11 of 24 elements are a step or more from the replay")
    clean = _report("autoencoder/int8_portable/clean")
    assert not clean.culprits and not any("not rounding" in (r.note or "") for r in clean.rows)


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


def test_files_of_another_model_are_refused_with_a_true_hint() -> None:
    """Each sample run with another sample model's ETRecord, and with its debug buffer: never an answer."""
    crossed = [c for c in crossed_pairs() if c.swapped != "lowering"]
    clean_runs = sum("clean" in v for _, _, v in zoo.SAMPLE)
    assert len(crossed) == 2 * clean_runs and all(c.outcome == "refused" for c in crossed), zoo.crossed_table(crossed)
    said = {(c.run, c.swapped): c.detail for c in crossed}
    everything = "\n".join(said.values())
    # most kernel and delegate calls are instructions the ETRecord does not have
    assert re.search(r"\d+ of the \d+ kernel and delegate calls the runtime ran are instructions the ETRecord's "
                     "debug_handle_map does not have", everything)
    # a debug buffer too small for what the ETDump says it holds
    assert "DebugBufferError" in everything and "past the end of the" in everything
    # replays unrelated to what the runtime logged, from the first op on
    assert re.search(r"\d+ of \d+ compared ops disagree with their own replay", everything)

    def refused(run: str, etrecord: str, buffer: str | None = None) -> str:
        folder = SAMPLE / run / "clean"
        with pytest.raises(MismatchedArtifactsError) as info, warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the other ETRecord's delegate map lacks this run's entries
            Inspector(etdump_path=folder / "etdump.etdp", etrecord=str(SAMPLE / etrecord / "etrecord.bin"),
                      debug_buffer_path=(SAMPLE / buffer / "clean" if buffer else folder) / "debug_buffer.bin",
                      ).find_culprits("SNR")
        return str(info.value)

    # a one-delegate program whose only instruction id the other ETRecord also has, as a kernel
    assert "do not describe the same program: the runtime called a delegate at instruction 0, where the ETRecord's " \
           "program runs a kernel" in refused("depthwise_separable/int8_xnnpack", "attention_prenorm/xnnpack")
    # the other program's graph pairs, but every tensor has another size
    assert "none of the 2 aligned ops could be compared: the runtime's tensors have other sizes" \
        in refused("input_fanout/xnnpack", "attention_prenorm/xnnpack")
    # a program of one compared op, unrelated to its replay: not a culprit
    assert "1 of 1 compared ops disagree with their own replay" in refused(
        "depthwise_separable/int8_xnnpack", "depthwise_separable/int8_xnnpack", buffer="attention_prenorm/xnnpack")
    assert not any("holds no intermediate outputs" in d for d in said.values())


def test_a_clean_export_the_runtime_computes_wrongly_is_blamed_on_its_delegate() -> None:
    """The zoo's unrolled RNN, PT2E int8 on XNNPACK: the runtime's output is -7 dB from the ETRecord's
    reference output on the same input (checked with ExecuTorch's own Inspector when it was found), so
    the delegate is a real culprit, named by its compute ops."""
    run = zoo._run(SAMPLE / "manual_rnn/int8_xnnpack/clean")
    assert zoo.output_snr_db(run) < 0
    (culprit,) = run.report.culprits
    assert culprit.runtime_ops == ["DELEGATE_CALL"] and culprit.local_gap < 0 and culprit.verdict.value == "suspicious"
    assert culprit.module_path == "ih, hh, out" and culprit.delegate and culprit.delegate.startswith("XnnpackBackend #1:")


def test_the_cli_says_which_ops_it_cannot_judge_and_why(capsys: pytest.CaptureFixture[str]) -> None:
    from numdiff.cli import main

    run = SAMPLE / "conv_bn/int8_portable/other_input"
    assert main(["culprits", "--etdump", str(run / "etdump.etdp"), "--etrecord", str(run.parent / "etrecord.bin"),
                 "--debug-buffer", str(run / "debug_buffer.bin"), "--width", "100"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == ("find_culprits (SNRComparator on exported_program): 10 rows, 0 culprits: every judged local "
                        "error is within its expected noise; 1 row not judged (inputs not logged)")
    after = lines[lines.index("") + 1:]  # the table, then its sentences wrapped to the width
    after = after[after.index("") + 1:]
    assert all(len(line) <= 100 for line in after)
    prose = " ".join(line.strip() for line in after)
    assert after[0].startswith("graph input(s) x: no op that reads them agrees with its replay")
    assert "the ETRecord's representative inputs (one is unrelated to it, several disagree, or a slightly different " \
           "input explains it)" in prose
    assert prose.endswith("worst accumulated row: quantize_per_tensor, dequantize_per_tensor_3 (-2.944), verdict "
                          "not-judged: its graph inputs may not be the run's, so nothing is said about it (see its note)")


def test_the_same_model_lowered_another_way_is_refused() -> None:
    """A user who quantized (or re-lowered) a model and kept the old ETRecord: the programs share
    instruction ids, op names and often debug handles, and the replay differs by about the
    quantization noise, so each delegate looked like a culprit (or, for dynamic against float, all
    looked fine). Every sample run with its own architecture's ETRecord for another backend is refused."""
    lowering = [c for c in crossed_pairs() if c.swapped == "lowering"]
    assert len(lowering) == 18 and all(c.outcome == "refused" for c in lowering), zoo.crossed_table(lowering)
    said = {(c.run, c.other): c.detail for c in lowering}
    # XNNPACK names the operators it ran with their data types: F32 against QS8 against QDU8
    assert said[("conv_bn/xnnpack", "conv_bn/int8_xnnpack")].endswith(
        "the ETRecord's delegate XnnpackBackend #1 computes in int8, quantized ahead of time, but the runtime ran it in "
        "floating point (Convolution (NHWC, F32) IGEMM): the ETRecord describes another program than the one that ran "
        "(e.g. the float model's, or one quantized another way)")
    assert "computes in floating point, but the runtime ran it in int8, quantized ahead of time (Convolution (NHWC, " \
           "QS8) IGEMM)" in said[("conv_bn/int8_xnnpack", "conv_bn/xnnpack")]
    assert "computes in int8, quantized ahead of time, but the runtime ran it in int8, quantized at run time (Fully " \
           "Connected (NC, QDU8, F32, QC8W) GEMM)" in said[("deep_mlp/int8dyn_xnnpack", "deep_mlp/int8_xnnpack")]
    # a delegate call where the other lowering runs a kernel
    assert "do not describe the same program: the runtime called a delegate at instruction 0, where the ETRecord's " \
           "program runs a kernel" in said[("conv_bn/xnnpack", "conv_bn/int8_portable")]
    folder = SAMPLE / "conv_bn/xnnpack/clean"
    with pytest.raises(MismatchedArtifactsError, match=r"Pass the ETRecord written when this exact program \(\.pte\)"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            Inspector(etdump_path=folder / "etdump.etdp", etrecord=str(SAMPLE / "conv_bn/int8_xnnpack/etrecord.bin"),
                      debug_buffer_path=folder / "debug_buffer.bin").find_culprits("SNR")


def test_an_input_change_that_explains_the_only_reader_is_found() -> None:
    """conv_bn portable, run on the representative input plus 1% noise: the conv (3 channels in, 16 out)
    is the only op that reads x and disagrees by 40 dB. The input change that best explains it is 1%
    of the input and leaves noise: the run's input differs, the conv is not judged."""
    assert (scores()["conv_bn/portable/near_input"].kind, scores()["conv_bn/portable/near_input"].outcome) == \
        ("near-input", "ok")
    rep = _report("conv_bn/portable/near_input")
    (row,) = [r for r in rep.rows if r.verdict.value == "not-judged"]
    assert not rep.culprits and rep.inputs_in_doubt == ("x",) and row.aot_ops == ["conv2d"]
    change = re.search(r"its output is what it computes from an input ([0-9.]+)% \(rms\) away from the "
                       r"representative one \(the closest leaves ([0-9.e+-]+) noise units\)", row.note or "")
    assert change and 0.8 < float(change.group(1)) < 1.3 and float(change.group(2)) < 1, row.note
    run = SAMPLE / "conv_bn/portable/near_input"
    own = Inspector(etdump_path=run / "etdump.etdp", etrecord=str(run.parent / "etrecord.bin"),
                    debug_buffer_path=run / "debug_buffer.bin").find_culprits("SNR", step_inputs=run / "run_inputs.pt")
    assert not own.culprits and not own.inputs_in_doubt  # the run's own inputs settle it


def test_a_reader_no_input_change_can_be_told_from_a_fault_says_what_it_assumes() -> None:
    """input_fanout on int8 portable kernels, run on its input plus 1% noise: the float layer_norm
    reading x maps it to as many values (any output is some input's), so the fit cannot tell; the
    verdict stands and the report says it assumes the representative input."""
    score = scores()["input_fanout/int8_portable/near_input"]
    assert (score.kind, score.outcome) == ("near-input", "assumed"), score
    rep = _report("input_fanout/int8_portable/near_input")
    assert rep.inputs_assumed == ("x",) and str(rep).splitlines()[0].endswith("assuming the run's x = the "
                                                                              "representative one(s)")


def test_a_quantize_that_agrees_confirms_the_input_only_for_quantized_readers() -> None:
    """input_fanout on int8 portable kernels, run on the input plus 1% noise: the quantize of x agrees
    with its replay (1% is a fraction of its step), the float layer_norm reading x is 40 dB off.
    Before, the quantize confirmed x and the layer_norm was a plain broken culprit."""
    rep = _report("input_fanout/int8_portable/near_input")
    (culprit,) = rep.culprits
    assert culprit.aot_ops == ["layer_norm"] and culprit.note.startswith("judged on the representative inputs")
    quantizes = [r for r in rep.rows if "quantize_per_tensor" in r.aot_ops and "x: representative input"
                 in r.input_sources]
    assert quantizes and all(r.verdict.value in ("ok", "expected-noise") for r in quantizes)


def test_the_held_out_family_is_listed_on_its_own_and_shares_no_name(capsys: pytest.CaptureFixture[str],
                                                                      tmp_path: Path) -> None:
    """``make_zoo.py --list --heldout`` lists the held-out architectures (family ``heldout``), which are
    neither in the default zoo nor among the real-size ones: numdiff is measured on them, never tuned."""
    make_zoo = load_script("scripts/make_zoo.py")
    models = make_zoo.zm
    assert make_zoo.main(["--list", "--heldout", "--out", str(tmp_path)]) == 0
    listed = [line.split("\t") for line in capsys.readouterr().out.splitlines()]
    assert listed == [[a.name, "heldout"] for a in models.HELDOUT] and len(listed) >= 8
    held = {a.name for a in models.HELDOUT}
    assert not held & {a.name for a in models.ARCHS + models.REALSIZE}
    assert make_zoo.main(["--list", "--out", str(tmp_path)]) == 0
    assert not held & {line.split("\t")[0] for line in capsys.readouterr().out.splitlines()}
    assert not list(tmp_path.iterdir())  # listing writes nothing
