"""Mutation strategies for the three files numdiff reads, seeded from the real fixtures.

Kinds (``KINDS``):

``etdump``
    Raw bytes (bit flips, byte sets, truncation, splices from another seed's ETDump, integer-field
    boosts at aligned positions, chunk deletes/repeats) half of the time; otherwise schema-aware:
    the dump is parsed with ``numdiff.schema``, one field is changed (run/event counts, tensor
    offsets, sizes, strides, scalar types, strings, union members and the Value's type tag, debug
    handles, instruction ids, times, versions; huge and negative values) and it is written back with
    ``numdiff/schema/etdump/writer.py`` (see ``fuzz/_etdump_mut.py``).
``debug_buffer``
    The buffer truncated, replaced by garbage, grown or shrunk, and/or the ETDump's logged tensors
    pointed into it awkwardly: near or past the end, overlapping another tensor, stride 0 with a
    huge size, negative strides, unaligned offsets.
``etrecord``
    Zip level (entry names, compression method, sizes, CRC, central-directory and end-record fields,
    truncation, dropped/duplicated entries, deflate bombs); JSON level in every JSON entry, the
    serialized programs' targets, names, args and tensor meta favoured (values, types, keys,
    nesting up to 100,000 deep); pickled entries (raw bytes, their inner zip, a pickle that would
    call ``os.system``). See ``fuzz/_etrecord_mut.py``.

Strings that would run code if numdiff ever executed them write ``canary`` (a path per case).
Every mutant is a pure function of (kind, seed, random seed): ``make_mutant`` replays it exactly.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from fuzz._etdump_mut import mutate_doc, mutate_tensor_against_buffer
from fuzz._etrecord_mut import mutate_etrecord
from fuzz._values import byte_mutation

__all__ = ["KINDS", "ROLES", "Mutant", "Seed", "find_seeds", "make_mutant"]

KINDS = ("etdump", "debug_buffer", "etrecord")
ROLES = ("etdump", "etrecord", "debug_buffer")
FILENAMES = {"etdump": "etdump.etdp", "etrecord": "etrecord.bin", "debug_buffer": "debug_buffer.bin"}
REPO = Path(__file__).resolve().parent.parent
MAX_SEED_BYTES = 256 << 10  # realistic fixtures larger than this are left out (they slow every case)


@dataclass(frozen=True)
class Seed:
    """One real artifact set: the ETDump, and the ETRecord / debug buffer when the fixture has them."""

    name: str
    etdump: Path
    etrecord: Path | None
    debug_buffer: Path | None

    def path(self, role: str) -> Path | None:
        p: Path | None = getattr(self, role)
        return p


@dataclass
class Mutant:
    """A mutated artifact set: ``files`` holds the bytes of each role (mutated or the seed's own)."""

    kind: str
    seed: Seed
    strategy: str
    files: dict[str, bytes] = field(default_factory=dict)
    mutated: tuple[str, ...] = ()


def find_seeds(root: Path = REPO) -> list[Seed]:
    """Fixture folders under tests/fixtures/ (and tests/fixtures/realistic/ under 256 KiB) and the bundled
    example, each with at least an ETDump."""
    fixtures = root / "tests" / "fixtures"
    # realistic models (control flow, two methods, dynamic shapes) when small enough to keep the rate up
    realistic = [d for d in sorted((fixtures / "realistic").glob("*/"))
                 if sum(f.stat().st_size for f in d.iterdir() if f.is_file()) < MAX_SEED_BYTES]
    dirs = sorted(fixtures.glob("*/")) + realistic + [root / "numdiff" / "examples" / "quantized_mlp"]
    seeds = []
    for d in dirs:
        if not (d / "etdump.etdp").is_file():
            continue
        opt = {role: (d / FILENAMES[role]) if (d / FILENAMES[role]).is_file() else None
               for role in ("etrecord", "debug_buffer")}
        name = d.name if d.parent.name != "realistic" else f"realistic/{d.name}"
        seeds.append(Seed(name, d / "etdump.etdp", opt["etrecord"], opt["debug_buffer"]))
    return seeds


def seeds_for(kind: str, seeds: list[Seed]) -> list[Seed]:
    """The seeds a kind can mutate (an ETRecord kind needs an ETRecord, and so on)."""
    if kind == "etrecord":
        return [s for s in seeds if s.etrecord is not None]
    if kind == "debug_buffer":
        return [s for s in seeds if s.debug_buffer is not None]
    return list(seeds)


@lru_cache(maxsize=256)
def _read(path: Path) -> bytes:
    return path.read_bytes()


@lru_cache(maxsize=64)
def _doc(path: Path):  # type: ignore[no-untyped-def]
    from numdiff.schema.etdump import read_etdump

    return read_etdump(_read(path)).to_doc()


def _write(doc) -> bytes:  # type: ignore[no-untyped-def]
    from numdiff.schema.etdump.writer import write_etdump

    return write_etdump(doc, size_prefixed=True)


def _schema_etdump(seed: Seed, rng: random.Random, canary: str, buffer_len: int | None = None) -> tuple[bytes, str]:
    from numdiff.errors import NumdiffError

    try:
        doc = _doc(seed.etdump)
    except NumdiffError:  # a seed the reader refuses (fp16_debug): only raw mutations apply
        return byte_mutation(_read(seed.etdump), rng)[0], "raw-fallback"
    for _ in range(8):  # some values do not fit the field the writer packs them into: draw again
        try:
            if buffer_len is None:
                new, how = mutate_doc(doc, rng, canary)
            else:
                new, how = mutate_tensor_against_buffer(doc, buffer_len, rng)
            return _write(new), f"schema.{how}"
        except (OverflowError, ValueError, TypeError, UnicodeEncodeError, __import__("struct").error):
            continue
    return byte_mutation(_read(seed.etdump), rng)[0], "raw-fallback"


def make_mutant(kind: str, seed: Seed, rng_seed: int, canary: str, others: list[Seed] | None = None) -> Mutant:
    """The mutant of ``kind`` drawn from ``seed`` with random seed ``rng_seed`` (deterministic)."""
    rng = random.Random(rng_seed)
    files = {role: _read(p) for role in ROLES if (p := seed.path(role)) is not None}
    mutated: list[str] = []
    if kind == "etdump":
        if rng.random() < 0.5:
            other = _read(rng.choice(others).etdump) if others else None
            files["etdump"], how = byte_mutation(files["etdump"], rng, other=other)
            how = f"raw.{how}"
        else:
            files["etdump"], how = _schema_etdump(seed, rng, canary)
        mutated.append("etdump")
    elif kind == "debug_buffer":
        u = rng.random()
        parts = []
        if u < 0.6:
            buf = files["debug_buffer"]
            what = rng.randrange(5)
            if what == 0:
                files["debug_buffer"] = buf[: rng.randrange(len(buf) + 1)]
                parts.append("buffer.truncate")
            elif what == 1:
                files["debug_buffer"] = rng.randbytes(len(buf))
                parts.append("buffer.garbage")
            elif what == 2:
                files["debug_buffer"] = buf + bytes(rng.choice([1, 7, 4096]))
                parts.append("buffer.grow")
            elif what == 3:
                files["debug_buffer"] = bytes(rng.choice([0, 1, 16])) + buf
                parts.append("buffer.shift")
            else:
                files["debug_buffer"], how = byte_mutation(buf, rng)
                parts.append(f"buffer.{how}")
            mutated.append("debug_buffer")
        if u >= 0.3:
            files["etdump"], how = _schema_etdump(seed, rng, canary, buffer_len=len(files["debug_buffer"]))
            parts.append(how)
            mutated.append("etdump")
        how = "+".join(parts)
    elif kind == "etrecord":
        files["etrecord"], how = mutate_etrecord(files["etrecord"], rng, canary)
        mutated.append("etrecord")
    else:
        raise ValueError(f"unknown kind {kind!r}; choose from {', '.join(KINDS)}")
    return Mutant(kind, seed, how, files, tuple(mutated))
