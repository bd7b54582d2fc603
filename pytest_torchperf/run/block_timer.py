"""A block timer usable without pytest: the same protocol as the ``torchperf`` fixture, no baseline.

Example::

    >>> from pytest_torchperf import BlockTimer
    >>> result = BlockTimer(min_time=0.5).measure(model, x, name="bs1")
    >>> print(result.median, result)
"""

from __future__ import annotations

from dataclasses import replace

from pytest_torchperf.core.stats import summarize
from pytest_torchperf.core.types import Target, UserValue
from pytest_torchperf.options.measure_options import MeasureOptions, parse_layer
from pytest_torchperf.run.result import Result


class BlockTimer:
    """Times callables with ``torch.utils.benchmark`` in ~10 ms blocks, device-synchronised.

    ``options`` are :class:`~pytest_torchperf.options.measure_options.MeasureOptions` field names (``min_time``,
    ``warmup``, ``threads``, ``inference``, ...). CUDA targets are clocked with CUDA events.
    """

    def __init__(self, device: str | None = None, **options: object) -> None:
        self.device = device
        # Same parsing and errors as marker keywords: min_time="0.5s" works, typos are named.
        parsed = parse_layer(options, "BlockTimer")
        parsed.pop("name", None)
        self.options = replace(
            MeasureOptions(inference=False, check_finite=False, counters=False), **parsed
        )

    def measure(
        self,
        fn: Target,
        *args: UserValue,
        name: str | None = None,
        kwargs: dict[str, UserValue] | None = None,
    ) -> Result:
        """Time ``fn(*args, **kwargs)`` and return a :class:`~pytest_torchperf.run.result.Result`."""
        __tracebackhide__ = True
        from pytest_torchperf.measure.timing import Measurer

        measurer = Measurer(
            fn, args, kwargs or {}, self.options, device=self.device, calibrate=False
        )
        timed = measurer.sample()
        label = name or str(getattr(fn, "__name__", type(fn).__name__))
        return Result(
            name=label,
            nodeid="",
            samples=list(timed.raw.times),
            number_per_block=timed.raw.number_per_block,
            device=timed.device,
            threads=self.options.threads,
            cpu_share=timed.raw.cpu_share,
            summary=summarize(timed.raw.times),
            options=self.options,
            source="timer",
            clock=timed.clock,
        )
