"""The saved analysis carries the culprit finder's new facts, and fails on files that do not belong
(issue 20: items 1, 2, 5 in the saved ``Analysis``; bad input is an error, never an answer).

Real oracle fixtures: ``culprit_xnnpack`` (delegate rows), ``realistic/real_llama_xnn`` (replay
problems), ``culprit_mlp``'s ETRecord with ``culprit_clean_fp32``'s ETDump and debug buffer (same
architecture, other weights: the files do not belong together).
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from numdiff import Inspector
from numdiff.analysis.storage import load_analysis
from numdiff.cli import main
from numdiff.errors import MismatchedArtifactsError
from numdiff.report import Analysis
from tests.culprits.helpers import FIXTURES, inspector, report

MLP, OTHER = FIXTURES / "culprit_mlp", FIXTURES / "culprit_clean_fp32"


def test_rows_carry_input_sources_and_delegate(tmp_path: Path) -> None:
    Analysis.from_inspector(inspector("culprit_xnnpack")).save(tmp_path / "a.json")
    section = load_analysis(tmp_path / "a.json").culprits
    live = report("culprit_xnnpack")
    assert [r.delegate for r in section.rows] == [r.delegate for r in live.rows]
    assert [r.input_sources for r in section.rows] == [list(r.input_sources) for r in live.rows]
    assert section.rows[2].delegate is not None and section.rows[2].delegate.startswith("XnnpackBackend #2: linear_2")
    assert any(section.rows[1].input_sources)
    assert section.headline == str(live).splitlines()[0] and section.broken == 1
    assert section.replay_mismatches == 0 and section.not_judged == 0


def test_replay_problems_are_counted_on_the_section(monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.culprits.test_replay_checks import position_pairing

    position_pairing(monkeypatch)
    d = FIXTURES / "realistic" / "real_llama_xnn"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ins = Inspector(etdump_path=d / "etdump.etdp", etrecord=str(d / "etrecord.bin"),
                        debug_buffer_path=d / "debug_buffer.bin")
    section = Analysis.from_inspector(ins).culprits
    verdicts = [r.verdict for r in section.rows]
    assert section.replay_mismatches == verdicts.count("replay-mismatch") >= 2
    assert section.broken == verdicts.count("broken") == 0
    assert section.headline is not None and "rows with a replay problem (not judged)" in section.headline


def _mismatched() -> Inspector:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Inspector(etdump_path=OTHER / "etdump.etdp", etrecord=str(MLP / "etrecord.bin"),
                         debug_buffer_path=OTHER / "debug_buffer.bin")


def test_the_analysis_fails_on_files_that_do_not_belong() -> None:
    with pytest.raises(MismatchedArtifactsError, match="disagree with their own replay"):
        Analysis.from_inspector(_mismatched())


@pytest.mark.parametrize("command", [["culprits"], ["analyze", "-o", "{out}"]])
def test_culprits_and_analyze_exit_3(command: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = [c.replace("{out}", str(tmp_path / "a.json")) for c in command]
    code = main([*argv, "--etdump", str(OTHER / "etdump.etdp"), "--etrecord", str(MLP / "etrecord.bin"),
                 "--debug-buffer", str(OTHER / "debug_buffer.bin")])
    assert code == 3 and "do not come from the program the ETRecord describes" in capsys.readouterr().err
    assert not (tmp_path / "a.json").exists()
