"""Manifests from elsewhere (issue 22, items 15 and 16): confined to their folder, bounded in time and memory.

A manifest's paths may not leave its folder (``..``, absolute, ``~``, a symlink out) unless
``allow_outside`` / ``--allow-outside`` is given; the error names the row and column and never
quotes a file's bytes. A folder manifest given as a relative path resolves against the right
folder. A CSV is read as a stream, and a manifest over ``MAX_RUNS`` runs is refused early.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from numdiff.batch.manifest import MAX_RUNS, ManifestError, load_manifest
from numdiff.cli import main

HEADER = "run,etdump,etrecord,debug_buffer\n"


@pytest.fixture
def lab(tmp_path: Path) -> Path:
    """``tmp_path/lab`` holding a run; ``tmp_path/secret.bin`` outside it, starting with ETDump-like bytes."""
    (tmp_path / "lab" / "runs").mkdir(parents=True)
    (tmp_path / "lab" / "runs" / "a.etdp").write_bytes(b"d")
    (tmp_path / "secret.bin").write_bytes(b"ET C secret bytes")
    return tmp_path / "lab"


@pytest.mark.parametrize("path", ["../secret.bin", "runs/../../secret.bin", "{tmp}/secret.bin", "~/x.etdp",
                                  "runs/link.etdp", "linkdir/secret.bin"])
def test_paths_out_of_the_folder_are_refused(lab: Path, path: str) -> None:
    (lab / "runs" / "link.etdp").symlink_to(lab.parent / "secret.bin")
    (lab / "linkdir").symlink_to(lab.parent)
    manifest = lab / "fleet.csv"
    manifest.write_text(HEADER + f"a,runs/a.etdp,,\nb,{path.format(tmp=lab.parent)},,\n")
    with pytest.raises(ManifestError, match=r"row 2 \(line 3\), column 'etdump': the path .* outside the manifest's "
                                            r"folder") as e:
        load_manifest(manifest)
    assert "secret bytes" not in str(e.value) and "ET C" not in str(e.value)
    assert "--allow-outside" in str(e.value)
    (b,) = load_manifest(manifest, allow_outside=True)[1:]
    assert b.etdump == os.path.normpath(os.path.join(lab, os.path.expanduser(path.format(tmp=lab.parent))))


def test_every_artifact_column_is_confined(lab: Path) -> None:
    manifest = lab / "fleet.json"
    for column in ("etrecord", "debug_buffer"):
        manifest.write_text(f'[{{"run": "a", "etdump": "runs/a.etdp", "{column}": "../secret.bin"}}]')
        with pytest.raises(ManifestError, match=rf"runs\[0\], column '{column}': the path '../secret.bin' points"):
            load_manifest(manifest)


def test_symlinks_inside_the_folder_are_fine(lab: Path) -> None:
    (lab / "runs" / "alias.etdp").symlink_to(lab / "runs" / "a.etdp")
    manifest = lab / "fleet.csv"
    manifest.write_text(HEADER + "a,runs/alias.etdp,,\nb,./runs/../runs/a.etdp,,\n")
    a, b = load_manifest(manifest)
    assert a.etdump == str(lab / "runs" / "alias.etdp") and b.etdump == str(lab / "runs" / "a.etdp")


def test_a_directory_manifest_refuses_a_symlinked_run_file(lab: Path) -> None:
    (lab / "r1").mkdir()
    (lab / "r1" / "etdump.etdp").symlink_to(lab.parent / "secret.bin")
    with pytest.raises(ManifestError, match=r"folder 'r1', column 'etdump': the path .* goes through a symlink"):
        load_manifest(lab)


def test_cli_allow_outside(lab: Path, capsys: pytest.CaptureFixture[str]) -> None:
    manifest = lab / "fleet.csv"
    manifest.write_text(HEADER + "a,../secret.bin,,\n")
    out = lab.parent / "out"
    assert main(["batch", str(manifest), "-o", str(out), "--analyses", "profile"]) == 3
    err = capsys.readouterr().err
    assert "points outside the manifest's folder" in err and "secret bytes" not in err and not out.exists()
    assert main(["batch", str(manifest), "-o", str(out), "--analyses", "profile", "--workers", "1",
                 "--allow-outside"]) == 3  # read now: the run fails on its content
    assert "1 run(s) failed" in capsys.readouterr().err


@pytest.mark.parametrize(("cwd", "given"), [("fleet", "."), ("fleet/sub", ".."), (".", "fleet/"), (".", "fleet")])
def test_a_relative_folder_manifest_resolves_from_the_working_directory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cwd: str, given: str) -> None:
    root = tmp_path / "fleet"
    (root / "device=pixel8" / "r1").mkdir(parents=True)
    (root / "sub").mkdir()
    (root / "device=pixel8" / "r1" / "etdump.etdp").write_bytes(b"d")
    (root / "etrecord.bin").write_bytes(b"r")
    monkeypatch.chdir(tmp_path / cwd)
    (spec,) = load_manifest(given)
    assert spec.etdump == str(root / "device=pixel8" / "r1" / "etdump.etdp")
    assert spec.etrecord == str(root / "etrecord.bin") and spec.labels == {"device": "pixel8"}


_BOUNDED = textwrap.dedent("""
    import resource, sys, time
    from numdiff.batch.manifest import ManifestError, load_manifest
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.perf_counter()
    try:
        load_manifest(sys.argv[1])
        print("loaded")
    except ManifestError as e:
        print(str(e).splitlines()[0])
    grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    print(f"{time.perf_counter() - started:.1f} s, {grown:.0f} MiB")
""")


def test_a_huge_csv_is_refused_in_bounded_time_and_memory(tmp_path: Path) -> None:
    rows = 300_000  # 3 x the cap; 1,000,000 rows took 60 s and 2 GB before
    path = tmp_path / "huge.csv"
    with open(path, "w") as f:
        f.write("run,etdump,etrecord,debug_buffer,device\n")
        f.writelines(f"r{i},runs/r{i}/etdump.etdp,model.etrecord,runs/r{i}/debug.bin,pixel{i % 7}\n"
                     for i in range(rows))
    done = subprocess.run([sys.executable, "-c", _BOUNDED, str(path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    message, cost = done.stdout.splitlines()
    assert message.endswith(f"row {MAX_RUNS + 1} (line {MAX_RUNS + 2}): more than {MAX_RUNS} runs"), message
    seconds, mib = (float(x.split()[0]) for x in cost.split(", "))
    assert seconds < 60 and mib < 400, cost  # the cap's worth of specs, not the file's
