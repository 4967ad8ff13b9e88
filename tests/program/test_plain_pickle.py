"""ExecuTorch 1.0.x's ``pickle.dumps`` entries: read by the restricted reader, never by plain pickle.

ExecuTorch 1.0.x writes ``representative_inputs`` and ``reference_outputs`` with ``pickle.dumps``
(checked in the 1.0.1 wheel and in ``tests/fixtures/releases/1.0.1``). These tests write such
entries with ``pickle.dumps`` the same way, read them back, and try every kind of pickle that must be
refused: each refusal is an ETRecordError naming the entry and what it held, and no code runs.
"""

from __future__ import annotations

import io
import os
import pickle
import warnings
import zipfile
from collections import OrderedDict
from pathlib import Path
from typing import Any

import pytest
import torch

from numdiff import Inspector, parse_etrecord
from numdiff.errors import ETRecordError
from numdiff.program._plain_pickle import load_plain_pickle
from numdiff.program.graph_meta import ProgramLoadError
from tests.conftest import FIXTURES

MLP = FIXTURES / "mlp_fp32"


def _same(a: Any, b: Any) -> None:
    assert type(a) is type(b), (type(a), type(b))
    if isinstance(a, torch.Tensor):
        assert a.dtype == b.dtype and a.shape == b.shape and a.stride() == b.stride()
        assert torch.equal(a, b)
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _same(x, y)
    elif isinstance(a, dict):
        assert list(a) == list(b)
        for k in a:
            _same(a[k], b[k])
    else:
        assert a == b


VALUES = [
    [(torch.randn(2, 8),)],
    {"forward": [[torch.randn(2, 4)]]},
    [(torch.arange(12, dtype=torch.int64).reshape(3, 4)[:, 1], torch.tensor(True), torch.zeros(0))],
    [tuple(torch.randn(3).to(d) for d in (torch.float16, torch.bfloat16, torch.float64, torch.int8, torch.uint8,
                                         torch.int32, torch.int16, torch.complex64))],
    [(torch.randn(4, 4).t(), 3, 2.5, "text", None, b"raw", True)],
    OrderedDict(a=torch.ones(2)),
]


@pytest.mark.parametrize("value", VALUES, ids=["inputs", "outputs", "views", "dtypes", "scalars", "ordered"])
@pytest.mark.parametrize("protocol", [2, 4, 5])
def test_plain_pickles_of_tensors_read_back_equal(value: Any, protocol: int) -> None:
    _same(load_plain_pickle(pickle.dumps(value, protocol=protocol)), value)


def _etrecord_with(tmp_path: Path, **entries: bytes) -> Path:
    out = tmp_path / "etrecord.bin"
    with zipfile.ZipFile(MLP / "etrecord.bin") as src, zipfile.ZipFile(out, "w") as dst:
        for info in src.infolist():
            dst.writestr(info, entries.get(info.filename, src.read(info)))
    return out


def _inspector(etrecord: Path) -> Inspector:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Inspector(etdump_path=str(MLP / "etdump.etdp"), etrecord=str(etrecord),
                         debug_buffer_path=str(MLP / "debug_buffer.bin"))


def test_an_etrecord_with_1_0_pickles_gives_the_same_gap(tmp_path: Path) -> None:
    """Same entries re-written with pickle.dumps, as ExecuTorch 1.0.x writes them: same values, same gap."""
    saved = parse_etrecord(MLP / "etrecord.bin")
    inputs, outputs = saved._representative_inputs, saved._reference_outputs
    path = _etrecord_with(tmp_path, representative_inputs=pickle.dumps(inputs), reference_outputs=pickle.dumps(outputs))
    record = parse_etrecord(path)
    _same(record._representative_inputs, inputs)
    _same(record._reference_outputs, outputs)
    got = _inspector(path).calculate_numeric_gap("SNR")
    expected = _inspector(MLP / "etrecord.bin").calculate_numeric_gap("SNR")
    assert list(got["gap"]) == list(expected["gap"]) and len(got) == 3


class _Runs:
    """Unpickling it would run ``os.system`` (creating a marker file)."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, (f"touch {self.marker}",))


class _Rebuild:
    """A tensor rebuilt with crafted geometry over a real 4-element storage."""

    def __init__(self, sizes: tuple[int, ...], strides: tuple[int, ...], offset: int = 0, hooks: Any = None) -> None:
        self.args = (torch.ones(4)._typed_storage(), offset, sizes, strides, False, hooks or OrderedDict())

    def __reduce__(self) -> tuple[Any, ...]:
        return (torch._utils._rebuild_tensor_v2, self.args)


def _with_build(value: Any, state: Any) -> bytes:
    """pickle.dumps(value) followed by a BUILD of ``state`` on it (what a crafted file can do)."""
    head = pickle.dumps(value, protocol=2)[:-1]
    return head + pickle.dumps(state, protocol=2)[2:-1] + b"b."


def _legacy_storage_with_count(count: int) -> bytes:
    """A 1.0.x pickle of one tensor whose inner storage header claims ``count`` elements."""
    data = bytearray(pickle.dumps([torch.ones(4)], protocol=4))
    at = data.index((4).to_bytes(8, "little") + torch.ones(4).numpy().tobytes())  # the storage's header and data
    data[at:at + 8] = count.to_bytes(8, "little")
    return bytes(data)


def _cycle() -> list[Any]:
    loop: list[Any] = []
    loop.append(loop)
    return loop


def _deep() -> Any:
    nest: Any = torch.ones(1)
    for _ in range(300):
        nest = [nest]
    return nest


HOSTILE = [
    (lambda tmp: pickle.dumps([_Runs(tmp / "ran")]), r"names posix\.system, which is not a tensor"),
    (lambda tmp: pickle.dumps([eval]), r"names builtins\.eval"),
    (lambda tmp: pickle.dumps([torch.nn.Linear(2, 2)]), r"names torch\.nn\.modules\.linear\.Linear"),
    (lambda tmp: pickle.dumps([torch.nn.Parameter(torch.ones(2))]), r"names torch\._utils\._rebuild_parameter"),
    (lambda tmp: pickle.dumps([torch.float32]), r"names torch\.float32"),
    (lambda tmp: pickle.dumps([_Rebuild((1000,), (1,))]), r"reaches past its storage of 4 elements"),
    (lambda tmp: pickle.dumps([_Rebuild((2,), (1,), offset=-1)]), r"impossible"),
    (lambda tmp: pickle.dumps([_Rebuild((2,), (1,), hooks=OrderedDict(a=1))]), r"backward hooks"),
    (lambda tmp: pickle.dumps([_Rebuild((2**40,), (0,))]), r"describes 4398046511104 bytes, more than"),
    (lambda tmp: _with_build(torch.ones(2), ((1, 2), 0, (9,), (1,))), r"not a readable pickle"),
    (lambda tmp: _legacy_storage_with_count(5), r"element count does not match"),
    (lambda tmp: pickle.dumps(_cycle()), r"contains itself"),
    (lambda tmp: pickle.dumps(_deep()), r"nested more than 200 deep"),
    (lambda tmp: pickle.dumps([torch.ones(3)])[:-20], r"not a readable pickle"),
]


@pytest.mark.parametrize(("make", "match"), HOSTILE, ids=[
    "os-system", "eval", "module", "parameter", "dtype", "past-storage", "negative-offset", "hooks", "stride-0",
    "build-on-tensor", "storage-count", "cycle", "deep", "truncated"])
def test_hostile_plain_pickles_are_refused_by_name(tmp_path: Path, make: Any, match: str) -> None:
    path = _etrecord_with(tmp_path, representative_inputs=make(tmp_path))
    record = parse_etrecord(path)
    with pytest.raises(ETRecordError, match=match) as info:
        record._representative_inputs  # noqa: B018 - the read is the test
    message = str(info.value)
    assert "entry 'representative_inputs'" in message and "damaged" not in message
    if "max_tensor" not in message:  # (a tensor too large for the limits: the limits' hint)
        assert "is a plain pickle (as ExecuTorch 1.0.x writes it) that numdiff does not read" in message
    assert str(path) in message
    assert not (tmp_path / "ran").exists()


def test_the_reader_refuses_persistent_ids_in_the_outer_pickle() -> None:
    class Out(pickle.Pickler):
        def persistent_id(self, obj: Any) -> Any:
            return 7 if isinstance(obj, str) else None

    buffer = io.BytesIO()
    Out(buffer, protocol=2).dump(["x"])
    with pytest.raises(ProgramLoadError, match="persistent id"):
        load_plain_pickle(buffer.getvalue())


def test_garbage_that_is_neither_zip_nor_pickle_names_both_formats(tmp_path: Path) -> None:
    record = parse_etrecord(_etrecord_with(tmp_path, reference_outputs=b"neither"))
    with pytest.raises(ETRecordError, match=r"(?s)neither a torch.save zip archive nor a pickle.*pickle.dumps \(1.0.x and older\)"):
        record._reference_outputs  # noqa: B018
