"""The device × device view of a generated fleet (numdiff fleet summary)."""

from __future__ import annotations

from typing import Any

from numdiff.report.device_outliers import outliers


def test_on_the_generated_fleet_rpi5_is_the_relu_outlier(fleet: dict[str, Any]) -> None:
    from numdiff.batch.fleet import load_tables, render_fleet_html, summarize

    s = summarize(*load_tables(fleet["out"]), by="device")
    found = {o.op: o.group for o in outliers(s.ops, s.groups, s.cells)}
    assert found.get("relu") == "rpi5"
    assert "linear_1" not in found  # the planted culprit diverges on every device
    page = render_fleet_html(s)
    assert 'id="fleet-pairs"' in page and "<b>device=rpi5</b> departs from every other device" in page
