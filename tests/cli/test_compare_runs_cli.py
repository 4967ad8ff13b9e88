"""numdiff compare-runs: table and JSON on oracle runs, exit status, bad --run arguments."""

from __future__ import annotations

import json

import pytest

from numdiff.cli import main
from tests.runs_compare.conftest import FIXTURES, MLP, mlp_run

pytestmark = pytest.mark.filterwarnings("ignore")


def _run(name: str, folder: str | None = None) -> str:
    etdump, buffer = mlp_run(folder or name)
    return f"{name}={etdump},{buffer}"


def test_table_names_the_op_and_the_side_and_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["compare-runs", "--etrecord", str(MLP / "etrecord.bin"), "--run", _run("laptop", "base"),
                 "--run", _run("phone", "scaled")])
    out = capsys.readouterr().out
    flat = " ".join(out.split())  # sentences wrap at the terminal's width
    assert code == 1
    assert flat.startswith("compare-runs (SNRComparator against base 'laptop'): 1 run; 1 of them parts from the base")
    assert "phone parts from the base at linear_2 (fc3): phone departs from the reference there" in flat
    assert "outputs are 0.50× the base's (half), R² 1.00" in flat
    assert max(len(line) for line in out.splitlines()) <= 100


def test_json_and_base(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["compare-runs", "--etrecord", str(MLP / "etrecord.bin"), "--run", _run("laptop", "base"),
                 "--run", _run("phone", "kernel"), "--base", "phone", "--format", "json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 1 and data["base"] == "phone"
    laptop = data["runs"]["laptop"]
    assert laptop["first_divergent_op"] == ["linear_1"] and laptop["departs"] == "base"
    assert laptop["departs_from_reference"] is False and data["base_departs_from_reference"] is True


def test_agreeing_runs_exit_0(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["compare-runs", "--etrecord", str(MLP / "etrecord.bin"), "--run", _run("a", "base"),
                 "--run", _run("b", "base"), "--metric", "median_ratio"])
    out = " ".join(capsys.readouterr().out.split())
    assert code == 0 and "every run agrees with the base within noise" in out
    assert "MedianRatioComparator" in out


@pytest.mark.parametrize(("runs", "message"), [
    (["phone"], "--run 'phone' is not NAME=ETDUMP[,DEBUG_BUFFER[,STEP_INPUTS]] | Example: --run phone=phone.etdp,"),
    (["a=x,y,z,w"], "is not NAME=ETDUMP"),
    (["a=x.etdp"], "compare-runs needs at least two --run, got 1"),
    (["a=x.etdp", "a=y.etdp"], "--run 'a' is given twice | Give each run its own name."),
])
def test_bad_runs_exit_2(runs: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["compare-runs", "--etrecord", str(MLP / "etrecord.bin")]
    for item in runs:
        argv += ["--run", item]
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_runs_of_another_program_exit_3(capsys: pytest.CaptureFixture[str]) -> None:
    other = FIXTURES / "mlp_fp32"
    code = main(["compare-runs", "--etrecord", str(MLP / "etrecord.bin"), "--run", _run("a", "base"),
                 "--run", f"b={other / 'etdump.etdp'},{other / 'debug_buffer.bin'}"])
    err = capsys.readouterr().err
    assert code == 3 and "are not runs of one program: 5 aligned ops against 3" in err


@pytest.mark.filterwarnings("default")
def test_a_run_without_its_debug_buffer_is_told_in_compare_runs_terms(capsys: pytest.CaptureFixture[str]) -> None:
    etdump, _ = mlp_run("scaled")
    code = main(["compare-runs", "--etrecord", str(MLP / "etrecord.bin"), "--run", _run("base"),
                 "--run", f"scaled={etdump}"])
    err = capsys.readouterr().err
    assert code == 3 and "--run scaled=ETDUMP,DEBUG_BUFFER" in err
    assert "(give it as --run NAME=ETDUMP,DEBUG_BUFFER)" in err and "--debug-buffer" not in err


def test_table_at_100_columns(capsys: pytest.CaptureFixture[str]) -> None:
    """Whole text: sentences wrap under themselves; the op table leaves out the fit's columns first (the
    sentences under the tables put the fit in words) and says so, naming --format json."""
    code = main(["compare-runs", "--etrecord", str(MLP / "etrecord.bin"), "--run", _run("laptop", "base"),
                 "--run", _run("phone", "scaled"), "--width", "100"])
    assert code == 1
    assert capsys.readouterr().out == """\
compare-runs (SNRComparator against base 'laptop'): 1 run; 1 of them parts from the base: phone
  parts from the base at linear_2 (fc3): phone departs from the reference there

run 'phone' against base 'laptop'
aot_ops    module    verdict      gap_vs_base    rel_diff  run_local    base_local    departs
---------  --------  ---------  -------------  ----------  -----------  ------------  ---------
linear     fc1       identical        inf             0    ok           ok
relu       MLP3      identical        inf             0    ok           ok
linear_1   fc2       identical        inf             0    ok           ok
tanh       MLP3      identical        inf             0    ok           ok
linear_2   fc3       diverges           6.021         0.5  broken       ok            run
(offset, r2 and scale left out to fit 100 columns: a wider terminal, --width or --format json shows
them)

phone: phone parts from the base at linear_2 (fc3): phone departs from the reference there
  outputs are 0.50× the base's (half), R² 1.00
  at linear_2: values are 0.50× the base's (half), R² 1.00
floating-point values agree within a relative rms difference of 1e-4 (float32, float64) or 1e-2
  (float16, bfloat16); integer values within one step
"""
