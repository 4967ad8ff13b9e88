"""The Inspector's numerical methods: the gap (drop-in), numdiff's gap report and culprit localization.

A mixin of :class:`numdiff.inspector.Inspector`, kept apart so each module has one job: this one
turns the Inspector's parsed artifacts into comparisons; ``numdiff.inspector`` builds them and
serves the profiling view.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from numdiff.errors import UsageError
from numdiff.profile.symbolicate import FORWARD

if TYPE_CHECKING:
    import pandas as pd

    from numdiff._core.etrecord import ETRecordLike

    from numdiff.comparators import NumericalComparatorBase
    from numdiff.culprits import CulpritReport
    from numdiff.gap import GapInputs, GapReport
    from numdiff.gap.inputs import OnPair
    from numdiff.profile.events import EventBlock
    from numdiff.schema.debug_buffer import DebugBuffer

__all__ = ["NumericsMixin"]


class NumericsMixin:
    """Numerical comparison on the Inspector's ETRecord, event blocks and debug buffer."""

    _etrecord: ETRecordLike | None
    _debug_buffer: DebugBuffer | None
    _etdump_path: str | None
    event_blocks: list[EventBlock]

    # --- numerical gap --------------------------------------------------------------------------

    def calculate_numeric_gap(
        self,
        distance: str | NumericalComparatorBase = "MSE",
        disable_debug_handle_valdiation: bool = False,
        reference_graph: str | None = None,
        *,
        disable_debug_handle_validation: bool | None = None,
    ) -> pd.DataFrame:
        """Compare every intermediate output of the reference graph with the runtime's.

        Runs the ETRecord's representative inputs through the reference graph, pairs each op's
        output with what the runtime logged under the same debug handle, and scores each pair.

        Args:
            distance: A metric name ("MSE", "L1", "SNR", "cosine", "max_abs"; case and spaces
                ignored) or a ``NumericalComparatorBase`` instance. Defaults to "MSE".
            disable_debug_handle_valdiation: The reference's (misspelled) keyword, kept for
                drop-in use: apply back-propagated handles to the ATen graph even when some Edge
                nodes have no ATen counterpart. Defaults to False.
            reference_graph: None (ATen ``exported_program`` when handle back-propagation works,
                else the Edge program, with a warning), "exported_program",
                "edge_dialect_exported_program", or a ``graph_map`` name. Defaults to None.
            disable_debug_handle_validation: Correctly spelled alias of the above.

        Returns:
            Columns ``aot_debug_handle, aot_ops, aot_intermediate_output, runtime_ops,
            runtime_debug_handle, runtime_intermediate_output, gap, stacktraces``: the
            reference's rows and numbers. Pairs the reference skips (multi-output ops) are
            counted in ``df.attrs["numdiff_notes"]``; see ``numeric_gap_report`` for all of them.

        Raises:
            MissingDataError: No ETRecord, no representative inputs, no debug buffer, or no
                intermediate outputs in the ETDump.
            MismatchedArtifactsError: The ETRecord and ETDump share no debug handle.
            UsageError: Unknown metric or reference graph.

        Example:
            >>> df = inspector.calculate_numeric_gap("SNR")  # doctest: +SKIP
            >>> df[["aot_ops", "runtime_ops", "gap"]].head()  # doctest: +SKIP
        """
        from numdiff.gap import numeric_gap
        from numdiff.gap.methods import multi_method_gap
        from numdiff.comparators.numerics import difference_sums_l1
        from numdiff.gap.presum import presumming

        comparator = self._comparator(distance)
        release = self._debug_buffer.release if self._debug_buffer is not None else None
        if self._etrecord is not None:  # several methods: every method, rows tagged with theirs
            disable = _disable_flag(disable_debug_handle_valdiation, disable_debug_handle_validation)
            df = multi_method_gap(self._etrecord, self.event_blocks, comparator, reference_graph, disable,
                                  self._etdump_path, release)
            if df is not None:
                return df
        # each pair's sums are computed as the reference graph produces it (numdiff.gap.presum)
        with presumming(difference_sums_l1(comparator), release) as presum:
            inputs = self._gap_inputs(reference_graph, disable_debug_handle_valdiation, disable_debug_handle_validation,
                                      on_pair=presum.on_pair)
            return numeric_gap(inputs, comparator, presum.release)

    def numeric_gap_report(
        self,
        distance: str | NumericalComparatorBase = "SNR",
        reference_graph: str | None = None,
        disable_debug_handle_validation: bool = False,
    ) -> GapReport:
        """numdiff's fuller per-layer analysis (multi-output ops, views, unmatched rows with reasons).

        Returns:
            A ``GapReport``; ``report.to_dataframe()`` adds ``matched``, ``match`` and ``note``
            to the reference's columns.

        Raises:
            UsageError: The program has several methods (``calculate_numeric_gap`` compares them).
        """
        from numdiff.gap import numeric_gap_report
        from numdiff.gap.methods import plan_methods

        comparator = self._comparator(distance)
        if self._etrecord is not None and plan_methods(self._etrecord, self.event_blocks, []) is not None:
            raise UsageError("numeric_gap_report compares one method's graph, and this program has several\n"
                             "Use calculate_numeric_gap (CLI: numdiff gap --drop-in), which compares every method the "
                             "ETDump ran on its own graph and inputs, or find_culprits (numdiff culprits).")
        return numeric_gap_report(self._gap_inputs(reference_graph, disable_debug_handle_validation, None), comparator)

    def stream_numeric_gap(self, distance: str | NumericalComparatorBase = "SNR", reference_graph: str | None = None,
                           disable_debug_handle_validation: bool = False) -> pd.DataFrame:
        """``calculate_numeric_gap``'s rows and gaps in bounded memory, for intermediates larger than RAM.

        numdiff addition. The DataFrame has no ``aot_intermediate_output`` and
        ``runtime_intermediate_output`` columns (holding them is what makes ``calculate_numeric_gap``
        grow with the model's activations); every other column and every gap value are the same,
        including the ``method`` column of a multi-method program. The reference graph runs twice
        (see :mod:`numdiff.gap.stream`).
        """
        from numdiff.gap.methods import multi_method_gap
        from numdiff.gap.stream import stream_numeric_gap

        comparator = self._comparator(distance)
        release = self._debug_buffer.release if self._debug_buffer is not None else None
        if self._etrecord is not None:  # several methods: every method, rows tagged with theirs
            df = multi_method_gap(self._etrecord, self.event_blocks, comparator, reference_graph,
                                  disable_debug_handle_validation, self._etdump_path, release, streamed=True)
            if df is not None:
                return df
        inputs = self._gap_inputs(reference_graph, disable_debug_handle_validation, None, shapes_only=True)
        return stream_numeric_gap(inputs, comparator, release)

    def find_culprits(self, distance: str | NumericalComparatorBase = "SNR", reference_graph: str | None = None,
                      thresholds: Any = None, *, float_program: Any = None,
                      target_snr_db: float | None = None, decode_steps: bool | None = None,
                      step_inputs: Any = None, taps: Any = None, tap_outputs: Any = None,
                      inputs_are_representative: bool = False) -> CulpritReport:
        """Which op is wrong by itself: local error (replay on the runtime's inputs) vs accumulated.

        See :mod:`numdiff.culprits`. ``thresholds`` is a ``Thresholds`` or ``{op type: Thresholds
        or dict}``. Returns a ``CulpritReport`` (``.culprits``, ``.to_dataframe()``, ``str()``).
        ``float_program`` (the float model's ``ExportedProgram`` or ETRecord path) adds
        ``report.quantization``: layers ranked by quantization cost, with the layers to keep in
        higher precision for ``target_snr_db`` (see :mod:`numdiff.culprits.quant_view`).
        ``step_inputs`` (each run's inputs) or ``decode_steps=True`` adds ``report.decode``: the
        runs as the steps of one generation (see :mod:`numdiff.culprits.decode`). ``taps`` (a tap
        sidecar) adds ``report.inside_delegates`` (see :mod:`numdiff.culprits.taps`), on ``tap_outputs``
        or else the program outputs the ETDump logged for the method's first run. A program of
        several methods is compared as ``calculate_numeric_gap`` compares it: each method the ETDump
        ran on its own graph and inputs, rows tagged with their ``method``.
        ``inputs_are_representative=True`` says the run used the ETRecord's representative inputs:
        ops that read a graph input the runtime did not log are then judged even when no op that
        reads it agrees with its replay.
        """
        from numdiff.culprits import find_culprits
        from numdiff.gap import require_etrecord

        etrecord = require_etrecord(self._etrecord)
        events = [ev for block in self.event_blocks for ev in block.events]
        run_outputs = next((b.run_output for b in self.event_blocks
                            if b.run_output and (b.method_name or FORWARD) == FORWARD), None)
        return find_culprits(etrecord, events, self._comparator(distance), reference_graph=reference_graph,
                             thresholds=thresholds, etdump_path=self._etdump_path,
                             debug_buffer_path=self._debug_buffer.path if self._debug_buffer is not None else None,
                             release=self._debug_buffer.release if self._debug_buffer is not None else None,
                             float_program=float_program, target_snr_db=target_snr_db,
                             decode_steps=decode_steps, step_inputs=step_inputs, taps=taps, tap_outputs=tap_outputs,
                             run_outputs=run_outputs, blocks=self.event_blocks,
                             inputs_are_representative=inputs_are_representative)

    def _comparator(self, distance: str | NumericalComparatorBase) -> NumericalComparatorBase:
        from numdiff.comparators import get_comparator

        comparator = get_comparator(distance)
        if comparator.inspector is None:
            comparator.inspector = self
        return comparator

    def _gap_inputs(self, reference_graph: str | None, misspelled: bool, correct: bool | None,
                    shapes_only: bool = False, on_pair: OnPair | None = None) -> GapInputs:
        from numdiff.gap import gather

        disable = _disable_flag(misspelled, correct)
        # The reference graph is the 'forward' method's: compare that method's blocks only.
        events = [ev for block in self.event_blocks if (block.method_name or FORWARD) == FORWARD
                  for ev in block.events]
        return gather(self._etrecord, events, reference_graph=reference_graph,
                      disable_debug_handle_validation=disable, etdump_path=self._etdump_path, shapes_only=shapes_only,
                      on_pair=on_pair)


def _disable_flag(misspelled: bool, correct: bool | None) -> bool:
    """The handle-validation opt-out from the reference's misspelled keyword and its correct alias."""
    if correct is not None and correct != misspelled and misspelled:
        raise UsageError("disable_debug_handle_valdiation and disable_debug_handle_validation disagree\n"
                         "Pass only disable_debug_handle_validation.")
    return misspelled if correct is None else correct
