"""Test items of variants: ``@pytest.mark.torchperf(variants=[...])`` gives a test one item per
variant (``test_resnet[int8]``) through the ``torchperf_variant`` parameter, narrowed by
``--torchperf-variants``; marker checks at collection. The plugin's hooks call these."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_torchperf.core.errors import OptionError
from pytest_torchperf.core.units import counted
from pytest_torchperf.options.variant_options import parse_variants
from pytest_torchperf.pytest_plugin.fixtures import VARIANT_PARAM
from pytest_torchperf.pytest_plugin.stash import MARKER, SETTINGS_KEY


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
    metafunc.parametrize(VARIANT_PARAM, names, ids=names)


def deselect(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``--torchperf-variants``: the other variants' items are deselected, as ``-k`` deselects
    (pytest counts them: ``6 deselected``)."""
    wanted = config.stash[SETTINGS_KEY].variant_filter
    if wanted is None:
        return
    kept: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    for item in items:
        variant = getattr(getattr(item, "callspec", None), "params", {}).get(VARIANT_PARAM)
        (dropped if variant and variant not in wanted else kept).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept
        tally: dict[str, int] = {}
        for item in dropped:
            name = item.callspec.params[VARIANT_PARAM]  # type: ignore[attr-defined]
            tally[name] = tally.get(name, 0) + 1
        given = config.stash[SETTINGS_KEY].variant_filter_from
        line = (
            f"torchperf: {given} {','.join(wanted)}: {counted(len(dropped), 'variant item')} "
            f"deselected "
            f"({', '.join(f'{n} {c}' for n, c in sorted(tally.items()))})"
        )
        config.stash[LEFT_OUT_KEY] = line
        workeroutput = getattr(config, "workeroutput", None)
        if workeroutput is not None:  # an xdist worker's header is not shown: the controller's is
            workeroutput[LEFT_OUT_WORKER] = line


#: The line saying what ``--torchperf-variants`` deselected (pytest's own count does not say
#: why, and under xdist its last line has none).
LEFT_OUT_KEY = pytest.StashKey[str]()
#: ``workeroutput`` key: that line, from an xdist worker to the controller, which collects nothing.
LEFT_OUT_WORKER = "torchperf_left_out"
#: The controller of an xdist run has not said that line yet (its header came before any worker
#: collected): its summary says it.
LEFT_OUT_UNSAID_KEY = pytest.StashKey[str]()


def left_out_line(config: pytest.Config) -> str | None:
    """``torchperf: --torchperf-variants amp: 4 variant items deselected (compiled 2, int8 2)``."""
    return config.stash.get(LEFT_OUT_KEY, None)


def worker_left_out(config: pytest.Config, workeroutput: dict[str, Any]) -> None:
    """The controller of an xdist run: keep a worker's line for the summary (every worker
    collects the same items, so the first one's is the run's)."""
    line = workeroutput.get(LEFT_OUT_WORKER)
    if line and LEFT_OUT_UNSAID_KEY not in config.stash:
        config.stash[LEFT_OUT_UNSAID_KEY] = line


def unsaid_left_out_line(config: pytest.Config) -> str | None:
    """The line an xdist controller's summary says (None outside xdist: the header said it)."""
    return config.stash.get(LEFT_OUT_UNSAID_KEY, None)


def check_variant_item(config: pytest.Config, item: pytest.Item, uses_fixture: bool) -> None:
    """Marker variants need the fixture; a marked test without variants (eager) is skipped when
    eager is not selected."""
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
                reason=f"no variant of this test ({', '.join(names)}) is selected by "
                f"{config.stash[SETTINGS_KEY].variant_filter_from}"
            )
        )
