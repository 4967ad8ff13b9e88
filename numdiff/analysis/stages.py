"""An analysis in stages: profile, gap, culprits, then the whole :class:`~numdiff.analysis.models.Analysis`.

There is one pipeline (:func:`numdiff.analysis._build.build_parts`); this module is its face for
callers that run the stages one at a time. :meth:`Analysis.from_inspector` runs them one after
another; the service runs each as its own persisted job (``numdiff.service.worker``), so a run's
profile is stored and shown while its gap is still being computed, and a failure names the stage
it happened in. Each stage's result is a small pydantic model that round-trips through JSON
(:func:`dump_part` / :func:`load_part`), and :func:`assemble` puts the parts together into exactly
the analysis the one-call path builds.

Example:
    >>> from numdiff.analysis.stages import assemble, culprit_part, gap_part, profile_part  # doctest: +SKIP
    >>> profile = profile_part(inspector, {"etdump": etdump_path})  # doctest: +SKIP
    >>> gap = gap_part(inspector, etdump_path)  # doctest: +SKIP
    >>> analysis = assemble({"device": "pixel8"}, profile, gap, culprit_part(inspector, gap))  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, ValidationError

from numdiff.analysis._build import NOT_ASKED, Progress, build_parts, culprit_part, gap_part, profile_part
from numdiff.analysis.models import Analysis
from numdiff.analysis.records import CulpritSection, GapPart, ProfilePart
from numdiff.errors import AnalysisFileError, UsageError

if TYPE_CHECKING:
    from numdiff.inspector import Inspector

__all__ = ["NOT_ASKED", "STAGES", "GapPart", "ProfilePart", "assemble", "build_analysis", "build_parts",
           "culprit_part", "dump_part", "gap_part", "input_options", "load_part", "profile_part"]

#: The stages in the order they run; each needs the ones before it (``report`` needs them all).
STAGES = ("profile", "gap", "culprits", "report")

P = TypeVar("P", ProfilePart, GapPart, CulpritSection)


def assemble(labels: Mapping[str, str], profile: ProfilePart, gap: GapPart, culprits: CulpritSection) -> Analysis:
    """The saved analysis made of the three parts (what :meth:`Analysis.from_inspector` returns)."""
    return Analysis.from_parts(labels, profile, gap, culprits)


def build_analysis(inspector: Inspector, labels: Mapping[str, str], artifact_paths: Mapping[str, object],
                   progress: Progress | None = None, culprit_options: Mapping[str, Any] | None = None) -> Analysis:
    """Every stage in one call (the same as :meth:`Analysis.from_inspector`)."""
    return Analysis.from_inspector(inspector, labels, artifact_paths=artifact_paths, progress=progress,
                                   culprit_options=culprit_options)


def input_options(step_inputs: object = None, inputs_are_representative: bool = False) -> dict[str, Any]:
    """The stages' options that say which graph inputs a run used: its own (``step_inputs``, a list or
    a file; the gap and culprit stages run on them) or the ETRecord's representative ones (declared).

    Raises:
        UsageError: Both given: a run used one or the other.
    """
    if step_inputs is not None and inputs_are_representative:
        raise UsageError("the run's own inputs (step_inputs, --step-inputs) and inputs_are_representative "
                         "(--inputs-are-representative) are both given\nGive the inputs the run used, or say it used "
                         "the ETRecord's representative ones: one of them.")
    if step_inputs is not None:
        return {"step_inputs": step_inputs}
    return {"inputs_are_representative": True} if inputs_are_representative else {}


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
