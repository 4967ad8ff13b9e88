"""The user's own source line in a stack trace: the last frame outside torch and site-packages.

Stack traces in an ETRecord run through torch internals; what a user needs is the line of *their*
model that produced the op. The gap table, the culprit rows and the saved analysis all show it.
"""

from __future__ import annotations

import re

__all__ = ["user_frame"]

_FRAME = re.compile(r'File "(?P<path>[^"]+)", line (?P<line>\d+), in (?P<fn>[^\n]+)\n(?P<code>[^\n]*)')
_LIBRARY = re.compile(r"(site-packages|dist-packages)[/\\]|[/\\]torch[/\\]|<eval_with_key>|^<")


def user_frame(stack_trace: str | None) -> str | None:
    """``"model.py:42 forward: y = self.fc(x)"`` for the last frame outside libraries, or None."""
    if not stack_trace:
        return None
    frames = list(_FRAME.finditer(stack_trace))
    mine = [f for f in frames if not _LIBRARY.search(f.group("path"))] or frames
    if not mine:
        return None
    f = mine[-1]
    name = re.split(r"[/\\]", f.group("path"))[-1]
    return f"{name}:{f.group('line')} {f.group('fn').strip()}: {f.group('code').strip()}"
