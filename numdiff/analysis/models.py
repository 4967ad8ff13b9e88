"""The saved analysis: :class:`Analysis`, one versioned JSON file made of the records of
:mod:`numdiff.analysis.records` (re-exported here).

An :class:`Analysis` holds everything the report, the trace, the CI diff and the notebook view
need, so they never have to reopen the ExecuTorch artifacts. It is built by one pipeline
(:func:`numdiff.analysis._build.build_parts`, run by :meth:`Analysis.from_inspector` and, one stage
per job, by the service through :mod:`numdiff.analysis.stages`) and put together by
:meth:`Analysis.from_parts`.
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pydantic import Field, ValidationError

from numdiff._core.files import atomic_write
from numdiff.analysis._build import Progress, build_parts
from numdiff.analysis.migrations import invalid_analysis, read_analysis_data
from numdiff.analysis.records import (
    FORMAT_VERSION,
    ArtifactInfo,
    CulpritSection,
    GapPart,
    GapSection,
    ProfilePart,
    ProfileSummary,
    ProgramSignature,
    _Model,
)

if TYPE_CHECKING:
    from numdiff.inspector import Inspector

__all__ = ["Analysis"]


class Analysis(_Model):
    """One saved analysis of an ExecuTorch run. Build with :meth:`from_inspector` or
    :meth:`from_files`; write with :meth:`save`, read with :meth:`load`."""

    format_version: int = FORMAT_VERSION
    numdiff_version: str
    created_utc: str
    labels: dict[str, str] = Field(default_factory=dict)
    artifacts: list[ArtifactInfo] = Field(default_factory=list)
    program: ProgramSignature | None = Field(
        default=None, description="signature of the ETRecord's Edge program(s): analyses of different programs "
                                  "are not compared; None without an ETRecord or in files older than version 3")
    profile: ProfileSummary
    gap: GapSection | None = None
    gap_unavailable: str | None = Field(default=None, description="why there is no gap section")
    culprits: CulpritSection = CulpritSection(available=False, reason="not computed")
    notes: list[str] = Field(default_factory=list)

    # --- construction -------------------------------------------------------------------------

    @classmethod
    def from_parts(cls, labels: Mapping[str, str], profile: ProfilePart, gap: GapPart,
                   culprits: CulpritSection) -> Analysis:
        """The analysis made of the stages' parts, stamped with this numdiff's version and the time now."""
        from numdiff import __version__

        return cls(
            numdiff_version=__version__,
            created_utc=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            labels=dict(labels), artifacts=profile.artifacts, program=profile.program, profile=profile.profile, gap=gap.gap,
            gap_unavailable=gap.gap_unavailable, culprits=culprits, notes=profile.notes)

    @classmethod
    def from_inspector(cls, inspector: Inspector, labels: Mapping[str, str] | None = None, *,
                       artifact_paths: Mapping[str, object] | None = None,
                       culprit_options: Mapping[str, Any] | None = None, progress: Progress | None = None,
                       gap: bool = True, culprits: bool = True) -> Analysis:
        """Analyse an ``Inspector``: profile, gap (SNR, MSE, L1) when possible, culprits when available.

        Args:
            inspector: A ``numdiff.Inspector``.
            labels: Free-form ``{key: value}`` to remember (device, build, model ...).
            artifact_paths: ``{"etdump"|"etrecord"|"debug_buffer": path}`` to hash into the file.
            culprit_options: Keyword arguments of ``find_culprits`` (e.g. ``float_program``).
            progress: ``progress(step, done, total)``, called as the work advances.
            gap: False to leave the numerical gap (and so culprits) out: the section says "not asked".
            culprits: False to leave culprit localization out: the section says "not asked".
        """
        parts = build_parts(inspector, artifact_paths or {}, progress, culprit_options, gap=gap, culprits=culprits)
        return cls.from_parts(labels or {}, *parts)

    @classmethod
    def from_files(cls, etdump: str | os.PathLike[str], etrecord: object = None,
                   debug_buffer: str | os.PathLike[str] | None = None, labels: Mapping[str, str] | None = None,
                   progress: Progress | None = None, *,
                   culprit_options: Mapping[str, Any] | None = None) -> Analysis:
        """Open the artifacts with an ``Inspector`` and analyse them (see :meth:`from_inspector`).

        ``etrecord`` is a path or an ETRecord object; ``progress(step, done, total)``, if given, is
        called as the work advances; ``culprit_options`` are keyword arguments of ``find_culprits``.
        """
        from numdiff.inspector import Inspector

        if progress is not None:
            progress("reading the artifacts", 0, 1)
        inspector = Inspector(etdump_path=etdump, etrecord=etrecord, debug_buffer_path=debug_buffer)
        paths = {"etdump": etdump, "etrecord": etrecord, "debug_buffer": debug_buffer}
        return cls.from_inspector(inspector, labels, progress=progress, culprit_options=culprit_options,
                                  artifact_paths={k: v for k, v in paths.items() if isinstance(v, (str, os.PathLike))})

    # --- files --------------------------------------------------------------------------------

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the analysis as JSON to ``path`` (a new file or one to replace, never half-written)."""
        atomic_write(path, self.model_dump_json(indent=1))

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Analysis:
        """Read an analysis file written by this or an older numdiff.

        Raises:
            AnalysisFileError: Unreadable, not JSON, invalid, or written by a newer numdiff.
        """
        data = read_analysis_data(path)
        try:
            return cls.model_validate(data)
        except ValidationError as e:
            raise invalid_analysis(os.fspath(path), e) from e

    def _repr_html_(self) -> str:
        """The HTML report, for Jupyter (inside an iframe, so its styles and scripts stay its own)."""
        from numdiff.report.html import notebook_html

        return notebook_html(self)
