"""Counting and announcing the notes a stage leaves (skipped pairs, fallbacks, replacements)."""

from __future__ import annotations

import warnings
from collections import Counter
from collections.abc import Iterable
from enum import Enum
from typing import Protocol


class _Note(Protocol):
    @property
    def kind(self) -> Enum: ...


def count_kinds(notes: Iterable[_Note]) -> dict[str, int]:
    """How many notes of each kind, by kind value (e.g. ``{"fallback_match": 2}``)."""
    return dict(Counter(str(note.kind.value) for note in notes))


def warn_counts(counts: dict[str, int], what: str, hint: str, stacklevel: int) -> None:
    """One ``UserWarning`` summarising ``counts``; nothing when there are none.

    Args:
        counts: From :func:`count_kinds`.
        what: What was being done, for the message.
        hint: Where the detailed notes are.
        stacklevel: For :func:`warnings.warn`, counted from the caller of this function.
    """
    if not counts:
        return
    summary = ", ".join(f"{count} {kind}" for kind, count in sorted(counts.items()))
    warnings.warn(f"numdiff: while {what}: {summary}.\n{hint}", UserWarning, stacklevel=stacklevel + 1)
