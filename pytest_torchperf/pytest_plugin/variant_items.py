"""Test items of variants: ``@pytest.mark.torchperf(variants=[...])`` gives a test one item per
variant (``test_resnet[int8]``) through the ``torchperf_variant`` parameter, narrowed by
``--torchperf-variants``; marker checks at collection. The plugin's hooks call these."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_torchperf.core.errors import OptionError
from pytest_torchperf.options.variant_options import parse_variants
from pytest_torchperf.pytest_plugin.fixtures import VARIANT_PARAM
from pytest_torchperf.pytest_plugin.stash import MARKER, SETTINGS_KEY

#: Variant name -> how many items ``--torchperf-variants`` kept from being generated.
LEFT_OUT_KEY = pytest.StashKey[dict[str, int]]()


def marker_variants(markers: Any) -> Any:
    """The ``variants=`` of the closest torchperf marker that sets it (None when none does)."""
    for mark in markers:
        if "variants" in mark.kwargs:
            return mark.kwargs["variants"]
    return None


def parametrize(metafunc: pytest.Metafunc) -> None:
    """``@pytest.mark.torchperf(variants=[...])`` gives the test one item per variant
    (``test_resnet[compiled]``), so JUnit XML reports each variant and ``-k int8`` selects one."""
    raw = marker_variants(metafunc.definition.iter_markers(MARKER))
    if raw is None or VARIANT_PARAM not in metafunc.fixturenames:
        return  # a marked test without the fixture is rejected in collection_modifyitems
    try:
        names = [name for name, _ in parse_variants(raw)]
    except OptionError:
        return  # not parametrized: collection_modifyitems reports it as a usage error
    selected = metafunc.config.stash[SETTINGS_KEY].selected_variants(tuple(names))
    left_out = [name for name in names if name not in selected]
    if left_out:
        tally = metafunc.config.stash.setdefault(LEFT_OUT_KEY, {})
        for name in left_out:
            tally[name] = tally.get(name, 0) + 1
    if selected:
        metafunc.parametrize(VARIANT_PARAM, selected, ids=list(selected))


def left_out_line(config: pytest.Config) -> str | None:
    """``--torchperf-variants eager,compiled: 6 variant items not collected (amp 2, fused 2,
    int8 2)``, or None when the filter left nothing out (or is not set)."""
    tally = config.stash.get(LEFT_OUT_KEY, {})
    settings = config.stash.get(SETTINGS_KEY, None)
    if not tally or settings is None or settings.variant_filter is None:
        return None
    total = sum(tally.values())
    parts = ", ".join(f"{name} {count}" for name, count in sorted(tally.items()))
    return (
        f"torchperf: --torchperf-variants {','.join(settings.variant_filter)}: {total} variant "
        f"item{'s' if total != 1 else ''} not collected ({parts})"
    )


def check_variant_item(config: pytest.Config, item: pytest.Item, uses_fixture: bool) -> None:
    """Marker variants need the fixture; a test none of whose variants is selected is skipped."""
    raw = marker_variants(item.iter_markers(MARKER))
    if raw is None:
        names: tuple[str, ...] = ("eager",)
    elif not uses_fixture:
        raise pytest.UsageError(
            f"{item.nodeid}: @pytest.mark.torchperf(variants=...) needs the torchperf fixture: the "
            f"variants are built from the model you pass to torchperf(model, *inputs)"
        )
    else:
        try:
            names = tuple(name for name, _ in parse_variants(raw))
        except OptionError as exc:
            raise pytest.UsageError(
                f"{item.nodeid}: @pytest.mark.torchperf: invalid value for variants: {exc}"
            ) from None
    settings = config.stash[SETTINGS_KEY]
    if not settings.selected_variants(names):
        item.add_marker(
            pytest.mark.skip(
                reason=f"no variant of this test ({', '.join(names)}) is selected by --torchperf-variants"
            )
        )
