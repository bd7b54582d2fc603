"""GPU kernel time of a call, taken with the profiler after timing (never on the timed path).

Each profiler session runs ``calls`` calls of the target with the device activity recorded
(CUPTI through Kineto) and sums the device activities by name: kernels, copies and fills, not
the GPU side of annotations (our own ranges span whole calls) nor Kineto's context syncs. Several
sessions let the judge tell a kernel that got slower from one that ran unsteadily. The figures
are summarised here (:class:`KernelTimes`) and judged in
:mod:`pytest_torchperf.kinds.kernels.judge_times`.

:func:`device_activities` reads profiler events by duck typing (``name``, ``device_type``,
``activity_type``, ``time_range``), so it is unit-tested on recorded or synthetic events without
a GPU.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pytest_torchperf.core.types import UserValue
from pytest_torchperf.measure.profiling import RANGE_PREFIX

if TYPE_CHECKING:  # torch is imported lazily, when kernels are profiled
    from torch.autograd.profiler_util import FunctionEvent

#: Profiler sessions per measurement.
SESSIONS = 3
#: Device time a session covers at least (seconds of wall time per call x calls), and the most
#: calls one session runs (a profile holds every launch: memory grows with them).
SESSION_TARGET = 0.02
MAX_CALLS = 200
#: Device-side events that are not work the call asked for.
_NOT_WORK = {"gpu_user_annotation", "overhead"}
_NOT_WORK_NAMES = {"Context Sync"}


#: Below this share of the wall time filled by kernels, a GPU measurement is launch-bound: its
#: wall time mostly measures the CPU launching work, not the GPU doing it.
LAUNCH_BOUND = 0.5
#: Kernels kept by name in a profile (the rest are summed as :data:`OTHER`).
TOP_KERNELS = 12
OTHER = "(other kernels)"


@dataclass(frozen=True)
class Kernel:
    """One kernel name's share of a call: launches and device seconds per call."""

    name: str
    launches: float
    seconds: float


@dataclass(frozen=True)
class KernelTimes:
    """The device time of one call's kernels, from several profiler sessions of one process."""

    #: Seconds of device activity per call: the median of :attr:`sessions`.
    per_call: float
    #: Each profiler session's seconds per call.
    sessions: tuple[float, ...]
    #: Device activities (kernel launches, copies, fills) per call.
    launches: float
    #: The kernels taking the most time, most first (the rest summed as :data:`OTHER`).
    kernels: tuple[Kernel, ...] = ()
    #: The timed pass's wall time per call (its p25), for :attr:`busy`; None when not known.
    wall: float | None = None

    @property
    def busy(self) -> float | None:
        """Share of the wall time the kernels filled (1: the GPU never waited for the CPU)."""
        if not self.wall or self.wall <= 0:
            return None
        return min(1.0, self.per_call / self.wall)

    @property
    def launch_bound(self) -> bool:
        busy = self.busy
        return busy is not None and busy < LAUNCH_BOUND

    def to_record(self) -> dict[str, Any]:
        return {
            "per_call": float(f"{self.per_call:.6g}"),
            "sessions": [float(f"{s:.6g}") for s in self.sessions],
            "launches": round(self.launches, 3),
            "kernels": [
                [k.name, round(k.launches, 3), float(f"{k.seconds:.6g}")] for k in self.kernels
            ],
            "wall": None if self.wall is None else float(f"{self.wall:.6g}"),
        }

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> KernelTimes:
        return cls(
            per_call=float(record["per_call"]),
            sessions=tuple(float(s) for s in record.get("sessions") or (record["per_call"],)),
            launches=float(record.get("launches") or 0.0),
            kernels=tuple(
                Kernel(str(n), float(c), float(s)) for n, c, s in record.get("kernels") or ()
            ),
            wall=None if record.get("wall") is None else float(record["wall"]),
        )


def summarize_sessions(
    sessions: Sequence[Mapping[str, tuple[float, float]]],
    calls: int,
    wall: float | None = None,
    top: int = TOP_KERNELS,
) -> KernelTimes:
    """:class:`KernelTimes` of profiler sessions of ``calls`` calls each, every session given as
    ``{kernel name: (launches, device seconds)}`` summed over its calls."""
    if not sessions or calls < 1:
        raise ValueError("kernel times need at least one profiler session of one call")
    totals = [sum(s for _, s in session.values()) / calls for session in sessions]
    per_kernel: dict[str, list[float]] = {}
    launches: dict[str, float] = {}
    for session in sessions:
        for name, (count, seconds) in session.items():
            per_kernel.setdefault(name, []).append(seconds / calls)
            launches[name] = max(launches.get(name, 0.0), count / calls)
    # Each kernel's median over the sessions (0 in a session that did not run it).
    medians = {
        name: statistics.median([*times, *[0.0] * (len(sessions) - len(times))])
        for name, times in per_kernel.items()
    }
    ranked = sorted(medians, key=lambda n: -medians[n])
    kept = [Kernel(n, launches[n], medians[n]) for n in ranked[:top]]
    rest = ranked[top:]
    if rest:
        kept.append(Kernel(OTHER, sum(launches[n] for n in rest), sum(medians[n] for n in rest)))
    return KernelTimes(
        per_call=statistics.median(totals),
        sessions=tuple(totals),
        launches=sum(launches.values()),
        kernels=tuple(kept),
        wall=wall,
    )


class KernelTimeUnavailable(RuntimeError):
    """The profiler saw no device activity (no CUPTI, or the call ran nothing on the GPU)."""


def device_activities(events: Iterable[FunctionEvent]) -> dict[str, tuple[float, float]]:
    """``{name: (count, device seconds)}`` of a profile's device activities."""
    found: dict[str, tuple[float, float]] = {}
    for event in events:
        device_type = getattr(event, "device_type", None)
        if getattr(device_type, "name", str(device_type)).split(".")[-1] == "CPU":
            continue
        name = str(getattr(event, "name", ""))
        if (
            getattr(event, "activity_type", None) in _NOT_WORK
            or getattr(event, "is_user_annotation", False)
            or name in _NOT_WORK_NAMES
            or name.startswith(RANGE_PREFIX)
        ):
            continue
        seconds = float(event.time_range.elapsed_us()) * 1e-6
        count, total = found.get(name, (0.0, 0.0))
        found[name] = (count + 1, total + seconds)
    return found


def calls_per_session(wall_per_call: float | None) -> int:
    """Calls per session: enough to cover :data:`SESSION_TARGET`, at least 3, at most
    :data:`MAX_CALLS`."""
    if not wall_per_call or wall_per_call <= 0:
        return 10
    return max(3, min(MAX_CALLS, math.ceil(SESSION_TARGET / wall_per_call)))


def kernel_times(
    call: Callable[[], UserValue],
    device: str,
    wall_per_call: float | None,
    sessions: int = SESSIONS,
) -> KernelTimes:
    """Profile ``sessions`` sessions of ``call`` on ``device`` (a CUDA device) and summarise
    its kernels; ``wall_per_call`` (the timed pass's p25) sizes the sessions and gives the busy
    share. Raises :class:`KernelTimeUnavailable` when no session saw device activity."""
    import torch

    from pytest_torchperf.measure.profiling import Profiler

    calls = calls_per_session(wall_per_call)
    dev = torch.device(device)
    profiles = []
    for _ in range(sessions):
        torch.cuda.synchronize(dev)
        with Profiler(device=device) as prof:  # CPU and, on a CUDA device, CUDA activities
            for _ in range(calls):
                call()
            torch.cuda.synchronize(dev)
        profiles.append(device_activities(prof.profile.events()))
    if not any(profiles):
        raise KernelTimeUnavailable(
            f"the profiler saw no GPU activity in {sessions} sessions of {calls} calls on "
            f"{device}: CUPTI may be unavailable in this environment (containers need the "
            f"CUPTI library of the CUDA toolkit and profiling permission), or the call ran "
            f"nothing on the GPU"
        )
    return summarize_sessions(profiles, calls, wall=wall_per_call)
