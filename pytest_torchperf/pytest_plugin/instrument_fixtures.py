"""The instrument fixtures: ``torchperf_device``, ``torchperf_profiler``, ``torchperf_nvtx``,
``torchperf_quantized_model``. Each is a thin layer over a plain function or class usable without
pytest (:func:`~pytest_torchperf.measure.devices.select_device`,
:class:`~pytest_torchperf.measure.profiling.Profiler`,
:class:`~pytest_torchperf.measure.profiling.nvtx_range`,
:func:`~pytest_torchperf.variants.quantization.quantize_model`)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator
from types import TracebackType
from typing import TYPE_CHECKING, Any

import pytest

from pytest_torchperf.core.errors import OptionError
from pytest_torchperf.core.types import Target, UserValue
from pytest_torchperf.pytest_plugin.stash import SETTINGS_KEY, context_of, item_options, state_of

if TYPE_CHECKING:  # torch and the measuring machinery are imported lazily, when a fixture runs
    import torch

    from pytest_torchperf.measure.profiling import Profiler, nvtx_range
    from pytest_torchperf.run.context import RunContext


@pytest.fixture
def torchperf_device(request: pytest.FixtureRequest) -> torch.device:
    """The ``torch.device`` to run on: ``--torchperf-device`` (ini ``torchperf_device``), ``auto`` by default.

    ``auto`` is a real accelerator if present, else cpu. An absent device skips the test with the
    reason; under xdist each worker gets its own GPU.
    """
    from pytest_torchperf.measure.devices import DeviceUnavailable, select_device

    requested = request.config.stash[SETTINGS_KEY].device
    try:
        return select_device(requested)
    except DeviceUnavailable as exc:
        pytest.skip(str(exc))


class ProfilerFixture:
    """``with torchperf_profiler() as prof: model(x)`` (or bare, ``with torchperf_profiler as
    prof:``, with the defaults): torch.profiler for the test's device.

    Saves a Chrome/Perfetto trace per block into ``<report dir>/traces/`` (also loadable in
    TensorBoard's profiler plugin), exposes ``prof.key_averages()`` / ``prof.top_ops()``, and
    attaches a top-ops table to the test's report (shown for failures and with ``-rP``). Timing a
    ``torchperf`` measurement inside the block is refused: profiling inflates times by 3-25%.
    """

    def __init__(self, item: pytest.Item) -> None:
        self._item = item
        self._ctx = context_of(item.config)
        self.profiles: list[Profiler] = []
        self._bare: list[Profiler] = []

    def __enter__(self) -> Profiler:
        """``with torchperf_profiler as prof:``: a profiler with the defaults."""
        profiler = self()
        self._bare.append(profiler)
        return profiler.__enter__()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._bare.pop().__exit__(kind, error, traceback)

    def __call__(
        self,
        device: torch.device | str | None = None,
        name: str | None = None,
        # Forwarded to torch.profiler.profile, which checks them.
        **profile_kwargs: Any,
    ) -> Profiler:
        from pytest_torchperf.measure.profiling import Profiler, trace_path

        index = len(self.profiles)
        suffix = name or (str(index) if index else "")
        trace = trace_path(self._ctx.settings.report_dir / "traces", self._item.nodeid, suffix)
        device = str(device) if device is not None else _default_device(self._ctx)
        profiler = Profiler(
            device=device, trace=trace, on_enter=self._enter, on_exit=self._exit, **profile_kwargs
        )
        self.profiles.append(profiler)
        return profiler

    def _enter(self) -> None:
        self._ctx.profiling_depth += 1

    def _exit(self, profiler: Profiler) -> None:
        self._ctx.profiling_depth -= 1
        try:
            table = profiler.table()
        except Exception as exc:  # noqa: BLE001 - a report section must never fail the test
            table = f"(no op table: {exc})"
        trace = profiler.trace
        where = trace if trace is not None and trace.exists() else "(not written)"
        self._item.add_report_section("call", "torchperf profiler", f"trace: {where}\n{table}")


def _default_device(ctx: RunContext) -> str:
    from pytest_torchperf.measure.devices import DeviceUnavailable, select_device

    try:
        return str(select_device(ctx.settings.device))
    except DeviceUnavailable:
        return "cpu"


@pytest.fixture
def torchperf_profiler(request: pytest.FixtureRequest) -> ProfilerFixture:
    """torch.profiler as a context manager: ``with torchperf_profiler() as prof: model(x)``."""
    return ProfilerFixture(request.node)


@pytest.fixture
def torchperf_nvtx() -> Iterator[type[nvtx_range]]:
    """NVTX ranges: ``with torchperf_nvtx("forward"): ...`` or ``@torchperf_nvtx("step")``.

    An NVTX range for Nsight Systems on CUDA plus a ``record_function`` range for torch.profiler;
    never raises on CPU-only or MPS builds.
    """
    from pytest_torchperf.measure.profiling import nvtx_range

    yield nvtx_range


@pytest.fixture
def torchperf_quantized_model(request: pytest.FixtureRequest) -> Callable[..., Target]:
    """Build an int8 model: ``q = torchperf_quantized_model(model, example_inputs, mode=None,
    calibration=None)``.

    ``mode``: ``"dynamic"`` (torchao int8 dynamic activation + int8 weight, compiled),
    ``"static"`` (PT2E with the x86 inductor quantizer, compiled with freezing; x86 CPUs) or
    ``"weight_only"``; None picks static for conv nets on x86 CPUs, else dynamic. Returns the
    quantized, compiled ``nn.Module`` (the original is untouched) with the recipe in its
    ``torchperf_quantization`` attribute. Skips the test with the reason when the mode cannot
    exist here (no torchao, no C++ compiler, mps, ...).
    """
    item = request.node

    def build(
        model: object,
        example_inputs: UserValue,
        mode: str | None = None,
        calibration: Iterable[UserValue] | None = None,
    ) -> Target:
        __tracebackhide__ = True
        from pytest_torchperf.measure.timing import prepared
        from pytest_torchperf.variants.quantization import (
            QuantizationError,
            QuantizationUnavailable,
            quantize_model,
        )
        from pytest_torchperf.variants.registry import INT8_MODES

        if mode is not None and mode not in INT8_MODES:
            pytest.fail(
                f"torchperf_quantized_model: unknown mode {mode!r}; modes: "
                f"{', '.join(INT8_MODES)} (or None for the device's default)",
                pytrace=False,
            )
        try:
            options, _ = item_options(item)
        except OptionError as exc:
            pytest.fail(f"torchperf: {exc}", pytrace=False)
        problem = None
        try:
            # Built under the timing's thread count and grad mode, so a later torchperf(q, x)
            # does not recompile (dynamo guards on both).
            with prepared(model, options):
                quantized = quantize_model(model, example_inputs, mode, calibration)
        except QuantizationUnavailable as exc:
            pytest.skip(f"torchperf_quantized_model: {exc}")
        except QuantizationError as exc:
            problem = f"torchperf_quantized_model: quantizing {type(model).__name__} failed: {exc}"
        if problem:
            pytest.fail(problem, pytrace=False)
        state_of(item).built_variants = True  # dynamo is reset after this test
        module = quantized.model
        with contextlib.suppress(AttributeError, TypeError):  # exotic module types
            module.torchperf_quantization = quantized  # type: ignore[attr-defined]
        return module

    return build
