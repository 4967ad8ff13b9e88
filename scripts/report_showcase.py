"""Write the README's report screenshot and print the report's size and open time.

    .venv/bin/python scripts/report_showcase.py [--screenshot docs/report-screenshot.png]

Screenshot: the bundled planted_culprit example's report in headless Chromium. Timing: the
bundled examples and a synthetic 1,000-layer analysis, each opened in a fresh browser;
"ready" is when the page's script has drawn the summary and tables, "load" the load event.
Needs chromium, chromedriver and selenium (scripts/install_test_system_deps.sh, '.[test]').
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from numdiff.examples import example_files  # noqa: E402
from numdiff.report import Analysis, write_html  # noqa: E402
from tests.report._browser import browser  # noqa: E402
from tests.report._synthetic import synthetic_analysis  # noqa: E402


def _example(name: str) -> Analysis:
    f = example_files(name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Analysis.from_files(f.etdump, f.etrecord, f.debug_buffer, labels={"model": name})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--screenshot", default=str(ROOT / "docs" / "report-screenshot.png"))
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    cases = {"planted_culprit": _example("planted_culprit"), "quantized_mlp": _example("quantized_mlp"),
             "synthetic 1,000 layers": synthetic_analysis(1000)}
    with tempfile.TemporaryDirectory() as tmp:
        for name, analysis in cases.items():
            page = Path(tmp) / (name.replace(" ", "_").replace(",", "") + ".html")
            t0 = time.perf_counter()
            write_html(analysis, page)
            written = time.perf_counter() - t0
            timings = []
            for _ in range(args.repeats):
                with browser() as d:
                    d.get(page.as_uri())
                    timings.append(d.execute_script(
                        "const t = performance.timing; return [+document.body.dataset.ready,"
                        " t.loadEventEnd - t.navigationStart];"))
                    if name == "planted_culprit" and args.screenshot:
                        Path(args.screenshot).parent.mkdir(parents=True, exist_ok=True)
                        d.save_screenshot(args.screenshot)
            ready = sorted(t[0] for t in timings)[len(timings) // 2]
            load = sorted(t[1] for t in timings)[len(timings) // 2]
            print(f"{name:24} {page.stat().st_size / 1e6:6.2f} MB  written in {written:4.1f} s  "
                  f"ready {ready:5.0f} ms  load {load:5.0f} ms (median of {len(timings)} cold opens)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
