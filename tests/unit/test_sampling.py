"""Unit tests of pytest_torchperf.measure.sampling.collect, driven by a fake clock (no real timing)."""

from __future__ import annotations

import pytest

from pytest_torchperf.measure import sampling
from pytest_torchperf.measure.sampling import (
    BLOCK_TARGET,
    MIN_BLOCKS,
    MIN_WARMUP_CALLS,
    RawSamples,
    block_size,
    collect,
)


class FakeClock:
    """Simulated wall and CPU clocks; ``run_block(n)`` advances time by ``n * per_call``.

    ``first_call_extra`` is added to the very first call (one-off costs such as lazy init);
    ``cpu_share`` is the fraction of wall time the process gets on the CPU.
    """

    def __init__(
        self, per_call: float, *, first_call_extra: float = 0.0, cpu_share: float = 1.0
    ) -> None:
        self.per_call = per_call
        self.first_call_extra = first_call_extra
        self.cpu_share = cpu_share
        self.now = 100.0  # arbitrary non-zero origin
        self.cpu = 7.0
        self.calls: list[int] = []  # ``number`` of every run_block call, in order

    def clock(self) -> float:
        return self.now

    def cpu_clock(self) -> float:
        return self.cpu

    def run_block(self, number: int) -> float:
        duration = number * self.per_call
        if not self.calls:
            duration += self.first_call_extra
        self.calls.append(number)
        self.now += duration
        self.cpu += duration * self.cpu_share
        return duration

    def collect(self, **kwargs) -> RawSamples:
        kwargs.setdefault("min_time", 1.0)
        kwargs.setdefault("warmup", 0.2)
        return collect(self.run_block, clock=self.clock, cpu_clock=self.cpu_clock, **kwargs)


def _split(fake: FakeClock, raw: RawSamples) -> tuple[list[int], list[int]]:
    """Split the recorded calls into warm-up calls and timed blocks."""
    warm = fake.calls[: raw.warmup_calls]
    blocks = fake.calls[raw.warmup_calls :]
    return warm, blocks


def test_constants():
    assert MIN_WARMUP_CALLS == 3
    assert MIN_BLOCKS == 5
    assert BLOCK_TARGET == 0.010


# --------------------------------------------------------------------------------------------------
# block_size
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("per_call", "expected"),
    [
        (1e-4, 100),
        (1e-5, 1000),
        (1e-3, 10),
        (3e-3, 3),
        (0.01, 1),
        (0.02, 1),
        (5.0, 1),
        (1e-7, 100000),
    ],
)
def test_block_size_targets_ten_ms(per_call, expected):
    assert block_size(per_call) == expected


def test_block_size_custom_target():
    assert block_size(1e-3, block_target=0.1) == 100


@pytest.mark.parametrize("per_call", [0.0, -1e-3])
def test_block_size_immeasurably_fast(per_call):
    assert block_size(per_call) == 1000


# --------------------------------------------------------------------------------------------------
# Warm-up
# --------------------------------------------------------------------------------------------------


def test_warmup_lasts_at_least_warmup_seconds():
    fake = FakeClock(0.01)
    raw = fake.collect(warmup=0.2, min_time=0.1)
    warm, _ = _split(fake, raw)
    assert all(n == 1 for n in warm)  # single untimed calls
    assert raw.warmup_calls * 0.01 >= 0.2 - 1e-12
    # ... and stops as soon as both rules hold (no more than one call past 0.2 s, float slack).
    assert (raw.warmup_calls - 1) * 0.01 < 0.2 + 1e-9
    assert 20 <= raw.warmup_calls <= 21


def test_warmup_makes_at_least_three_calls_even_when_slow():
    fake = FakeClock(1.0)  # one call already exceeds the warm-up time
    raw = fake.collect(warmup=0.2, min_time=0.5)
    assert raw.warmup_calls == MIN_WARMUP_CALLS
    assert fake.calls[:3] == [1, 1, 1]


def test_warmup_three_calls_with_zero_warmup_time():
    fake = FakeClock(1e-4)
    raw = fake.collect(warmup=1e-9, min_time=0.05)
    assert raw.warmup_calls == MIN_WARMUP_CALLS


def test_warmup_long_with_fast_calls():
    fake = FakeClock(1e-4)
    raw = fake.collect(warmup=0.2, min_time=0.05)
    assert 2000 <= raw.warmup_calls <= 2001


def test_block_sizing_ignores_slow_first_call():
    fake = FakeClock(1e-4, first_call_extra=1.0)  # first call takes 1 s
    raw = fake.collect(warmup=0.0001, min_time=0.05)
    assert raw.warmup_calls == 3
    assert raw.number_per_block == 100  # sized from calls 2..3, not the 1 s outlier


def test_block_sizing_ignores_warm_up_calls_slowed_by_other_processes():
    """A warm-up beside a busy process: two calls of three take 3x as long. The blocks are sized
    from the call's own time (10 ms of work), not the median's 30 % of it: an A/B side whose
    warm-up was busier would otherwise time shorter blocks than the other side, and short blocks
    dodge the CPU-bound neighbour that long ones share the CPU with (B/A read 0.26 for identical
    code)."""
    fake = FakeClock(1e-4)
    slowed = iter([1, 3, 3] * 1000)

    def run_block(number: int) -> float:
        fake.per_call = 1e-4 * (next(slowed) if number == 1 else 1)
        return fake.run_block(number)

    raw = collect(run_block, clock=fake.clock, cpu_clock=fake.cpu_clock, min_time=0.05, warmup=0.01)
    assert raw.warmup_calls > 10
    assert raw.number_per_block == 100


def test_one_abnormally_fast_warm_up_call_does_not_make_blocks_last_seconds():
    """A target whose every 50th call is a cache hit 100x faster: sized from that call alone,
    blocks would hold 1000 calls (1 s each, 5 blocks in a 1 s pass). The median bounds the
    fastest call at 4x, so a block holds at most 4x its 10 ms."""
    fake = FakeClock(1e-3)
    calls = iter(range(10**6))

    def run_block(number: int) -> float:
        fast = number == 1 and next(calls) % 50 == 49
        fake.per_call = 1e-5 if fast else 1e-3
        return fake.run_block(number)

    raw = collect(run_block, clock=fake.clock, cpu_clock=fake.cpu_clock, min_time=0.5, warmup=0.2)
    assert raw.warmup_calls > 50
    assert raw.number_per_block == 40  # 10 ms of 1 ms calls, x4 at most
    assert len(raw.times) >= 10


# --------------------------------------------------------------------------------------------------
# Block sizing and collection
# --------------------------------------------------------------------------------------------------


def test_blocks_sized_to_about_ten_ms():
    fake = FakeClock(1e-4)
    raw = fake.collect(warmup=0.01, min_time=1.0)
    warm, blocks = _split(fake, raw)
    assert raw.number_per_block == 100
    assert blocks and all(n == 100 for n in blocks)
    assert len(raw.times) == len(blocks)
    # per-call time = block time / number
    assert all(t == pytest.approx(1e-4) for t in raw.times)
    # min_time of 1 s of 10 ms blocks: about 100 blocks, stopping at the first block past 1 s
    assert 100 <= len(raw.times) <= 101
    assert raw.wall_time >= 1.0
    assert raw.wall_time - 0.01 < 1.0


@pytest.mark.parametrize(("per_call", "number"), [(1e-3, 10), (2e-3, 5), (1e-5, 1000), (0.05, 1)])
def test_block_size_follows_per_call_time(per_call, number):
    fake = FakeClock(per_call)
    raw = fake.collect(warmup=0.0, min_time=0.2)
    assert raw.number_per_block == number
    assert all(n == number for n in _split(fake, raw)[1])
    assert all(t == pytest.approx(per_call) for t in raw.times)


@pytest.mark.parametrize("min_time", [0.1, 0.25, 0.5, 2.0])
def test_min_time_governs_number_of_blocks(min_time):
    fake = FakeClock(1e-4)
    raw = fake.collect(warmup=0.0, min_time=min_time)
    block_seconds = raw.number_per_block * 1e-4
    assert raw.wall_time >= min_time
    assert raw.wall_time - block_seconds < min_time  # stopped at the first block past min_time
    expected = round(min_time / block_seconds)
    assert expected <= len(raw.times) <= expected + 1


def test_min_blocks_for_slow_model():
    fake = FakeClock(0.5)  # 0.5 s per call, slower than the block target
    raw = fake.collect(warmup=0.0, min_time=0.1)
    assert raw.number_per_block == 1
    assert len(raw.times) == MIN_BLOCKS  # min_time reached after 1 block, yet 5 are collected
    assert raw.wall_time == pytest.approx(2.5)


def test_model_slower_than_min_time_still_gets_min_blocks():
    fake = FakeClock(3.0)
    raw = fake.collect(warmup=0.0, min_time=1.0)
    assert len(raw.times) == MIN_BLOCKS


def test_min_blocks_parameter():
    fake = FakeClock(0.5)
    raw = fake.collect(warmup=0.0, min_time=0.1, min_blocks=2)
    assert len(raw.times) == 2


def test_min_time_beyond_min_blocks():
    fake = FakeClock(0.25)  # binary-exact: no float slack needed
    raw = fake.collect(warmup=0.0, min_time=3.0)
    assert len(raw.times) == 12
    assert raw.wall_time == 3.0


def test_block_target_parameter():
    fake = FakeClock(1e-4)
    raw = fake.collect(warmup=0.0, min_time=0.5, block_target=0.05)
    assert raw.number_per_block == 500


# --------------------------------------------------------------------------------------------------
# number= override (re-measure reuses the first pass's block size)
# --------------------------------------------------------------------------------------------------


def test_number_override_skips_block_sizing():
    fake = FakeClock(1e-4)
    raw = fake.collect(warmup=0.0, min_time=0.1, number=7)
    warm, blocks = _split(fake, raw)
    assert raw.number_per_block == 7
    assert blocks and all(n == 7 for n in blocks)
    assert all(t == pytest.approx(1e-4) for t in raw.times)
    assert raw.warmup_calls >= MIN_WARMUP_CALLS  # still warms up
    assert all(n == 1 for n in warm)


def test_number_override_matches_first_pass():
    fake = FakeClock(1e-4)
    first = fake.collect(warmup=0.01, min_time=0.2)
    fake.per_call = 2e-4  # the model got slower: the re-measure must time the same block size
    again = fake.collect(warmup=0.01, min_time=0.2, number=first.number_per_block)
    assert again.number_per_block == first.number_per_block == 100
    assert all(t == pytest.approx(2e-4) for t in again.times)


def test_number_override_ignores_block_sizing_function(monkeypatch):
    def boom(*_args, **_kwargs):
        raise AssertionError("block_size must not be called with number=")

    monkeypatch.setattr(sampling, "block_size", boom)
    fake = FakeClock(1e-3)
    raw = fake.collect(warmup=0.0, min_time=0.05, number=3)
    assert raw.number_per_block == 3


# --------------------------------------------------------------------------------------------------
# CPU share
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("share", [1.0, 0.95, 0.5, 0.1])
def test_cpu_share_from_fake_cpu_clock(share):
    fake = FakeClock(1e-4, cpu_share=share)
    raw = fake.collect(warmup=0.5, min_time=0.3)
    assert raw.cpu_share == pytest.approx(share)
    assert raw.cpu_time == pytest.approx(share * raw.wall_time)


def test_cpu_and_wall_time_exclude_warmup():
    fake = FakeClock(1e-4, cpu_share=0.5)
    raw = fake.collect(warmup=2.0, min_time=0.5)  # a long warm-up that must not be counted
    timed_seconds = len(raw.times) * raw.number_per_block * 1e-4
    assert raw.wall_time == pytest.approx(timed_seconds)
    assert raw.cpu_time == pytest.approx(0.5 * timed_seconds)
    assert raw.wall_time < 1.0


def test_cpu_share_only_counts_timed_interval():
    """CPU share is high during warm-up, low while timing: only the latter counts."""
    fake = FakeClock(1e-4, cpu_share=1.0)
    original = fake.run_block

    def run_block(number: int) -> float:
        fake.cpu_share = 1.0 if number == 1 else 0.25
        return original(number)

    raw = collect(run_block, min_time=0.2, warmup=0.5, clock=fake.clock, cpu_clock=fake.cpu_clock)
    assert raw.number_per_block == 100
    assert raw.cpu_share == pytest.approx(0.25)


def test_raw_samples_cpu_share_zero_wall_time():
    raw = RawSamples(times=[1.0], number_per_block=1, wall_time=0.0, cpu_time=0.0, warmup_calls=3)
    assert raw.cpu_share == 0.0
    raw = RawSamples(times=[1.0], number_per_block=1, wall_time=2.0, cpu_time=1.0, warmup_calls=3)
    assert raw.cpu_share == 0.5


def test_default_clocks_are_real_clocks():
    import inspect
    import time

    params = inspect.signature(collect).parameters
    assert params["clock"].default is time.perf_counter
    assert params["cpu_clock"].default is time.process_time
    assert params["block_target"].default == BLOCK_TARGET
    assert params["min_blocks"].default == MIN_BLOCKS


def test_calibration_block_follows_every_timed_block():
    from pytest_torchperf.measure.sampling import collect

    now = [0.0]
    cal_calls = []

    def clock():
        return now[0]

    def run_block(number):
        now[0] += number * 1e-3
        return number * 1e-3

    def calibrate(number):
        cal_calls.append(number)
        now[0] += number * 5e-6
        return number * 5e-6

    raw = collect(
        run_block, min_time=0.1, warmup=0.0, clock=clock, cpu_clock=clock, calibrate=calibrate
    )
    warm = 5  # untimed calibration warm-up calls (number=1)
    assert cal_calls[:warm] == [1] * warm
    timed = cal_calls[warm:]
    assert len(timed) == len(raw.times) == len(raw.calibration)
    assert set(timed) == {300}  # 1.5 ms / 5 us
    assert all(c == pytest.approx(5e-6) for c in raw.calibration)


# -- GPUs: settling blocks before timing, and a reading after each timed block ----------------


class RampingClock(FakeClock):
    """A GPU ramping up its clocks: calls start 40 % slow and speed up until ``ramp`` seconds of
    work, then run at ``per_call``."""

    def __init__(self, per_call: float, ramp: float) -> None:
        super().__init__(per_call)
        self.ramp, self.worked = ramp, 0.0

    def run_block(self, number: int) -> float:
        slow = 1.4 - 0.4 * min(1.0, self.worked / self.ramp)
        duration = number * self.per_call * slow
        self.calls.append(number)
        self.now += duration
        self.cpu += duration
        self.worked += duration
        return duration


def test_settling_runs_blocks_until_their_times_rest_then_times_steady_blocks() -> None:
    fake = RampingClock(1e-3, ramp=1.2)
    raw = fake.collect(settle=sampling.Settle(min_seconds=0.5, max_seconds=3.0))
    assert raw.settled is True and raw.settle_blocks > 0
    # Settling lasted past the ramp: every timed block runs at full speed.
    assert max(raw.times) == pytest.approx(1e-3, rel=0.021)
    unsettled = RampingClock(1e-3, ramp=1.2).collect()
    assert unsettled.settled is None and unsettled.settle_blocks == 0
    assert max(unsettled.times) > 1.05e-3  # timed during the ramp


def test_settling_gives_up_at_its_limit_and_says_so() -> None:
    fake = RampingClock(1e-3, ramp=2.0)  # still ramping (~3 % per 0.2 s) past the limit
    raw = fake.collect(settle=sampling.Settle(min_seconds=0.2, max_seconds=0.6))
    assert raw.settled is False
    assert sum(fake.calls[raw.warmup_calls : raw.warmup_calls + raw.settle_blocks]) * 1e-3 < 1.0


def test_after_block_runs_once_per_timed_block_outside_the_timed_wall() -> None:
    fake = FakeClock(1e-3)
    seen: list[float] = []

    def read() -> None:  # a slow reading (50 ms) must not count as timed wall
        seen.append(fake.now)
        fake.now += 0.05

    raw = fake.collect(after_block=read)
    assert len(seen) == len(raw.times)
    assert raw.wall_time == pytest.approx(sum(raw.times) * raw.number_per_block, rel=1e-6)


def test_steady_compares_the_last_window_with_the_one_before() -> None:
    assert sampling.steady([1.0, 1.01, 1.0, 1.0, 1.01, 1.0], 3, 0.02)
    # A slow ramp: neighbouring blocks agree within 1 %, windows three blocks apart do not.
    assert not sampling.steady([1.05, 1.04, 1.03, 1.02, 1.01, 1.0], 3, 0.02)
    assert not sampling.steady([1.0, 1.0, 1.0], 3, 0.02)  # no window before yet
