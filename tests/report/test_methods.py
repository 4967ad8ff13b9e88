"""The HTML report of a multi-method program (real oracle artifact: tests/fixtures/realistic/real_two_methods).

Before, ``numdiff report`` on these files stopped with a CaptureError (encode's inputs run through
forward's graph). Now the page has every method's rows, each joined to its own culprit row (both
methods could have an op of the same name), and says whose op each row is.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from numdiff.cli import main
from tests.conftest import FIXTURES

FOLDER = FIXTURES / "realistic" / "real_two_methods"


def test_report_from_the_artifacts_has_every_methods_rows(tmp_path: Path) -> None:
    out = tmp_path / "two.html"
    assert main(["report", "--etdump", str(FOLDER / "etdump.etdp"), "--etrecord", str(FOLDER / "etrecord.bin"),
                 "--debug-buffer", str(FOLDER / "debug_buffer.bin"), "-o", str(out)]) == 0
    html = out.read_text()
    m = re.search(r'<script type="application/json" id="numdiff-data">(.*?)</script>', html, re.S)
    assert m is not None
    data = json.loads(m.group(1))
    assert [(r["method"], r["op"]) for r in data["rows"]] == [
        ("forward", "linear"), ("forward", "sigmoid"), ("encode", "aten_addmm_default"), ("encode", "aten_tanh_default")]
    assert all(r["verdict"] == "ok" and r["local"] is not None for r in data["rows"])  # each joined to its culprit row
    assert data["extra_culprits"] == []
    assert data["meta"]["graph"] == "exported_program (forward), edge_dialect_exported_program/encode (encode)"
    assert data["meta"]["culprits_headline"].endswith("4 rows, 0 culprits: every local error is within its "
                                                      "expected noise")
    assert "method 'encode': 2 rows on 'edge_dialect_exported_program/encode'" in " ".join(data["meta"]["notes"])
