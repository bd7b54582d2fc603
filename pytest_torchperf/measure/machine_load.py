"""How busy the *other* CPUs were while a pass was timed: a busy neighbour is contention too.

A process can keep its own core (CPU share >= 0.9) and still be slowed by another process on the
sibling core: they share caches, memory bandwidth and, on SMT machines and VMs, the physical core.
On a 2-vCPU VM an unchanged EfficientNet measured +12-25 % while one other pytest process ran.
The process CPU share cannot see that; the machine-wide CPU time can: ``/proc/stat`` counts the
busy time of all CPUs, this process's own CPU time is subtracted, and what is left is the work
of other processes (and of other VMs, as steal time).

Pure standard library: no torch, no pytest.
"""

from __future__ import annotations

import os
from collections.abc import Callable

#: /proc/stat columns that are busy time: user nice system idle iowait irq softirq steal.
_BUSY_COLUMNS = (0, 1, 2, 5, 6, 7)


def busy_cpu_seconds(stat_path: str = "/proc/stat") -> float | None:
    """CPU-seconds all CPUs of the machine have been busy since boot (None where unknown)."""
    try:
        with open(stat_path, encoding="ascii") as handle:
            fields = handle.readline().split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu":
        return None
    try:
        ticks = [int(v) for v in fields[1:9]]
    except ValueError:
        return None
    return sum(ticks[i] for i in _BUSY_COLUMNS if i < len(ticks)) / os.sysconf("SC_CLK_TCK")


def busy_clock() -> Callable[[], float | None] | None:
    """A function reading :func:`busy_cpu_seconds`, or None where ``/proc/stat`` is missing."""
    return busy_cpu_seconds if busy_cpu_seconds() is not None else None


def neighbour_load(machine_busy: float, own_cpu: float, wall: float, cpus: int) -> float | None:
    """Share of the other CPUs' capacity that other processes used during ``wall`` seconds.

    ``machine_busy``: busy CPU-seconds of the whole machine over the interval; ``own_cpu``: this
    process's CPU-seconds over it. 0 = the other CPUs were idle, 1 = all of them were busy.
    None on a single-CPU machine (there is no neighbour to tell apart from ourselves).
    """
    if cpus <= 1 or wall <= 0:
        return None
    others = max(0.0, machine_busy - own_cpu)
    return min(1.0, others / (wall * (cpus - 1)))


def loadavg_neighbour_load(cpus: int) -> float | None:
    """Fallback where ``/proc/stat`` is missing (macOS): the 1-minute load average minus this
    process, over the other CPUs. A slow average, so it only catches long-lasting neighbours."""
    if cpus <= 1 or not hasattr(os, "getloadavg"):
        return None
    try:
        one_minute = os.getloadavg()[0]
    except OSError:
        return None
    return min(1.0, max(0.0, one_minute - 1.0) / (cpus - 1))


def run_queue_seconds(path: str = "/proc/thread-self/schedstat") -> float | None:
    """Seconds the calling thread has waited on a run queue (runnable, but another thread had
    its CPU), from the kernel's scheduler statistics; None where unknown (not Linux, no
    schedstats). What tells a timed thread that was crowded off its CPU (it waited on the run
    queue) from one that slept or waited on I/O (it did not): both show a low CPU share."""
    try:
        with open(path, encoding="ascii") as handle:
            fields = handle.read().split()
        return int(fields[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return None


def steal_seconds_per_cpu(stat_path: str = "/proc/stat") -> float | None:
    """Seconds the VM's host has taken each CPU away since boot (``/proc/stat``'s steal time,
    averaged over the CPUs); None where unknown."""
    try:
        with open(stat_path, encoding="ascii") as handle:
            fields = handle.readline().split()
        steal = int(fields[8])
    except (OSError, IndexError, ValueError):
        return None
    return steal / os.sysconf("SC_CLK_TCK") / cpu_count()


def run_queue_clock() -> Callable[[], float | None] | None:
    """Seconds the timing thread was kept off its CPU against its will: waiting on a run queue
    (:func:`run_queue_seconds`) plus, on a VM, the host's steal time (the thread's CPU taken
    away, which the guest's run queue never sees: a newcomer's MLP beside a hog read CPU share
    0.11 with 0.96 % queued, and was called an idle target). None where the run queue cannot
    be read."""
    if run_queue_seconds() is None:
        return None
    if steal_seconds_per_cpu() is None:
        return run_queue_seconds

    def kept_off() -> float | None:
        queued, steal = run_queue_seconds(), steal_seconds_per_cpu()
        return None if queued is None else queued + (steal or 0.0)

    return kept_off


def cpu_count() -> int:
    """CPUs of the machine (all of them: ``/proc/stat`` counts all, whatever our affinity)."""
    return os.cpu_count() or 1


def others_load(window: float, cpus: int | None = None) -> float | None:
    """Share of the other CPUs other processes keep busy, measured over ``window`` seconds
    while this process sleeps (so all the busy time seen is theirs). None where unknown."""
    import time

    cpus = cpu_count() if cpus is None else cpus
    before, own, start = busy_cpu_seconds(), time.process_time(), time.monotonic()
    if before is None:
        time.sleep(window)
        return loadavg_neighbour_load(cpus)
    time.sleep(window)
    after = busy_cpu_seconds()
    if after is None:
        return None
    return neighbour_load(after - before, time.process_time() - own, time.monotonic() - start, cpus)
