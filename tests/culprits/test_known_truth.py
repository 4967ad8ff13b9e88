"""find_culprits on real artifacts with a planted culprit (scripts/make_culprit_fixtures.py).

The ETRecord is the correct model's; the ETDump and debug buffer come from a twin whose planted op
computes something else. The culprit must be exactly the planted op; clean models show none.
"""

from __future__ import annotations

import math

import pytest

from tests.culprits.helpers import CLEAN_ORACLE, KNOWN_TRUTH, report, truth


def test_fixtures_are_present() -> None:
    assert len(KNOWN_TRUTH) >= 12
    assert sum(1 for n in KNOWN_TRUTH if truth(n)["planted"]) >= 9


@pytest.mark.parametrize("name", KNOWN_TRUTH)
def test_culprits_are_exactly_the_planted_ops(name: str) -> None:
    planted = truth(name)["planted"]
    found = report(name).culprits
    assert len(found) == len(planted), str(report(name))
    for site in planted:
        hits = [r for r in found if set(site["aot_ops"]) & set(r.aot_ops)]
        assert len(hits) == 1, f"{site} not found exactly once in {[r.aot_ops for r in found]}"
        row = hits[0]
        assert row.verdict.beyond_noise and row.local_noise_units > 8
        assert row.source_line and "_culprit_models.py" in row.source_line


@pytest.mark.parametrize("name", KNOWN_TRUTH)
def test_rows_after_the_culprit_only_inherit(name: str) -> None:
    rep = report(name)
    for row in rep.rows:
        if not row.is_culprit:
            assert not row.verdict.beyond_noise or any(rep.rows[p].verdict.beyond_noise for p in row.producers)


@pytest.mark.parametrize("name", CLEAN_ORACLE + ("quantized_mlp",))
def test_clean_oracle_fixtures_show_no_culprit(name: str) -> None:
    rep = report(name)
    assert rep.culprits == [] and bool(rep)
    assert all(r.verdict.value in ("ok", "expected-noise") for r in rep.rows if not math.isnan(r.local_noise_units))


def test_softmax_amplifies_yet_the_culprit_is_upstream() -> None:
    rep = report("culprit_softmax")
    worst = rep.worst_accumulated()
    assert worst is not None and not worst.is_culprit
    (culprit,) = rep.culprits
    assert culprit.index < worst.index
    assert culprit.accumulated_gap > 30 > worst.accumulated_gap  # naive "first row below 30 dB" misses it
    softmax = next(r for r in rep.rows if r.op_type == "softmax")
    assert softmax.amplification > 10 and softmax.verdict.value == "ok"


def test_two_independent_culprits_in_parallel_branches() -> None:
    rep = report("culprit_two")
    assert [r.module_path for r in rep.culprits] == ["left", "right"]
    head = rep.rows[-1]
    assert not head.is_culprit and head.accumulated_gap < 20


def test_delegated_culprit_is_the_second_partition() -> None:
    rep = report("culprit_xnnpack")
    (culprit,) = rep.culprits
    assert culprit.runtime_ops == ["DELEGATE_CALL"]
    assert "linear_2" in culprit.aot_ops and "linear" not in culprit.aot_ops
    first = rep.rows[0]
    assert first.runtime_ops == ["DELEGATE_CALL"] and not first.is_culprit
    assert first.replayed_ops  # the partition's inner nodes are replayed with it
    assert first.input_source == "runtime"  # the delegate logged its input: the replay uses it
    assert "taken from what the delegate logged as its inputs" in (first.note or "")


def test_bad_quantization_scale_is_judged_in_quantization_steps() -> None:
    rep = report("culprit_int8_scale")
    (culprit,) = rep.culprits
    assert "quantize_per_tensor_2" in culprit.aot_ops
    assert "step" in culprit.noise
    clean = [r for r in rep.rows if not r.is_culprit]
    assert max(r.local_noise_units for r in clean) < 1


@pytest.mark.parametrize("name", ["culprit_two", "culprit_int8_scale", "culprit_xnnpack", "culprit_clean_int8_portable"])
def test_the_edge_graph_as_reference_finds_the_same_culprits(name: str) -> None:
    from tests.culprits.helpers import ON_REPRESENTATIVE, inspector

    rep = inspector(name).find_culprits("SNR", reference_graph="edge_dialect_exported_program",
                                        inputs_are_representative=name in ON_REPRESENTATIVE)
    planted = truth(name)["planted"]
    assert len(rep.culprits) == len(planted)
    assert [r.module_path for r in rep.culprits] == [r.module_path for r in report(name).culprits]
