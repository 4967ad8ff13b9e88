"""Every way the aligner can match a pair has a sentence in the report."""

from __future__ import annotations

from numdiff.align._records import MatchKind
from numdiff.analysis._build import MATCH_EXPLANATIONS


def test_every_match_kind_is_explained() -> None:
    assert {kind.value for kind in MatchKind} <= set(MATCH_EXPLANATIONS)
