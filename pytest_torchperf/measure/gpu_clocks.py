"""The GPU's SM clock and why the driver held it down, read through NVML (``nvidia-ml-py``).

A GPU that is not at its clocks while timing (still ramping up from idle, hot, at a power brake)
runs the same kernels slower; NVML says so. :class:`ClockReader` reads the SM clock, the maximum
SM clock and the clock event reasons after every timed block of a CUDA measurement;
:func:`summarize_readings` folds them into a :class:`ClockSummary` that the pass carries
(:class:`pytest_torchperf.judge.samples.Sample` ``gpu_clock``), and the clock guard
(:func:`pytest_torchperf.judge.samples.guard_problem`) refuses a pass whose clock fell below
:data:`MIN_CLOCK_SHARE` of the maximum or that the driver throttled for heat, a power brake or
a hardware slowdown. Without NVML nothing is checked, and :func:`clock_reader` says why.

The reading itself (:meth:`ClockReader.read`) goes through the ``pynvml`` module handed in, so
it is unit-tested with a fake module.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from pytest_torchperf.core.types import JSON, JSONObject

#: NVML's clock event reasons (``nvmlClocksEventReason*``; formerly ``...ThrottleReason*``).
REASONS = {
    0x1: "idle",
    0x2: "application clocks",
    0x4: "power cap",
    0x8: "hardware slowdown",
    0x10: "sync boost",
    0x20: "thermal (software)",
    0x40: "thermal (hardware)",
    0x80: "power brake",
    0x100: "display clock",
}
#: Reasons that make a pass untrustworthy whatever the clock read: the GPU was held down by
#: heat, an external power brake or a hardware slowdown, not by the work. (A power cap is the
#: steady state of a long heavy run on many GPUs, and is judged by the clock itself.)
DISTURBING = ("hardware slowdown", "thermal (software)", "thermal (hardware)", "power brake")
#: A pass whose lowest SM clock was under this share of the maximum ran on a GPU not at its
#: clocks (nvbench discards samples below 75 % of the default clock).
MIN_CLOCK_SHARE = 0.75


@dataclass(frozen=True)
class ClockReading:
    """One NVML reading: the SM clock, its maximum (MHz) and the active clock event reasons."""

    sm_mhz: int
    max_sm_mhz: int
    reasons: tuple[str, ...] = ()


@dataclass(frozen=True)
class ClockSummary:
    """The readings of one timed pass: the lowest and highest SM clock, the maximum, and every
    clock event reason seen."""

    lowest_mhz: int
    highest_mhz: int
    max_mhz: int
    reasons: tuple[str, ...] = ()
    readings: int = 0

    @property
    def share(self) -> float | None:
        """The lowest SM clock as a share of the maximum (None when NVML gave no maximum)."""
        return self.lowest_mhz / self.max_mhz if self.max_mhz > 0 else None

    @property
    def disturbed(self) -> tuple[str, ...]:
        """The reasons seen that refuse a pass (:data:`DISTURBING`)."""
        return tuple(r for r in self.reasons if r in DISTURBING)

    def to_record(self) -> JSONObject:
        return {**asdict(self), "reasons": list(self.reasons)}

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> ClockSummary:
        return cls(
            int(record["lowest_mhz"]),
            int(record["highest_mhz"]),
            int(record["max_mhz"]),
            tuple(record.get("reasons") or ()),
            int(record.get("readings") or 0),
        )


def reasons_of(mask: int) -> tuple[str, ...]:
    """The names of the clock event reasons set in an NVML bitmask, lowest bit first."""
    return tuple(name for bit, name in REASONS.items() if mask & bit)


def summarize_readings(readings: Iterable[ClockReading]) -> ClockSummary | None:
    """The :class:`ClockSummary` of a pass's readings (None without any)."""
    taken = list(readings)
    if not taken:
        return None
    reasons: list[str] = []
    for reading in taken:
        reasons += [r for r in reading.reasons if r not in reasons]
    return ClockSummary(
        lowest_mhz=min(r.sm_mhz for r in taken),
        highest_mhz=max(r.sm_mhz for r in taken),
        max_mhz=max(r.max_sm_mhz for r in taken),
        reasons=tuple(reasons),
        readings=len(taken),
    )


class ClockReader:
    """Reads one GPU's clocks through an initialised ``pynvml`` module.

    ``nvml`` and its device handle are ``Any``: pynvml ships no types, its names differ between
    versions (read with ``getattr``), and tests hand in a fake module."""

    def __init__(self, nvml: Any, handle: Any) -> None:
        self.nvml, self.handle = nvml, handle
        # Renamed in NVML 12.2 ("throttle" -> "clocks event"); older bindings have the old name.
        self._reasons = (
            getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
            or nvml.nvmlDeviceGetCurrentClocksThrottleReasons
        )
        self.max_sm_mhz = int(nvml.nvmlDeviceGetMaxClockInfo(handle, nvml.NVML_CLOCK_SM))

    def read(self) -> ClockReading:
        nvml = self.nvml
        return ClockReading(
            int(nvml.nvmlDeviceGetClockInfo(self.handle, nvml.NVML_CLOCK_SM)),
            self.max_sm_mhz,
            reasons_of(int(self._reasons(self.handle))),
        )


def clock_reader(device: str, nvml: Any = None) -> ClockReader | str:
    """A reader for the CUDA ``device``, or why its clocks cannot be checked (the sentence a
    report shows). ``nvml``: the ``pynvml`` module (imported here when None)."""
    if nvml is None:
        try:
            import pynvml
        except ImportError:
            return (
                "GPU clocks not checked: nvidia-ml-py is not installed (pip install "
                "nvidia-ml-py, or pytest-torchperf[gpu]), so a throttled or still idle-clocked "
                "GPU is not refused"
            )
        nvml = pynvml
    try:
        nvml.nvmlInit()
        handle = nvml.nvmlDeviceGetHandleByIndex(_nvml_index(device))
        return ClockReader(nvml, handle)
    except Exception as exc:  # noqa: BLE001 - NVMLError's many subclasses, a missing symbol
        return f"GPU clocks not checked: NVML could not be read ({exc})"


def _nvml_index(device: str) -> int:
    """NVML's index of a CUDA device (they differ when CUDA_VISIBLE_DEVICES reorders GPUs)."""
    index = int(device.split(":", 1)[1]) if ":" in device else None
    try:
        import torch
    except ImportError:  # only the unit tests' fake NVML gets here
        return index or 0
    if index is None:
        index = torch.cuda.current_device()
    mapped = getattr(torch.cuda, "_get_nvml_device_index", None)
    try:
        return int(mapped(index)) if mapped is not None else index
    except Exception:  # noqa: BLE001 - a private torch helper: fall back to the CUDA index
        return index


def device_state(device: str, nvml: Any = None) -> dict[str, JSON]:
    """What a GPU's own settings were (soft fingerprint fields, for the reader of a baseline):
    driver, maximum SM clock, power limit and persistence mode; empty without NVML."""
    reader = clock_reader(device, nvml)
    if isinstance(reader, str):
        return {}
    nvml, handle = reader.nvml, reader.handle
    state: dict[str, JSON] = {"gpu_max_sm_mhz": reader.max_sm_mhz}
    for key, read in (
        ("gpu_driver", lambda: nvml.nvmlSystemGetDriverVersion()),
        ("gpu_power_limit_w", lambda: nvml.nvmlDeviceGetPowerManagementLimit(handle) / 1000),
        ("gpu_persistence", lambda: bool(nvml.nvmlDeviceGetPersistenceMode(handle))),
    ):
        try:
            value = read()
        except Exception:  # noqa: BLE001 - NVMLError_NotSupported on some boards
            continue
        state[key] = value.decode() if isinstance(value, bytes) else value
    return state
