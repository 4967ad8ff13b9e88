"""Pydantic models of every request and response of the REST API (``/docs`` shows them).

Answers write numbers as numbers and ``null`` where there is none (an identical layer's infinite
SNR, a NaN), as the command line's ``--format json`` does. The saved analysis
(``analysis.json``, the stage results) is a file in the analysis format instead, which keeps
``"Infinity"``/``"NaN"`` so that it loads back exactly.
"""

from __future__ import annotations

import datetime
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["CompareRequest", "CompareResult", "GapRecord", "JobOut", "ModelOut", "ProjectOut", "RunList", "RunOut",
           "RunResult", "BaselineRequest"]


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="null")


class ProjectOut(_Out):
    name: str
    models: int
    runs: int


class ModelOut(_Out):
    name: str
    runs: int
    baseline_run: int | None = None


class JobOut(_Out):
    """One stage of a run's analysis: ``kind`` is profile, gap, culprits or report (they run in that order).

    ``status``: queued, running, done or failed (``reason`` says why); ``elapsed_ms`` is the time the
    stage took in its worker. A stage's result is ``GET /api/v1/runs/{id}/jobs/{kind}`` once done.
    """

    kind: str
    status: str
    attempts: int = 0
    elapsed_ms: int | None = None
    reason: str | None = None


class RunOut(_Out):
    """A run and the state of its analysis. ``status``: queued, running, done or failed (``reason`` says
    why); ``jobs`` are its stages, each persisted and run by a worker on its own."""

    id: int
    model: str
    status: str
    reason: str | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    created: datetime.datetime
    finished: datetime.datetime | None = None
    attempts: int = 0
    jobs: list[JobOut] = Field(default_factory=list)
    artifacts: dict[str, str | None] = Field(default_factory=dict, description="role -> SHA-256 of the upload")
    inputs_are_representative: bool = Field(False, description=(
        "the upload said the run used the ETRecord's representative inputs: the culprit stage judges every op "
        "that reads a graph input the runtime did not log on them"))


class RunList(_Out):
    runs: list[RunOut]


class GapRecord(_Out):
    """One row of the SNR gap, with the columns of ``calculate_numeric_gap``'s DataFrame.

    The intermediate outputs are summaries of the tensors (dtype, shapes, min/max/mean/std), not
    the values; the full values stay in the run's files.
    """

    aot_ops: list[str]
    aot_intermediate_output: dict[str, Any] | None = None
    runtime_ops: list[str]
    runtime_intermediate_output: dict[str, Any] | None = None
    gap: list[float | None] = Field(description="the SNR per output element in dB; null where there is no "
                                    "number (an identical layer's infinite SNR, a NaN)")
    aot_debug_handle: list[int] = Field(default_factory=list)
    matched: bool = True
    match: str | None = None


class RunResult(RunOut):
    """A run with its results once ``status`` is done: the SNR gap rows and the culprit rows."""

    gap: list[GapRecord] | None = None
    gap_unavailable: str | None = None
    culprits: list[dict[str, Any]] | None = None
    culprits_unavailable: str | None = None
    program: str | None = Field(default=None, description="SHA-256 signature of the ETRecord's program(s)")
    baseline_program: str | None = Field(default=None, description="the model's baseline run's program signature")
    program_differs_from_baseline: bool | None = Field(
        default=None, description="true when this run's ETRecord is another program than its model's baseline "
                                  "(comparing them is refused); null when there is no baseline or a signature is missing")


#: The largest id a row can have (PostgreSQL's INTEGER): larger ids are answered 422, never sent to the database.
MAX_ID = 2**31 - 1
#: A run id in a request body.
RunRef = Annotated[int, Field(ge=1, le=MAX_ID)]


class CompareRequest(BaseModel):
    """Compare ``new_run`` with ``base_run``, or with its model's baseline when ``base_run`` is omitted."""

    model_config = ConfigDict(extra="forbid")
    new_run: RunRef
    base_run: RunRef | None = None
    max_snr_drop_db: float = Field(default=3.0, ge=0)
    max_latency_increase_pct: float = Field(default=10.0, ge=0)
    min_latency_increase_us: float = Field(default=5.0, ge=0)
    snr_cap_db: float = Field(default=140.0, ge=0)
    min_matched_share: float = Field(default=0.5, ge=0, le=1, description="share of the base's ops that must be "
                                     "found in the new run's analysis (else the gate fails)")


class CompareResult(_Out):
    """``passed`` is the CI gate; ``diff`` is ``numdiff diff --format json``'s document."""

    passed: bool
    base_run: int
    new_run: int
    regressions: int
    diff: dict[str, Any]


class BaselineRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    run_id: RunRef
