"""Progress on long CLI work: drawn on a terminal, silent otherwise, fed by the library's callback."""

from __future__ import annotations

import io

from numdiff.cli._progress import ProgressLine


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_bar_on_a_terminal_only() -> None:
    tty, pipe = _Tty(), io.StringIO()
    for stream in (tty, pipe):
        bar = ProgressLine(stream, width=10)
        bar("comparing (SNR)", 1, 2)
        bar.close()
    assert "comparing (SNR)" in tty.getvalue() and "[#####.....] 1/2" in tty.getvalue()
    assert tty.getvalue().endswith("\r\x1b[K")
    assert pipe.getvalue() == ""
