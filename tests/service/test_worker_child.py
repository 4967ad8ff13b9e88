"""The runner's stages: a stage that lands on a runner without the run in memory reads the earlier
stages' stored results and reopens the files, and ends with the same analysis."""

from __future__ import annotations

from pathlib import Path

from numdiff.report import Analysis
from numdiff.service.worker import child as runner
from tests.service._server import EXAMPLE


def _paths() -> dict[str, str | None]:
    return {"etdump": str(EXAMPLE.etdump), "etrecord": str(EXAMPLE.etrecord), "debug_buffer": str(EXAMPLE.debug_buffer)}


def _stage(kind: str, out: Path, parts: dict[str, str]) -> int:
    out.mkdir()
    return runner.analyse(kind, _paths(), {"device": "d"}, out, parts, memory=1 << 40)


def test_stages_on_different_runners_give_the_analysis_of_one_runner(tmp_path: Path) -> None:
    parts: dict[str, str] = {}
    for kind in ("profile", "gap", "culprits"):
        runner._last.clear()  # each stage on a fresh runner: nothing in memory
        assert _stage(kind, tmp_path / kind, parts) == runner.OK
        parts[kind] = str(tmp_path / kind / "result.json")
    runner._last.clear()
    assert _stage("report", tmp_path / "cold", parts) == runner.OK
    assert not runner._last  # the finished run's Inspector is not kept
    for kind in ("profile", "gap", "culprits"):  # one runner, back to back: results from memory
        assert _stage(kind, tmp_path / f"warm-{kind}", {}) == runner.OK
    assert _stage("report", tmp_path / "warm", {}) == runner.OK
    cold, warm = (Analysis.load(tmp_path / d / "analysis.json") for d in ("cold", "warm"))
    assert cold.model_dump_json(exclude={"created_utc"}) == warm.model_dump_json(exclude={"created_utc"})
    assert cold.labels == {"device": "d"} and cold.gap is not None and cold.culprits.available
    assert (tmp_path / "cold" / "report.html").read_text().startswith("<!DOCTYPE html>")


def test_a_damaged_stored_part_is_a_bad_input_with_its_name(tmp_path: Path) -> None:
    broken = tmp_path / "gap.json"
    broken.write_text('{"gap": 3}')
    runner._last.clear()
    assert _stage("culprits", tmp_path / "out", {"gap": str(broken)}) == runner.BAD_INPUT
    reason = (tmp_path / "out" / "reason.txt").read_text()
    assert reason.startswith("bad input:") and "the stored gap result" in reason and "GapPart" in reason


def test_a_run_s_options_are_part_of_its_cache_key() -> None:
    """Two runs of the same stored files, uploaded with different declarations of their inputs, never share
    a runner's stage results (the cache is emptied when the other run's job arrives)."""
    runner._last.clear()
    plain = runner._for_run(_paths())
    plain["culprits"] = "plain's result"
    declared = runner._for_run(_paths(), {"inputs_are_representative": True})
    assert "culprits" not in declared
    declared["culprits"] = "declared's result"
    assert runner._for_run(_paths(), {"inputs_are_representative": True})["culprits"] == "declared's result"
    assert "culprits" not in runner._for_run(_paths())
    runner._last.clear()
