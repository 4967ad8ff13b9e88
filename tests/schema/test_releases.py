"""Artifacts of older ExecuTorch releases give that release's own answers.

``tests/fixtures/releases/<version>/`` holds an ETRecord exported by that release, the program and
an ETDump + debug buffer of two runs, and ``expected.json``: what that release's own ``Inspector``
answered on exactly those files (written by ``scripts/make_release_fixtures.py`` with the release's
virtualenv; see ``tests/fixtures/releases/README.md``).
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch

from numdiff import Inspector, parse_etrecord
from tests.conftest import FIXTURES
from tests.dev_scripts import load_script

RELEASES = FIXTURES / "releases"
VERSIONS = sorted(p.name for p in RELEASES.iterdir() if (p / "etrecord.bin").is_file()) if RELEASES.is_dir() else []


def _expected(version: str) -> dict[str, Any]:
    return json.loads((RELEASES / version / "expected.json").read_text())  # type: ignore[no-any-return]


def _inspector(version: str) -> Inspector:
    folder = RELEASES / version
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Inspector(etdump_path=str(folder / "etdump.etdp"), etrecord=str(folder / "etrecord.bin"),
                         debug_buffer_path=str(folder / "debug_buffer.bin"))


#: What the generator stored for a value: its own function, so the two cannot drift apart.
_plain = load_script("scripts/make_release_fixtures.py")._plain


def test_every_release_has_a_sample() -> None:
    assert {"0.7.0", "1.0.1", "1.3.1", "1.4.1", "1.5.1"} <= set(VERSIONS)


@pytest.mark.parametrize("version", VERSIONS)
def test_the_etrecord_reads_and_its_programs_check(version: str) -> None:
    record = parse_etrecord(RELEASES / version / "etrecord.bin")
    record.check_programs()
    assert record.op_nodes() and record._representative_inputs and record._reference_outputs


@pytest.mark.parametrize("version", VERSIONS)
def test_events_are_the_releases(version: str) -> None:
    expected = _expected(version)["inspector"]["blocks"]
    got = _inspector(version).event_blocks
    assert [b.name for b in got] == [b["name"] for b in expected]
    for block, want in zip(got, expected):
        assert len(block.events) == len(want["events"])
        for ev, w in zip(block.events, want["events"]):
            assert ev.name == w["name"]
            assert list(ev.op_types or []) == w["op_types"], ev.name
            assert _plain(ev.debug_handles) == w["debug_handles"], ev.name
            assert (len(ev.perf_data.raw) if ev.perf_data else 0) == w["samples"]
            assert ev.is_delegated_op == w["is_delegated_op"]
            assert _plain(list(ev.debug_data or [])) == w["debug_data"], ev.name


@pytest.mark.parametrize("metric", ["MSE", "L1", "SNR"])
@pytest.mark.parametrize("version", VERSIONS)
def test_the_gap_is_the_releases(version: str, metric: str) -> None:
    """Where the release answers, the same rows and numbers; where it raised, numdiff still answers."""
    want = _expected(version)["inspector"]["gap"][metric]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        df = _inspector(version).calculate_numeric_gap(metric)
    if "error" in want:
        assert len(df) == 3 and all(len(g) == 1 for g in df["gap"])  # one row per op of the MLP
        return
    assert [list(x) for x in df["aot_ops"]] == want["aot_ops"]
    assert [list(x) for x in df["runtime_ops"]] == want["runtime_ops"]
    # 0.7 gives each row's gap as a number, later releases (and numdiff's drop-in) as a one-item list
    got_gaps = [_plain(g[0] if len(g) == 1 else list(g)) for g in df["gap"]]
    want_gaps = [g[0] if isinstance(g, list) and len(g) == 1 else g for g in want["gap"]]
    assert len(got_gaps) == len(want_gaps)
    for got, expected in zip(got_gaps, want_gaps):
        assert got == expected if isinstance(expected, str) else got == pytest.approx(expected, rel=1e-12)


PT2 = sorted(p.name for p in RELEASES.glob("torch-*") if (p / "model.pt2").is_file()) if RELEASES.is_dir() else []


@pytest.mark.parametrize("folder", PT2)
def test_a_pt2_archive_of_that_torch_loads_as_its_own_loader_loads_it(folder: str) -> None:
    """torch 2.9 writes schema 8.14 nodes without names: the same names and outputs as its torch.export.load."""
    from numdiff.schema.pt2 import load_pt2

    want = json.loads((RELEASES / folder / "expected.json").read_text())
    program = load_pt2(RELEASES / folder / "model.pt2")
    assert [[n.op, n.name] for n in program.graph.nodes] == [[op, name] for op, name, _ in want["nodes"]]
    inputs = tuple(torch.tensor(t["values"], dtype=torch.float32).reshape(t["shape"]) for t in want["inputs"])
    with torch.no_grad():
        outputs = program.module()(*inputs)
    assert _plain(list(outputs)) == want["outputs"]


def test_hints_about_an_etrecord_name_every_releases_way_to_write_one(tmp_path: Path) -> None:
    """A damaged 0.7 ETRecord's hint names 0.7's API too, not only to_edge_transform_and_lower (which 0.7 lacks)."""
    import zipfile

    from numdiff.errors import ETRecordError

    damaged = tmp_path / "etrecord.bin"
    with zipfile.ZipFile(RELEASES / "0.7.0" / "etrecord.bin") as src, zipfile.ZipFile(damaged, "w") as dst:
        for info in src.infolist():
            body = src.read(info)
            dst.writestr(info, body.replace(b'"debug_handle": "6"', b'"debug_handle": "six"')
                         if info.filename == "edge_dialect_exported_program" else body)
    with pytest.raises(ETRecordError, match=r"non-integer debug_handle 'six'") as info:
        parse_etrecord(damaged).op_nodes()
    assert "executorch.devtools.generate_etrecord(path, ...) (0.7)" in str(info.value)
    assert "get_etrecord().save(path) (1.0 and later)" in str(info.value)


def test_the_fallback_to_the_edge_graph_gives_a_true_hint_for_an_etrecord_without_an_aten_program(
        caplog: pytest.LogCaptureFixture) -> None:
    """0.7's ETRecord holds the Edge program alone: the fallback must not suggest using 'the ATen graph
    anyway' (there is none), as it does when back-propagation fails on a record that has one."""
    import logging

    with caplog.at_level(logging.WARNING, logger="numdiff.capture.graphs"):
        _inspector("0.7.0").calculate_numeric_gap("SNR")
    said = " ".join(r.getMessage() for r in caplog.records if "Falling back" in r.getMessage())
    assert "The ETRecord holds no ATen program" in said and "to use the ATen graph anyway" not in said
