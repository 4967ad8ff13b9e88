"""A debug buffer that is not one is refused at load, with the file to check (issue 20, item 3).

Real oracle files: an ETRecord zip, an ETDump (size-prefixed ``ED00``); a ``.pte`` header built
here (no fixture holds a program). Real debug buffers of every fixture still load.
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import pytest

from numdiff import Inspector
from numdiff.cli import main
from numdiff.errors import DebugBufferError
from numdiff.schema.debug_buffer import DebugBuffer, foreign_format

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
MLP = FIXTURES / "culprit_mlp"


@pytest.mark.parametrize(("name", "kind", "hint"), [
    ("etrecord.bin", "a zip archive (an ETRecord or a .pt2 archive)", "The ETRecord goes to --etrecord"),
    ("etdump.etdp", "an ETDump (FlatBuffer identifier ED00)", "The ETDump goes to --etdump"),
])
def test_a_real_etrecord_or_etdump_as_debug_buffer_is_refused_at_load(name: str, kind: str, hint: str) -> None:
    path = MLP / name
    with pytest.raises(DebugBufferError, match=re.escape(f"debug buffer '{path}': is not a debug buffer: it is {kind}\n{hint}")):
        DebugBuffer(path)
    with pytest.raises(DebugBufferError, match="as the debug buffer pass the file the runtime wrote with the ETDump"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            Inspector(etdump_path=MLP / "etdump.etdp", etrecord=str(MLP / "etrecord.bin"), debug_buffer_path=path)


def test_the_cli_exits_3_naming_the_file(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["culprits", "--etdump", str(MLP / "etdump.etdp"), "--etrecord", str(MLP / "etrecord.bin"),
                 "--debug-buffer", str(MLP / "etrecord.bin")])
    err = capsys.readouterr().err
    assert code == 3 and "is not a debug buffer: it is a zip archive" in err and "etrecord.bin" in err


def test_a_pte_header_is_refused(tmp_path: Path) -> None:
    pte = tmp_path / "model.pte"
    pte.write_bytes((24).to_bytes(4, "little") + b"ET12" + b"eh00" + bytes(100))
    with pytest.raises(DebugBufferError, match=r"ExecuTorch program \(.pte, FlatBuffer identifier ET12\)\n"
                                               r"The .pte program is not an input of numdiff"):
        DebugBuffer(pte)


def test_tensor_bytes_that_look_like_a_magic_are_not_refused(tmp_path: Path) -> None:
    # The magic alone is not enough: the second sign (zip directory, root offset inside the file) is missing.
    assert foreign_format(b"PK\x03\x04" + bytes(12), 64, None) is None
    zipish = tmp_path / "buf.bin"
    zipish.write_bytes(b"PK\x03\x04" + bytes(60))
    assert DebugBuffer(zipish).size == 64
    assert foreign_format(b"\xff\xff\xff\xffED00" + bytes(8), 64) is None
    assert foreign_format(b"\xff\xff\xff\xffET12" + bytes(8), 64) is None


@pytest.mark.parametrize("buffer", sorted(FIXTURES.glob("**/debug_buffer.bin")), ids=lambda p: p.parent.name)
def test_every_real_debug_buffer_still_loads(buffer: Path) -> None:
    head = buffer.read_bytes()[:16]
    assert foreign_format(head, buffer.stat().st_size, str(buffer)) is None
