"""The ETRecord's ``delegate_info`` entry (per-delegate backend metadata, keyed ``method/lowered_name``).

ExecuTorch 1.5.1 does not write it yet (its next release will): the records here are the oracle's
bundled-example ETRecord with the entry added as ExecuTorch adds JSON entries (a stored zip
entry of ``json.dumps``). Present → read and served; malformed → a named error; absent → empty.
"""

from __future__ import annotations

import json
import shutil
import warnings
import zipfile
from pathlib import Path

import pytest

from numdiff import Inspector
from numdiff.errors import ETRecordError
from numdiff.examples import example_files
from numdiff.schema.etrecord import parse_etrecord

INFO = {"forward/lowered_module_0": {"backend": "XnnpackBackend", "xnn_ops": 9, "fp16": False},
        "forward/lowered_module_1": {"backend": "XnnpackBackend", "xnn_ops": 3, "fp16": False}}


def _with_entry(tmp_path: Path, content: object) -> Path:
    record = tmp_path / "etrecord.bin"
    shutil.copy(example_files().etrecord, record)
    with zipfile.ZipFile(record, "a") as z:
        z.writestr("delegate_info", json.dumps(content))
    return record


def test_entry_is_read_and_served(tmp_path: Path) -> None:
    record = _with_entry(tmp_path, INFO)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a known entry: no "unknown entry" warning
        parsed = parse_etrecord(record)
    assert parsed.unknown_entries == ()
    assert parsed.delegate_info() == {("forward", "lowered_module_0"): INFO["forward/lowered_module_0"],
                                      ("forward", "lowered_module_1"): INFO["forward/lowered_module_1"]}
    assert parsed.delegate_info("encode") == {}
    ex = example_files()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        inspector = Inspector(etdump_path=ex.etdump, etrecord=str(record), debug_buffer_path=ex.debug_buffer)
    assert inspector.get_delegate_info("forward")[("forward", "lowered_module_1")]["xnn_ops"] == 3


def test_absent_entry_gives_nothing() -> None:
    assert parse_etrecord(example_files().etrecord).delegate_info() == {}


@pytest.mark.parametrize("content, field", [
    ({"lowered_module_0": {}}, r"lowered_module_0"),
    ({"forward/lowered_module_0": [1, 2]}, r"forward/lowered_module_0"),
    ([1, 2], r"\(top level\)"),
])
def test_malformed_entry_is_a_named_error(tmp_path: Path, content: object, field: str) -> None:
    with pytest.raises(ETRecordError, match=rf"entry 'delegate_info': field .*{field}(.|\n)*method/lowered_name"):
        parse_etrecord(_with_entry(tmp_path, content))
