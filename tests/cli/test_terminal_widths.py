"""Every terminal view fits the width asked for: numdiff gap and every part of numdiff example.

Rendered at a fixed width and compared as whole text (Rich's rendering tests are the model).
"""

from __future__ import annotations

import pytest

from numdiff.cli import main
from numdiff.examples import example_files

EXAMPLE = example_files("quantized_mlp")
ARTIFACTS = ["--etdump", str(EXAMPLE.etdump), "--etrecord", str(EXAMPLE.etrecord),
             "--debug-buffer", str(EXAMPLE.debug_buffer)]

GAP_AT_80 = """\
3 layers compared (SNRComparator on exported_program)
aot_ops             runtime_ops               gap  source
------------------  ----------------------  -----  --------------------------
linear, relu,       DELEGATE_CALL           inf    _fixture_models.py:153
linear_1 (+8 q/dq)                                 forward: h = self.fc2(self
                                                   .relu(self.fc1(x)))
linear_2 (+5 q/dq)  DELEGATE_CALL           inf    _fixture_models.py:155
                                                   forward: return
                                                   self.fc3(h)
cumsum              native_call_cumsum.out  150.9  _fixture_models.py:154
                                                   forward: h =
                                                   torch.cumsum(h, dim=-1)
(handle, shape and module left out to fit 80 columns: a wider terminal, --width
or --format csv shows them)
"""


def test_gap_table_at_80_columns(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["gap", *ARTIFACTS, "--width", "80"]) == 0
    captured = capsys.readouterr()
    assert captured.err == ""
    assert captured.out == GAP_AT_80


def test_gap_table_keeps_every_column_when_wide(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["gap", *ARTIFACTS, "--width", "160"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].split() == ["handle", "aot_ops", "runtime_ops", "shape", "gap", "module", "source"]
    assert lines[3].split()[:6] == ["1,2,4,4,5,6,6,6,7,7,7", "linear,", "relu,", "linear_1", "(+8", "q/dq)"]
    assert "left out" not in lines[-1] and max(len(line) for line in lines) <= 160
    # a delegate row's module is its linears', not the model's root module its first dequantize belongs to
    modules = [line[lines[1].index("module"):lines[1].index("source")].strip() for line in lines[3:]
               if "DELEGATE_CALL" in line]
    assert modules == ["fc1", "fc3"]


@pytest.mark.parametrize("width", [60, 100, 120])
def test_gap_table_fits_the_width_and_says_what_it_left_out(width: int, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["gap", *ARTIFACTS, "--width", str(width)]) == 0
    out = capsys.readouterr().out
    assert max(len(line) for line in out.splitlines()) <= width
    header = out.splitlines()[1].split()
    left_out = [c for c in ("handle", "shape", "module") if c not in header]
    said = " ".join(out.split("(")[-1].split())
    assert (said.startswith(f"{' and '.join(left_out) if len(left_out) < 3 else 'handle, shape and module'} left out "
                            f"to fit {width} columns") if left_out else "left out" not in out), out
    for op in ("DELEGATE_CALL", "cumsum", "150.9"):  # every row is there
        assert op in out


def test_gap_width_follows_columns(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("COLUMNS", "72")
    assert main(["gap", *ARTIFACTS]) == 0
    assert max(len(line) for line in capsys.readouterr().out.splitlines()) <= 72


@pytest.mark.parametrize("command", ["gap", "profile", "example"])
def test_width_must_be_positive(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    argv = [command, *(ARTIFACTS if command != "example" else []), "--width", "0"]
    assert main(argv) == 2
    assert "--width 0: give a positive number of characters" in capsys.readouterr().err


def test_example_at_80_columns_is_narrow_in_every_part(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["example", "--width", "80"]) == 0
    out = capsys.readouterr().out
    folder = EXAMPLE.etdump.parent
    head = f"numdiff example: quantized_mlp ({folder})"
    assert out.startswith(head + "\n\n" if len(head) <= 80 else "numdiff example: quantized_mlp\n")
    profiling = out[out.index("Profiling"):out.index("Numerical gap")]
    assert profiling.startswith("""\
Profiling (one row per runtime event):

Default (1 run)
op                             calls  p50 (ms)  avg (ms)   share  delegate
─────────────────────────────  ─────  ────────  ────────  ──────  ──────────────
Method::init                       1   0.08489   0.08489
Program::load_method               1   0.08737   0.08737
""")
    assert out[out.index("Numerical gap"):] == "Numerical gap, reference graph vs runtime:\n" + GAP_AT_80


@pytest.mark.parametrize("width", [60, 72, 100])  # the profile table is never narrower than 59
def test_example_every_line_fits(width: int, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["example", "--width", str(width)]) == 0
    lines = capsys.readouterr().out.splitlines()
    folder_lines = [line for line in lines if str(EXAMPLE.etdump.parent)[:20] in line]  # a path is never cut
    assert max(len(line) for line in lines if line not in folder_lines) <= width


PLANTED = example_files("planted_culprit")


def test_culprits_table_at_100_columns(capsys: pytest.CaptureFixture[str]) -> None:
    """The culprit table fits the width: the columns a person can spare first (input source, amplification,
    runtime ops, module path: the summary under the table names the culprit's module), said on its last line."""
    assert main(["culprits", "--etdump", str(PLANTED.etdump), "--etrecord", str(PLANTED.etrecord),
                 "--debug-buffer", str(PLANTED.debug_buffer), "--width", "100"]) == 1
    out = capsys.readouterr().out
    assert out == """\
find_culprits (SNRComparator on exported_program): 5 rows, 1 culprit: linear_1 (fc2); 1 row broken

aot_ops      local_gap    accumulated_gap  verdict    is_culprit    source_line
---------  -----------  -----------------  ---------  ------------  --------------------------------
linear          144               144      ok                       _culprit_models.py:28 forward: h
                                                                    = torch.relu(self.fc1(x))
relu            inf               140.7    ok                       "
linear_1         11.35             11.35   broken     CULPRIT       _culprit_models.py:29 forward: h
                                                                    = torch.tanh(self.fc2(h))
tanh            143.9              11.45   ok                       "
linear_2        142.3               6.513  ok                       _culprit_models.py:30 forward:
                                                                    return self.fc3(h)
(input_source, amplification, runtime_ops and module_path left out to fit 100 columns: a wider
terminal, --width or --format csv shows them)

culprit: linear_1 (handle (3,), broken) module fc2
  at _culprit_models.py:29 forward: h = torch.tanh(self.fc2(h))
  local 11.35 (2.755e+05 noise units), accumulated 11.35
worst accumulated row: linear_2 (6.513), verdict ok: its error is inherited from its inputs
"""


def test_culprits_table_keeps_every_column_when_wide(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["culprits", "--etdump", str(PLANTED.etdump), "--etrecord", str(PLANTED.etrecord),
                 "--debug-buffer", str(PLANTED.debug_buffer), "--width", "220"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[2].split() == ["aot_ops", "runtime_ops", "local_gap", "accumulated_gap", "amplification", "verdict",
                                "is_culprit", "input_source", "module_path", "source_line"]
    assert not any("left out" in line for line in lines)
