"""Timing a target with torch.utils.benchmark under the block protocol.

This is the only place that runs user code for timing. It prepares the call (eval mode and
``no_grad`` for modules, fixed thread count), checks the outputs once for NaN/inf, and hands
``torch.utils.benchmark.Timer.timeit`` to :func:`pytest_torchperf.measure.sampling.collect` as
the block runner. Devices are synchronised around every timed block, never per call: a block
measures finished work, not asynchronous launches.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_torchperf.core.types import Target, UserValue
from pytest_torchperf.measure.devices import infer_device
from pytest_torchperf.measure.sampling import GPU_SETTLE, Neighbours, RawSamples, collect
from pytest_torchperf.options.measure_options import MeasureOptions
from pytest_torchperf.variants.compilers import quiet_cpp_extension

if TYPE_CHECKING:  # torch is imported lazily, on the first measurement
    import torch

    from pytest_torchperf.measure.gpu_clocks import ClockReader, ClockReading
    from pytest_torchperf.measure.op_tables import OpRow


class NonFiniteOutputError(AssertionError):
    """The target returned NaN or inf values."""


class TargetError(ValueError):
    """The target or its arguments are not something torchperf can call."""


@dataclass(frozen=True)
class TimedPass:
    """One sampling pass plus where it ran and how blocks were clocked."""

    raw: RawSamples
    device: str
    #: ``cpu`` (perf_counter), ``cuda-events`` or ``sync`` (synchronize + perf_counter).
    clock: str


def count_non_finite(output: UserValue) -> tuple[int, int]:
    """(non-finite values, total values) over all floating tensors in a nested output."""
    import torch
    from torch.utils._pytree import tree_leaves

    bad = total = 0
    for leaf in tree_leaves(output):
        if isinstance(leaf, torch.Tensor) and (leaf.is_floating_point() or leaf.is_complex()):
            total += leaf.numel()
            bad += int((~torch.isfinite(leaf)).sum().item())
        elif isinstance(leaf, float):
            total += 1
            bad += 0 if math.isfinite(leaf) else 1
    return bad, total


@contextlib.contextmanager
def prepared(target: object, options: MeasureOptions, module: UserValue = None) -> Iterator[None]:
    """Run user code as it will be timed, and restore global state afterwards.

    Always: the timing's thread count. For ``nn.Module`` targets with ``options.inference``:
    ``eval()`` and ``torch.no_grad()``. Not ``inference_mode``: tensors a module creates lazily
    during the measurement (caches, buffers) would become inference tensors and break the user's
    own training code after the test. Callables and test bodies run with grad mode untouched.

    Every call (output check, counters, profiling, timing) goes through here so compiled targets
    see the same global state each time: dynamo guards on the thread count and would recompile.
    ``module`` (a variant's eager module) decides eval/no_grad when the target itself is a wrapper.
    """
    import torch

    subject = target if module is None else module
    threads = torch.get_num_threads()
    torch.set_num_threads(options.threads)
    inferred = subject if options.inference and isinstance(subject, torch.nn.Module) else None
    modes: list[tuple[torch.nn.Module, bool]] = []
    if inferred is not None:
        modes = [(m, m.training) for m in inferred.modules()]
        # An exported program's module (torchperf_quantized_model's PT2E static int8) refuses
        # train()/eval(): it was exported for inference already; no_grad still holds.
        with contextlib.suppress(NotImplementedError):
            inferred.eval()
    try:
        with torch.no_grad() if inferred is not None else contextlib.nullcontext():
            yield
    finally:
        for module, training in modes:
            module.training = training
        torch.set_num_threads(threads)


def neighbours_for(device: str) -> Neighbours | None:
    """How busy the other CPUs are, for CPU measurements (GPU timing does not share the cores)."""
    if not device.startswith("cpu"):
        return None
    from pytest_torchperf.measure.machine_load import (
        busy_clock,
        cpu_count,
        loadavg_neighbour_load,
        run_queue_clock,
    )

    cpus = cpu_count()
    return Neighbours(
        busy_clock(),
        cpus,
        fallback=lambda: loadavg_neighbour_load(cpus),
        queue_clock=run_queue_clock(),
    )


#: The calibration kernel: a 64x64 fp32 matrix product, ~5 us on one core of a 2026 x86 VM.
#: Fixed forever: changing it would make stored calibrations incomparable (bump the name if so).
CALIBRATION_KERNEL = "mm64-fp32"


def calibration_kernel() -> Callable[[int], float]:
    """A block runner for the CPU calibration kernel (timed alongside the target's blocks).

    It runs inside :func:`prepared`, so it uses the measurement's thread count like the target.
    """
    import torch

    generator = torch.Generator().manual_seed(0)
    a = torch.randn(64, 64, generator=generator)
    b = torch.randn(64, 64, generator=generator)
    out = torch.empty(64, 64)

    def run(number: int) -> float:
        with torch.no_grad():
            start = time.perf_counter()
            for _ in range(number):
                torch.mm(a, b, out=out)
            return time.perf_counter() - start

    return run


def benchmark_timer() -> type[Any]:
    """``torch.utils.benchmark.Timer``, imported without the CUDA_HOME line its import of
    ``torch.utils.cpp_extension`` logs (:func:`~pytest_torchperf.variants.compilers.quiet_cpp_extension`)."""
    quiet_cpp_extension()
    from torch.utils.benchmark import Timer

    return Timer


class Measurer:
    """Times one target on fixed inputs; :meth:`sample` may be called again to re-measure."""

    def __init__(
        self,
        target: Target,
        inputs: Sequence[UserValue],
        kwargs: dict[str, UserValue],
        options: MeasureOptions,
        device: str | None = None,
        calibrate: bool = True,
        module: UserValue = None,
    ) -> None:
        if not callable(target):
            raise TargetError(
                f"the target must be an nn.Module or a callable, got "
                f"{type(target).__name__}: pass the model or a function, not its output"
            )
        if not isinstance(kwargs, dict):
            raise TargetError(
                f"kwargs= must be a dict of keyword arguments for the target, got "
                f"{type(kwargs).__name__}"
            )
        self.target = target
        self.inputs = tuple(inputs)
        self.kwargs = kwargs
        self.options = options
        #: The eager module behind a variant wrapper (decides eval/no_grad), else None.
        self.module = module
        self.device = device or infer_device(
            target if module is None else module, self.inputs, self.kwargs
        )
        self.number_per_block: int | None = None
        self.calibrate = calibrate
        #: A/B runs: called before each timed block, returns on this side's turn.
        self.turn: Callable[[], None] | None = None
        #: CUDA: the NVML clock reader, or why the GPU's clocks are not checked.
        self._clock_reader: ClockReader | None = None
        self.clocks_unchecked: str | None = None

    def prepared(self) -> contextlib.AbstractContextManager[None]:
        """:func:`prepared` for this target (and its eager module)."""
        return prepared(self.target, self.options, self.module)

    def call(self) -> UserValue:
        """One call of the target (the caller enters :meth:`prepared`), e.g. to count its
        instructions."""
        __tracebackhide__ = True  # the user's traceback starts at their target
        return self.target(*self.inputs, **self.kwargs)

    def check_outputs(self, label: str) -> UserValue:
        """Call the target once, fail clearly on NaN/inf outputs (when ``check_finite``), and
        return the outputs (the reference for a variant's accuracy)."""
        __tracebackhide__ = True
        output = self.run_once()
        if not self.options.check_finite:
            return output
        bad, total = count_non_finite(output)
        if bad:
            raise NonFiniteOutputError(
                f"{label}: the target's output contains {bad} NaN/inf of {total} values; timings of a "
                f"broken model are meaningless. Fix the model or inputs, or pass check_finite=False."
            )
        return output

    def block_runner(self, *, per_block_state: bool = False) -> tuple[Callable[[int], float], str]:
        """A function timing ``number`` calls of the target (seconds), and the clock's name.

        On CUDA, a block is timed with CUDA events recorded on the current stream around the
        ``Timer.timeit`` loop (GPU time of finished work); elsewhere with a clock that synchronises
        the device at block boundaries. ``per_block_state`` enters :func:`prepared` around each
        block (for interleaved variants, whose global state differs); otherwise the caller does.
        """
        import torch

        Timer = benchmark_timer()

        use_events = self.device.startswith("cuda") and torch.cuda.is_available()
        clock_name = (
            "cuda-events" if use_events else ("cpu" if self.device.startswith("cpu") else "sync")
        )

        def synchronized_clock() -> float:  # waits for the device's queued work first
            if torch.accelerator.is_available():
                torch.accelerator.synchronize()
            return time.perf_counter()

        timer = Timer(
            stmt="__torchperf_call()",
            globals={"__torchperf_call": self.call},
            num_threads=self.options.threads,
            timer=time.perf_counter if clock_name != "sync" else synchronized_clock,
        )

        # Timer.timeit(n) first runs max(n // 100, 2) untimed warm-up calls: for a model slower
        # than a block (1 call per block) that triples the cost of every block. Our protocol warms
        # up once per pass, so blocks go straight to the compiled timeit.Timer inside the torch
        # Timer (same statement, globals and clock; threads are set by ``prepared``).
        inner = getattr(timer, "_timer", None)
        raw_block = (
            inner.timeit
            if inner is not None
            else (lambda number: timer.timeit(number).raw_times[0])
        )

        def run_block(number: int) -> float:
            return float(raw_block(number))

        def run_block_events(number: int) -> float:
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            raw_block(number)
            end.record()
            end.synchronize()
            return float(start.elapsed_time(end)) / 1000.0  # ms -> s

        runner = run_block_events if use_events else run_block
        if not per_block_state:
            return runner, clock_name

        def prepared_block(number: int) -> float:
            with self.prepared():
                return runner(number)

        return prepared_block, clock_name

    def sample(self) -> TimedPass:
        """One sampling pass: warm-up, block sizing (first pass only) and timed blocks; on CUDA
        the blocks settle first and the GPU's clocks are read after each timed block."""
        __tracebackhide__ = True
        run_block, clock_name = self.block_runner()
        calibrate = calibration_kernel() if clock_name == "cpu" and self.calibrate else None
        gpu = clock_name == "cuda-events"
        readings: list[ClockReading] = []
        reader = self.clock_reader() if gpu else None
        with self.prepared():
            raw = collect(
                run_block,
                min_time=self.options.min_time,
                warmup=self.options.warmup,
                number=self.number_per_block,
                calibrate=calibrate,
                neighbours=neighbours_for(self.device),
                turn=self.turn,
                settle=GPU_SETTLE if gpu else None,
                after_block=(lambda: readings.append(reader.read()))
                if reader is not None
                else None,
            )
        if readings:
            from pytest_torchperf.measure.gpu_clocks import summarize_readings

            raw = replace(raw, gpu_clock=summarize_readings(readings))
        self.number_per_block = raw.number_per_block
        return TimedPass(raw=raw, device=self.device, clock=clock_name)

    def clock_reader(self) -> ClockReader | None:
        """The NVML reader of this CUDA device's clocks (once per target), or None with
        :attr:`clocks_unchecked` saying why."""
        if self._clock_reader is None and self.clocks_unchecked is None:
            from pytest_torchperf.measure.gpu_clocks import clock_reader

            found = clock_reader(self.device)
            if isinstance(found, str):
                self.clocks_unchecked = found
            else:
                self._clock_reader = found
        return self._clock_reader

    def counters(
        self, eager: Target | None = None, ops_only: bool = False
    ) -> tuple[dict[str, Any], UserValue]:
        """FLOPs, ATen op counts, parameters and peak tensor memory of one call (no timing), and
        that call's output; ``ops_only``: the op counts and dtypes alone.

        ``eager`` replaces the target for counting: compiled code runs fused kernels that dispatch
        modes cannot see, so a ``torch.compile``d target is counted on its eager original.
        """
        __tracebackhide__ = True
        from pytest_torchperf.measure.counters import collect_counters, collect_op_counts

        fn = eager or self.target
        outputs: list[UserValue] = []

        def call() -> UserValue:
            out = fn(*self.inputs, **self.kwargs)
            outputs.append(out)
            return out

        with self.prepared():
            if ops_only:
                return collect_op_counts(call)
            counted = collect_counters(call, self.device, module=fn)
        return counted, outputs[0]

    def graph_counters(self, eager: Target) -> dict[str, Any]:
        """Graphs and graph breaks ``torch.compile`` captures from ``eager`` (before the first call)."""
        from pytest_torchperf.measure.counters import graph_counters

        with self.prepared():
            return graph_counters(eager, self.inputs, self.kwargs)

    def profile(
        self, iterations: int, trace: Path | None = None
    ) -> tuple[list[OpRow], Path | None]:
        """Top-ops table (and optional Chrome trace) of ``iterations`` profiled calls."""
        from pytest_torchperf.measure.profiling import profile_call

        with self.prepared():
            return profile_call(self.call, self.device, iterations, trace)

    def run_once(self) -> UserValue:
        """Call the target once under the same preparation (``--torchperf-disable``)."""
        __tracebackhide__ = True
        with self.prepared():
            return self.call()
