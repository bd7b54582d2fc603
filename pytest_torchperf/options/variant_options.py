"""Parsing the variant options: ``variants``, ``--torchperf-variants``, ``min_speedup``,
``accuracy``, ``metric`` and ``data``. Pure module (no torch, no pytest); the option table in
:mod:`pytest_torchperf.options.measure_options` uses these parsers.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

from pytest_torchperf.core.errors import OptionError
from pytest_torchperf.core.types import UserValue
from pytest_torchperf.variants.registry import (
    ACCURACY_KEYS,
    VARIANT_NAMES,
    VARIANTS,
)

#: One variant and its settings, as stored in :class:`MeasureOptions` (hashable pairs).
VariantSpec = tuple[str, tuple[tuple[str, object], ...]]


def _variant_name(name: object, allow: tuple[str, ...] = VARIANT_NAMES) -> str:
    text = str(name).strip()
    if text not in allow:
        close = difflib.get_close_matches(text, allow, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise OptionError(f"unknown variant {text!r}{hint}; known variants: {', '.join(allow)}")
    return text


def parse_variants(value: object) -> tuple[VariantSpec, ...]:
    """Parse ``variants=``: a list of names, a comma-separated string, or a dict name -> settings.

    ``["eager", "compiled"]``, ``"eager,compiled"`` and ``{"compiled": {"mode": "max-autotune"},
    "int8": None}`` are accepted; order is kept, duplicates are an error.
    """
    if isinstance(value, str):
        items: list[tuple[object, object]] = [(v, None) for v in value.split(",") if v.strip()]
    elif isinstance(value, Mapping):
        items = list(value.items())
    elif isinstance(value, (list, tuple)):
        items = [(v, None) for v in value]
    else:
        raise OptionError(f"{value!r} is not a list of variants (example: ['eager', 'compiled'])")
    if not items:
        raise OptionError(f"{value!r} names no variant; known variants: {', '.join(VARIANT_NAMES)}")
    specs: list[VariantSpec] = []
    for raw_name, raw_settings in items:
        name = _variant_name(raw_name)
        if any(name == seen for seen, _ in specs):
            raise OptionError(f"variant {name!r} is listed twice")
        settings = {} if raw_settings is None else raw_settings
        if not isinstance(settings, Mapping):
            raise OptionError(
                f"settings of variant {name!r} must be a dict such as "
                f"{{'mode': 'max-autotune'}}, got {raw_settings!r}"
            )
        allowed = VARIANTS[name].settings
        for key in settings:
            if key not in allowed:
                valid = ", ".join(allowed) if allowed else "none"
                raise OptionError(f"variant {name!r} has no setting {key!r}; its settings: {valid}")
        check = VARIANTS[name].check  # values torch would only reject later, inside a compile
        if check is not None:
            check(name, settings)
        specs.append((name, tuple(settings.items())))
    return tuple(specs)


def parse_variant_filter(value: object) -> tuple[str, ...]:
    """Parse ``--torchperf-variants``: variant names, comma-separated (settings are not allowed)."""
    if isinstance(value, (list, tuple)):
        value = ",".join(str(v) for v in value)
    names = [_variant_name(v) for v in str(value).split(",") if v.strip()]
    if not names:
        raise OptionError(f"{value!r} names no variant; known variants: {', '.join(VARIANT_NAMES)}")
    return tuple(dict.fromkeys(names))


def _per_variant(value: object, what: str, example: str) -> Mapping[object, object]:
    if not isinstance(value, Mapping):
        raise OptionError(f"{value!r} is not a dict of variant -> {what} (example: {example})")
    return value


def parse_min_speedup(value: object) -> tuple[tuple[str, float], ...]:
    """Parse ``min_speedup={"compiled": 1.2}`` (also ``"1.2x"``): required speedup vs eager."""
    pairs = []
    for name, raw in _per_variant(value, "speedup", "{'compiled': 1.2}").items():
        variant = _variant_name(name, VARIANT_NAMES[1:])
        text = str(raw).strip().lower().removesuffix("x")
        try:
            if isinstance(raw, bool):
                raise ValueError
            number = float(text)
        except ValueError:
            raise OptionError(
                f"min_speedup for {variant!r}: {raw!r} is not a number (examples: 1.2, '1.5x')"
            ) from None
        if not math.isfinite(number) or number <= 0:
            raise OptionError(f"min_speedup for {variant!r}: {raw!r} must be a positive number")
        pairs.append((variant, number))
    return tuple(pairs)


def unrun_speedups(asked: Sequence[tuple[str, float]], run: Sequence[str]) -> str | None:
    """Why ``min_speedup`` (``asked``) names a variant the measurement does not run (``run``):
    a limit that gates nothing there, or None. A warning, not an error: a module-wide marker's
    ``min_speedup`` may be meant for the tests that run that variant."""
    missing = [variant for variant, _ in asked if variant not in run]
    if not missing:
        return None
    return (
        f"min_speedup names {', '.join(repr(v) for v in missing)}, which this measurement does "
        f"not run (it runs {', '.join(run) or 'eager'}): that limit gates nothing here; add "
        f"{missing[0]!r} to variants=, or drop it from min_speedup"
    )


def parse_accuracy(value: object) -> tuple[tuple[str, tuple[tuple[str, float], ...]], ...]:
    """Parse ``accuracy={"int8": {"rel_l2": 0.1, "cosine": 0.99}}`` (tolerance overrides)."""
    parsed = []
    example = "{'int8': {'rel_l2': 0.1}}"
    for name, limits in _per_variant(value, "tolerances", example).items():
        variant = _variant_name(name)
        if not isinstance(limits, Mapping):
            raise OptionError(
                f"accuracy for {variant!r} must be a dict such as {{'rel_l2': 0.1}}, got {limits!r}"
            )
        pairs = []
        for key, raw in limits.items():
            if key not in ACCURACY_KEYS:
                close = difflib.get_close_matches(str(key), ACCURACY_KEYS, n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                raise OptionError(
                    f"accuracy for {variant!r}: unknown metric {key!r}{hint}; "
                    f"metrics: {', '.join(ACCURACY_KEYS)}"
                )
            try:
                if isinstance(raw, bool):
                    raise ValueError
                number = float(raw)
            except (TypeError, ValueError):
                raise OptionError(
                    f"accuracy for {variant!r}: {key}={raw!r} is not a number"
                ) from None
            if not math.isfinite(number) or number < 0:
                raise OptionError(f"accuracy for {variant!r}: {key}={raw!r} must be >= 0")
            pairs.append((str(key), number))
        parsed.append((variant, tuple(pairs)))
    return tuple(parsed)


def parse_metric(value: object) -> Callable[..., Any]:
    """Parse ``metric=fn``: a callable ``fn(outputs, targets) -> float`` (e.g. top-1 accuracy).

    Its result is ``Any``: whatever the user's function returns, tried with ``float()`` where it
    is used (a float, a 0-d tensor, a numpy scalar), which says so when it cannot."""
    if not callable(value):
        raise OptionError(
            f"{value!r} is not callable; pass a function fn(outputs, targets) -> float"
        )
    return cast("Callable[..., Any]", value)


def parse_data(value: object) -> tuple[UserValue, UserValue]:
    """Parse ``data=(inputs, targets)``: the labelled batch the ``metric`` is computed on."""
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        raise OptionError(
            "data= must be a pair (inputs, targets); inputs is a tensor or a tuple of "
            "positional inputs"
        )
    return (value[0], value[1])
