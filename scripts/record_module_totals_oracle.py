"""Record ExecuTorch 1.5.1's ``Inspector.find_total_for_module`` on every module key of every fixture.

Writes ``tests/data/module_totals_oracle.json``. Needs the oracle virtualenv (ExecuTorch
installed); numdiff and its tests never run this:

    $(/work/shared/oracle-venv.sh) scripts/record_module_totals_oracle.py

For each fixture folder with an ``etrecord.bin`` (and each realistic fixture under
``tests/fixtures/realistic/`` that has one), with ``enable_module_hierarchy`` False and True, the
file holds ``{name: total}`` for these names:

* every key of every event's ``module_hierarchy`` stacks (all of them, quantized graphs'
  ``L__self__L__self__fc1`` included);
* every module path (the first item of each stack entry, e.g. ``L['self'].fc1``);
* every proper prefix of each key that ends just before a digit or after ``__`` / ``.``
  (``L__self__L__self__fc`` matches ``fc1``, ``fc2``... by substring);
* a few fixed probes: ``""``, ``"self"``, ``"no_such_module"``.

Totals only depend on the ETDump's timestamps, so they are stable as long as the fixture files
are; each entry keeps the ETDump's SHA-256 so a test can tell a stale recording. Rerun this
whenever a fixture is regenerated.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import sys
import warnings
from pathlib import Path
from typing import Any

from executorch.devtools.inspector import Inspector

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
OUT = ROOT / "tests" / "data" / "module_totals_oracle.json"
PROBES = ("", "self", "no_such_module")


def folders() -> list[Path]:
    out = [d for d in sorted(FIXTURES.iterdir()) if (d / "etrecord.bin").is_file() and (d / "etdump.etdp").is_file()]
    realistic = FIXTURES / "realistic"
    if realistic.is_dir():
        out += [d for d in sorted(realistic.iterdir())
                if (d / "etrecord.bin").is_file() and (d / "etdump.etdp").is_file()]
    return out


def names(inspector: Inspector) -> list[str]:
    keys: list[str] = []
    paths: list[str] = []
    for block in inspector.event_blocks:
        for event in block.events:
            for stack in event.module_hierarchy.values():
                for key, value in (stack or {}).items():
                    keys.append(key)
                    if isinstance(value, (tuple, list)) and value and isinstance(value[0], str):
                        paths.append(value[0])
    prefixes = []
    for key in keys:
        for m in re.finditer(r"(?<=__)|(?<=\.)|(?=\d)", key):
            if 0 < m.start() < len(key):
                prefixes.append(key[: m.start()])
    return list(dict.fromkeys(keys + paths + prefixes + list(PROBES)))


def record(folder: Path, hierarchy: bool) -> dict[str, Any]:
    debug = folder / "debug_buffer.bin"
    try:
        inspector = Inspector(etdump_path=str(folder / "etdump.etdp"), etrecord=str(folder / "etrecord.bin"),
                              debug_buffer_path=str(debug) if debug.is_file() else None,
                              enable_module_hierarchy=hierarchy)
    except Exception as e:  # the reference refuses some fixtures (different inputs, two methods)
        return {"error": {"type": type(e).__name__, "message": str(e)[:500]}}
    return {"totals": {name: float(inspector.find_total_for_module(name)) for name in names(inspector)}}


def main() -> int:
    logging.disable(logging.WARNING)
    warnings.simplefilter("ignore")
    out: dict[str, Any] = {"generator": {"executorch": "1.5.1", "script": "scripts/record_module_totals_oracle.py"},
                           "fixtures": {}}
    for folder in folders():
        name = str(folder.relative_to(FIXTURES))
        out["fixtures"][name] = {
            "etdump_sha256": hashlib.sha256((folder / "etdump.etdp").read_bytes()).hexdigest(),
            "default": record(folder, False),
            "enable_module_hierarchy": record(folder, True),
        }
        print(name, {k: len(v.get("totals", {})) for k, v in out["fixtures"][name].items() if isinstance(v, dict)},
              file=sys.stderr)
    OUT.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
