"""The noise floor of a gap row: the SNR below which its error is more than rounding noise.

Ideal rounding noise of a full-scale signal stored in ``bits`` significant bits is
6.02·bits + 1.76 dB (bits = mantissa + 1 for floats, the integer width for int8). Real kernels
round many times (reductions, fused ops, accumulated upstream error): the floor allows
``ACCUMULATION_ALLOWANCE_DB`` for that (ExecuTorch's own fp32 fixtures sit at 133-146 dB, the
ideal being 146 dB). The HTML report draws it and the fleet tables count rows under it.
"""

from __future__ import annotations

from numdiff.analysis.records import GapRowModel

__all__ = ["ACCUMULATION_ALLOWANCE_DB", "noise_floor_db"]

_SIGNIFICANT_BITS = {"float64": 53, "float32": 24, "float16": 11, "bfloat16": 8, "int8": 8, "uint8": 8, "int16": 16}
ACCUMULATION_ALLOWANCE_DB = 20.0
_QUANTIZED_OPS = ("quantize_per_tensor", "quantize_per_channel", "dequantize_per_tensor", "dequantize_per_channel")


def noise_floor_db(row: GapRowModel) -> tuple[float | None, str]:
    """The SNR below which a row's error is more than rounding noise, and where that number comes from.

    A row whose reference ops include (de)quantize is held to the int8 floor; otherwise the
    floor is the rounding noise of the runtime output's dtype, less ``ACCUMULATION_ALLOWANCE_DB``.
    """
    if any(op.startswith(_QUANTIZED_OPS) for op in row.aot_ops):
        dtype = "int8"
    elif row.runtime_stats is not None:
        dtype = row.runtime_stats.dtype.split(",")[0]
    else:
        return None, "unknown dtype"
    bits = _SIGNIFICANT_BITS.get(dtype)
    if bits is None:
        return None, f"no floor for {dtype}"
    floor = 6.02 * bits + 1.76 - ACCUMULATION_ALLOWANCE_DB
    return round(floor, 2), f"{dtype} rounding 6.02·{bits}+1.76 dB, less {ACCUMULATION_ALLOWANCE_DB:g} dB for accumulation"
