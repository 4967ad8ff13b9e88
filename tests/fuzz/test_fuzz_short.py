"""Short fuzzing budget for the default suite: hypothesis over ETDump bytes, schema-aware ETDump
mutations, the debug buffer and the ETRecord's JSON entries, plus a smoke run of fuzz/campaign.py.

The only acceptable outcomes are success or a ``NumdiffError``; the input files never change and
no payload string ever writes its canary. The long campaign is ``python fuzz/campaign.py``.
"""

from __future__ import annotations

import hashlib
import io
import json
import random
import re
import subprocess
import sys
import tempfile
import warnings
import zipfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fuzz._etdump_mut import mutate_doc, mutate_tensor_against_buffer
from fuzz._zipraw import read_entries, write_zip
from fuzz.mutators import FILENAMES, REPO, find_seeds
from numdiff.errors import NumdiffError
from numdiff.inspector import Inspector
from numdiff.schema.etdump import read_etdump
from numdiff.schema.etdump.writer import write_etdump

SEEDS = {s.name: s for s in find_seeds()}
SMALL = ["mlp_fp32", "multi_output", "pt2e_quant", "xnnpack", "quantized_mlp", "many_runs", "no_etrecord"]
FULL = ["mlp_fp32", "multi_output", "pt2e_quant", "quantized_mlp", "culprit_softmax"]  # ETRecord + debug buffer

FAST = settings(max_examples=70, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _run(files: dict[str, bytes], *, gap: bool = False) -> None:
    """Write ``files`` to a fresh folder, run what a user runs; only NumdiffError may come out."""
    with tempfile.TemporaryDirectory() as tmp:
        paths = {role: Path(tmp) / FILENAMES[role] for role in files}
        for role, data in files.items():
            paths[role].write_bytes(data)
        before = {role: hashlib.sha256(p.read_bytes()).hexdigest() for role, p in paths.items()}
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                inspector = Inspector(etdump_path=str(paths["etdump"]),
                                      etrecord=str(paths["etrecord"]) if "etrecord" in paths else None,
                                      debug_buffer_path=str(paths["debug_buffer"]) if "debug_buffer" in paths else None)
                inspector.to_dataframe()
                inspector.print_data_tabular(file=io.StringIO())
                if gap and "etrecord" in paths and "debug_buffer" in paths:
                    inspector.calculate_numeric_gap("SNR")
        except NumdiffError:
            pass
        after = {role: hashlib.sha256(p.read_bytes()).hexdigest() for role, p in paths.items()}
        assert after == before, "numdiff modified an input file"
        assert not (Path(tmp) / "CANARY").exists()


def _files(name: str) -> dict[str, bytes]:
    seed = SEEDS[name]
    return {role: p.read_bytes() for role in FILENAMES if (p := seed.path(role)) is not None}


@FAST
@given(name=st.sampled_from(SMALL), edits=st.lists(st.tuples(st.integers(0, 1 << 20), st.integers(0, 255)),
                                                    max_size=6),
       cut=st.one_of(st.none(), st.integers(0, 1 << 20)))
def test_etdump_bytes(name: str, edits: list[tuple[int, int]], cut: int | None) -> None:
    files = _files(name)
    data = bytearray(files["etdump"])
    for pos, value in edits:
        data[pos % len(data)] = value
    files["etdump"] = bytes(data[: None if cut is None else cut % (len(data) + 1)])
    _run(files)


@FAST
@given(name=st.sampled_from(SMALL), rng_seed=st.integers(0, 2**32), steps=st.integers(1, 3))
def test_schema_aware_etdump(name: str, rng_seed: int, steps: int) -> None:
    files = _files(name)
    doc = read_etdump(files["etdump"]).to_doc()
    rng = random.Random(rng_seed)
    for _ in range(steps):
        doc, _how = mutate_doc(doc, rng, "/nonexistent/CANARY")
    try:
        files["etdump"] = write_etdump(doc)
    except (OverflowError, ValueError, TypeError, UnicodeEncodeError):
        return  # a value the writer cannot pack into its field: nothing to read
    except Exception as e:  # struct.error
        if type(e).__name__ != "error":
            raise
        return
    _run(files)


@settings(FAST, max_examples=40)
@given(name=st.sampled_from(FULL), rng_seed=st.integers(0, 2**32), cut=st.one_of(st.none(), st.integers(0, 1 << 16)))
def test_debug_buffer_against_tensors(name: str, rng_seed: int, cut: int | None) -> None:
    files = _files(name)
    if cut is not None:
        files["debug_buffer"] = files["debug_buffer"][: cut % (len(files["debug_buffer"]) + 1)]
    doc, _how = mutate_tensor_against_buffer(read_etdump(files["etdump"]).to_doc(), len(files["debug_buffer"]),
                                             random.Random(rng_seed))
    files["etdump"] = write_etdump(doc)
    _run(files, gap=True)


_JSON = st.recursive(st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=20),
                     lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                                 max_size=4), max_leaves=12)


def _json_paths(node: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = []
    stack = [(node, path)]
    while stack:
        cur, p = stack.pop()
        items = cur.items() if isinstance(cur, dict) else enumerate(cur) if isinstance(cur, list) else ()
        for k, v in items:
            out.append(p + (k,))
            stack.append((v, p + (k,)))
    return out


@settings(FAST, max_examples=80)
@given(name=st.sampled_from(FULL), data=st.data())
def test_etrecord_json_entries(name: str, data: st.DataObject) -> None:
    files = _files(name)
    entries = read_entries(files["etrecord"])
    jsons = [i for i, e in enumerate(entries) if e.data[:1] == b"{"]
    i = data.draw(st.sampled_from(jsons), label="entry")
    doc = json.loads(entries[i].data)
    paths = _json_paths(doc)
    if paths:
        path = data.draw(st.sampled_from(paths), label="path")
        parent = doc
        for step in path[:-1]:
            parent = parent[step]
        if data.draw(st.booleans(), label="delete"):
            del parent[path[-1]]
        else:
            parent[path[-1]] = data.draw(_JSON, label="value")
    entries[i] = entries[i].with_(data=json.dumps(doc).encode("utf-8", "surrogatepass"), crc=None, size=None)
    files["etrecord"] = write_zip(entries)
    _run(files, gap=True)


def test_zip_writer_round_trips() -> None:
    raw = SEEDS["mlp_fp32"].etrecord.read_bytes()  # type: ignore[union-attr]
    with zipfile.ZipFile(io.BytesIO(write_zip(read_entries(raw)))) as z, zipfile.ZipFile(io.BytesIO(raw)) as ref:
        assert z.namelist() == ref.namelist()
        assert all(z.read(n) == ref.read(n) for n in ref.namelist())


def test_campaign_smoke(tmp_path: Path) -> None:
    """The documented campaign runs end to end, prints its summary, and finds no escape."""
    proc = subprocess.run([sys.executable, str(REPO / "fuzz" / "campaign.py"), "--mutants", "60", "--seed", "7",
                           "--out", str(tmp_path), "--warm-up", "6"],
                          capture_output=True, text=True, timeout=300, cwd=REPO)
    out = proc.stdout
    assert "numdiff fuzz campaign: 60 mutants" in out, proc.stderr[-3000:]
    header, _rule, *rows = out.split("\n\n")[1].splitlines()
    cols = header.split()
    total = dict(zip(cols, next(r for r in rows if r.startswith("total")).split()))
    assert total["mutants"] == "60"
    for outcome in ("ESCAPE", "MODIFIED", "CANARY", "CRASH", "MUTATOR"):
        assert total[outcome] == "0", out
    assert re.search(r"distinct escape signatures: \d+", out) and "slowest 5 cases" in out
    assert (tmp_path / "summary.txt").read_text() == out
