"""The ``time`` kind's run part: chosen when no other kind is; filed under the timing environment,
its save guarded by the time guards. Pytest-free."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_torchperf.kinds.instructions.options import CountSettings
from pytest_torchperf.run.kind_run import Keeping, KindRun, Unsaved

if TYPE_CHECKING:
    from pytest_torchperf.options.measure_options import MeasureOptions
    from pytest_torchperf.run.context import RunContext
    from pytest_torchperf.run.result import Result
    from pytest_torchperf.run.state import Measured, TestState


class TimeKeeping(Keeping):
    """Time: kept as the default keeps it, except a measurement timed in an instruction-count
    run (one opted out of counting with ``instructions=False``): it was timed in one process
    beside the Valgrind children, so it is not saved."""

    def attach(
        self,
        ctx: RunContext,
        state: TestState,
        m: Measured,
        result: Result,
        comparing: bool,
        saving: bool,
    ) -> Unsaved | None:
        if ctx.settings.of(CountSettings).instructions and m.gate:
            return (
                "timed in an instruction-count run",
                f"{m.name}: not saved: timed in a --torchperf-instructions run (one process); "
                f"save its timing baseline in a run without that option",
            )
        return None


def _chosen(ctx: RunContext, options: MeasureOptions, device: str, gate: bool) -> bool:
    return True


RUN = KindRun(TimeKeeping(), _chosen)
