"""The GPU clock guard: NVML readings through a fake ``pynvml`` module (no GPU here), their
summary, and the guard that refuses a pass taken below the GPU's clocks. Pure."""

from __future__ import annotations

import pytest

from pytest_torchperf.core.stats import summarize
from pytest_torchperf.judge.refusals import GPU_CLOCK, loosening_option, refusing_guard
from pytest_torchperf.judge.samples import Sample, guard_problem
from pytest_torchperf.measure.gpu_clocks import (
    ClockReader,
    ClockReading,
    ClockSummary,
    clock_reader,
    reasons_of,
    summarize_readings,
)


class FakeNvml:
    """The pynvml calls ClockReader makes, answering from queued SM clocks and reason masks."""

    NVML_CLOCK_SM = 1

    def __init__(self, clocks: list[int], masks: list[int], old_names: bool = False) -> None:
        self.clocks, self.masks = list(clocks), list(masks)
        if old_names:  # bindings before NVML 12.2 only had the "throttle" name
            self.nvmlDeviceGetCurrentClocksThrottleReasons = self._reasons
        else:
            self.nvmlDeviceGetCurrentClocksEventReasons = self._reasons

    def nvmlInit(self) -> None:
        pass

    def nvmlDeviceGetHandleByIndex(self, index: int) -> str:
        return f"gpu{index}"

    def nvmlDeviceGetMaxClockInfo(self, handle: str, clock: int) -> int:
        assert clock == self.NVML_CLOCK_SM
        return 1980

    def nvmlDeviceGetClockInfo(self, handle: str, clock: int) -> int:
        return self.clocks.pop(0)

    def _reasons(self, handle: str) -> int:
        return self.masks.pop(0)


def test_readings_name_the_reasons_and_fold_into_a_summary() -> None:
    reader = ClockReader(FakeNvml([1980, 1410, 1980], [0x0, 0x4 | 0x40, 0x0]), "gpu0")
    readings = [reader.read() for _ in range(3)]
    assert readings[1] == ClockReading(1410, 1980, ("power cap", "thermal (hardware)"))
    summary = summarize_readings(readings)
    assert summary == ClockSummary(1410, 1980, 1980, ("power cap", "thermal (hardware)"), 3)
    assert summary.share == pytest.approx(1410 / 1980)
    assert summary.disturbed == ("thermal (hardware)",)
    assert ClockSummary.from_record(summary.to_record()) == summary
    assert summarize_readings([]) is None


def test_older_bindings_read_the_throttle_reasons() -> None:
    reader = ClockReader(FakeNvml([1980], [0x80], old_names=True), "gpu0")
    assert reader.read().reasons == ("power brake",)


def test_reasons_of_a_mask() -> None:
    assert reasons_of(0) == ()
    assert reasons_of(0x1 | 0x20) == ("idle", "thermal (software)")


def test_without_nvml_the_reader_says_what_is_not_checked() -> None:
    class Broken(FakeNvml):
        def nvmlInit(self) -> None:
            raise RuntimeError("NVML Shared Library Not Found")

    said = clock_reader("cuda:0", Broken([], []))
    assert isinstance(said, str)
    assert said == "GPU clocks not checked: NVML could not be read (NVML Shared Library Not Found)"


def sample(clock: ClockSummary | None) -> Sample:
    times = (1e-3,) * 8
    return Sample(summarize(times), None, times, gpu_clock=clock)


def test_the_guard_refuses_a_pass_below_the_gpus_clocks() -> None:
    ramping = ClockSummary(1035, 1980, 1980, ("idle",), 20)
    problem = guard_problem(sample(ramping))
    assert problem == (
        "the GPU was not at its clocks while timing: its SM clock read 1035-1980 MHz of its "
        "1980 MHz maximum (limit 75% of it; the driver reported idle): a GPU still ramping up, "
        "hot or held by a power brake runs the same kernels slower"
    )
    assert refusing_guard(problem) == GPU_CLOCK
    assert loosening_option(problem) == "--torchperf-min-gpu-clock=0"
    assert guard_problem(sample(ramping), min_gpu_clock=0) is None  # 0 disables


def test_the_guard_refuses_a_throttled_pass_whatever_its_clock_and_passes_a_power_cap() -> None:
    hot = ClockSummary(1900, 1980, 1980, ("thermal (hardware)",), 20)
    assert "the driver reported thermal (hardware)" in (guard_problem(sample(hot)) or "")
    capped = ClockSummary(1755, 1980, 1980, ("power cap",), 20)  # 89 %: a long heavy run
    assert guard_problem(sample(capped)) is None
    assert guard_problem(sample(None)) is None  # no NVML: nothing to refuse on


def test_the_gpus_own_settings_are_recorded_where_nvml_reads_them() -> None:
    from pytest_torchperf.measure.gpu_clocks import device_state

    class Board(FakeNvml):
        def nvmlSystemGetDriverVersion(self) -> bytes:
            return b"580.82.07"

        def nvmlDeviceGetPowerManagementLimit(self, handle: str) -> int:
            return 700_000  # milliwatts

        def nvmlDeviceGetPersistenceMode(self, handle: str) -> int:
            raise RuntimeError("Not Supported")  # some boards: left out, not an error

    assert device_state("cuda:0", Board([], [])) == {
        "gpu_max_sm_mhz": 1980,
        "gpu_driver": "580.82.07",
        "gpu_power_limit_w": 700.0,
    }

    class NoNvml(FakeNvml):
        def nvmlInit(self) -> None:
            raise RuntimeError("no driver")

    assert device_state("cuda:0", NoNvml([], [])) == {}
