"""Name → comparator class registry: one way to reach every metric, built-in or user-written."""

from __future__ import annotations

import inspect
import re
from typing import Any

from numdiff.comparators.base import NumericalComparatorBase
from numdiff.errors import UsageError, UsageTypeError

__all__ = ["available_comparators", "comparator_class", "get_comparator", "normalize_name", "register_comparator"]

_COMPARATORS: dict[str, type[NumericalComparatorBase]] = {}


def normalize_name(name: str) -> str:
    """Lower-case, trim, and turn inner spaces or hyphens into ``_``.

    Example:
        >>> normalize_name(" Max-Abs "), normalize_name("SNR")
        ('max_abs', 'snr')
    """
    return re.sub(r"[\s\-]+", "_", name.strip().lower())


def register_comparator(name: str, cls: type[NumericalComparatorBase]) -> None:
    """Make ``cls`` reachable by ``name`` (case- and space-insensitive).

    Args:
        name: The metric name users pass, e.g. ``"mse"``.
        cls: A concrete :class:`NumericalComparatorBase` subclass, constructible without arguments
            or with the keywords users will pass to :func:`get_comparator`.

    Raises:
        UsageError: The name is empty or already taken, or ``cls`` is not a concrete comparator.

    Example:
        >>> from numdiff.comparators import MSEComparator
        >>> register_comparator("mse", MSEComparator)
        Traceback (most recent call last):
        ...
        numdiff.errors.UsageError: comparator name 'mse' is already registered to MSEComparator
        Pick another name.
    """
    key = normalize_name(name) if isinstance(name, str) else ""
    if not key:
        raise UsageError(f"comparator name must be a non-empty string, got {name!r}\nPass e.g. 'my_metric'.")
    if not (isinstance(cls, type) and issubclass(cls, NumericalComparatorBase)) or inspect.isabstract(cls):
        raise UsageError(
            f"cannot register {cls!r} as comparator {name!r}: not a concrete NumericalComparatorBase subclass\n"
            "Subclass NumericalComparatorBase and implement element_compare(a, b) -> float."
        )
    if key in _COMPARATORS:
        raise UsageError(
            f"comparator name {key!r} is already registered to {_COMPARATORS[key].__name__}\nPick another name."
        )
    _COMPARATORS[key] = cls


def available_comparators() -> tuple[str, ...]:
    """Registered names, sorted.

    Example:
        >>> {"l1", "mse", "snr", "cosine", "max_abs"} <= set(available_comparators())
        True
    """
    return tuple(sorted(_COMPARATORS))


def comparator_class(metric: str) -> type[NumericalComparatorBase] | None:
    """The registered comparator class for a registered name (``"snr"``) or a class name
    (``"SNRComparator"``, as the gap's reports name their metric), or None.

    Example:
        >>> comparator_class("SNRComparator").higher_is_better, comparator_class("mse").higher_is_better
        (True, False)
    """
    found = _COMPARATORS.get(normalize_name(metric))
    if found is not None:
        return found
    return next((cls for cls in _COMPARATORS.values() if cls.__name__ == metric), None)


def get_comparator(
    name_or_instance: str | NumericalComparatorBase | type[NumericalComparatorBase], **kwargs: Any
) -> NumericalComparatorBase:
    """The comparator for a name, a class or an instance.

    Args:
        name_or_instance: A registered name (``"mse"``, ``" SNR "``, ``"max_abs"``...), a
            comparator class (instantiated with ``kwargs``) or an instance (returned as is).
        **kwargs: Constructor keywords, for a name or a class.

    Raises:
        UsageError: Unknown name (the message lists the known ones) or keywords given with an
            instance.
        UsageTypeError: An object that is not a name, a comparator class or an instance (also a
            ``TypeError``).

    Example:
        >>> type(get_comparator(" SNR ")).__name__
        'SNRComparator'
        >>> get_comparator("l2")
        Traceback (most recent call last):
        ...
        numdiff.errors.UsageError: Unsupported distance metric 'l2' (unknown comparator 'l2')
        Known comparators: cosine, cosine_similarity, kl, kl_divergence, l1, max_abs, median_diff_ratio, median_ratio, mse, snr, top_k, topk; or pass a NumericalComparatorBase instance.
    """
    if isinstance(name_or_instance, NumericalComparatorBase):
        if kwargs:
            raise UsageError(
                f"keywords {sorted(kwargs)} given with a comparator instance\n"
                "Configure the instance itself, or pass its name or class with the keywords."
            )
        return name_or_instance
    if isinstance(name_or_instance, type) and issubclass(name_or_instance, NumericalComparatorBase):
        return name_or_instance(**kwargs)
    if isinstance(name_or_instance, str):
        cls = _COMPARATORS.get(normalize_name(name_or_instance))
        if cls is not None:
            return cls(**kwargs)
        raise UsageError(  # first words as the reference's ValueError
            f"Unsupported distance metric {name_or_instance!r} (unknown comparator {name_or_instance!r})\n"
            f"Known comparators: {', '.join(available_comparators())}; "
            "or pass a NumericalComparatorBase instance."
        )
    raise UsageTypeError(
        f"expected a comparator name, class or instance, got {type(name_or_instance).__name__}\n"
        f"Known comparators: {', '.join(available_comparators())}."
    )
