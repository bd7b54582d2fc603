"""The block-sampling protocol, independent of torch so it can run on a fake clock.

1. Warm up: untimed single calls until at least ``MIN_WARMUP_CALLS`` calls and ``warmup`` seconds.
2. Size blocks: ``number`` calls per block so that one block takes about ``block_target`` (10 ms)
   of the call's own work, sized from the fastest warm-up call: a warm-up beside a busy process
   reads slower calls, and blocks sized from them run shorter than 10 ms. That matters in an A/B
   run, where each side sizes its own blocks and the pairing assumes both sides' blocks last alike:
   beside a CPU-bound process on the shared CPU, 0.5 ms blocks ran at full speed while 10 ms ones
   took twice as long, so identical code read B/A 0.26 or 3.6 by which side had the short blocks.
   This gives 50-100 samples per second even for sub-millisecond models, unlike the power-of-ten
   rule of ``blocked_autorange``.
3. Collect blocks until ``min_time`` seconds and at least ``MIN_BLOCKS`` blocks.
4. Report per-call times (block time / number) and the process CPU share over the timed blocks.
5. GPUs (``settle``): after sizing, untimed whole blocks run until their times stop moving (at
   least ``Settle.min_seconds``): a GPU ramps its clocks up from idle, fills caches and loads
   modules lazily over the first few hundred milliseconds of work (Triton's issue 2306: a 25 ms
   warm-up read 28 % slower than one over 150 ms).
6. Optionally, after every timed block, time one short block of a fixed calibration kernel. Its
   per-call times describe how fast *the machine* was in the same moments as the target, so a
   verdict can tell "the code got slower" from "the machine is slower right now" (on a shared VM
   the same unchanged model moved 1.6x between processes while target/calibration stayed within
   about 5 %).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # NVML is read lazily, on a GPU
    from pytest_torchperf.measure.gpu_clocks import ClockSummary

#: Untimed calls made before timing, whatever ``warmup`` says.
MIN_WARMUP_CALLS = 3
#: Blocks collected at least, so quantiles exist even for a model slower than ``min_time``.
MIN_BLOCKS = 5
#: Target duration of one timed block, in seconds.
BLOCK_TARGET = 0.010
#: Target duration of one calibration block, in seconds (adds ~15 % to the timed phase).
CALIBRATION_BLOCK_TARGET = 0.0015
#: The most a warm-up's fastest call may be faster than its median one and still size the
#: blocks (:func:`calls_per_block`): a busy machine slowed warm-up calls 3x on a 2-core VM.
MAX_FAST_CALL_RATIO = 4.0

#: Runs ``number`` calls of the target and returns their total duration in seconds.
RunBlock = Callable[[int], float]


@dataclass(frozen=True)
class Settle:
    """A warm-up of whole blocks until the median block time of the last ``window_seconds``
    is within ``tolerance`` of the median of the ``window_seconds`` before (a slow ramp moves
    more between windows than between neighbouring blocks), after at least ``min_seconds``
    and at most ``max_seconds``."""

    min_seconds: float = 0.5
    max_seconds: float = 3.0
    window_seconds: float = 0.2
    tolerance: float = 0.02


#: The settling a CUDA measurement gets (GPU benchmark tools warm up for 0.5-1 s of work).
GPU_SETTLE = Settle()


def steady(times: list[float], window: int, tolerance: float) -> bool:
    """The median of the last ``window`` block times is within ``tolerance`` of the median of
    the ``window`` before them."""
    if window < 1 or len(times) < 2 * window:
        return False
    last = statistics.median(times[-window:])
    before = statistics.median(times[-2 * window : -window])
    return before > 0 and abs(last / before - 1.0) <= tolerance


@dataclass(frozen=True)
class RawSamples:
    """What one sampling pass collected."""

    #: Per-call seconds, one value per block.
    times: list[float]
    number_per_block: int
    #: Wall seconds spent in the timed blocks (excludes warm-up).
    wall_time: float
    #: Process CPU seconds over the same interval.
    cpu_time: float
    warmup_calls: int
    #: Per-call seconds of the calibration kernel, one per timed block (empty when not calibrated).
    calibration: list[float] = field(default_factory=list)
    #: Share of the other CPUs' capacity other processes used meanwhile (None: not measured).
    neighbour_load: float | None = None
    #: Share of the timed wall time the timing thread spent waiting on a run queue: crowded
    #: off its CPU by another thread (None: not measured).
    queued_share: float | None = None
    #: ``settle``: untimed blocks run before timing, and whether their times came to rest
    #: (None: no settling asked).
    settle_blocks: int = 0
    settled: bool | None = None
    #: The GPU's clocks over the timed blocks (a ``gpu_clocks.ClockSummary``; None: not read).
    gpu_clock: ClockSummary | None = None

    @property
    def cpu_share(self) -> float:
        """Process CPU time / wall time during timing (1.0 = had a core the whole time)."""
        return self.cpu_time / self.wall_time if self.wall_time > 0 else 0.0


def block_size(per_call: float, block_target: float = BLOCK_TARGET) -> int:
    """Calls per block so one block lasts about ``block_target`` seconds (at least 1)."""
    if per_call <= 0:
        return 1000  # an immeasurably fast call: plenty of calls per block
    return max(1, round(block_target / per_call))


class Neighbours:
    """Measures how busy the other CPUs are over an interval (see :mod:`.machine_load`).

    ``busy_clock`` returns the machine's busy CPU-seconds (all CPUs); ``fallback`` gives a load
    directly where there is no such clock. Injected, so sampling stays testable on fake clocks.
    """

    def __init__(
        self,
        busy_clock: Callable[[], float | None] | None,
        cpus: int,
        fallback: Callable[[], float | None] | None = None,
        queue_clock: Callable[[], float | None] | None = None,
    ) -> None:
        self.busy_clock, self.cpus, self.fallback = busy_clock, cpus, fallback
        #: Seconds the timing thread has waited on a run queue (``machine_load.run_queue_seconds``).
        self.queue_clock = queue_clock
        self._start: float | None = None
        self._queued: float | None = None

    def start(self) -> None:
        self._start = self.busy_clock() if self.busy_clock is not None else None
        self._queued = self.queue_clock() if self.queue_clock is not None else None

    def queued_share(self, wall: float) -> float | None:
        """Share of ``wall`` seconds since :meth:`start` the timing thread waited on a run
        queue (another thread had its CPU)."""
        now = self.queue_clock() if self.queue_clock is not None else None
        if now is None or self._queued is None or wall <= 0:
            return None
        return min(1.0, max(0.0, (now - self._queued) / wall))

    def load(self, own_cpu: float, wall: float) -> float | None:
        """The neighbours' load since :meth:`start`, given this process's CPU time and the wall."""
        from pytest_torchperf.measure.machine_load import neighbour_load

        now = self.busy_clock() if self.busy_clock is not None else None
        if now is None or self._start is None:  # no clock, or it became unreadable meanwhile
            return self.fallback() if self.fallback is not None else None
        return neighbour_load(now - self._start, own_cpu, wall, self.cpus)


def _warm_up(run_block: RunBlock, warmup: float, clock: Callable[[], float]) -> list[float]:
    """Untimed single calls until at least ``MIN_WARMUP_CALLS`` and ``warmup`` seconds."""
    warm: list[float] = []
    start = clock()
    while len(warm) < MIN_WARMUP_CALLS or clock() - start < warmup:
        warm.append(run_block(1))
    return warm


def calls_per_block(warm: list[float], block_target: float = BLOCK_TARGET) -> int:
    """Calls per timed block from the warm-up's single-call times (step 2 of the module
    docstring): the fastest past the first (which often pays one-off costs: allocator growth,
    lazy init) is the call's own work; slower ones include other processes' time. A call more
    than :data:`MAX_FAST_CALL_RATIO` times faster than the median took another path (a cache
    hit, an early exit): sized from it, blocks would last seconds, so the median bounds it."""
    calls = warm[1:] or warm
    own = max(min(calls), statistics.median(calls) / MAX_FAST_CALL_RATIO)
    return block_size(own, block_target)


def _calibration_number(calibrate: RunBlock | None) -> int:
    """Calls per calibration block (0: no calibration)."""
    if calibrate is None:
        return 0
    cal_warm = [calibrate(1) for _ in range(MIN_WARMUP_CALLS + 2)]
    return calls_per_block(cal_warm, CALIBRATION_BLOCK_TARGET)  # sized as the target's blocks


def collect(
    run_block: RunBlock,
    *,
    min_time: float,
    warmup: float,
    clock: Callable[[], float] = time.perf_counter,
    cpu_clock: Callable[[], float] = time.process_time,
    block_target: float = BLOCK_TARGET,
    min_blocks: int = MIN_BLOCKS,
    number: int | None = None,
    calibrate: RunBlock | None = None,
    neighbours: Neighbours | None = None,
    turn: Callable[[], None] | None = None,
    settle: Settle | None = None,
    after_block: Callable[[], None] | None = None,
) -> RawSamples:
    """Warm up, size the blocks and collect timed blocks (see module docstring).

    ``number`` skips block sizing and warm-up sizing (used by a re-measure, which reuses the block
    size of the first pass so both passes time the same thing). ``neighbours`` measures how busy
    the other CPUs were over the timed blocks. ``turn`` is called before each timed block and
    returns when this process may run it (A/B runs: the two sides' blocks alternate).
    ``settle`` runs untimed blocks until their times come to rest (GPUs); ``after_block`` is
    called after each timed block, outside its timing (a GPU's clocks are read there).
    """
    warm = _warm_up(run_block, warmup, clock)
    if number is None:
        number = calls_per_block(warm, block_target)
    cal_number = _calibration_number(calibrate)
    settling: list[float] = []
    settled = None
    if settle is not None:
        begun = clock()
        while True:
            settling.append(run_block(number) / number)
            spent = clock() - begun
            # Blocks per window from the block time so far (blocks last about block_target).
            window = max(3, round(settle.window_seconds * len(settling) / max(spent, 1e-9)))
            if spent >= settle.min_seconds and steady(settling, window, settle.tolerance):
                settled = True
                break
            if spent >= settle.max_seconds:
                settled = False
                break

    times: list[float] = []
    calibration: list[float] = []
    if neighbours is not None:
        neighbours.start()
    cpu0, wall0 = cpu_clock(), clock()
    waited = 0.0
    while True:
        if turn is not None:
            # Time spent waiting for the other side is neither this process's wall nor CPU time.
            before = clock()
            turn()
            waited += clock() - before
        times.append(run_block(number) / number)
        if after_block is not None:
            before = clock()
            after_block()
            waited += clock() - before
        if calibrate is not None:
            calibration.append(calibrate(cal_number) / cal_number)
        elapsed = clock() - wall0 - waited
        if elapsed >= min_time and len(times) >= min_blocks:
            break
    cpu_time = cpu_clock() - cpu0
    load = neighbours.load(cpu_time, elapsed) if neighbours is not None else None
    return RawSamples(
        times=times,
        number_per_block=number,
        wall_time=elapsed,
        cpu_time=cpu_time,
        warmup_calls=len(warm),
        calibration=calibration,
        neighbour_load=load,
        # Over the same timed wall as the CPU share (turns waited for left out: a side waiting
        # for its turn sleeps, it does not queue).
        queued_share=neighbours.queued_share(elapsed) if neighbours is not None else None,
        settle_blocks=len(settling),
        settled=settled,
    )


def collect_interleaved(
    runners: Mapping[str, RunBlock],
    *,
    min_time: float,
    warmup: float,
    clock: Callable[[], float] = time.perf_counter,
    cpu_clock: Callable[[], float] = time.process_time,
    block_target: float = BLOCK_TARGET,
    min_blocks: int = MIN_BLOCKS,
    calibrate: RunBlock | None = None,
    neighbours: Neighbours | None = None,
    turn: Callable[[], None] | None = None,
) -> dict[str, RawSamples]:
    """Time several variants of one target in round-robin blocks (one block of each per round).

    Drift and noisy neighbours then hit every variant alike, so the per-round ratio of two
    variants' block times is a same-moment comparison (measured: ratios held to about
    ±0.1 where absolute times drifted 10 %). Each variant is warmed up and sized on its own;
    rounds continue until at least ``min_blocks`` rounds and ``min_time`` seconds per variant in
    total (``len(runners) * min_time``): the budget a user sets stays the budget, and a variant
    much slower than a ~10 ms block (one call per block) does not multiply it. Every variant's
    ``times`` has one entry per round, in round order. ``turn`` is called before each round (A/B
    runs, as in :func:`collect`).
    """
    names = list(runners)
    numbers: dict[str, int] = {}
    warm_calls: dict[str, int] = {}
    for name in names:
        warm = _warm_up(runners[name], warmup, clock)
        numbers[name] = calls_per_block(warm, block_target)
        warm_calls[name] = len(warm)
    cal_number = _calibration_number(calibrate)

    times: dict[str, list[float]] = {n: [] for n in names}
    calibration: dict[str, list[float]] = {n: [] for n in names}
    wall = dict.fromkeys(names, 0.0)
    cpu = dict.fromkeys(names, 0.0)
    if neighbours is not None:
        neighbours.start()
    all_cpu0, all_wall0 = cpu_clock(), clock()
    while True:
        if turn is not None:
            turn()
        for name in names:
            cpu0, wall0 = cpu_clock(), clock()
            times[name].append(runners[name](numbers[name]) / numbers[name])
            if calibrate is not None:
                calibration[name].append(calibrate(cal_number) / cal_number)
            wall[name] += clock() - wall0
            cpu[name] += cpu_clock() - cpu0
        rounds = len(times[names[0]])
        if rounds >= min_blocks and sum(wall.values()) >= min_time * len(names):
            break
    # The variants took turns in the same moments: one load for all of them.
    load = (
        neighbours.load(cpu_clock() - all_cpu0, clock() - all_wall0)
        if neighbours is not None
        else None
    )
    queued = neighbours.queued_share(clock() - all_wall0) if neighbours is not None else None
    return {
        n: RawSamples(
            times=times[n],
            number_per_block=numbers[n],
            wall_time=wall[n],
            cpu_time=cpu[n],
            warmup_calls=warm_calls[n],
            calibration=calibration[n],
            neighbour_load=load,
            queued_share=queued,
        )
        for n in names
    }


def round_ratios(reference: list[float], candidate: list[float]) -> list[float]:
    """Per-round speedups ``reference / candidate`` of two interleaved variants (rounds paired)."""
    return [r / c for r, c in zip(reference, candidate, strict=False) if c > 0]
