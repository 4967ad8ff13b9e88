"""An analysis in stages: profile, gap, culprits, then the whole :class:`~numdiff.report.Analysis`.

:meth:`Analysis.from_inspector` runs the stages one after another; the service runs each as its
own persisted job (``numdiff.service.jobs``), so a run's profile is stored and shown while its gap
is still being computed, and a failure names the stage it happened in. Each stage's result is a
small pydantic model that round-trips through JSON (:func:`dump_part` / :func:`load_part`), and
:func:`assemble` puts the parts together into exactly the analysis the one-call path builds.

Example:
    >>> from numdiff.analysis.stages import assemble, culprit_part, gap_part, profile_part  # doctest: +SKIP
    >>> profile = profile_part(inspector, {"etdump": etdump_path})  # doctest: +SKIP
    >>> gap = gap_part(inspector, etdump_path)  # doctest: +SKIP
    >>> analysis = assemble({"device": "pixel8"}, profile, gap, culprit_part(inspector, gap))  # doctest: +SKIP
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from numdiff.errors import AnalysisFileError
from numdiff.analysis.models import (
    Analysis,
    ArtifactInfo,
    CulpritSection,
    GapSection,
    ProfileSummary,
)

__all__ = ["STAGES", "GapPart", "ProfilePart", "assemble", "culprit_part", "dump_part", "gap_part", "load_part",
           "profile_part"]

#: The stages in the order they run; each needs the ones before it (``report`` needs them all).
STAGES = ("profile", "gap", "culprits", "report")


class _Part(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", ser_json_inf_nan="strings")


class ProfilePart(_Part):
    """The profile stage: latency per event, the artifacts' hashes and the Inspector's notes."""

    artifacts: list[ArtifactInfo] = Field(default_factory=list)
    profile: ProfileSummary
    notes: list[str] = Field(default_factory=list)


class GapPart(_Part):
    """The gap stage: the SNR/MSE/L1 rows, or why there are none."""

    gap: GapSection | None = None
    gap_unavailable: str | None = None


P = TypeVar("P", ProfilePart, GapPart, CulpritSection)


def profile_part(inspector: Any, artifact_paths: Mapping[str, object]) -> ProfilePart:
    """Hash the artifacts and summarise the Inspector's profile view."""
    from numdiff.analysis._build import file_info, profile_summary

    return ProfilePart(artifacts=[file_info(role, path) for role, path in artifact_paths.items() if path is not None],
                       profile=profile_summary(inspector.event_blocks), notes=list(getattr(inspector, "notes", ())))


def gap_part(inspector: Any, etdump_path: object = None, progress: Any = None) -> GapPart:
    """The numerical gap with every metric, or the reason it is not available (no debug buffer ...)."""
    from numdiff.analysis._build import gap_section

    gap, unavailable = gap_section(inspector, etdump_path, progress)
    return GapPart(gap=gap, gap_unavailable=unavailable)


def culprit_part(inspector: Any, gap: GapPart, options: Mapping[str, Any] | None = None) -> CulpritSection:
    """Culprit localization; not available (with the gap's reason) when there is no gap."""
    from numdiff.analysis._build import culprit_section

    if gap.gap is None:
        return CulpritSection(available=False, reason="not available: no numerical gap (" + (gap.gap_unavailable or "") + ")")
    return culprit_section(inspector, options or {})


def assemble(labels: Mapping[str, str], profile: ProfilePart, gap: GapPart, culprits: CulpritSection) -> Analysis:
    """The saved analysis made of the three parts (what :meth:`Analysis.from_inspector` returns)."""
    from numdiff import __version__

    return Analysis(
        numdiff_version=__version__,
        created_utc=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        labels=dict(labels), artifacts=profile.artifacts, profile=profile.profile, gap=gap.gap,
        gap_unavailable=gap.gap_unavailable, culprits=culprits, notes=profile.notes)


def dump_part(part: BaseModel) -> str:
    """A stage's result as strict JSON (non-finite floats as strings, as in analysis files)."""
    return part.model_dump_json()


def load_part(kind: type[P], text: str | bytes, where: str = "a stage result") -> P:
    """Parse a stage's result written by :func:`dump_part`.

    Raises:
        AnalysisFileError: Not JSON, or not a valid part of that kind (naming ``where``).
    """
    try:
        return kind.model_validate_json(text)
    except ValidationError as e:
        problems = "; ".join(f"{'.'.join(str(p) for p in err['loc']) or '(top)'}: {err['msg']}" for err in e.errors()[:3])
        raise AnalysisFileError(where, f"is not a valid {kind.__name__}: {problems}",
                                "It was damaged after it was written: run that stage again.") from e
