"""A command that cannot do what was asked says so and exits non-zero, rather than doing less in silence."""

from __future__ import annotations

from pathlib import Path

import pytest

from numdiff.cli import _exit, main
from numdiff.examples import example_files

EXAMPLE = example_files("quantized_mlp")


def test_manifest_without_the_gap_columns_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    manifest = tmp_path / "fleet.csv"
    manifest.write_text(f"run,etdump,device\nr1,{EXAMPLE.etdump},pixel8\n")
    assert main(["batch", str(manifest), "-o", str(tmp_path / "out"), "--allow-outside"]) == _exit.BAD_INPUT
    assert capsys.readouterr().err == (
        f"numdiff batch: error: manifest {str(manifest)!r}: no run has the columns 'etrecord' and 'debug_buffer' "
        "that --analyses profile,gap,culprits needs | Add the ETRecord and debug buffer of each run, or ask for "
        "the profile only: --analyses profile.\n")
    assert not (tmp_path / "out").exists()


def test_manifest_missing_one_column(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    manifest = tmp_path / "fleet.csv"
    manifest.write_text(f"run,etdump,etrecord\nr1,{EXAMPLE.etdump},{EXAMPLE.etrecord}\n")
    assert main(["batch", str(manifest), "-o", str(tmp_path / "out"), "--analyses", "profile,gap",
                 "--allow-outside"]) == _exit.BAD_INPUT
    assert "no run has the column 'debug_buffer' that --analyses profile,gap needs" in capsys.readouterr().err


def test_profile_only_manifest_runs_when_asked_for_the_profile(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    manifest = tmp_path / "fleet.csv"
    manifest.write_text(f"run,etdump\nr1,{EXAMPLE.etdump}\n")
    assert main(["batch", str(manifest), "-o", str(tmp_path / "out"), "--allow-outside", "--analyses", "profile", "--workers", "1",
                 "-q"]) == _exit.OK
    assert (tmp_path / "out" / "runs.parquet").is_file()


def test_explore_on_a_profile_only_analysis_says_there_is_nothing(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "overlays"
    assert main(["explore", "--etdump", str(EXAMPLE.etdump), "-o", str(out), "-q"]) == _exit.BAD_INPUT
    assert capsys.readouterr().err == (
        "numdiff explore: error: nothing to write: the analysis has no numerical gap, so no error or latency per "
        "ATen node | Give --etrecord and --debug-buffer (or an analysis made with them).\n")
    assert not out.exists()
