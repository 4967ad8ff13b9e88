"""Real artifacts shipped with numdiff, written by ExecuTorch 1.5.1 (see scripts/make_fixtures.py)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = ["ExampleFiles", "example_files"]


@dataclass(frozen=True, slots=True)
class ExampleFiles:
    """Paths of one bundled example's ETDump, ETRecord and debug buffer."""

    etdump: Path
    etrecord: Path
    debug_buffer: Path


def example_files(name: str = "quantized_mlp") -> ExampleFiles:
    """The bundled example ``name``: a PT2E-quantized MLP in two XNNPACK partitions by default.

    ``"planted_culprit"``: an fp32 MLP whose run (ETDump, debug buffer) comes from a twin with
    ``fc2``'s weights changed, for ``Inspector.find_culprits``.

    Example:
        >>> example_files().etdump.name
        'etdump.etdp'
    """
    folder = Path(__file__).parent / name
    if not folder.is_dir():
        from numdiff.errors import UsageError

        known = sorted(p.name for p in Path(__file__).parent.iterdir() if p.is_dir() and not p.name.startswith("_"))
        raise UsageError(f"no bundled example {name!r}\nKnown examples: {', '.join(known)}.")
    return ExampleFiles(folder / "etdump.etdp", folder / "etrecord.bin", folder / "debug_buffer.bin")
