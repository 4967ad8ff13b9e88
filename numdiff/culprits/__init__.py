"""Culprits: each op's own (local) error, told apart from the error it inherits from its inputs.

``Inspector.find_culprits(distance="SNR")`` replays every aligned op (or debug-handle group, or
whole delegate) of the reference graph on the runtime's own values of its inputs and compares
that with the runtime's output (*local* error), next to the usual AOT-from-the-start comparison
(*accumulated* error). Each local error is judged against a noise model (quantization step,
floating-point epsilon × reduction length): ``ok``, ``expected-noise``, ``suspicious``,
``broken``. A **culprit** is a row whose local error is beyond noise while none of the rows it
consumes is.

Modules: :mod:`~numdiff.culprits.find` (orchestration), :mod:`~numdiff.culprits._replay` (the
replay interpreter and its run arguments), :mod:`~numdiff.culprits._scorer` (one row per pair,
configured in full at construction), :mod:`~numdiff.culprits._noise` (noise models, thresholds, verdicts),
:mod:`~numdiff.culprits.report` (rows, report, roll-ups), :mod:`~numdiff.culprits._matching`.
Deeper localization (options of ``find_culprits``): :mod:`~numdiff.culprits.quant_view`
(``float_program=``), :mod:`~numdiff.culprits.decode` (``step_inputs=``, ``decode_steps=``),
:mod:`~numdiff.culprits.taps` (``taps=``, ``tap_outputs=``).
Imports torch.
"""

from __future__ import annotations

from numdiff.culprits._noise import DEFAULT_QUANTIZED_THRESHOLDS, DEFAULT_THRESHOLDS, Thresholds, Verdict
from numdiff.culprits._runs import in_run
from numdiff.culprits.decode import DecodeStep, DecodeView
from numdiff.culprits.find import find_culprits
from numdiff.culprits.quant_view import QuantizationView, QuantLayer
from numdiff.culprits.report import CulpritReport, CulpritRow, MatchRecord, NonFinite
from numdiff.culprits.taps import TapRow, TapView

__all__ = [
    "DEFAULT_QUANTIZED_THRESHOLDS",
    "DEFAULT_THRESHOLDS",
    "CulpritReport",
    "CulpritRow",
    "DecodeStep",
    "DecodeView",
    "MatchRecord",
    "NonFinite",
    "QuantLayer",
    "QuantizationView",
    "TapRow",
    "TapView",
    "Thresholds",
    "Verdict",
    "find_culprits",
    "in_run",
]
