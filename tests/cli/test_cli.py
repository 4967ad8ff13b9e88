"""The command line: output, exit status, one-line errors, help for every option."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from numdiff.cli import build_parser, main
from numdiff.cli._exit import BAD_INPUT, USAGE
from tests.conftest import FIXTURES, load_expected

MLP = FIXTURES / "mlp_fp32"


def _artifacts(name: str) -> list[str]:
    d = FIXTURES / name
    return ["--etdump", str(d / "etdump.etdp"), "--etrecord", str(d / "etrecord.bin"),
            "--debug-buffer", str(d / "debug_buffer.bin")]


def test_profile_full_prints_the_reference_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["profile", *_artifacts("mlp_fp32"), "--full"]) == 0
    assert capsys.readouterr().out == load_expected("mlp_fp32")["inspector"]["printed_table"]


def test_profile_writes_tsv(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--tsv and --format tsv write the reference's save_data_to_tsv rows without its leading index column
    (pandas' row numbers); Inspector.save_data_to_tsv keeps it, as the reference writes it."""
    out = tmp_path / "t.tsv"
    assert main(["profile", *_artifacts("mlp_fp32"), "--tsv", str(out), "-q"]) == 0
    reference = load_expected("mlp_fp32")["inspector"]["tsv"]
    index, _, rest = zip(*(line.partition("\t") for line in reference.splitlines(keepends=True)))
    assert list(index) == ["", *map(str, range(len(index) - 1))]  # the column left out: only row numbers
    assert out.read_text() == "".join(rest)
    capsys.readouterr()
    assert main(["profile", *_artifacts("mlp_fp32"), "--format", "tsv", "-q"]) == 0
    assert capsys.readouterr().out == "".join(rest)


def test_profile_time_scales(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["profile", "--etdump", str(MLP / "etdump.etdp"), "--target-time-scale", "us"]) == 0
    assert "p50 (us)" in capsys.readouterr().out


@pytest.mark.parametrize("fmt", ["table", "csv", "json"])
def test_gap_formats(fmt: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["gap", *_artifacts("multi_output"), "--metric", "snr", "--format", fmt, "--width", "200"]) == 0
    out = capsys.readouterr().out
    assert "max_pool2d_with_indices" in out  # numdiff's full analysis includes multi-output ops
    if fmt == "json":
        rows = json.loads(out)["rows"]
        assert {"aot_ops", "gap", "matched", "note", "stacktraces"} <= set(rows[0])


def test_gap_drop_in_rows_match_the_reference(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["gap", *_artifacts("mlp_fp32"), "--drop-in", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert [r["aot_ops"] for r in rows] == [r["aot_ops"] for r in load_expected("mlp_fp32")["gap"]["default/SNR"]["rows"]]


def test_example_shows_both_tables(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["example", "--width", "80"]) == 0
    out = capsys.readouterr().out
    assert "Method::execute" in out and "DELEGATE_CALL" in out
    assert "layers compared" in out and "cumsum" in out
    # the profiling part is numdiff profile's readable table at the width asked for, not the drop-in's grid
    profiling = out[:out.index("Numerical gap")]
    assert "op                             calls  p50 (ms)  avg (ms)   share  delegate" in profiling
    assert "event_name" not in profiling and "start_time" not in profiling
    assert max(len(line) for line in profiling.splitlines() if not line.startswith("  numdiff profile")) <= 80
    from numdiff.examples import example_files

    assert ("share: of the block's Method::execute. Every column (the drop-in's grid):\n"
            f"  numdiff profile --etdump {example_files().etdump} --full\n") in profiling  # whole, to copy


def test_gap_drop_in_has_the_reference_columns_only(capsys: pytest.CaptureFixture[str]) -> None:
    """The reference's calculate_numeric_gap has no module column: --drop-in shows none (it showed an empty one);
    numdiff's own table fills it from the ETRecord."""
    assert main(["gap", *_artifacts("mlp_fp32"), "--drop-in", "--width", "200"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[1].split() == ["handle", "aot_ops", "runtime_ops", "shape", "gap", "source"], table[1]
    assert "module" not in load_expected("mlp_fp32")["gap"]["default/SNR"]["columns"]
    assert main(["gap", *_artifacts("mlp_fp32"), "--drop-in", "--format", "csv"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "handle,aot_ops,runtime_ops,shape,gap,source"
    assert main(["gap", *_artifacts("mlp_fp32"), "--width", "200"]) == 0
    own = capsys.readouterr().out.splitlines()
    assert own[1].split() == ["handle", "aot_ops", "runtime_ops", "shape", "gap", "module", "source"], own[1]
    assert [line.split()[6] for line in own[3:]] == ["fc1", "act", "fc2"], own


@pytest.mark.parametrize(
    ("argv", "code", "message"),
    [
        (["profile", "--etdump", "/nonexistent.etdp"], BAD_INPUT, "nonexistent.etdp.*cannot be read"),
        (["profile", "--etdump", str(MLP / "etrecord.bin")], BAD_INPUT, "not an ETDump"),
        (["gap", "--etdump", str(MLP / "etdump.etdp"), "--etrecord", str(FIXTURES / "cnn_nested" / "etrecord.bin"),
          "--debug-buffer", str(MLP / "debug_buffer.bin")], BAD_INPUT, "do not describe the same model"),
        (["gap", *_artifacts("mlp_fp32"), "--metric", "psnr"], USAGE, "unknown.*psnr.*snr"),
        (["gap", *_artifacts("mlp_fp32"), "--reference-graph", "nope"], USAGE, "nope"),
    ],
)
def test_errors_are_one_line_on_stderr(argv: list[str], code: int, message: str,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == code
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert "\n" not in err and "Traceback" not in err
    import re

    assert re.search(message, err, re.IGNORECASE), err


def test_every_option_has_help() -> None:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    for name, p in sub.choices.items():  # type: ignore[union-attr]
        assert p.description, name
        for action in p._actions:
            if action.dest != "help":
                assert action.help, (name, action.dest)


def test_missing_required_option_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(["gap", "--etdump", str(MLP / "etdump.etdp")])
    assert e.value.code == 2


def test_threshold_op_names_are_documented_and_an_unknown_op_is_warned_about(
        capsys: pytest.CaptureFixture[str]) -> None:
    """``--threshold OP``: --help and the README say what OP is; an OP no compared op has changed nothing
    silently before, now it is one warning line listing the run's op types."""
    import re

    from numdiff.examples import example_files

    with pytest.raises(SystemExit):
        main(["culprits", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    for said in ("OP is an op type", "aten.linear.default -> linear", "'default' (every floating-point row",
                 "'quantized' (every quantized row", "FIELD is ok, expected or broken",
                 "a delegate backend (XnnpackBackend, XnnpackBackend/quantized"):
        assert said in help_text, said
    readme = " ".join((Path(__file__).parents[2] / "README.md").read_text().split())
    assert "`--threshold OP:FIELD=VALUE` is the command line's `thresholds=`: **OP** is an op type" in readme
    ex = example_files()
    argv = ["culprits", "--etdump", str(ex.etdump), "--etrecord", str(ex.etrecord), "--debug-buffer",
            str(ex.debug_buffer), "--threshold", "softmx:expected=3", "--threshold", "cumsum:ok=0.5"]
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert err.strip() == ("numdiff culprits: warning: --threshold softmx: no compared op is of op type 'softmx', "
                           "so it changed nothing; the op types here: cumsum, dequantize_per_tensor; the delegate "
                           "backends: XnnpackBackend"), err
    assert not re.search("cumsum:", err)
    assert main([*argv, "--quiet"]) == 0 and capsys.readouterr().err == ""


def test_analyze_can_declare_the_run_used_the_representative_inputs(tmp_path: Path) -> None:
    """numdiff diff refuses to gate the layers of a run in doubt and says to analyse it again with this flag."""
    import json as _json

    from tests.culprits.helpers import folder

    d = folder("culprit_near_inputs")
    files = ["--etdump", str(d / "etdump.etdp"), "--etrecord", str(d / "etrecord.bin"),
             "--debug-buffer", str(d / "debug_buffer.bin")]
    assert main(["analyze", *files, "-o", str(tmp_path / "doubt.json")]) == 0
    assert main(["analyze", *files, "--inputs-are-representative", "-o", str(tmp_path / "declared.json")]) == 0
    doubt = _json.loads((tmp_path / "doubt.json").read_text())["culprits"]
    declared = _json.loads((tmp_path / "declared.json").read_text())["culprits"]
    assert doubt["inputs_in_doubt"] == ["x"] and doubt["inputs_note"]
    assert declared["inputs_in_doubt"] == [] and declared["inputs_note"] is None


def test_analyze_fails_on_step_inputs_that_are_not_inputs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A wrong file the user gave is an error (exit 3, naming it), not an analysis whose culprits are "not available"."""
    from tests.culprits.helpers import folder

    d = folder("culprit_near_inputs")
    files = ["--etdump", str(d / "etdump.etdp"), "--etrecord", str(d / "etrecord.bin"),
             "--debug-buffer", str(d / "debug_buffer.bin")]
    torch.save({"x": torch.ones(2)}, tmp_path / "dict.pt")
    torch.save([(torch.ones(3),)], tmp_path / "rank.pt")
    torch.save([(torch.ones(2, 4, 16), torch.ones(1))], tmp_path / "two.pt")
    for wrong, says in [(d / "etdump.etdp", "is not a torch.save zip archive"),
                        (tmp_path / "dict.pt", "hold no list of input tuples"),
                        (tmp_path / "rank.pt", "in run 0, input 0 is a torch.float32 tensor of shape (3,) where the "
                                               "graph takes a torch.float32 tensor of shape (2, 4, 16)"),
                        (tmp_path / "two.pt", "in run 0, 2 inputs are given where the graph takes 1"),
                        (tmp_path / "missing.pt", "cannot read the step inputs")]:
        code = main(["analyze", *files, "--step-inputs", str(wrong), "-o", str(tmp_path / "a.json")])
        err = capsys.readouterr().err
        assert code == 3 and str(wrong) in err and says in err, (wrong, err)
        assert not (tmp_path / "a.json").exists()


def test_analyze_refuses_both_ways_of_saying_which_inputs_a_run_used(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    from tests.culprits.helpers import folder

    d = folder("culprit_near_inputs")
    code = main(["analyze", "--etdump", str(d / "etdump.etdp"), "--etrecord", str(d / "etrecord.bin"),
                 "--step-inputs", str(d / "run_inputs.pt"), "--inputs-are-representative", "-o", str(tmp_path / "a.json")])
    err = capsys.readouterr().err
    assert code == 2 and "are both given" in err and "one of them" in err and not (tmp_path / "a.json").exists()
