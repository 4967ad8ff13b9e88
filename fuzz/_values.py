"""Interesting values for fuzzing: integer edges per field width, hostile strings, raw byte mutations."""

from __future__ import annotations

import random

__all__ = ["PAYLOADS", "byte_mutation", "edge_int", "hostile_string"]

# Strings an attacker would put where a name, a target or a stack trace goes. "{canary}" is replaced by
# the case's canary path: if any of these is ever executed, the canary file appears.
PAYLOADS = (
    "__import__('os').system('touch {canary}')",
    "x=__import__('pathlib').Path('{canary}').touch()",
    "x):\n    __import__('pathlib').Path('{canary}').touch()\n#",
    "torch.ops.load_library",
    "torch.ops.aten.__class__.__init__.__globals__",
    "builtins.eval",
    "os.system",
    "torch.ops.{canary}",
    "torch._C._load_library",
    "__builtins__.exec",
    "exec(\"open('{canary}','w')\")",
)


def edge_int(rng: random.Random, bits: int = 64, signed: bool = True) -> int:
    """An integer at or near an edge of a ``bits``-wide field (or a small one, sometimes)."""
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    pool = [0, 1, 2, 7, 255, 256, 65535, 65536, (1 << 31) - 1, 1 << 31, (1 << 32) - 1, 1 << 32, 1 << 40,
            (1 << 62), hi, hi - 1, rng.randint(0, 64), rng.randint(0, 1 << 20)]
    if signed:
        pool += [-1, -2, -(1 << 31), lo, lo + 1, -rng.randint(1, 1 << 20)]
    value = rng.choice(pool)
    return max(lo, min(hi, value))


def hostile_string(rng: random.Random, canary: str) -> str:
    """A string that is empty, huge, strange Unicode, or an injection payload."""
    choice = rng.randrange(8)
    if choice == 0:
        return ""
    if choice == 1:
        return "A" * rng.choice([1000, 100_000, 1_000_000])
    if choice == 2:
        return rng.choice(["\x00", "\u202e", "名前", "\n\n", "a\x00b", "%s%n", "{0}", "..", "../../x"])
    if choice == 3:
        return "".join(chr(rng.randrange(1, 0x2FFF)) for _ in range(rng.randrange(1, 40)))
    return rng.choice(PAYLOADS).replace("{canary}", canary)


def byte_mutation(data: bytes, rng: random.Random, *, other: bytes | None = None) -> tuple[bytes, str]:
    """One raw mutation of ``data``: flips, truncation, splice from ``other``, integer boost, chunk ops."""
    if not data:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(1, 64))), "garbage"
    b = bytearray(data)
    kind = rng.randrange(7)
    if kind == 0:
        for _ in range(rng.choice([1, 1, 2, 4, 16])):
            b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
        return bytes(b), "bitflip"
    if kind == 1:
        for _ in range(rng.choice([1, 2, 8])):
            b[rng.randrange(len(b))] = rng.randrange(256)
        return bytes(b), "byteset"
    if kind == 2:
        return bytes(b[: rng.randrange(len(b))]), "truncate"
    if kind == 3 and other:
        i, j = rng.randrange(len(b)), rng.randrange(len(other))
        n = rng.randrange(1, 256)
        return bytes(b[:i]) + other[j: j + n] + bytes(b[i + n:] if rng.random() < 0.5 else b[i:]), "splice"
    if kind in (3, 4):
        width = rng.choice([1, 2, 4, 8])
        pos = rng.randrange(0, max(1, len(b) - width)) & ~(width - 1)
        signed = rng.random() < 0.5
        value = edge_int(rng, width * 8, signed)
        b[pos: pos + width] = value.to_bytes(width, "little", signed=signed)[: len(b) - pos]
        return bytes(b), f"int{width * 8}-boost"
    if kind == 5:
        i = rng.randrange(len(b))
        n = rng.randrange(1, min(512, len(b) - i) + 1)
        return bytes(b[:i] + b[i + n:]), "delete"
    i, n = rng.randrange(len(b)), rng.randrange(1, 64)
    return bytes(b[:i] + b[i: i + n] * rng.choice([2, 16, 1000]) + b[i + n:]), "repeat"
