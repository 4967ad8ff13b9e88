"""Reading `.pt2` archives (torch.export.save) with numdiff's checks, never torch.export.load.

The archives are written here by torch.export.save from small models (trusted: the test made
them), so loading them with torch.export.load as well is fine to compare. Every broken or
hostile variant must give a ProgramArchiveError naming the file and what is wrong.
"""

from __future__ import annotations

import io
import json
import pickle
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from numdiff.errors import ProgramArchiveError
from numdiff.limits import use_limits
from numdiff.schema.pt2 import load_pt2


class _ConvBN(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(2, 4, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(4)
        self.head = torch.nn.Linear(4, 3)
        self.register_buffer("scale", torch.tensor([0.5, 2.0, 1.0]))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.bn(self.conv(x))).mean(dim=(2, 3))
        return self.head(h) * self.scale + torch.arange(3.0)  # a lifted tensor constant too


class _Tied(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = torch.nn.Linear(4, 4)
        self.b = torch.nn.Linear(4, 4)
        self.b.weight = self.a.weight

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(torch.tanh(self.a(x))[:, :4])


def _save(tmp_path: Path, model: torch.nn.Module, example: tuple[torch.Tensor, ...], name: str = "m.pt2") -> Path:
    torch.manual_seed(0)
    path = tmp_path / name
    torch.export.save(torch.export.export(model.eval(), example), path)
    return path


@pytest.fixture(scope="module")
def conv_pt2(tmp_path_factory: pytest.TempPathFactory) -> Path:
    torch.manual_seed(1)
    return _save(tmp_path_factory.mktemp("pt2"), _ConvBN(), (torch.randn(1, 2, 6, 6),))


@pytest.mark.parametrize("make, example", [(_ConvBN, (torch.randn(1, 2, 6, 6),)), (_Tied, (torch.randn(3, 4),))])
def test_loads_what_torch_loads(tmp_path: Path, make: Callable[[], torch.nn.Module],
                                example: tuple[torch.Tensor, ...]) -> None:
    torch.manual_seed(2)
    path = _save(tmp_path, make(), example)
    mine, theirs = load_pt2(path), torch.export.load(path)
    assert [n.name for n in mine.graph.nodes] == [n.name for n in theirs.graph.nodes]
    assert mine.state_dict.keys() == theirs.state_dict.keys()
    for key, value in theirs.state_dict.items():
        assert torch.equal(mine.state_dict[key], value) and type(mine.state_dict[key]) is type(value)
    assert torch.equal(mine.module()(*example), theirs.module()(*example))
    stacks = [n.meta.get("nn_module_stack") for n in mine.graph.nodes if n.op == "call_function"]
    assert all(stacks)


def _rewrite(src: Path, dst: Path, change: Callable[[str, bytes], bytes | None],
             extra: dict[str, bytes] | None = None) -> Path:
    """Copy the archive, entry by entry through ``change`` (None drops the entry), plus ``extra`` entries."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_STORED) as zout:
        for info in zin.infolist():
            data = change(info.filename, zin.read(info))
            if data is not None:
                zout.writestr(info.filename, data)
        for name, data in (extra or {}).items():
            zout.writestr(name, data)
    return dst


def _json_change(suffix: str, edit: Callable[[dict], None]) -> Callable[[str, bytes], bytes | None]:  # type: ignore[type-arg]
    def change(name: str, data: bytes) -> bytes | None:
        if not name.endswith(suffix):
            return data
        doc = json.loads(data)
        edit(doc)
        return json.dumps(doc).encode()
    return change


def _set_first_target(doc: dict) -> None:  # type: ignore[type-arg]
    doc["graph_module"]["graph"]["nodes"][0]["target"] = "torch.ops.load_library"


def _shrink_weight(doc: dict) -> None:  # type: ignore[type-arg]
    first = next(iter(doc["config"].values()))
    first["tensor_meta"]["sizes"][0]["as_int"] = 10_000


def _escape_path(doc: dict) -> None:  # type: ignore[type-arg]
    next(iter(doc["config"].values()))["path_name"] = "../../etc/passwd"


def _pickled(doc: dict) -> None:  # type: ignore[type-arg]
    first = next(iter(doc["config"].values()))
    first["use_pickle"] = True


class _Evil:
    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (print, ("pwned",))


@pytest.mark.parametrize("mutate, pattern", [
    (lambda n, d: b"big" if n.endswith("/byteorder") else d, r"stored b'big'-endian"),
    (lambda n, d: b"zip" if n.endswith("/archive_format") else d, r"archive_format is b'zip', not b'pt2'"),
    (lambda n, d: None if n.endswith("/archive_format") else d, r"no <name>/archive_format entry"),
    (lambda n, d: None if n.endswith("/weight_0") else d, r"weights 'conv.weight': entry '.*weight_0' is missing"),
    (_json_change("model.json", _set_first_target), r"load_library"),
    (_json_change("model_weights_config.json", _shrink_weight), r"weights 'conv\.weight': shape \[10000, 2, 3, 3\].*needs \d+ bytes, but its entry holds 288"),
    (_json_change("model_weights_config.json", _escape_path), r"file name '\.\./\.\./etc/passwd' is not a plain name"),
    (_json_change("model_weights_config.json", lambda d: d.update(config=[1])), r"is not a valid tensor config"),
    (_json_change("model.json", lambda d: d.update(schema_version={"major": 99, "minor": 0})), r"unknown export schema version 99\.0"),
])
def test_broken_archives_are_named_errors(conv_pt2: Path, tmp_path: Path, mutate: Callable[[str, bytes], bytes | None],
                                          pattern: str) -> None:
    bad = _rewrite(conv_pt2, tmp_path / "bad.pt2", mutate)
    with pytest.raises(ProgramArchiveError, match=r"\.pt2 archive '.*bad\.pt2': " + r"(.|\n)*" + pattern):
        load_pt2(bad)


def test_a_pickled_tensor_is_read_weights_only(conv_pt2: Path, tmp_path: Path) -> None:
    evil = io.BytesIO()
    pickle.dump(_Evil(), evil)
    bad = _rewrite(conv_pt2, tmp_path / "bad.pt2",
                   lambda n, d: evil.getvalue() if n.endswith("/weight_0") else _json_change(
                       "model_weights_config.json", _pickled)(n, d))
    with pytest.raises(ProgramArchiveError, match=r"weights 'conv\.weight'.*(cannot be loaded|not a torch\.save)"):
        load_pt2(bad)


def test_two_models_need_a_choice(conv_pt2: Path, tmp_path: Path) -> None:
    with zipfile.ZipFile(conv_pt2) as z:
        prefix = z.namelist()[0].split("/")[0]
        model = z.read(f"{prefix}/models/model.json")
    two = _rewrite(conv_pt2, tmp_path / "two.pt2", lambda n, d: d, {f"{prefix}/models/other.json": model})
    with pytest.raises(ProgramArchiveError, match=r"holds 2 models \['model', 'other'\].*\nPass which one"):
        load_pt2(two)
    assert load_pt2(two, model="model").graph is not None
    with pytest.raises(ProgramArchiveError, match=r"no model 'nope'"):
        load_pt2(two, model="nope")


def test_zip_bomb_and_truncation(conv_pt2: Path, tmp_path: Path) -> None:
    bomb = tmp_path / "bomb.pt2"
    with zipfile.ZipFile(conv_pt2) as zin, zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as zout:
        for info in zin.infolist():
            zout.writestr(info.filename, zin.read(info))
        zout.writestr("m/data/weights/padding", bytes(64 << 20))
    with pytest.raises(ProgramArchiveError, match=r"bomb\.pt2.*padding.*max_entry_ratio(.|\n)*NUMDIFF_MAX_ENTRY_RATIO"):
        load_pt2(bomb)
    cut = tmp_path / "cut.pt2"
    cut.write_bytes(conv_pt2.read_bytes()[:-100])
    with pytest.raises(ProgramArchiveError, match=r"cut\.pt2.*(truncated|not a readable zip)"):
        load_pt2(cut)
    with pytest.raises(ProgramArchiveError, match=r"missing\.pt2': file not found"):
        load_pt2(tmp_path / "missing.pt2")
    with use_limits(max_entries=3), pytest.raises(ProgramArchiveError, match=r"entries, more than the limit 3"):
        load_pt2(conv_pt2)
