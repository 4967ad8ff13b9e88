"""Text from files, runs and servers made safe to print on a terminal.

An ETDump's event names, a delegate's name, a run's failure reason or a server's error text are
written by whoever made the file or runs the server. Printed raw, their control characters drive the
terminal: ``ESC ]0;...`` retitles it, ``ESC [2J`` clears it, ``\\r`` overwrites a line with a fake
"ALL OK", ``ESC ]52;c;...`` writes the clipboard, and bidi overrides (U+202E) show text in an order
other than its bytes. :func:`printable` replaces each such character with a visible escape
(``\\x1b``, ``\\r``, ``\\u202e``), so the bytes reaching the terminal are plain text; everything
else, accents and CJK included, is kept as it is.

Example:
    >>> printable("conv\\x1b]0;owned\\x07")
    'conv\\\\x1b]0;owned\\\\x07'
    >>> printable("two\\nlines", newlines=False)
    'two\\\\nlines'
"""

from __future__ import annotations

import re
import textwrap

__all__ = ["printable", "wrapped"]

#: C0 controls but newline and tab, DEL, C1 controls; bidi embeddings, overrides, isolates and marks;
#: line and paragraph separators (a terminal may break a line there).
_UNSAFE = "\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069"
_KEEP_LINES = re.compile(f"[{_UNSAFE}]")
_ONE_LINE = re.compile(f"[{_UNSAFE}\n\t]")
_NAMED = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    if char in _NAMED:
        return _NAMED[char]
    code = ord(char)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def printable(text: object, *, newlines: bool = True) -> str:
    """``str(text)`` with every control character replaced by a visible escape.

    Args:
        text: What to print (anything; ``str()`` is taken).
        newlines: Keep newlines and tabs (a table, a multi-line message); ``False`` escapes them too,
            for text that must stay on one line (a cell, a name).

    Returns:
        The text, safe to write to a terminal.
    """
    return (_KEEP_LINES if newlines else _ONE_LINE).sub(_escape, str(text))


def wrapped(line: str, width: int) -> list[str]:
    """A sentence wrapped to ``width`` (at least 20) at spaces, its continuation indented two more
    than its own indent; words longer than a line (a path) are kept whole."""
    indent = line[:len(line) - len(line.lstrip())]
    return textwrap.wrap(line, max(width, 20), subsequent_indent=indent + "  ", break_on_hyphens=False,
                         break_long_words=False) or [line]
