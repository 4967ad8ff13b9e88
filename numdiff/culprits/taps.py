"""Inside delegates: localize with ExecuTorch's intermediate-output taps.

A delegate is one row of ``find_culprits``: the runtime logs its outputs, not the values inside
it. A program exported with taps (``executorch.devtools.intermediate_output_tap``) returns the
tapped values as extra method outputs, passing through the delegate. The tap specs live only in
memory at export time: :func:`numdiff.export_helpers.taps.write_tap_sidecar` saves them as the
sidecar below. ``find_culprits(taps="taps.json", tap_outputs=...)`` then replays every tapped op
of the reference graph on the tapped values of its inputs, with the same replay interpreter,
noise model and thresholds as the main report: ``report.inside_delegates``.

The tapped values are the method's flat outputs (``output_index`` of each spec), which the
op events do not hold by position (a delegate logs its own outputs, de-duplicated and in its own
order). They are read from the ETDump's logged program outputs (``EventBlock.run_output`` of the
method's first run; the runtime logs them at debug level ``kProgramOutputs`` and above, so also
whenever a debug buffer holds intermediate outputs), or passed as ``tap_outputs``: the list the
method returned, or a ``torch.save`` file of it (read with ``torch.load(weights_only=True)``). Only ``FULL_TENSOR`` taps carry values
to replay against; taps with a statistics reducer are listed as not compared. Spec node names
must be nodes of the ETRecord's ``exported_program`` (taps are inserted on that ATen graph).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import torch
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from numdiff._core.etrecord import ETRecordLike
from numdiff.capture import graph_threads
from numdiff.comparators import snr_db
from numdiff.comparators.numerics import finite_difference_sums
from numdiff.culprits._measure import noise_units
from numdiff.culprits._noise import Noise, Thresholds, Verdict, op_type
from numdiff.culprits._lineage import lineage
from numdiff.culprits._replay import ReplayInterpreter, graph_args
from numdiff.errors import InputError, MismatchedArtifactsError, UsageError

if TYPE_CHECKING:
    import pandas as pd

#: The tapped method's flat outputs, or the path of a ``torch.save`` file of them.
TapOutputs = str | os.PathLike[str] | Sequence[object]

__all__ = ["TapRow", "TapSidecar", "TapSpecModel", "TapView", "inside_delegates", "load_sidecar"]

SIDECAR_FORMAT = "numdiff-tap-sidecar"
SIDECAR_VERSION = 1
_MAX_SIDECAR_BYTES = 16 * 1024 * 1024


class TapSpecModel(BaseModel):
    """One tap: the tapped node and where its value lands in the method's flat outputs."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    node_name: str = Field(min_length=1, max_length=1000)
    op_target: str = Field(max_length=1000)
    output_index: int = Field(ge=0)
    reducer: str = Field(max_length=200)
    fields: list[str] = Field(default_factory=list, max_length=64)
    module_path: str | None = None
    module_class: str | None = None


class TapSidecar(BaseModel):
    """The sidecar file (JSON): format name, version, method, untapped output count, taps."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    format: Literal["numdiff-tap-sidecar"]
    version: Literal[1]
    method: str = "forward"
    user_outputs: int = Field(ge=0)
    taps: list[TapSpecModel] = Field(max_length=1_000_000)


def load_sidecar(path: str | os.PathLike[str]) -> TapSidecar:
    """Read and validate a tap sidecar.

    Raises:
        InputError: Unreadable, too large, not JSON, or not a valid sidecar (the message names the field).
    """
    from numdiff._core.safe_json import loads_checked

    name = os.fspath(path)
    try:
        size = os.path.getsize(name)
        if size > _MAX_SIDECAR_BYTES:
            raise InputError(f"tap sidecar {name!r} is {size} bytes, over the {_MAX_SIDECAR_BYTES}-byte limit\n"
                             "Is this the taps.json written by numdiff.export_helpers.taps.write_tap_sidecar?")
        with open(name, "rb") as f:
            data = loads_checked(f.read())
        return TapSidecar.model_validate(data)
    except OSError as e:
        raise InputError(f"tap sidecar {name!r} cannot be read: {e.strerror or e}\nCheck the path.") from e
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(top level)"
        raise InputError(f"tap sidecar {name!r} is not valid: {where}: {first['msg']}\n"
                         "Write it with numdiff.export_helpers.taps.write_tap_sidecar at export time.") from e
    except ValueError as e:
        raise InputError(f"tap sidecar {name!r} is not JSON: {e}\n"
                         "Write it with numdiff.export_helpers.taps.write_tap_sidecar at export time.") from e


@dataclass(frozen=True, slots=True)
class TapRow:
    """One tapped op inside a delegate, replayed on the tapped values of its inputs."""

    node: str
    op_target: str
    module_path: str | None
    local_gap: float
    local_noise_units: float
    verdict: Verdict
    is_culprit: bool
    producers: tuple[str, ...]
    note: str | None = None


@dataclass(frozen=True, slots=True)
class TapView:
    """Tapped ops in execution order (``report.inside_delegates``)."""

    rows: tuple[TapRow, ...]
    not_compared: tuple[str, ...] = ()
    source: str = "tap_outputs"
    """Where the tapped values came from: ``tap_outputs`` or the ETDump's logged program outputs."""

    @property
    def culprits(self) -> list[TapRow]:
        """Tapped ops beyond noise whose tapped producers are not."""
        return [r for r in self.rows if r.is_culprit]

    def to_dataframe(self) -> pd.DataFrame:
        """One row per tapped op."""
        import pandas as pd

        cols = ["node", "op_target", "module_path", "local_gap", "local_noise_units", "verdict", "is_culprit",
                "producers", "note"]
        return pd.DataFrame([{c: (getattr(r, c).value if c == "verdict" else getattr(r, c)) for c in cols}
                             for r in self.rows], columns=cols)

    def __str__(self) -> str:
        names = ", ".join(f"{r.node} ({r.module_path or '?'})" for r in self.culprits) or "none"
        return f"inside delegates: {len(self.rows)} tapped ops, culprit(s): {names}"


def _load_outputs(tap_outputs: TapOutputs) -> list[object]:
    if isinstance(tap_outputs, (str, os.PathLike)):
        from numdiff.program.pickles import load_torch_artifact

        path = os.fspath(tap_outputs)
        with open(path, "rb") as f:
            tap_outputs = load_torch_artifact(f.read(), f"tap outputs {path!r}")
    if not isinstance(tap_outputs, (list, tuple)):
        raise UsageError("tap_outputs must be the method's flat output list (what the tapped program returned), "
                         f"not {type(tap_outputs).__name__}")
    return list(tap_outputs)


@graph_threads()  # the replay: one intra-op thread (numdiff.capture.threads)
def inside_delegates(etrecord: ETRecordLike, sidecar_path: str | os.PathLike[str], tap_outputs: TapOutputs,
                     limits: Mapping[str, Thresholds], source: str = "tap_outputs") -> TapView:
    """Replay every FULL_TENSOR-tapped op on the tapped values (see the module docstring)."""
    from numdiff.capture import resolve_reference_graph

    sidecar = load_sidecar(sidecar_path)
    outputs = _load_outputs(tap_outputs)
    graph_module, _ = resolve_reference_graph(etrecord, "exported_program")
    names = {n.name for n in graph_module.graph.nodes}
    values: dict[str, torch.Tensor] = {}
    not_compared: list[str] = []
    for tap in sidecar.taps:
        if tap.reducer != "FULL_TENSOR":
            not_compared.append(f"{tap.node_name}: reducer {tap.reducer} (statistics, no tensor to replay against)")
        elif tap.output_index >= len(outputs) or not isinstance(tapped := outputs[tap.output_index], torch.Tensor):
            raise MismatchedArtifactsError(
                f"tap {tap.node_name!r} lands at output {tap.output_index}, but {source} holds {len(outputs)} "
                "values there is no tensor at\nPass the tapped program's own flat outputs, with the sidecar "
                "written for that program.")
        elif tap.node_name not in names:
            not_compared.append(f"{tap.node_name}: no such node in the ETRecord's exported_program")
        else:
            values[tap.node_name] = tapped
    if not values:
        raise MismatchedArtifactsError(f"no FULL_TENSOR tap of {os.fspath(sidecar_path)!r} names a node of the "
                                       "ETRecord's exported_program\nTap the program the ETRecord was made from.")
    specs = {t.node_name: t for t in sidecar.taps}
    lineages = lineage(graph_module.graph, set(values))
    rows: list[TapRow] = []
    by_name: dict[str, TapRow] = {}

    def on_paired(node: torch.fx.Node, replay: object, args: tuple[object, ...], kwargs: dict[str, object],
                  noise: Noise) -> object:
        runtime = values[node.name]
        note = None
        local, units = math.nan, math.nan
        if isinstance(replay, torch.Tensor) and replay.shape == runtime.shape:
            sums = finite_difference_sums(replay, runtime, need_l1=False)
            if sums is not None:
                local = snr_db(sums[0] / sums[3], sums[1] / sums[3])
            units, _, _, why = noise_units(replay, runtime, noise, sums)
            note = why
        else:
            note = "tapped value and replay differ in shape: not compared"
        kind = op_type(node.target)
        verdict = limits.get(kind, limits["default"]).verdict(units) if not math.isnan(units) else Verdict.UNMATCHED
        producers = tuple(p for p, _ in lineages[node.name].producers)
        culprit = verdict.beyond_noise and not any(by_name[p].verdict.beyond_noise for p in producers if p in by_name)
        spec = specs[node.name]
        row = TapRow(node.name, spec.op_target, spec.module_path, local, units, verdict, culprit, producers, note)
        rows.append(row)
        by_name[node.name] = row
        return runtime.clone() if verdict is not Verdict.UNMATCHED else replay

    ReplayInterpreter(graph_module, set(values), on_paired).run(*graph_args(etrecord))
    return TapView(tuple(rows), tuple(not_compared), source)
