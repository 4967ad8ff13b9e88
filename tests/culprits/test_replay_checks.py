"""The replay is checked before it is believed (issue 20, item 2), on real oracle artifacts.

* ``realistic/real_llama_xnn``: two softmax rows are paired by position with a runtime value their
  replay cannot reproduce (-2.5 and -2.1 dB local) while the runtime matches the reference run
  from the start (143.6 and 142.1 dB accumulated): a replay problem, not a broken op.
* Files that do not belong together: the ETRecord of one model with the ETDump and debug buffer
  of another (same architecture, other weights), and another model's debug buffer.
  Every weighted op disagrees with its own replay from the first op on: no culprit is named.
"""

from __future__ import annotations

import math
import warnings
from pathlib import Path

import pytest

from numdiff import Inspector
from numdiff.cli import main
from numdiff.errors import DebugBufferError, MismatchedArtifactsError
from tests.culprits.helpers import FIXTURES


def _inspector(etrecord: Path, etdump: Path, debug_buffer: Path) -> Inspector:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Inspector(etdump_path=etdump, etrecord=str(etrecord), debug_buffer_path=debug_buffer)


def position_pairing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pair multi-output delegate calls by the reference's position rule (numdiff pairs them by the
    partition's outputs): on the XNNPACK llama some replays then take another output of the same
    shape as their input, a real replay fault for the safety net to catch."""
    import numdiff.align

    monkeypatch.setattr(numdiff.align, "delegate_output_ids", lambda graph_module, runtime_outputs: {})


def test_a_replay_that_disagrees_with_a_runtime_matching_the_reference_is_not_a_culprit(
        monkeypatch: pytest.MonkeyPatch) -> None:
    position_pairing(monkeypatch)
    d = FIXTURES / "realistic" / "real_llama_xnn"
    rep = _inspector(d / "etrecord.bin", d / "etdump.etdp", d / "debug_buffer.bin").find_culprits("SNR")
    problems = [r for r in rep.rows if r.verdict.value == "replay-mismatch"]
    softmax = [r for r in problems if r.op_type == "softmax"]
    assert len(softmax) == 2
    for row in softmax:
        assert row.local_gap < 0 and row.accumulated_gap > 140 and not row.is_culprit
        assert not row.verdict.beyond_noise
        assert (row.note or "").startswith("replay problem, not a culprit: the replay on the runtime's inputs is")
    for row in problems:
        assert "(inputs: " in (row.note or "") and not row.is_culprit
    assert not [r for r in rep.rows if r.verdict.value == "broken"] and rep.culprits == []
    assert f"{len(problems)} rows with a replay problem, not judged (verdict replay-mismatch)" in str(rep)


def test_another_models_etdump_is_mismatched_artifacts_not_culprits() -> None:
    other = FIXTURES / "culprit_clean_fp32"  # same MLP3 architecture, other weights
    ins = _inspector(FIXTURES / "culprit_mlp" / "etrecord.bin", other / "etdump.etdp", other / "debug_buffer.bin")
    with pytest.raises(MismatchedArtifactsError,
                       match=r"3 of 5 compared ops disagree with their own replay on the runtime's inputs from the "
                             r"first op on \(row 0 linear.*\nCheck that the debug buffer '.*culprit_clean_fp32/debug_buffer.bin' is the one "
                             r"the runtime wrote"):
        ins.find_culprits("SNR")


def test_another_models_debug_buffer_is_mismatched_artifacts(capsys: pytest.CaptureFixture[str]) -> None:
    # An ETRecord zip as the debug buffer used to reach this check; it is now refused when the buffer
    # is opened (tests/schema/test_debug_buffer_foreign.py). A real buffer of another model still does.
    d, other = FIXTURES / "culprit_mlp", FIXTURES / "mlp_fp32" / "debug_buffer.bin"
    with pytest.raises(MismatchedArtifactsError, match=r"5 of 5 compared ops disagree"):
        _inspector(d / "etrecord.bin", d / "etdump.etdp", other).find_culprits("SNR")
    code = main(["culprits", "--etdump", str(d / "etdump.etdp"), "--etrecord", str(d / "etrecord.bin"),
                 "--debug-buffer", str(other)])
    assert code == 3 and "do not come from the program the ETRecord describes" in capsys.readouterr().err
    with pytest.raises(DebugBufferError, match="is not a debug buffer: it is a zip archive"):
        _inspector(d / "etrecord.bin", d / "etdump.etdp", d / "etrecord.bin")


def test_planted_and_clean_fixtures_are_judged_as_before() -> None:
    from tests.culprits.helpers import KNOWN_TRUTH, report

    for name in KNOWN_TRUTH:
        rep = report(name)
        assert not [r for r in rep.rows if r.verdict.value == "replay-mismatch"], name
        assert all(math.isnan(r.local_noise_units) or r.verdict.value != "unmatched" for r in rep.rows)


def test_a_one_op_program_whose_logged_inputs_are_the_representative_ones_gets_a_culprit(tmp_path: Path) -> None:
    """A program of one compared op (one XNNPACK delegate) whose output is unrelated to its replay: wrong
    files or a wrong op? The delegate logged its input, and it is exactly the ETRecord's representative
    input, so the buffer is this program's run and the delegate is named. (The debug buffer is the zoo
    sample's, with the delegate's logged output negated in place.)"""
    run = Path(__file__).resolve().parent.parent / "fixtures" / "zoo" / "depthwise_separable" / "int8_xnnpack"
    clean = Inspector(etdump_path=run / "clean" / "etdump.etdp", etrecord=str(run / "etrecord.bin"),
                      debug_buffer_path=run / "clean" / "debug_buffer.bin").find_culprits("SNR")
    (row,) = clean.rows
    assert row.input_source == "runtime" and not clean.culprits
    data = (run / "clean" / "debug_buffer.bin").read_bytes()
    ins = Inspector(etdump_path=run / "clean" / "etdump.etdp", etrecord=str(run / "etrecord.bin"),
                    debug_buffer_path=run / "clean" / "debug_buffer.bin")
    (logged,) = [ev.debug_data[-1] for block in ins.event_blocks for ev in block.events if ev.name == "DELEGATE_CALL"]
    raw = logged.numpy().tobytes()
    assert data.count(raw) == 2  # the delegate's output, and the program's output event: both negated
    data = data.replace(raw, (-logged).numpy().tobytes())
    (tmp_path / "debug_buffer.bin").write_bytes(data)
    rep = Inspector(etdump_path=run / "clean" / "etdump.etdp", etrecord=str(run / "etrecord.bin"),
                    debug_buffer_path=tmp_path / "debug_buffer.bin").find_culprits("SNR")
    (culprit,) = rep.culprits
    assert culprit.runtime_ops == ["DELEGATE_CALL"] and culprit.input_source == "runtime"
    assert culprit.verdict.value == "broken"
