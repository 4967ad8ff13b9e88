"""Run ExecuTorch 1.5.1's own devtools tests twice: against the reference, then against numdiff.

Dev script (issue 8), never run by CI. It needs the oracle virtualenv and a copy of the test
files from ExecuTorch's public repository, outside this repository::

    python scripts/run_et_devtools_tests.py [--tests /tmp/et-tests] [--git REPO] [--oracle PYTHON] [--json OUT]

``--tests`` must hold ``devtools/etrecord/tests/*.py`` and ``devtools/inspector/tests/*.py``
(the files at commit 181e510 are byte-identical to the 1.5.1 release). When the folder lacks
them they are taken from ``--git`` (a clone of github.com/pytorch/executorch: ``git archive
181e510 devtools/inspector/tests devtools/etrecord/tests``), or else from the copies the 1.5.1
wheel installs under ``executorch/devtools/*/tests`` (also identical). Run 1 is plain; run 2 installs ``scripts/et_shim/numdiff_et_shim.py``, which
serves the Inspector-facing public names from numdiff and leaves artifact building to
ExecuTorch. Then each test is judged applicable or not by reading its source (``APPLICABLE_RULE``)
and a per-test table and the counts are printed.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
WORKER = REPO / "scripts" / "et_shim" / "run_unittests.py"
ORACLE = Path("/root/.cache/numdiff-oracle/bin/python")
TEST_DIRS = ("devtools/etrecord/tests", "devtools/inspector/tests")

APPLICABLE_RULE = """\
A test is APPLICABLE when it exercises the Inspector-facing public surface numdiff claims to
replace, i.e. it reaches (in its body or the test-file helpers it calls) at least one name the
shim serves from numdiff: Inspector, Event, EventBlock, PerfData, TimeScale, compare_results,
the L1/MSE/SNR comparators and NumericalComparatorBase, parse_etrecord, and the public
vgf_neural_statistics parsers; public methods and attributes of those objects count (a missing
public name is a failure, not a reason to skip). It is NOT APPLICABLE when
  (a) it patches or mocks ExecuTorch internals (unittest.mock.patch / patch.object / MagicMock),
  (b) it uses ExecuTorch-internal helpers numdiff does not claim to replicate: names imported
      from executorch.devtools.inspector._inspector / _inspector_utils /
      _intermediate_output_capturer or executorch.devtools.etrecord._etrecord other than the
      public names above (e.g. InstructionEvent, ProfileEventSignature, calculate_snr,
      find_op_names, calculate_snr, propagate_back_debug_handle, IntermediateOutputCapturer;
      type aliases such as DebugHandle and the ETRecord writer class do not count),
  (c) it calls a private method (obj._name(...)) of a served object (e.g. Event._gen_from_...,
      EventBlock._gen_from_etdump, inspector._get_aot_intermediate_outputs_and_op_names);
      reading the reference's underscore data attributes that users rely on (ETRecord's
      _debug_handle_map, _delegate_map, _representative_inputs, _reference_outputs,
      Event._instruction_id, Inspector._etrecord) is allowed,
  (d) it never reaches a served name (it tests artifact building: generate_etrecord, the
      ETRecord writer, export/lowering), so numdiff is not under test.
Rules are applied in that order; the first that matches gives the reason."""

SERVED = frozenset({
    "Inspector", "Event", "EventBlock", "PerfData", "TimeScale", "compare_results",
    "L1Comparator", "MSEComparator", "SNRComparator", "NumericalComparatorBase", "parse_etrecord",
    "parse_vgf_neural_statistics_metadata", "parse_vgf_neural_statistics_delegate_metadata",
})  # fmt: skip
INTERNAL_MODULES = (
    "executorch.devtools.inspector._inspector",
    "executorch.devtools.inspector._inspector_utils",
    "executorch.devtools.inspector._intermediate_output_capturer",
    "executorch.devtools.etrecord._etrecord",
)
#: Names from internal modules that are type aliases or writer-side (not Inspector behaviour).
NEUTRAL = frozenset({"DebugHandle", "ETRecord", "ETRecordReservedFileNames", "flatcc"})
#: Private methods of test classes (helpers), not of the objects under test.
TEST_OWNERS = frozenset({"self", "cls", "TestEventBlock", "TestETRecord", "TestInspector", "TestInspectorUtils"})


@dataclass(frozen=True)
class Judgement:
    applicable: bool
    reason: str


class _Source:
    """Functions of every test file, for following helper calls from a test body."""

    def __init__(self, files: list[Path]) -> None:
        self.funcs: dict[str, list[ast.AST]] = {}
        self.tests: dict[str, ast.FunctionDef] = {}
        self.class_body: dict[str, list[ast.AST]] = {}  # test key -> class-level statements
        self.imports: dict[str, dict[str, str]] = {}  # file stem -> local name -> module
        for path in files:
            tree = ast.parse(path.read_text())
            stem = path.stem
            self.imports[stem] = {}
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom) and node.module:
                    for alias in node.names:
                        self.imports[stem][alias.asname or alias.name] = node.module
                elif isinstance(node, ast.FunctionDef):
                    self.funcs.setdefault(node.name, []).append(node)
            for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
                attrs = [n for n in cls.body if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
                for fn in cls.body:
                    if isinstance(fn, ast.FunctionDef) and fn.name.startswith("test"):
                        self.tests[f"{stem}.{cls.name}.{fn.name}"] = fn
                        self.class_body[f"{stem}.{cls.name}.{fn.name}"] = attrs

    def closure(self, fn: ast.FunctionDef) -> list[ast.AST]:
        seen: dict[int, ast.AST] = {id(fn): fn}
        todo: list[ast.AST] = [fn]
        while todo:
            for node in ast.walk(todo.pop()):
                name = None
                if isinstance(node, ast.Call):
                    f = node.func
                    name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
                if name and not name.startswith("test") and name not in {"__init__", "forward"}:
                    for helper in self.funcs.get(name, []):
                        if id(helper) not in seen:
                            seen[id(helper)] = helper
                            todo.append(helper)
        return list(seen.values())


def judge(src: _Source, key: str) -> Judgement:
    stem = key.split(".")[0]
    fn = src.tests.get(key)
    if fn is None:
        return Judgement(False, "test source not found")
    nodes = src.closure(fn) + src.class_body.get(key, [])
    names: set[str] = set()
    attrs: set[str] = set()
    private_calls: set[str] = set()
    for root in nodes:
        for node in ast.walk(root):
            if isinstance(node, ast.Name):
                names.add(node.id)
            elif isinstance(node, ast.Attribute):
                attrs.add(node.attr)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                attr, owner = node.func.attr, node.func.value
                owner_name = owner.id if isinstance(owner, ast.Name) else ""
                if attr.startswith("_") and not attr.startswith("__") and owner_name not in TEST_OWNERS:
                    private_calls.add(f"{ast.unparse(owner)}.{attr}")
    imports = src.imports.get(stem, {})
    if {"patch", "MagicMock"} & names or "patch" in attrs:
        return Judgement(False, "(a) patches/mocks ExecuTorch internals")
    internal = sorted(
        n for n in names | attrs
        if imports.get(n) in INTERNAL_MODULES and n not in SERVED and n not in NEUTRAL
    )
    if internal:
        return Judgement(False, f"(b) uses ExecuTorch internals: {', '.join(internal[:4])}")
    if "_inspector" in names and any(a not in SERVED for a in attrs if a in _INSPECTOR_ATTRS):
        return Judgement(False, "(b) uses ExecuTorch internals via _inspector")
    if private_calls:
        return Judgement(False, f"(c) calls private methods: {', '.join(sorted(private_calls)[:3])}")
    if not (SERVED & (names | attrs)):
        return Judgement(False, "(d) does not reach a name served from numdiff (artifact building only)")
    return Judgement(True, "")


#: Attributes of ExecuTorch's private _inspector module a test might reach through the module object.
_INSPECTOR_ATTRS = frozenset({"gen_etdump_object", "parse_etrecord", "gen_graphs_from_etrecord",
                              "create_debug_handle_to_op_node_mapping", "is_inference_output_equal"})


ET_1_5_1_TESTS_COMMIT = "181e510"


def _tests_root(arg: Path, oracle: Path, git: Path | None) -> Path:
    if all((arg / d).is_dir() for d in TEST_DIRS):
        return arg
    arg.mkdir(parents=True, exist_ok=True)
    if git is not None:
        archive = subprocess.run(["git", "-C", str(git), "archive", ET_1_5_1_TESTS_COMMIT, *TEST_DIRS],
                                 check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(arg)], input=archive, check=True)
        print(f"extracted the tests at {ET_1_5_1_TESTS_COMMIT} from {git} to {arg}", file=sys.stderr)
        return arg
    code = "import executorch.devtools as d, os; print(os.path.dirname(d.__file__))"
    out = subprocess.run([str(oracle), "-c", code],
                         check=True, capture_output=True, text=True).stdout.strip()
    for d in TEST_DIRS:
        shutil.copytree(Path(out) / d.removeprefix("devtools/"), arg / d, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("__pycache__"))
    print(f"copied the tests from the installed wheel ({out}) to {arg}", file=sys.stderr)
    return arg


def _numdiff_deps(oracle: Path, root: Path) -> Path:
    """numdiff's dependencies the oracle venv lacks (pydantic), installed beside the tests, not into the venv."""
    site = root / "site"
    probe = subprocess.run([str(oracle), "-c", "import pydantic"], capture_output=True)
    if probe.returncode == 0 or (site / "pydantic").is_dir():
        return site
    subprocess.run([str(oracle), "-m", "pip", "install", "-q", "--target", str(site), "pydantic"], check=True)
    # keep the venv's own typing_extensions (torch's), not a second copy ahead of it on the path
    for p in site.glob("typing_extensions*"):
        shutil.rmtree(p) if p.is_dir() else p.unlink()
    return site


def _run(oracle: Path, root: Path, out: Path, shim: bool, only: list[str]) -> dict[str, dict[str, object]]:
    env = dict(os.environ)
    if shim:
        parts = [str(REPO), str(_numdiff_deps(oracle, root)), env.get("PYTHONPATH", "")]
        env["PYTHONPATH"] = os.pathsep.join(p for p in parts if p)
    else:
        env.pop("PYTHONPATH", None)  # the reference run must not pick up the shim's sitecustomize
    cmd = [str(oracle), str(WORKER), str(root), str(out)] + (["--shim"] if shim else [])
    for s in only:
        cmd += ["--only", s]
    print(f"running {'with the numdiff shim' if shim else 'plain (reference)'}: {' '.join(cmd)}", file=sys.stderr)
    subprocess.run(cmd, check=True, cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return json.loads(out.read_text())  # type: ignore[no-any-return]


def _short(test_id: str) -> str:
    return re.sub(r"^executorch\.devtools\.(inspector|etrecord)\.tests\.", "", test_id)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", type=Path, default=Path("/tmp/et-tests"))
    parser.add_argument("--git", type=Path, default=None, help="a clone of pytorch/executorch to take the tests from")
    parser.add_argument("--oracle", type=Path, default=ORACLE)
    parser.add_argument("--json", type=Path, default=None, help="also write the per-test outcomes here")
    parser.add_argument("--reuse", action="append", default=[], choices=("plain", "shim"),
                        help="reuse <tests>/<run>.json from an earlier run instead of running again (repeatable)")
    parser.add_argument("--only", action="append", default=[], help="run tests whose id contains this")
    args = parser.parse_args(argv)

    root = _tests_root(args.tests, args.oracle, args.git)
    runs = {}
    for mode in ("plain", "shim"):
        out = root / f"{mode}.json"
        runs[mode] = (json.loads(out.read_text()) if mode in args.reuse and out.is_file()
                      else _run(args.oracle, root, out, mode == "shim", args.only))
    src = _Source(sorted(p for d in TEST_DIRS for p in (root / d).glob("*.py")))

    rows = []
    for test_id in sorted(t for t in runs["plain"] if not t.startswith("<")):
        key = _short(test_id)
        j = judge(src, key)
        plain = str(runs["plain"][test_id]["status"])
        shim = runs["shim"].get(test_id, {"status": "missing", "detail": "not run"})
        rows.append((key, plain, str(shim["status"]), j, str(shim.get("detail", ""))))

    plain_pass = sum(r[1] == "pass" for r in rows)
    applicable = [r for r in rows if r[3].applicable]
    app_pass = [r for r in applicable if r[2] == "pass"]
    print(APPLICABLE_RULE)
    print()
    print(f"{'test':<100} {'ref':<5} {'numdiff':<8} verdict")
    for key, plain, shim, j, detail in rows:
        verdict = ("PASS" if shim == "pass" else f"FAIL: {detail}") if j.applicable else f"n/a {j.reason}"
        print(f"{key:<100} {plain:<5} {shim:<8} {verdict}")
    print()
    print(f"reference (plain run): {plain_pass}/{len(rows)} pass")
    print(f"numdiff (shim run): all {sum(r[2] == 'pass' for r in rows)}/{len(rows)} pass; applicable "
          f"{len(app_pass)}/{len(applicable)} pass ({100 * len(app_pass) / max(len(applicable), 1):.0f}%)")
    missing = runs["shim"].get("<shim>", {}).get("detail")
    if missing:
        print("public names numdiff lacks (served as placeholders):")
        for name, why in dict(missing).items():
            print(f"  {name}: {why}")
    if args.json:
        args.json.write_text(json.dumps(
            [{"test": k, "reference": p, "numdiff": s, "applicable": j.applicable, "reason": j.reason,
              "detail": d} for k, p, s, j, d in rows], indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
