"""compare_results / program_output_metrics: drop-in numbers without side effects."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from numdiff.comparators import compare_results, program_output_metrics
from numdiff.errors import UsageError


def test_rounds_only_in_drop_in() -> None:
    a = torch.tensor([1.0, 2.0, 3.0])
    raw = program_output_metrics([a], [a + 0.1])
    rounded = compare_results([a], [a + 0.1])
    assert list(rounded) == ["snr", "mse", "cosine_similarity"]
    assert rounded["mse"] == [round(raw["mse"][0], 2)] and raw["mse"][0] != rounded["mse"][0]


def test_metric_selection_and_non_tensor_outputs() -> None:
    got = compare_results([torch.ones(2), 3], [torch.ones(2), 3], metrics=["MSE", "snr"])
    assert got == {"snr": [float("inf"), None], "mse": [0.0, None]}


def test_prints_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    compare_results([torch.ones(2)], [torch.zeros(2)])
    assert capsys.readouterr() == ("", "")


def test_bad_arguments() -> None:
    with pytest.raises(UsageError, match=r"unknown program-output metric\(s\) \['l2'\]"):
        compare_results([torch.ones(1)], [torch.ones(1)], metrics=["l2"])
    with pytest.raises(UsageError, match="1 reference outputs but 2 run outputs"):
        compare_results([torch.ones(1)], [torch.ones(1), torch.ones(1)])
    with pytest.raises(UsageError, match="plot=True needs plot_path"):
        compare_results([torch.ones(1)], [torch.ones(1)], plot=True)


def test_plot_goes_to_the_given_file_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("matplotlib")
    monkeypatch.chdir(tmp_path)
    target = tmp_path / "out" / "metrics.png"
    target.parent.mkdir()
    compare_results([torch.ones(3), torch.ones(2)], [torch.zeros(3), torch.ones(2)], plot=True, plot_path=target)
    assert target.stat().st_size > 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_missing_matplotlib_gives_install_hint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    with pytest.raises(UsageError, match=r"pip install -c constraints.txt -e '\.\[plot\]'"):
        compare_results([torch.ones(1)], [torch.ones(1)], plot_path=tmp_path / "x.png")
