"""Systematic differences said in words: scale, offset, sign flip, transposition, permutation, none."""

from __future__ import annotations

import math

import pytest
import torch

from numdiff.runs_compare import fit_systematic

BASE = torch.linspace(-2.0, 3.0, 24).reshape(4, 6) ** 3


def test_identical() -> None:
    fit = fit_systematic(BASE, BASE.clone(), "outputs")
    assert (fit.kind, fit.words, fit.scale, fit.r2) == ("identical", "outputs are identical", 1.0, 1.0)


def test_a_constant_factor_is_named() -> None:
    fit = fit_systematic(BASE, BASE * 0.5, "outputs")
    assert fit.kind == "scale"
    assert fit.scale == pytest.approx(0.5) and fit.offset == pytest.approx(0.0, abs=1e-12)
    assert fit.words == "outputs are 0.50× the base's (half), R² 1.00"
    assert fit_systematic(BASE, BASE * 1.37).words == "values are 1.37× the base's, R² 1.00"


def test_offset_and_affine() -> None:
    assert fit_systematic(BASE, BASE + 0.25).words == "values are the base's offset by +0.25, R² 1.00"
    fit = fit_systematic(BASE, 2 * BASE - 1.0)
    assert fit.kind == "affine" and fit.words == "values are 2.00× the base's (twice) offset by -1, R² 1.00"


def test_sign_flip() -> None:
    fit = fit_systematic(BASE, -BASE)
    assert fit.kind == "sign-flip" and fit.scale == pytest.approx(-1.0)
    assert fit.words == "values are the base's with the sign flipped, R² 1.00"


def test_transposed_and_permuted() -> None:
    square = torch.arange(16.0).reshape(4, 4) ** 1.5
    assert fit_systematic(square, square.T.contiguous()).kind == "transposed"
    shuffled = BASE.reshape(-1)[torch.randperm(24, generator=torch.Generator().manual_seed(0))].reshape(4, 6)
    fit = fit_systematic(BASE, shuffled)
    assert fit.kind == "permuted" and "another order" in (fit.words or "")


def test_noise_has_no_words_and_a_partly_systematic_fit_says_how_much() -> None:
    gen = torch.Generator().manual_seed(3)
    noise = torch.randn(BASE.shape, generator=gen)
    fit = fit_systematic(BASE, BASE + noise * BASE.std())
    assert fit.kind == "none" and fit.words is None
    assert 0 < fit.r2 < 1
    partly = fit_systematic(BASE, 0.5 * BASE + 0.3 * noise * BASE.std())
    assert partly.kind == "partly" and partly.words is not None and partly.words.startswith("partly systematic: ")
    assert 0.5 <= partly.explained < 0.9


def test_non_finite_elements_are_counted_not_fitted() -> None:
    run = BASE * 0.5
    run[0, 0] = float("nan")
    fit = fit_systematic(BASE, run)
    assert fit.skipped == 1 and fit.scale == pytest.approx(0.5)


def test_constant_base_gives_an_offset_without_a_scale() -> None:
    fit = fit_systematic(torch.ones(5), torch.ones(5) * 3)
    assert math.isnan(fit.scale) and fit.offset == pytest.approx(2.0)
    assert fit.words == "values are the base's offset by +2"


def test_the_issue_example_slope_minus_half_r2_085() -> None:
    """react-native-executorch #1379: one backend's logits against the laptop's regress with slope -0.50, R² 0.85."""
    gen = torch.Generator().manual_seed(1379)
    laptop = torch.randn(64, 10, generator=gen)
    noise = torch.randn(64, 10, generator=gen)
    phone = -0.5 * laptop + noise * 0.5 * math.sqrt(0.15 / 0.85) * laptop.std()
    fit = fit_systematic(laptop, phone, "logits")
    assert fit.scale == pytest.approx(-0.5, abs=0.03) and fit.r2 == pytest.approx(0.85, abs=0.03)
    assert fit.words == "logits are -0.50× the base's (minus half), R² 0.84"
    assert fit.kind == "scale" and fit.explained > 0.9
