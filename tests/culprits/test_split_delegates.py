"""Delegate calls that share only a duplicated dequantize's id stay apart in the culprit finder.

Found on the real-size zoo (scripts/_zoo_models.py, ``convnext_stage_224`` on int8 XNNPACK): each
block's XNNPACK call also logs the id of the residual the previous call computed, the reference
merges the three calls into one and keeps only the last one's data, and the layer norms between
them were replayed through whole blocks (int8 roundings included) under a floating-point noise
model: false culprits at 80-142 noise units on the clean run (0.16 at most once split).
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import torch

from numdiff.align import AlignedPair, MatchKind
from numdiff.comparators import SNRComparator
from numdiff.culprits._delegates import delegate_calls
from numdiff.culprits._noise import Noise
from numdiff.culprits._scorer import Meter, Planned, score_accumulated


def _call(handles: list[int]) -> SimpleNamespace:
    return SimpleNamespace(name="DELEGATE_CALL", debug_handles=handles, delegate_backend_name="XnnpackBackend")


def test_a_split_call_is_known_under_its_own_ids_and_its_whole_handle() -> None:
    calls = delegate_calls([_call([2, 4, 31, 31]), _call([6, 31, 35, 35]), _call([2, 4, 31, 31])])
    assert calls == {frozenset({2, 4, 31}): ("XnnpackBackend", 1), frozenset({6, 31, 35}): ("XnnpackBackend", 2),
                     frozenset({6, 35}): ("XnnpackBackend", 2)}


def test_an_integer_delegate_output_is_compared_dequantized_in_the_accumulated_error() -> None:
    # A call hands its int8 residual to the next call; the AOT value kept for that handle is the dequantized one.
    aot = torch.linspace(-3, 3, 64)
    scale, zero_point = 0.0385, -1
    runtime = torch.clamp(torch.round(aot / scale) + zero_point, -128, 127).to(torch.int8)
    pair = AlignedPair((31,), aot, (6, 35), runtime, MatchKind.DELEGATE_OUTPUT, 0)
    meter = Meter(SNRComparator(), {}, {})
    raw, dequantized = Planned(pair, None), Planned(pair, None)
    score_accumulated([raw], meter, None)
    score_accumulated([dequantized], meter, None, {(31,): Noise(quant_step=scale, zero_point=float(zero_point))})
    assert raw.accumulated < 0  # integers against floats: unrelated (it read -27.9 dB on the ConvNeXt)
    expected = 10 * math.log10(float((aot.double() ** 2).mean()) / (scale**2 / 12))  # rounding noise only
    assert abs(dequantized.accumulated - expected) < 3
