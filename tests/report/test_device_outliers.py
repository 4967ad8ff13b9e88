"""Device against device: the outlier per op and the device × device matrix (fleet cells)."""

from __future__ import annotations

from numdiff.batch.fleet import Cell, FleetSummary, text_summary
from numdiff.report.device_outliers import disagree, outliers, pair_matrix


def _summary(cells: dict[tuple[str, str], Cell], groups: list[str]) -> FleetSummary:
    ops = list(dict.fromkeys(op for op, _ in cells))
    return FleetSummary("device", ops, groups, cells, {g: 2 for g in groups}, {}, [])


def _cell(diverging: int, snr: float | None, runs: int = 2) -> Cell:
    return Cell(runs, diverging, snr, snr, 1.0)


def test_the_device_alone_on_an_op_is_its_outlier() -> None:
    groups = ["a", "b", "c"]
    cells = {("relu", "a"): _cell(0, 140.0), ("relu", "b"): _cell(0, float("inf")), ("relu", "c"): _cell(2, 31.0),
             ("tanh", "a"): _cell(0, 120.0), ("tanh", "b"): _cell(0, 70.0), ("tanh", "c"): _cell(0, 121.0),
             ("linear", "a"): _cell(2, 10.0), ("linear", "b"): _cell(2, 10.5), ("linear", "c"): _cell(2, 9.0)}
    s = _summary(cells, groups)
    found = {o.op: o for o in outliers(s.ops, s.groups, s.cells)}
    assert found["relu"].group == "c" and found["relu"].reason == "diverges in 2/2 runs, on no other device"
    assert found["tanh"].group == "b" and found["tanh"].reason == "median SNR 70 dB, the others 100 dB (capped)"
    assert "linear" not in found  # diverges everywhere: planted in the model, no device stands alone
    pairs = pair_matrix(s.ops, s.groups, s.cells)
    assert pairs[("a", "c")] == ["relu"] and pairs[("a", "b")] == ["tanh"] and pairs[("b", "c")] == ["relu", "tanh"]
    text = text_summary(s)
    assert "  relu: device=c (diverges in 2/2 runs, on no other device)" in text
    assert "ops on which two devices disagree" in text


def test_no_outlier_without_a_majority_or_when_the_others_disagree() -> None:
    two = _summary({("relu", "a"): _cell(0, 140.0), ("relu", "b"): _cell(2, 20.0)}, ["a", "b"])
    assert outliers(two.ops, two.groups, two.cells) == [] and pair_matrix(two.ops, two.groups, two.cells)[("a", "b")] == ["relu"]
    spread = _summary({("relu", "a"): _cell(0, 90.0), ("relu", "b"): _cell(0, 60.0), ("relu", "c"): _cell(0, 30.0)},
                      ["a", "b", "c"])
    assert outliers(spread.ops, spread.groups, spread.cells) == []


def test_disagree_needs_a_clear_difference() -> None:
    assert not disagree(_cell(1, 50.0, runs=3), _cell(0, 53.0))  # 1 of 3 runs diverging, SNRs 3 dB apart
    assert disagree(_cell(1, 50.0, runs=2), _cell(0, 50.0))  # half of one's runs, none of the other's
    assert not disagree(_cell(1, 50.0, runs=2), _cell(1, 50.0, runs=3))  # both diverge in some runs
    assert disagree(_cell(0, 40.0), _cell(0, 46.0)) and not disagree(_cell(0, 40.0), _cell(0, 45.9))
    assert not disagree(_cell(0, None), _cell(0, 40.0))


def test_the_service_compare_page_names_the_outlier() -> None:
    """The compare page (one run per device) marks the device alone on an op, in the label's words."""
    from numdiff.report.verdicts import CULPRIT
    from numdiff.service.web.render import page

    class Run:
        def __init__(self, id: int) -> None:
            self.id = id

    class Model:
        name = "m"

    columns = [("pixel8", Run(1)), ("pixel9", Run(2)), ("rpi5", Run(3))]
    table = {"aten.linear": {"pixel8": 90.0, "pixel9": 91.0, "rpi5": 20.0},
             "aten.relu": {"pixel8": 120.0, "pixel9": 118.0, "rpi5": 119.0}}
    causes = {"aten.linear": {"rpi5": CULPRIT}}
    found = {o.op: o for o in outliers(list(table), [c for c, _ in columns],
                                       {(k, v): Cell(1, int(causes.get(k, {}).get(v) == CULPRIT), s, s, None)
                                        for k in table for v, s in table[k].items()}, by="phone")}
    assert list(found) == ["aten.linear"] and found["aten.linear"].reason == "diverges in 1/1 runs, on no other phone"
    html = page("compare.html", title="m: compare by phone", model=Model(), by="phone", columns=columns,
                order=list(table), table=table, worst={k: min(v.values()) for k, v in table.items()},
                spread={k: None for k in table}, totals={c: None for c, _ in columns}, unit="ms",
                fmt=lambda v: "—" if v is None else f"{v:.1f}", causes=causes, CULPRIT=CULPRIT, INHERITED="inherited",
                outliers=found, crumbs=[("project p", "/ui")], signed_in=True).body.decode()
    assert "<th>outlier</th>" in html
    assert '<td class="outlier"><b>rpi5</b> (diverges in 1/1 runs, on no other phone)</td>' in html
