"""scripts/install_test_system_deps.sh: silent when everything is there, a note (exit 0) when not root."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "install_test_system_deps.sh"


def _fake_bin(tmp_path: Path, uid: int, programs: list[str]) -> Path:
    folder = tmp_path / "bin"
    folder.mkdir()
    (folder / "id").write_text(f"#!/bin/sh\necho {uid}\n")
    for name in programs:
        (folder / name).write_text("#!/bin/sh\nexit 0\n")
    for p in folder.iterdir():
        p.chmod(0o755)
    return folder


def _run(path: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PATH"} | {"PATH": str(path)}
    return subprocess.run(["/bin/sh", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=60, check=False)


def test_silent_when_everything_is_present(tmp_path: Path) -> None:
    # python3 stands for an interpreter whose Python.h exists (the fake exits 0)
    done = _run(_fake_bin(tmp_path, 0, ["chromium", "chromedriver", "initdb", "apt-get", "cc", "python3"]))
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


def test_not_root_gets_a_note_and_exit_0(tmp_path: Path) -> None:
    # no C compiler and no python3 on this PATH: gcc and python3-dev are missing too
    if any(Path("/usr/lib/postgresql").glob("*/bin/initdb")):
        missing = "gcc python3-dev chromium chromium-driver"
    else:
        missing = "gcc python3-dev chromium chromium-driver postgresql"
    done = _run(_fake_bin(tmp_path, 1000, ["apt-get"]))
    assert done.returncode == 0 and done.stdout == ""
    assert f"note: not root, so not installing: {missing}" in done.stderr


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="shellcheck not installed")
def test_shellcheck_clean() -> None:
    subprocess.run(["shellcheck", str(SCRIPT)], check=True)
