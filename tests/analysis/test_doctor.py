"""numdiff doctor: findings on matching, partial and mismatched artifacts."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from numdiff.cli import main
from numdiff.cli._exit import BAD_INPUT
from numdiff.examples import example_files
from numdiff.analysis.doctor import diagnose_files
from tests.conftest import FIXTURES


def _by_check(findings: list) -> dict:  # type: ignore[type-arg]
    return {f.check: f for f in findings}


def test_complete_example_is_healthy() -> None:
    f = example_files()
    found = _by_check(diagnose_files(f.etdump, f.etrecord, f.debug_buffer))
    assert {c: x.level for c, x in found.items() if x.level != "ok"} == {}
    assert found["intermediate outputs"].detail == "3 of 3 runtime ops logged their outputs (100%)"
    assert "XnnpackBackend" in found["delegate map"].detail


def test_missing_files_say_what_to_change() -> None:
    found = _by_check(diagnose_files(example_files().etdump))
    assert found["ETRecord"].level == "warn" and "generate_etrecord=True" in found["ETRecord"].fix
    assert found["intermediate outputs"].level == "warn"
    assert "kIntermediateOutputs" in found["intermediate outputs"].fix and "debug_buffer_size" in found["intermediate outputs"].fix


def test_etrecord_of_another_model_fails() -> None:
    found = diagnose_files(example_files().etdump, FIXTURES / "xnnpack" / "etrecord.bin")
    failed = [f for f in found if f.level == "fail"]
    assert failed and all("ETRecord" in f.detail or "ETRecord" in f.fix for f in failed)


def test_unreadable_etdump_is_a_finding(tmp_path: Path) -> None:
    bad = tmp_path / "bad.etdp"
    bad.write_bytes(b"\x00" * 7)
    [finding] = diagnose_files(bad)
    assert finding.level == "fail" and finding.check == "ETDumpError" and "bad.etdp" in finding.detail


def test_cli_exit_status(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    f = example_files()
    assert main(["doctor", "--etdump", str(f.etdump), "--etrecord", str(f.etrecord), "--debug-buffer", str(f.debug_buffer)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("OK    runs:") and "note: to compare ops inside a delegate" in out
    assert main(["doctor", "--etdump", str(f.etdump), "--etrecord", str(FIXTURES / "xnnpack" / "etrecord.bin"),
                 "--width", "1000"]) == BAD_INPUT
    out = capsys.readouterr().out  # another program's ETRecord: refused when the files are opened
    assert out.startswith("FAIL  MismatchedArtifactsError: ETRecord and ETDump") and "do not describe the same model" in out
    assert "kernel and delegate calls the runtime ran are instructions the ETRecord's debug_handle_map does not have" in out
    bad = tmp_path / "bad.etdp"
    bad.write_bytes(b"\x00" * 7)
    assert main(["doctor", "--etdump", str(bad)]) == BAD_INPUT
    assert "FAIL  ETDumpError: " in capsys.readouterr().out


# Issue 20, item 3: files that do not belong are a failure, with the file to check (real fixtures).
_MLP = FIXTURES / "culprit_mlp"


@pytest.mark.parametrize(("buffer", "check", "says"), [
    (_MLP / "etrecord.bin", "DebugBufferError", "is not a debug buffer: it is a zip archive"),
    (_MLP / "etdump.etdp", "DebugBufferError", "is not a debug buffer: it is an ETDump"),
    (FIXTURES / "culprit_clean_fp32" / "debug_buffer.bin", "files belong together",
     "disagree with their own replay on the runtime's inputs from the first op on"),
    (FIXTURES / "mlp_fp32" / "debug_buffer.bin", "files belong together", "5 of 5 compared ops disagree"),
], ids=["etrecord-zip", "etdump", "same-architecture-other-weights", "other-model"])
def test_a_debug_buffer_that_does_not_belong_fails(buffer: Path, check: str, says: str,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    found = diagnose_files(_MLP / "etdump.etdp", _MLP / "etrecord.bin", buffer)
    failed = [f for f in found if f.level == "fail"]
    assert [f.check for f in failed] == [check] and says in failed[0].detail
    assert "debug buffer" in failed[0].fix
    # a refused file or files that do not belong together are bad input: 3, as every command exits on them
    assert main(["doctor", "--etdump", str(_MLP / "etdump.etdp"), "--etrecord", str(_MLP / "etrecord.bin"),
                 "--debug-buffer", str(buffer)]) == BAD_INPUT
    assert failed[0].bad_input
    assert f"FAIL  {check}: " in capsys.readouterr().out


def test_the_files_that_belong_together_pass_the_replay_check() -> None:
    found = _by_check(diagnose_files(_MLP / "etdump.etdp", _MLP / "etrecord.bin", _MLP / "debug_buffer.bin"))
    assert found["files belong together"].level == "ok"
    assert {c: x.level for c, x in found.items() if x.level == "fail"} == {}
    assert "run's inputs" not in found  # the run used the representative inputs: nothing to say


def test_a_run_that_may_have_used_other_inputs_is_warned_about() -> None:
    """The oracle fixture culprit_near_inputs: the device ran its input plus 1% noise."""
    near = FIXTURES / "culprit_near_inputs"
    found = _by_check(diagnose_files(near / "etdump.etdp", near / "etrecord.bin", near / "debug_buffer.bin"))
    assert found["files belong together"].level == "ok"
    inputs = found["run's inputs"]
    assert inputs.level == "warn" and inputs.detail.startswith("graph input(s) x may not be the ETRecord's "
                                                               "representative inputs")
    assert "--step-inputs" in inputs.fix and "--inputs-are-representative" in inputs.fix


def test_the_run_s_own_inputs_clear_the_warning_and_a_wrong_file_fails(tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    near = FIXTURES / "culprit_near_inputs"
    files = ["--etdump", str(near / "etdump.etdp"), "--etrecord", str(near / "etrecord.bin"),
             "--debug-buffer", str(near / "debug_buffer.bin")]
    assert main(["doctor", *files, "--step-inputs", str(near / "run_inputs.pt")]) == 0
    out = capsys.readouterr().out
    assert "OK    files belong together" in out and "run's inputs" not in out
    torch.save([(torch.ones(3),)], tmp_path / "wrong.pt")
    assert main(["doctor", *files, "--step-inputs", str(tmp_path / "wrong.pt"), "--width", "400"]) == 3
    out = capsys.readouterr().out
    assert "FAIL  InputError: the step inputs" in out and "wrong.pt" in out and "in run 0, input 0 is" in out


# Timing: a duration of zero is explained by the clock that timed it, or it is suspicious; the finding says which.

def _timing(*files: Path) -> object:
    return _by_check(diagnose_files(*files))["timing"]


def test_zero_durations_inside_a_delegate_with_a_coarse_clock_are_ok_and_explained() -> None:
    """The example: 5 of its 10 timed events read 0, all XNNPACK ops whose other durations are whole µs
    (XNNPACK's profiler counts in µs): they took less than a µs. OK, with that precise statement."""
    f = example_files()
    finding = _timing(f.etdump, f.etrecord)
    assert (finding.level, finding.detail, finding.fix) == (
        "ok", "5 of 10 timed events have a duration above zero; at zero: 5 inside XnnpackBackend, whose other "
        "durations are all whole multiples of 1 µs: a clock of that step, so these ops took less than one step", "")


def test_most_durations_at_zero_warn_and_say_when_the_step_cannot_be_told() -> None:
    d = FIXTURES / "culprit_clean_int8"  # 5 of 7 at zero; the delegate's only nonzero duration is 1 µs
    finding = _timing(d / "etdump.etdp")
    assert finding.level == "warn"
    assert finding.detail == ("2 of 7 timed events have a duration above zero; at zero: 5 inside a delegate (the step "
                              "of their clock cannot be told from 1 nonzero duration)")
    assert finding.fix.startswith("most timed events read zero, so these times say little")


def test_an_op_at_zero_on_a_fine_clock_is_suspicious(tmp_path: Path) -> None:
    """mlp_fp32 (portable ops, timed in ns) with one op's end time set to its start: the runtime's other
    durations share no coarse step, so the zero is not explained: warn, with what to check."""
    import dataclasses

    from numdiff.schema.etdump import Event, RunDoc, read_etdump
    from numdiff.schema.etdump.writer import write_etdump

    src = FIXTURES / "mlp_fp32"
    doc = read_etdump((src / "etdump.etdp").read_bytes()).to_doc()
    runs, done = [], 0
    for run in doc.run_data:  # the first op of every run (a zero is a duration of 0 in every run)
        events, first = [], True
        for ev in run.events or ():
            p = ev.profile_event
            if first and p is not None and p.name is not None and p.name.startswith("native_call_"):
                ev, first, done = Event(profile_event=dataclasses.replace(p, end_time=p.start_time)), False, done + 1
            events.append(ev)
        runs.append(RunDoc(run.name, events, run.bundled_input_index, tuple(run.allocators)))
    assert done == 3
    path = tmp_path / "zero.etdp"
    path.write_bytes(write_etdump(dataclasses.replace(doc, run_data=runs)))
    finding = _timing(path, src / "etrecord.bin")
    assert finding.level == "warn"
    assert "; at zero: 1 timed by the runtime, on a clock that counts in steps of " in finding.detail
    assert finding.fix.startswith("an op timed at exactly zero on a fine clock is suspicious")


def test_no_zero_duration_is_ok() -> None:
    d = FIXTURES / "mlp_fp32"
    finding = _timing(d / "etdump.etdp", d / "etrecord.bin")
    assert finding.level == "ok" and finding.detail == "5 of 5 timed events have a duration above zero"


def test_cli_lines_fit_the_width_with_a_hanging_indent(capsys: pytest.CaptureFixture[str]) -> None:
    """Whole text at 100 columns: each finding's long line wraps under its check, the note under it."""
    f = example_files()
    assert main(["doctor", "--etdump", str(f.etdump), "--etrecord", str(f.etrecord), "--debug-buffer",
                 str(f.debug_buffer), "--width", "100"]) == 0
    assert capsys.readouterr().out == """\
OK    runs: Default: 1 run(s), Execute: 1 run(s)
OK    debug handles: 3 of 3 runtime ops link to graph ops through the ETRecord (100%)
OK    delegate map: 2 of 2 delegate calls name their backend (XnnpackBackend)
OK    intermediate outputs: 3 of 3 runtime ops logged their outputs (100%)
OK    files belong together: 3 compared ops replayed on the runtime's logged inputs: the logged
      values come from the program the ETRecord describes
OK    inside delegates: 7 delegate-internal events are timed; their tensors are compared one
      delegate call at a time
      note: to compare ops inside a delegate one by one, lower fewer ops to it (a finer partitioner)
      or compare a run without the delegate
OK    timing: 5 of 10 timed events have a duration above zero; at zero: 5 inside XnnpackBackend,
      whose other durations are all whole multiples of 1 µs: a clock of that step, so these ops took
      less than one step
OK    time scale: Method::execute p50 = 3.61e-05 s
"""
