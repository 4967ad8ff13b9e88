"""``json.loads`` for untrusted text: nesting depth checked first, so parsing cannot recurse too deep.

The depth is measured with a linear scan that skips string contents (brackets inside strings do
not count), done with C-level byte operations so that it costs less than the parse itself.
"""

from __future__ import annotations

import json
from itertools import accumulate

from numdiff._core.types import JSON
from numdiff.errors import InputError
from numdiff.limits import current_limits, raise_hint

__all__ = ["TooDeepError", "json_depth", "loads_checked"]

_KEEP = b"[]{}"
_DROP = bytes(b for b in range(256) if b not in _KEEP)
_STEP = [0] * 256
_STEP[ord("[")] = _STEP[ord("{")] = 1
_STEP[ord("]")] = _STEP[ord("}")] = -1


class TooDeepError(InputError):
    """JSON nested deeper than ``max_nesting_depth``; ``hint`` says how to raise the limit.

    An :class:`~numdiff.errors.InputError` (so still a ``ValueError``); the readers catch it and name the file.
    """

    def __init__(self, depth: int, limit: int) -> None:
        super().__init__(f"JSON nested at least {depth} deep, more than the limit {limit} (max_nesting_depth)")
        self.depth = depth
        self.limit = limit
        self.hint = raise_hint("max_nesting_depth", depth)


def json_depth(data: bytes | str) -> int:
    """Deepest nesting of arrays/objects in ``data`` (0 for a scalar), ignoring brackets in strings.

    Example:
        >>> json_depth(b'{"a": [1, [2, "]]]"]]}')
        3
    """
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    # Drop escaped backslashes, then escaped quotes: every quote left opens or closes a string, so
    # the even-numbered pieces between quotes are what lies outside strings. (Past the first
    # backslash outside a string the text is invalid JSON, which json.loads never descends into.)
    outside = b"".join(raw.replace(b"\\\\", b"").replace(b'\\"', b"").split(b'"')[::2])
    return max(accumulate(map(_STEP.__getitem__, outside.translate(None, _DROP))), default=0)


def loads_checked(data: bytes | str, limit: int | None = None) -> JSON:
    """``json.loads`` after checking the nesting depth against ``limit`` (default: the current limit).

    Raises:
        TooDeepError: Nested deeper than the limit.
        ValueError: Not valid JSON or not UTF-8 (``json.JSONDecodeError``, ``UnicodeDecodeError``).
    """
    limit = current_limits().max_nesting_depth if limit is None else limit
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    depth = 0
    if raw.count(b"[") + raw.count(b"{") > limit:  # fewer openers than the limit cannot nest deeper
        depth = json_depth(raw)
        if depth > limit:
            raise TooDeepError(depth, limit)
    text = data.decode("utf-8") if isinstance(data, bytes) else data
    try:
        value: JSON = json.loads(text)
        return value
    except RecursionError as e:  # pragma: no cover - the depth check comes first; kept as a backstop
        raise TooDeepError(depth, limit) from e
