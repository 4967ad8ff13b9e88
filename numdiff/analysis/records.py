"""The records an analysis is made of: pydantic models of the sections of one versioned JSON file.

An :class:`~numdiff.analysis.models.Analysis` holds everything the report, the trace, the CI diff and the notebook view
need, so they never have to reopen the ExecuTorch artifacts: the profile summary (latency per
event across runs, per block), the gap rows (SNR, MSE and L1 of every aligned pair with how it
was matched), culprit rows when culprit localization is available, the artifacts' hashes and the
user's labels.

Floats that are not finite (an SNR of ``inf`` for identical outputs, ``nan`` for an unmatched
pair) are written as the strings ``"Infinity"``, ``"-Infinity"`` and ``"NaN"`` so that the file
stays strict JSON.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from numdiff._core.names import row_title

__all__ = [
    "FORMAT_VERSION",
    "ArtifactInfo",
    "CulpritRow",
    "CulpritSection",
    "DecodeSection",
    "DecodeStepModel",
    "QuantLayerModel",
    "TapRowModel",
    "QuantizationSection",
    "EventStats",
    "GapPart",
    "GapRowModel",
    "GapSection",
    "Histogram",
    "ProfileBlock",
    "ProfilePart",
    "ProfileSummary",
    "ProgramSignature",
    "TensorStats",
]

#: Version of the file layout this numdiff writes. Older versions are migrated on load
#: (``numdiff.analysis.migrations.MIGRATIONS``); newer ones are refused.
FORMAT_VERSION = 5


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", ser_json_inf_nan="strings")


class ArtifactInfo(_Model):
    """One input file: its role, base name, SHA-256 and size in bytes."""

    role: Literal["etdump", "etrecord", "debug_buffer"]
    name: str
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    size: int = Field(ge=0)


class ProgramSignature(_Model):
    """Which program was analysed (:mod:`numdiff.analysis.signature`): a SHA-256 over each Edge
    method's op targets in graph order, each method's op count (to say how two programs differ), and a
    SHA-256 that also covers the ATen program (what is inside delegates)."""

    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    methods: dict[str, int] = Field(default_factory=dict, description="method -> number of op nodes")
    whole_sha256: str | None = Field(
        default=None, pattern=r"^[0-9a-f]{64}$",
        description="SHA-256 over the Edge ops and the ATen program's ops, which include the ops a delegate "
                    "took (absent in analyses written before it; then only sha256 is compared)")


class EventStats(_Model):
    """Latency of one runtime event across runs (durations in the profile's ``time_unit``)."""

    index: int = Field(ge=0, description="position of the event in its block (runtime order)")
    name: str
    runs: int = Field(ge=0)
    p10: float | None = None
    p50: float | None = None
    p90: float | None = None
    avg: float | None = None
    min: float | None = None
    max: float | None = None
    durations: list[float] = Field(default_factory=list, description="one duration per run")
    start_us: list[float] = Field(default_factory=list, description="start of each run's sample, in µs")
    op_types: list[str] = Field(default_factory=list)
    debug_handles: list[int] = Field(default_factory=list)
    module: str | None = Field(default=None, description="innermost source module of the event's ops")
    is_delegated_op: bool | None = None
    delegate_backend: str | None = None
    delegate_debug_identifier: str | None = None


class ProfileBlock(_Model):
    """The events of one block (one method's runs, or model loading)."""

    name: str
    runs: int = Field(ge=0)
    events: list[EventStats] = Field(default_factory=list)


class ProfileSummary(_Model):
    """The profiling view: blocks of events with durations in ``time_unit``."""

    time_unit: str
    blocks: list[ProfileBlock] = Field(default_factory=list)


class TensorStats(_Model):
    """Summary of one side's output (all elements of a multi-output row together)."""

    dtype: str
    shape: list[list[int]] = Field(default_factory=list, description="one shape per output")
    numel: int = Field(ge=0)
    min: float | None = None
    max: float | None = None
    mean: float | None = None
    std: float | None = None
    nonfinite: int = Field(default=0, ge=0)


class Histogram(_Model):
    """Counts of a value in ``len(counts)`` equal bins between ``edges[0]`` and ``edges[-1]``."""

    edges: list[float]
    counts: list[int]


class GapRowModel(_Model):
    """One aligned pair (or an unmatched one) with its error under SNR, MSE and L1.

    Each metric holds one value per compared element (one for a tensor, several for a
    multi-output op), as the ``gap`` column of ``calculate_numeric_gap`` does.
    """

    index: int = Field(ge=0, description="execution order of the row")
    aot_debug_handle: list[int]
    aot_ops: list[str]
    runtime_ops: list[str]
    runtime_debug_handle: list[int]
    snr: list[float]
    mse: list[float]
    l1: list[float]
    matched: bool
    match: str | None = None
    match_explanation: str | None = None
    note: str | None = None
    module: str | None = None
    source_line: str | None = Field(default=None, description="the user's own frame of the stack trace")
    stack_trace: str | None = None
    max_abs_error: float | None = None
    aot_stats: TensorStats | None = None
    runtime_stats: TensorStats | None = None
    error_histogram: Histogram | None = None
    method: str | None = Field(default=None, description="the method the row belongs to in a program of several "
                               "(forward, encode, ...); None in a program of one")


class GapSection(_Model):
    """The numerical gap: rows in execution order and what numdiff decided while making them."""

    graph_name: str
    rows: list[GapRowModel] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    match_counts: dict[str, int] = Field(default_factory=dict)
    match_explanation: dict[str, str] = Field(default_factory=dict)
    reference_inputs: Literal["representative", "own"] = Field(default="representative", description=(
        "what the reference graph ran on: the ETRecord's representative inputs, or the run's own inputs "
        "(step_inputs, the first run's)"))


class CulpritRow(_Model):
    """One row of culprit localization (local vs accumulated error)."""

    aot_ops: list[str]
    runtime_ops: list[str] = Field(default_factory=list)
    local_gap: float | None = None
    accumulated_gap: float | None = None
    amplification: float | None = None
    verdict: str | None = None
    is_culprit: bool = False
    local_noise_units: float | None = Field(default=None, description="local error in units of the expected noise")
    noise: str | None = Field(default=None, description="how the expected noise was estimated")
    source_line: str | None = None
    input_sources: list[str] = Field(default_factory=list,
                                     description="where each replayed input came from (a producer's runtime output, "
                                     "a delegate call's logged argument, step_inputs or the representative input)")
    delegate: str | None = Field(default=None, description="for a delegate call's row: its backend, call index and "
                                 "the compute ops inside with module paths and source lines")
    method: str | None = Field(default=None, description="the method the row belongs to in a program of several "
                               "(forward, encode, ...); None in a program of one")

    @property
    def title(self) -> str:
        """The row in one short line (:func:`numdiff._core.names.row_title`)."""
        return row_title(self.aot_ops, self.delegate)


class QuantLayerModel(_Model):
    """One layer of the quantization view (``find_culprits(float_program=...)``)."""

    layer: str = Field(description="module path / op type (#occurrence), matched between the two graphs")
    module_path: str = ""
    snr_db: float | None = Field(default=None, description="deployed output vs the float op on the same inputs")
    keep_in_float: bool = False
    from_runtime: bool = False
    note: str | None = None


class QuantizationSection(_Model):
    """Layers ranked by quantization cost (costliest first) and the keep-in-float suggestion."""

    target_snr_db: float
    estimated_snr_db: float | None = None
    suggested_snr_db: float | None = None
    layers: list[QuantLayerModel] = Field(default_factory=list)
    suggested_keep: list[str] = Field(default_factory=list)


class DecodeStepModel(_Model):
    """One decode step (run) of the decode-step view."""

    step: int = Field(ge=0)
    output_gap: float | None = Field(default=None, description="the output row's accumulated gap in this step")
    diverges: bool = False
    culprit_ops: list[list[str]] = Field(default_factory=list)
    note: str | None = None


class DecodeSection(_Model):
    """The runs as the steps of one generation (``find_culprits(step_inputs=...)``)."""

    with_step_inputs: bool = False
    first_divergent_step: int | None = None
    steps: list[DecodeStepModel] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)


class TapRowModel(_Model):
    """One tapped op inside a delegate, replayed on the tapped values."""

    node: str
    module_path: str | None = None
    local_gap: float | None = None
    local_noise_units: float | None = None
    verdict: str | None = None
    is_culprit: bool = False


class CulpritSection(_Model):
    """Culprit rows, or why there are none (format 2: the optional quantization, decode and
    inside-delegate views)."""

    available: bool
    reason: str | None = None
    rows: list[CulpritRow] = Field(default_factory=list)
    headline: str | None = Field(default=None, description="one line that summarises every view that ran "
                                 "(numdiff.culprits.report.headline)")
    broken: int = Field(default=0, ge=0, description="rows whose verdict is broken (culprits or not)")
    replay_mismatches: int = Field(default=0, ge=0, description="rows with a replay problem (verdict "
                                   "replay-mismatch): not judged, never culprits")
    not_judged: int = Field(default=0, ge=0, description="rows with no verdict (verdict not-judged: a graph input "
                            "the runtime did not log, in a run whose inputs are unknown)")
    inputs_in_doubt: list[str] = Field(default_factory=list, description="graph inputs the run may not have taken "
                                       "from the ETRecord's representative inputs (CulpritReport.inputs_in_doubt): "
                                       "accumulated gaps then compare the device with a reference run on other inputs")
    methods_in_doubt: list[str] = Field(default_factory=list, description="in a program of several methods, the "
                                        "methods whose inputs are in doubt (empty: the one method's, when "
                                        "inputs_in_doubt has any)")
    inputs_note: str | None = Field(default=None, description="what the run's inputs leave in doubt or assumed, "
                                    "in the words of the culprit report's note")
    quantization: QuantizationSection | None = None
    decode: DecodeSection | None = None
    inside_delegates: list[TapRowModel] | None = None


class ProfilePart(_Model):
    """The profile stage: latency per event, the artifacts' hashes and the Inspector's notes."""

    artifacts: list[ArtifactInfo] = Field(default_factory=list)
    profile: ProfileSummary
    notes: list[str] = Field(default_factory=list)
    program: ProgramSignature | None = Field(default=None, description="the ETRecord's program; None without one")


class GapPart(_Model):
    """The gap stage: the SNR/MSE/L1 rows, or why there are none."""

    gap: GapSection | None = None
    gap_unavailable: str | None = None
