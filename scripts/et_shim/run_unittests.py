"""Run ExecuTorch's devtools unittest files one test at a time and write the outcomes as JSON.

Dev-only worker of ``scripts/run_et_devtools_tests.py`` (oracle virtualenv)::

    python scripts/et_shim/run_unittests.py TESTS_ROOT OUT.json [--shim] [--only SUBSTRING]

``TESTS_ROOT`` is a folder holding ``devtools/<package>/tests/*_test.py`` from ExecuTorch's
repository; each file is loaded under its in-package module name
(``executorch.devtools.inspector.tests.inspector_test``, ...) so the files' imports of each
other resolve to these copies. With ``--shim`` the numdiff shim is installed first.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
import traceback
import unittest
from pathlib import Path
from typing import Any

#: Load order: helper modules other test files import come first.
FILES = (
    "devtools/etrecord/tests/etrecord_test.py",
    "devtools/inspector/tests/inspector_test_utils.py",
    "devtools/inspector/tests/event_blocks_test.py",
    "devtools/inspector/tests/inspector_test.py",
    "devtools/inspector/tests/inspector_utils_test.py",
    "devtools/inspector/tests/intermediate_output_capturer_test.py",
    "devtools/inspector/tests/l1_comparator_test.py",
    "devtools/inspector/tests/mse_comparator_test.py",
    "devtools/inspector/tests/snr_comparator_test.py",
    "devtools/inspector/tests/vgf_neural_statistics_test.py",
)


def _module_name(rel: str) -> str:
    return "executorch." + rel.removesuffix(".py").replace("/", ".")


def _load(root: Path, rel: str) -> Any:
    name = _module_name(rel)
    spec = importlib.util.spec_from_file_location(name, root / rel)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _summary(err: Any) -> str:
    exc_type, exc, tb = err
    lines = [ln for ln in str(exc).strip().splitlines() if ln.strip()]
    where = traceback.extract_tb(tb)[-1] if tb is not None else None
    loc = f" [{Path(where.filename).name}:{where.lineno}]" if where else ""
    return f"{exc_type.__name__}: {(lines[0] if lines else '')[:300]}{loc}"


class _Result(unittest.TestResult):
    def __init__(self) -> None:
        super().__init__()
        self.outcomes: dict[str, dict[str, Any]] = {}

    def _set(self, test: Any, status: str, detail: str = "") -> None:
        self.outcomes[test.id()] = {"status": status, "detail": detail}

    def addSuccess(self, test: Any) -> None:
        self._set(test, "pass")

    def addFailure(self, test: Any, err: Any) -> None:
        self._set(test, "fail", _summary(err))

    def addError(self, test: Any, err: Any) -> None:
        self._set(test, "error", _summary(err))

    def addSkip(self, test: Any, reason: str) -> None:
        self._set(test, "skip", reason)

    def addExpectedFailure(self, test: Any, err: Any) -> None:
        self._set(test, "pass", "expected failure")

    def addUnexpectedSuccess(self, test: Any) -> None:
        self._set(test, "fail", "unexpected success")

    def addSubTest(self, test: Any, subtest: Any, err: Any) -> None:
        if err is not None and self.outcomes.get(test.id(), {}).get("status") != "fail":
            self._set(test, "fail", f"subtest {subtest._subDescription()}: {_summary(err)}")


def _tests(suite: unittest.TestSuite) -> list[unittest.TestCase]:
    out: list[unittest.TestCase] = []
    for t in suite:
        if isinstance(t, unittest.TestSuite):
            out.extend(_tests(t))
        else:
            out.append(t)
    return out


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("root", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--shim", action="store_true")
    parser.add_argument("--only", action="append", default=[])
    args = parser.parse_args()
    if args.shim:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        import numdiff_et_shim

        numdiff_et_shim.install()
    results: dict[str, dict[str, Any]] = {}
    loader = unittest.TestLoader()
    for rel in FILES:
        if not (args.root / rel).is_file():
            continue
        try:
            module = _load(args.root, rel)
        except Exception as e:  # noqa: BLE001 - an unimportable file fails all its tests
            results[f"{_module_name(rel)}.<import>"] = {"status": "error", "detail": f"{type(e).__name__}: {e}"}
            continue
        for test in _tests(loader.loadTestsFromModule(module)):
            if args.only and not any(s in test.id() for s in args.only):
                continue
            result = _Result()
            start = time.perf_counter()
            test.run(result)
            outcome = result.outcomes.get(test.id(), {"status": "pass", "detail": ""})
            outcome["seconds"] = round(time.perf_counter() - start, 2)
            results[test.id()] = outcome
            print(f"{outcome['status']:5} {test.id()}", file=sys.stderr, flush=True)
    if args.shim:
        results["<shim>"] = {"status": "info", "detail": dict(sorted(numdiff_et_shim.MISSING.items()))}
    args.out.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
