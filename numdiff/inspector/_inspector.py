"""The :class:`Inspector` class: constructor, profiling views and the ETRecord's programs."""

from __future__ import annotations

import logging
import os
import sys
import warnings
from typing import IO, TYPE_CHECKING, Any

import pandas as pd

from numdiff._core.gc_pause import gc_paused
from numdiff.inspector._etrecord import (
    consume_etrecord,
    edge_op_nodes,
    in_module,
    load_etrecord,
    logs_tensors,
)
from numdiff.inspector._numerics import NumericsMixin
from numdiff.errors import UnknownNameError, UsageError
from numdiff.profile.frames import printable_dataframe
from numdiff.profile.build import build_event_blocks, warn_notes
from numdiff.profile.events import (
    DelegateMetadataParser,
    DelegateTimeScaleConverter,
    EventBlock,
)
from numdiff.profile.op_graph import (
    EDGE_DIALECT_GRAPH_KEY,
    OperatorGraphs,
    operator_graphs,
)
from numdiff.profile.timescale import TimeScale, time_scale_factor
from numdiff.schema.debug_buffer import DebugBuffer
from numdiff.schema.etdump import read_etdump
from numdiff.schema.etrecord import ETRecord

if TYPE_CHECKING:
    from torch.export import ExportedProgram

    from numdiff._core.etrecord import ETRecordLike
    from numdiff.profile.op_list import OpList

log = logging.getLogger(__name__)

PathLike = str | os.PathLike[str]


class Inspector(NumericsMixin):
    """Profiling and numerical-debugging view of one model run.

    Args:
        etdump_path: Path of the ETDump file. Give this or ``etdump_data``.
        etdump_data: ETDump contents as bytes. Give this or ``etdump_path``.
        etrecord: ETRecord path, or an already parsed ETRecord. Optional: without it, events
            have no debug handles, op types, stack traces or module hierarchy.
        source_time_scale: Unit of the runtime's timestamps. Defaults to ``TimeScale.NS``.
        target_time_scale: Unit of the reported durations. Defaults to ``TimeScale.MS``.
        debug_buffer_path: Debug buffer holding the logged tensors. Optional, but needed for
            intermediate and program outputs.
        delegate_metadata_parser: Turns delegate metadata (one entry per sample) into a list or
            a dict of columns.
        delegate_time_scale_converter: ``(event_name, time) -> time`` for delegate timestamps.
            Defaults to dividing by the source/target scale factor.
        enable_module_hierarchy: Group op nodes by source module when linking events to the
            graph (changes ``op_types`` order as in the reference). Defaults to False.
        reference_graph_name: The graph whose nodes give events their op types, stack traces
            and module hierarchy: ``"edge_dialect_graph_module"`` (the Edge program) or a
            ``graph_map`` entry of the ETRecord (e.g. ``"edge_after_transform/forward"``).
            Defaults to the Edge program.

    Attributes:
        event_blocks: The runs, grouped (``EventBlock`` → ``Event`` → ``PerfData``). On
            multi-method programs ``EventBlock.method_name`` says which method each block ran.
        op_graph_dict: ``{graph name: OperatorGraph}`` of the ETRecord's graphs (None without an
            ETRecord); built when first read.
        notes: What numdiff decided on your behalf while loading (also warned once).

    Raises:
        UsageError: Both or neither of ``etdump_path`` / ``etdump_data``; a bad time scale.
        UsageTypeError: ``etrecord`` is neither a path nor a parsed ETRecord (a ``TypeError``).
        UnknownNameError: ``reference_graph_name`` is not a graph of the ETRecord (a ``KeyError``).
        ETDumpError, DebugBufferError, ETRecordError: A file is unreadable or corrupt.
        MismatchedArtifactsError: The ETRecord does not describe the model in the ETDump.
    """

    def __init__(
        self,
        etdump_path: PathLike | None = None,
        etdump_data: bytes | None = None,
        etrecord: Any = None,
        source_time_scale: TimeScale | str = TimeScale.NS,
        target_time_scale: TimeScale | str = TimeScale.MS,
        debug_buffer_path: PathLike | None = None,
        delegate_metadata_parser: DelegateMetadataParser | None = None,
        delegate_time_scale_converter: DelegateTimeScaleConverter | None = None,
        enable_module_hierarchy: bool = False,
        reference_graph_name: str = EDGE_DIALECT_GRAPH_KEY,
    ) -> None:
        if (etdump_path is None) == (etdump_data is None):
            raise UsageError("give exactly one of etdump_path and etdump_data\n"
                             "etdump_path is the .etdp file; etdump_data is its contents as bytes.")
        self._source_time_scale = TimeScale.parse(source_time_scale)
        self._target_time_scale = TimeScale.parse(target_time_scale)
        time_scale_factor(self._source_time_scale, self._target_time_scale)  # validates the pair
        self._etdump_path = None if etdump_path is None else os.fspath(etdump_path)
        self._enable_module_hierarchy = enable_module_hierarchy
        self._reference_graph_name = reference_graph_name
        self._op_graph_dict: OperatorGraphs | None = None
        with gc_paused():  # tens of thousands of acyclic records (program JSON, slots): see numdiff._core.gc_pause
            notes = self._load(etrecord, etdump_path, etdump_data, debug_buffer_path, delegate_metadata_parser,
                               delegate_time_scale_converter)
        self.notes: tuple[str, ...] = tuple(notes)
        warn_notes(notes, self._etdump_path)

    # --- construction helpers -----------------------------------------------------------------

    def _load(self, etrecord: object, etdump_path: PathLike | None, etdump_data: bytes | None,
              debug_buffer_path: PathLike | None, delegate_metadata_parser: DelegateMetadataParser | None,
              delegate_time_scale_converter: DelegateTimeScaleConverter | None) -> list[str]:
        """Read the files, build the event blocks and link them to the ETRecord; return the notes."""
        self._etrecord = load_etrecord(etrecord)
        dump = read_etdump(etdump_path if etdump_data is None else etdump_data)  # type: ignore[arg-type]
        self._debug_buffer = None if debug_buffer_path is None else DebugBuffer(debug_buffer_path)
        if self._debug_buffer is None and logs_tensors(dump):
            warnings.warn(
                f"ETDump {self._etdump_path!r} logs tensors but no debug buffer was given: "
                "their values are unavailable (pass debug_buffer_path=)", stacklevel=3)
        self.event_blocks: list[EventBlock]
        self.event_blocks, notes = build_event_blocks(
            dump,
            source_time_scale=self._source_time_scale,
            target_time_scale=self._target_time_scale,
            buffer=self._debug_buffer,
            delegate_metadata_parser=delegate_metadata_parser,
            delegate_time_scale_converter=delegate_time_scale_converter,
        )
        if self._etrecord is not None:
            notes += self._consume_etrecord()
        return notes

    def _consume_etrecord(self) -> list[str]:
        if self._etrecord is None:
            return []
        return consume_etrecord(self._etrecord, self.event_blocks, etdump_path=self._etdump_path,
                                enable_module_hierarchy=self._enable_module_hierarchy,
                                reference_graph_name=self._reference_graph_name)

    # --- DataFrames and tables ----------------------------------------------------------------

    def to_dataframe(self, include_units: bool = True, include_delegate_debug_data: bool = False) -> pd.DataFrame:
        """Every event of every block as one row.

        Args:
            include_units: Append the target unit to the perf column names. Defaults to True.
            include_delegate_debug_data: Add delegate metadata columns. Defaults to False.

        Returns:
            Columns ``event_block_name, event_name, raw, p10, p50, p90, avg, min, max, op_types,
            delegate_debug_identifier, stack_traces, module_hierarchy, is_delegated_op,
            delegate_backend_name, debug_data, start_time``. As in the reference, ``start_time``
            stays in the runtime's raw units while the perf columns are converted.
        """
        frames = [b.to_dataframe(include_units, include_delegate_debug_data) for b in self.event_blocks]
        if not frames:  # a dump with no runs: no rows, the usual columns
            from numdiff.profile.frames import empty_events_dataframe

            return empty_events_dataframe(include_units, self._target_time_scale.value)
        return pd.concat(frames, ignore_index=True)

    def _prepare_dataframe(self, include_units: bool = True, include_delegate_debug_data: bool = False) -> pd.DataFrame:
        return printable_dataframe(self.to_dataframe(include_units, include_delegate_debug_data))

    def print_data_tabular(self, file: IO[str] | None = None, include_units: bool = True,
                           include_delegate_debug_data: bool = False) -> None:
        """Print the events as a table (``OPERATOR_CALL`` rows and wide columns left out).

        Args:
            file: Stream to print to. Defaults to the current ``sys.stdout`` (looked up at call
                time, so redirection works). In a notebook the DataFrame is displayed instead.
            include_units: Append the unit to the perf column names. Defaults to True.
            include_delegate_debug_data: Add delegate metadata columns. Defaults to False.
        """
        from numdiff.profile.tables import show_table

        show_table(self._prepare_dataframe(include_units, include_delegate_debug_data), file or sys.stdout)

    def save_data_to_tsv(self, file: IO[str], include_units: bool = True,
                         include_delegate_debug_data: bool = False) -> None:
        """Write the printed table's rows as tab-separated values (for spreadsheets)."""
        self._prepare_dataframe(include_units, include_delegate_debug_data).to_csv(file, sep="\t")

    # --- queries ------------------------------------------------------------------------------

    def find_total_for_module(self, module_name: str) -> float:
        """Sum of the average durations of the events whose module keys *contain* ``module_name``.

        The reference's rule, kept for drop-in answers: an event counts when any key of any of
        its ``module_hierarchy`` stacks contains ``module_name`` as a substring, so the root
        (``"L__self__"``) counts every op, ``"...conv"`` also counts ``"...conv2"``, and on
        quantized graphs (keys like ``"L__self__L__self__fc1"``) ``"L__self__"`` also matches
        every nested key. Module *paths* (``"L['self'].fc1"``) are not looked at. Each event
        counts once; ``OPERATOR_CALL`` events (a repeat of the op before them) are skipped.
        For "this module and its submodules" exactly, use :meth:`module_total`.

        Returns:
            The total, in the Inspector's target time scale (0.0 when nothing matches).
        """
        total = 0.0
        for block in self.event_blocks:
            for ev in block.events:
                if ev.name == "OPERATOR_CALL":
                    continue
                for stack in ev.module_hierarchy.values():
                    if stack and any(module_name in key for key in stack):
                        if ev.perf_data is not None:
                            total += ev.perf_data.avg
                        break
        return total

    def module_total(self, module_name: str) -> float:
        """Sum of the average durations of the ops inside ``module_name`` or its submodules, exactly.

        numdiff addition (the clearer rule next to :meth:`find_total_for_module`'s substring
        match). ``module_name`` is a ``module_hierarchy`` key (``"L__self___conv"``,
        ``"L__self__L__self__fc1"``) or a module path (``"L['self'].conv"``); an event counts
        when one of its graph nodes has that module in its ``nn_module_stack``, which lists the
        module and all its ancestors. ``"...conv"`` does not count ``"...conv2"``.
        ``OPERATOR_CALL`` events are skipped and each event counts once.

        Example:
            >>> inspector.module_total("L__self___features_0")  # doctest: +SKIP
            0.063084
        """
        total = 0.0
        for block in self.event_blocks:
            for ev in block.events:
                if ev.name == "OPERATOR_CALL" or ev.perf_data is None:
                    continue
                if any(in_module(stack, module_name) for stack in ev.module_hierarchy.values()):
                    total += ev.perf_data.avg
        return total

    def get_exported_program(self, graph: str | None = None) -> ExportedProgram | None:
        """The ETRecord's Edge program, or the ``graph_map`` entry named ``graph``.

        Returns None (with a warning) when no ETRecord was given.
        """
        if self._etrecord is None:
            log.warning("get_exported_program needs an ETRecord: pass etrecord= to the Inspector")
            return None
        if graph is None:
            # as the reference: a multi-method record gives its dict of programs (the signature is the reference's)
            return self._etrecord.edge_dialect_program  # type: ignore[return-value]
        return (self._etrecord.graph_map or {}).get(graph)

    @property
    def op_graph_dict(self) -> OperatorGraphs | None:
        """``{graph name: OperatorGraph}``: every ``graph_map`` entry, then ``"edge_dialect_graph_module"``.

        None without an ETRecord. Each graph lists its op nodes (name, op type, debug handle,
        stack trace, ``nn_module_stack``); graphs other than the Edge program load on first use.
        """
        if self._op_graph_dict is None and self._etrecord is not None:
            rec = self._etrecord
            self._op_graph_dict = operator_graphs(rec, lambda: edge_op_nodes(rec))
        return self._op_graph_dict

    @op_graph_dict.setter
    def op_graph_dict(self, value: OperatorGraphs | None) -> None:
        self._op_graph_dict = value

    def get_op_list(self, event_block: str, show_delegated_ops: bool | None = True) -> OpList:
        """The ops of the event block(s) named ``event_block``, with counts and latency statistics.

        The reference declares this method and returns ``{}``. numdiff returns an ``OpList``: the
        ``{op: [Event]}`` dict the signature promises (an op is the event's name, e.g.
        ``"native_call_addmm.out"``; ``OPERATOR_CALL`` and framework steps left out) with
        ``.to_dataframe()`` giving per op ``count``, ``runs``, ``total_avg``, ``avg``, ``p50``,
        ``min``, ``max`` and ``share`` of the block, in the target time scale
        (``.unit``). See :mod:`numdiff.profile.op_list`.

        Args:
            event_block: A block name (``"Execute"``) or, on multi-method programs, a method name
                (``"forward"``); all blocks with that name are included.
            show_delegated_ops: Include the ops that ran inside delegates. Defaults to True.

        Raises:
            UnknownNameError: No block has that name or method (a ``KeyError``; lists the names).

        Example:
            >>> inspector.get_op_list("Execute").to_dataframe()[["op", "count", "total_avg"]]  # doctest: +SKIP
        """
        from numdiff.profile.op_list import op_list

        blocks = self._blocks_named(event_block)
        return op_list((ev for b in blocks for ev in b.events), show_delegated_ops, self._target_time_scale.value)

    def write_tensorboard_artifact(self, path: str | os.PathLike[str]) -> None:
        """Write the profiling view as TensorBoard event files under ``path`` (one run per block).

        The reference declares this method and writes nothing. numdiff writes per-op latency
        scalars (one point per run), histograms and the op list table; see
        :mod:`numdiff.report.tensorboard`. View with ``tensorboard --logdir path``.

        Raises:
            MissingDependencyError: ``tensorboardX`` is missing (the ``tensorboard`` extra).
        """
        from numdiff.profile.op_list import op_list
        from numdiff.report.tensorboard import write_tensorboard

        unit = self._target_time_scale.value
        write_tensorboard(path, self.event_blocks, [op_list(b.events, True, unit) for b in self.event_blocks])

    def get_vgf_neural_statistics(self) -> list[dict[str, Any]]:
        """Arm VGF neural-accelerator statistics records found in the events' delegate metadata.

        Each record is the backend's JSON object; every available blob of each segment gains
        ``raw_data`` (the decoded bytes). See :mod:`numdiff.profile.vgf`.

        Raises:
            DelegateMetadataError: A record claims the VGF schema but is malformed (a ``ValueError``).
        """
        from numdiff.profile.vgf import neural_statistics_of_events

        return neural_statistics_of_events(ev for block in self.event_blocks for ev in block.events)

    def get_delegate_info(self, method: str | None = None) -> dict[tuple[str, str], dict[str, Any]]:
        """Per-delegate backend metadata from the ETRecord's ``delegate_info`` entry (ExecuTorch's next release).

        numdiff addition. Keys are ``(method, lowered module name)``; values the backend's JSON
        object as written. Empty when there is no ETRecord or it has no such entry.
        """
        return dict(self._etrecord.delegate_info(method)) if isinstance(self._etrecord, ETRecord) else {}

    def _blocks_named(self, name: str) -> list[EventBlock]:
        blocks = [b for b in self.event_blocks if b.name == name] or \
                 [b for b in self.event_blocks if b.method_name == name]
        if not blocks:
            known = sorted({b.name for b in self.event_blocks} | {b.method_name for b in self.event_blocks if b.method_name})
            raise UnknownNameError(f"no event block named {name!r}\nKnown block and method names: {', '.join(known)}.")
        return blocks

    @property
    def etrecord(self) -> ETRecordLike | None:
        """The parsed ETRecord, or None."""
        return self._etrecord
