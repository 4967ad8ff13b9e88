"""Manifests: CSV, JSON, YAML and directory layouts to run specs; every bad manifest names its row and column."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from numdiff.batch.manifest import ManifestError, load_manifest
from numdiff.cli import main

HEADER = "run,etdump,etrecord,debug_buffer,device,build\n"


def _csv(tmp_path: Path, body: str, header: str = HEADER) -> Path:
    path = tmp_path / "fleet.csv"
    path.write_text(header + body)
    return path


def test_csv_paths_relative_to_the_manifest_and_labels(tmp_path: Path) -> None:
    sub = tmp_path / "lab"
    sub.mkdir()
    path = sub / "fleet.csv"
    path.write_text(HEADER + "a,runs/a.etdp,model.etrecord,runs/a.bin,pixel8,b1\n"
                    "b,/abs/b.etdp,,,rpi5,\n\n")
    a, b = load_manifest(path, allow_outside=True)  # /abs is outside lab/: refused without it (test_confinement)
    assert a.run == "a" and a.etdump == str(sub / "runs/a.etdp") and a.etrecord == str(sub / "model.etrecord")
    assert a.debug_buffer == str(sub / "runs/a.bin") and a.labels == {"device": "pixel8", "build": "b1"}
    assert b.etdump == "/abs/b.etdp" and b.etrecord is None and b.debug_buffer is None
    assert b.labels == {"device": "rpi5"}  # an empty label cell is no label


@pytest.mark.parametrize(("body", "header", "match"), [
    ("a,x.etdp,,,pixel8\n", HEADER, r"row 1 \(line 2\): has 5 cells, the header has 6 columns"),
    ("a,x.etdp,,,p,b\n,y.etdp,,,p,b\n", HEADER, r"row 2 \(line 3\), column 'run': is missing or empty"),
    ("a,,,,p,b\n", HEADER, r"row 1 \(line 2\), column 'etdump': is missing or empty"),
    ("a,x.etdp,,,p,b\na,y.etdp,,,p,b\n", HEADER, r"row 2 \(line 3\), column 'run': the run name 'a' is already used by row 1"),
    ("a,x.etdp,,,ok\n", "run,etdump,etrecord,debug_buffer,status\n",
     r"row 1 \(line 2\), column 'status': the label name is a column of numdiff's own tables"),
    ("a,x.etdp,,,v\n", "run,etdump,etrecord,debug_buffer,my label\n",
     r"column 'my label': the label name is not a usable label name"),
    ("a,x.etdp,p,q\n", "run,etdump,device,device\n", r"line 1, column 4 'device': the column name appears twice"),
    ("", "", r"is empty"),
])
def test_bad_csv_names_row_and_column(tmp_path: Path, body: str, header: str, match: str) -> None:
    with pytest.raises(ManifestError, match=match):
        load_manifest(_csv(tmp_path, body, header))


def test_json_labels_as_keys_or_object(tmp_path: Path) -> None:
    path = tmp_path / "fleet.json"
    path.write_text(json.dumps({"runs": [
        {"run": "a", "etdump": "a.etdp", "device": "pixel8"},
        {"run": "b", "etdump": "b.etdp", "labels": {"device": "rpi5", "build": 7}}]}))
    a, b = load_manifest(path)
    assert a.labels == {"device": "pixel8"} and b.labels == {"device": "rpi5", "build": "7"}


@pytest.mark.parametrize(("data", "match"), [
    ({"runs": {"a": 1}}, r"holds a dict, not a list of runs"),
    ([1], r"runs\[0\]: is a int, not an object"),
    ([{"run": "a", "etdump": ["x"]}], r"runs\[0\], column 'etdump': is a list, not text"),
    ([{"run": "a", "etdump": "x", "labels": []}], r"runs\[0\], column 'labels': is a list, not an object"),
    ([{"run": "a", "etdump": "x", "device": "p", "labels": {"device": "q"}}], r"runs\[0\], column 'device': is given twice"),
    ([], r"lists no run"),
])
def test_bad_json(tmp_path: Path, data: object, match: str) -> None:
    path = tmp_path / "fleet.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ManifestError, match=match):
        load_manifest(path)


def test_json_syntax_error(tmp_path: Path) -> None:
    path = tmp_path / "fleet.json"
    path.write_text("[{")
    with pytest.raises(ManifestError, match=r"is not valid JSON"):
        load_manifest(path)


def test_yaml(tmp_path: Path) -> None:
    pytest.importorskip("yaml")
    path = tmp_path / "fleet.yaml"
    path.write_text("runs:\n  - run: a\n    etdump: a.etdp\n    device: pixel8\n")
    (a,) = load_manifest(path)
    assert a.labels == {"device": "pixel8"} and a.etdump == str(tmp_path / "a.etdp")
    path.write_text("- &x {run: a, etdump: a.etdp}\n- *x\n")
    with pytest.raises(ManifestError, match=r"line 1: uses a YAML anchor or alias"):
        load_manifest(path)
    path.write_text("- run: [a\n")
    with pytest.raises(ManifestError, match=r"is not valid YAML"):
        load_manifest(path)


def test_directory_layout(tmp_path: Path) -> None:
    (tmp_path / "etrecord.bin").write_bytes(b"r")
    for device, run in [("pixel8", "r1"), ("rpi5", "r2")]:
        d = tmp_path / f"device={device}" / "build=b1" / run
        d.mkdir(parents=True)
        (d / "etdump.etdp").write_bytes(b"d")
        if run == "r1":
            (d / "debug_buffer.bin").write_bytes(b"b")
    a, b = load_manifest(tmp_path)
    assert a.run == "device=pixel8/build=b1/r1" and a.labels == {"device": "pixel8", "build": "b1"}
    assert a.etrecord == str(tmp_path / "etrecord.bin") and a.debug_buffer is not None and b.debug_buffer is None
    (tmp_path / "device=rpi5" / "build=b1" / "r2" / "other.etdp").write_bytes(b"d")
    assert len(load_manifest(tmp_path)) == 2  # etdump.etdp wins over other *.etdp
    (tmp_path / "device=rpi5" / "build=b1" / "r2" / "etdump.etdp").rename(
        tmp_path / "device=rpi5" / "build=b1" / "r2" / "second.etdp")
    with pytest.raises(ManifestError, match=r"holds 2 .etdp files"):
        load_manifest(tmp_path)


def test_empty_directory_and_unknown_format(tmp_path: Path) -> None:
    with pytest.raises(ManifestError, match=r"holds no run"):
        load_manifest(tmp_path)
    other = tmp_path / "fleet.txt"
    other.write_text("x")
    with pytest.raises(ManifestError, match=r"unknown manifest format '.txt'"):
        load_manifest(other)
    with pytest.raises(ManifestError, match=r"cannot be read"):
        load_manifest(tmp_path / "absent.csv")


def test_cli_bad_manifest_exit_3(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _csv(tmp_path, "a,x.etdp,,,p\n")
    assert main(["batch", str(path), "-o", str(tmp_path / "out")]) == 3
    err = capsys.readouterr().err
    assert "row 1 (line 2): has 5 cells" in err and "Traceback" not in err


def test_every_table_column_is_reserved() -> None:
    from numdiff.batch.manifest import RESERVED_COLUMNS
    from numdiff.batch.tables import OPS_COLUMNS, RUNS_COLUMNS

    assert {name for name, _ in RUNS_COLUMNS + OPS_COLUMNS} <= RESERVED_COLUMNS
