"""The measuring fixtures: ``torchperf``, ``torchperf_timer`` (and the ``torchperf_variant``
parameter). Each is a thin layer over the pytest-free pipeline
(:mod:`pytest_torchperf.run.pipeline`, :class:`~pytest_torchperf.run.block_timer.BlockTimer`). The
instruments (device, profiler, NVTX, int8 model) are in
:mod:`pytest_torchperf.pytest_plugin.instrument_fixtures`.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import pytest

from pytest_torchperf.core.errors import OptionError
from pytest_torchperf.core.types import Target, UserValue
from pytest_torchperf.options.values import parse_bool
from pytest_torchperf.options.variant_options import unrun_speedups
from pytest_torchperf.pytest_plugin.stash import context_of, item_options, state_of

if TYPE_CHECKING:
    from pytest_torchperf.options.measure_options import MeasureOptions
    from pytest_torchperf.run.result import Result


def _target_name(target: object) -> str:
    """Default measurement name: the module's class name or the callable's ``__name__``."""
    inner = target.func if isinstance(target, functools.partial) else target
    name = getattr(inner, "__name__", None)
    if not name or name == "<lambda>":
        name = type(inner).__name__
    return name


class TorchperfFixture:
    """Callable handed to tests as the ``torchperf`` fixture.

    ``torchperf(target, *inputs, name=None, kwargs=None, **options)`` measures ``target`` (an
    ``nn.Module`` or any callable) called as ``target(*inputs, **kwargs)`` and returns a
    :class:`~pytest_torchperf.run.result.Result`. Options override the marker, command line and ini
    (see the README's option table). Each call in one test needs its own ``name``.
    """

    #: What measured, as its records say (``torchperf`` or ``timer``).
    source = "torchperf"
    #: Measurements are compared and saved unless the call says ``gate=False`` (timer only).
    gated_by_default = True
    #: Options a call may not set, with why (left out of the valid options an unknown
    #: keyword's error lists).
    refused: Mapping[str, str] = {
        "seed": "seed= cannot be set on a torchperf(...) call: torchperf seeds before the test's "
        "fixtures run; set it on the marker, with --torchperf-seed or with ini torchperf_seed"
    }
    #: Options this fixture's calls default to, below the call's own keywords.
    defaults: Mapping[str, object] = {}

    def __init__(self, item: pytest.Item) -> None:
        self._item = item
        self._ctx = context_of(item.config)
        self._state = state_of(item)

    def __call__(
        self,
        target: Target,
        *inputs: UserValue,
        name: str | None = None,
        kwargs: dict[str, UserValue] | None = None,
        **options: object,
    ) -> Any:
        # Any on purpose: a Result, or VariantResults (variant name -> Result) with variants=;
        # a union would make every type-checked test narrow what it got before using it.
        __tracebackhide__ = True
        from pytest_torchperf.measure.timing import TargetError
        from pytest_torchperf.run.pipeline import measure
        from pytest_torchperf.run.state import Call, MeasurementSkipped
        from pytest_torchperf.run.variant_run import VariantFailed, measure_variants
        from pytest_torchperf.store.baselines import BaselineFileError

        nodeid = self._item.nodeid
        skip = None
        try:
            gate = True if self.gated_by_default else parse_bool(options.pop("gate", False))
            refused = next((why for key, why in self.refused.items() if key in options), None)
            if refused:
                raise OptionError(f"{nodeid}: {refused}")
            call_options = {**self.defaults, **options, "name": name}
            resolved, explicit = item_options(self._item, call_options, self.refused)
            measurement_name = (
                name or (explicit if not self._state.names else None) or _target_name(target)
            )
            variants = self._variants(resolved, "variants" in options)
            unrun = unrun_speedups(resolved.min_speedup, resolved.variant_names())
            if unrun:
                self._state.warnings.append(f"{measurement_name}: {unrun}")
            if kwargs is not None and not isinstance(kwargs, Mapping):  # before it is copied
                raise TargetError(
                    f"kwargs= must be a mapping (a dict) of keyword arguments for the target, "
                    f"got {type(kwargs).__name__}"
                )
            call = Call(nodeid, measurement_name, target, inputs, dict(kwargs or {}), resolved)
            if variants is None:
                return measure(self._ctx, self._state, call, gate=gate, source=self.source)
            if not variants:
                skip = (
                    f"no variant of this measurement is selected by "
                    f"{self._ctx.settings.variant_filter_from} "
                    f"(asked for: {', '.join(resolved.variant_names())})"
                )
            else:
                results = measure_variants(self._ctx, self._state, call, variants)
                if _item_variant(self._item) is not None:
                    return results[variants[0]]
                return VariantResults(
                    results,
                    {
                        v: self._state.skipped.get(f"{measurement_name}[{v}]")
                        for v in variants
                        if v not in results
                    },
                )
        except MeasurementSkipped as exc:
            skip = str(exc)
        except (BaselineFileError, OptionError, TargetError) as exc:
            message = f"torchperf: {exc}"
        except VariantFailed as exc:
            message = str(exc)
        except Exception as exc:
            if type(exc).__name__ != "OutOfMemoryError":
                raise  # the user's own error: their traceback, our frames hidden
            message = _out_of_memory_message(exc, name or _target_name(target))
        else:
            message = ""
        if skip is not None:
            pytest.skip(skip)
        # Failing outside the except block keeps our internals out of the report (no chained trace).
        pytest.fail(message, pytrace=False)

    def _variants(self, resolved: MeasureOptions, on_call: bool) -> tuple[str, ...] | None:
        """Variants this call measures (filtered by the run), or None for the plain eager path."""
        item_variant = _item_variant(self._item)
        if item_variant is not None:
            if on_call:
                raise OptionError(
                    f"{self._item.nodeid}: variants= is set on the marker (which gives the test one "
                    f"item per variant) and on the torchperf(...) call; set it in one place"
                )
            return (item_variant,)
        names = resolved.variant_names()
        selected = self._ctx.settings.selected_variants(names)
        if names == ("eager",) and resolved.metric is None and not on_call and selected:
            return None
        return selected

    @property
    def results(self) -> list["Result"]:
        """Results of the measurements made so far in this test."""
        return list(self._state.results)


def _out_of_memory_message(exc: BaseException, label: str) -> str:
    """A device out-of-memory error, with the peak memory seen, instead of a long traceback.

    The cache is emptied so the following tests start from a clean allocator.
    """
    import torch

    first = (str(exc).strip().splitlines() or [""])[0]
    peak = ""
    if torch.cuda.is_available():
        from pytest_torchperf.core.units import format_bytes

        peak = (
            f" Peak allocated {format_bytes(torch.cuda.max_memory_allocated())}, reserved "
            f"{format_bytes(torch.cuda.max_memory_reserved())}, of "
            f"{format_bytes(torch.cuda.get_device_properties(torch.cuda.current_device()).total_memory)}"
            f" on {torch.cuda.get_device_name()}."
        )
        torch.cuda.empty_cache()
    return (
        f"torchperf: {label}: the device ran out of memory while measuring ({first}).{peak} "
        f"Reduce the batch size or the model, free memory held by other tests (session-scoped "
        f"fixtures), or run on a device with more memory."
    )


class VariantResults(dict[str, "Result"]):
    """What ``torchperf(model, x, variants=[...])`` returns: variant name -> ``Result``.

    ``skipped`` maps the variants that could not be measured here to the reason.
    """

    def __init__(self, results: dict[str, "Result"], skipped: dict[str, str | None]) -> None:
        super().__init__(results)
        self.skipped = {k: v or "not measured" for k, v in skipped.items()}


#: The parameter (and fixture) name that splits a test into one item per marker variant.
VARIANT_PARAM = "torchperf_variant"


def _item_variant(item: pytest.Item) -> str | None:
    callspec = getattr(item, "callspec", None)
    return callspec.params.get(VARIANT_PARAM) if callspec is not None else None


class TimerFixture(TorchperfFixture):
    """``torchperf_timer(fn, *args, name=None, gate=False, **options)``: time any callable.

    Recorded and shown like a ``torchperf`` call, but neither compared nor saved unless
    ``gate=True``. No counters, NaN checks or eval/inference handling unless asked for.
    """

    source = "timer"
    gated_by_default = False
    refused = {
        **TorchperfFixture.refused,
        "variants": "torchperf_timer does not build variants; use the torchperf fixture with "
        "variants=[...]",
    }
    defaults = {"counters": False, "check_finite": False, "inference": False}


@pytest.fixture
def torchperf_variant(request: pytest.FixtureRequest) -> str | None:
    """The variant this test item measures (``@pytest.mark.torchperf(variants=[...])`` gives each
    variant its own item, e.g. ``test_resnet[int8]``), or None for a test without marker variants."""
    return getattr(request, "param", None)


@pytest.fixture
def torchperf(request: pytest.FixtureRequest, torchperf_variant: str | None) -> TorchperfFixture:
    """Measure a model or callable: ``result = torchperf(model, x, name="bs1")``.

    Times ``target(*inputs)`` with torch.utils.benchmark in ~10 ms blocks for ``min_time`` seconds,
    records FLOPs/op/parameter/memory counters, compares with the stored baseline under
    ``--torchperf-compare`` and records one under ``--torchperf-save``.
    """
    return TorchperfFixture(request.node)


@pytest.fixture
def torchperf_timer(request: pytest.FixtureRequest) -> TimerFixture:
    """Time any callable with the torchperf block protocol: ``torchperf_timer(fn, x, name="step")``.

    Shown in the summary; gated against a baseline only with ``gate=True``.
    """
    return TimerFixture(request.node)
