"""One process pair of an A/B run: side A's and side B's pytest processes started together, taking
turns (:mod:`pytest_torchperf.kinds.ab.measure_turns`), this process handing the token back and
forth as :class:`pytest_torchperf.kinds.ab.run_data.TurnScheduler` decides. Pytest-free, no torch.

Each side runs ``<its python> <its flags> -m pytest <this run's args> --torchperf-child=FILE`` (a
:class:`~pytest_torchperf.run.child_process.ChildCommand`); its end of the turn protocol is a
pair of pipes whose file descriptors it inherits
(:data:`~pytest_torchperf.kinds.ab.measure_turns.TURN_FDS_ENV`), and what it measured is read
back from FILE (:func:`pytest_torchperf.kinds.ab.run_data.read_side`).
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_torchperf.core.child_protocol import (
    At,
    Bye,
    Go,
    Message,
    MessageError,
    Only,
    PerfTests,
    Ready,
    decode,
    encode,
)
from pytest_torchperf.core.units import counted
from pytest_torchperf.kinds.ab.measure_turns import (
    CPUS_ENV,
    PAIR_ENV,
    SIDE_ENV,
    TURN_FDS_ENV,
    allowed_cpus,
    place,
)
from pytest_torchperf.kinds.ab.run_data import Key, SideLine, TurnScheduler, read_side
from pytest_torchperf.kinds.ab.run_sides import Side, SideError
from pytest_torchperf.run.child_process import ChildCommand, ChildProcess
from pytest_torchperf.run.children import concurrent_child_args

#: Inductor's number of compile processes (1: it compiles in the calling process).
COMPILE_THREADS = "TORCHINDUCTOR_COMPILE_THREADS"
#: A side that holds the token this long without giving it back (or saying it is ready) is
#: killed, so a hung test cannot hold the job forever.
PAIR_TIMEOUT_S = 3600.0


@dataclass
class PairOutcome:
    """What one pair measured, and what went wrong on its sides."""

    lines: dict[str, dict[Key, SideLine]]
    #: The perf tests each side said it would run (None: it never said).
    tests: dict[str, set[str] | None]
    codes: dict[str, int | None]
    problems: list[str] = field(default_factory=list)
    #: Processes that said goodbye and are still tearing down (off the shared CPUs): the
    #: caller reaps them (:func:`reap`), so the next pair can start meanwhile.
    lingering: list[ChildProcess] = field(default_factory=list)


@dataclass
class StartedPair:
    """A pair's two processes, started (they import, collect, and wait for their selection)."""

    number: int
    sides: Mapping[str, Side]
    folder: Path
    procs: dict[str, ChildProcess] = field(default_factory=dict)
    #: side -> (its lines, the fd we write to)
    pipes: dict[str, tuple[_Lines, int]] = field(default_factory=dict)


def start_pair(
    args: Sequence[str],
    sides: Mapping[str, Side],
    number: int,
    cpus: Sequence[int],
    ahead: bool = False,
) -> StartedPair:
    """Start pair ``number``'s two processes (as the module docstring says). With ``ahead``,
    while the pair before it still measures: they start up and collect on the CPUs the sides do
    not share, and wait there for :func:`run_pair`."""
    pair = StartedPair(number, sides, Path(tempfile.mkdtemp(prefix="torchperf-ab-pair-")))
    others = allowed_cpus() - set(cpus)
    try:
        for name, side in sides.items():
            to_child_r, to_child_w = os.pipe()
            from_child_r, from_child_w = os.pipe()
            pair.pipes[name] = (_Lines(from_child_r), to_child_w)
            command = ChildCommand(
                tuple(side.map_args(args)),
                side.cwd,
                python=(side.python, *side.flags),
                child_file=pair.folder / f"{name}.jsonl",
                overrides=(
                    # Each side its own temporary folders and cache (they run at the same time),
                    # and both in collection order, for their blocks to alternate.
                    *concurrent_child_args(pair.folder / name, args),
                    # A failing test (-x in the arguments) must not stop the side's other
                    # measurements.
                    "--maxfail=1000000000",
                ),
                env={
                    # Inductor compiles in the side itself, on its turn. Where the sides share
                    # 2+ CPUs, its first Triton compile (a GPU) would start a pool of compile
                    # processes (on those CPUs: started after the first turn pinned the side),
                    # whose start-up (~3 CPU-s) ran on in the other side's timed blocks.
                    COMPILE_THREADS: os.environ.get(COMPILE_THREADS, "1"),
                    **side.env,
                    TURN_FDS_ENV: f"{to_child_r},{from_child_w}",
                    SIDE_ENV: name,
                    PAIR_ENV: str(number),
                    CPUS_ENV: ",".join(str(c) for c in cpus),
                },
            )
            try:
                child = command.start(
                    pair.folder / f"{name}.log", pass_fds=(to_child_r, from_child_w)
                )
            except OSError as exc:
                raise SideError(
                    f"side {name} ({side.label}): cannot start {command.argv()[0]} ({exc})"
                ) from None
            finally:  # the child's ends of its pipes, whatever happens
                os.close(to_child_r)
                os.close(from_child_w)
            pair.pipes[name][0].proc = child.process
            pair.procs[name] = child
            if ahead and others:
                # Off the CPUs the running pair times on (see run_pair).
                place(others, child.pid)
    except BaseException:
        abandon(pair)
        raise
    return pair


def can_start_ahead(cpus: Sequence[int]) -> bool:
    """Whether a pair may start up while another measures: only off the CPUs that one times on."""
    return bool(cpus) and bool(allowed_cpus() - set(cpus))


def abandon(pair: StartedPair) -> None:
    """Kill a started pair's processes and remove its folder (a pair started ahead that the run
    turned out not to need, or one interrupted)."""
    for child in pair.procs.values():
        child.stop()
    for reader, write_fd in pair.pipes.values():
        for fd in (reader.fd, write_fd):
            with contextlib.suppress(OSError):
                os.close(fd)
    shutil.rmtree(pair.folder, ignore_errors=True)


def run_pair(pair: StartedPair, only: Sequence[str] | None) -> PairOutcome:
    """Run a started pair to its end: tell both sides which tests (``only``, or all), then hand
    the turn back and forth until both exit; what they measured is read back."""
    number, sides, procs, pipes = pair.number, pair.sides, pair.procs, pair.pipes
    lingering: list[ChildProcess] = []
    problems: list[str] = []
    try:
        for child in procs.values():
            # Started ahead off the shared CPUs: what is left of its start-up may use them all
            # now (its first turn pins it to the shared ones).
            place(allowed_cpus(), child.pid)
        selection = encode(Only(None if only is None else tuple(only))) + "\n"
        for _reader, write_fd in pipes.values():
            with contextlib.suppress(OSError):  # it died already: seen below
                os.write(write_fd, selection.encode())
        scheduler = TurnScheduler()

        def drop(name: str, why: str) -> None:
            if procs[name].running():
                procs[name].stop()
                problems.append(
                    f"torchperf: side {name} ({sides[name].label}), pair {number}: {why}"
                )

        byes: dict[str, int] = {}
        _take_turns(scheduler, pipes, "A" if number % 2 else "B", drop, byes)
        found: dict[str, dict[Key, SideLine]] = {}
        codes: dict[str, int | None] = {}
        for name in sides:
            child = procs[name]
            if name in byes:
                # It said goodbye with its exit status; its teardown may finish on its own.
                codes[name] = byes[name]
                lingering.append(child)
            else:
                # One that left the protocol and hangs on its way out is killed after 60 s.
                code = child.wait(60)
                codes[name] = code if isinstance(code, int) else child.process.returncode
            found[name] = read_side(pair.folder / f"{name}.jsonl")
            # Side A's failures (a test that errors there) are shown; side B's fail in this run.
            if codes[name] not in (0, 1, 5) or (codes[name] == 1 and name == "A"):
                problems.append(
                    f"torchperf: side {name} ({sides[name].label}), pair {number}: pytest exited "
                    f"with code {codes[name]} after measuring {counted(len(found[name]), 'target')}. "
                    + child.told(15, f" (in {sides[name].cwd})")
                )
        return PairOutcome(found, dict(scheduler.tests), codes, problems, lingering)
    finally:
        for name, child in list(procs.items()):
            if child in lingering:
                procs.pop(name)  # tearing down on its own: reaped by the caller
        abandon(pair)


def reap(processes: Sequence[ChildProcess], timeout: float = 120.0) -> None:
    """Wait for the processes of finished pairs to exit (killed past ``timeout``)."""
    deadline = time.monotonic() + timeout
    for child in processes:
        child.wait(max(0.1, deadline - time.monotonic()))


def _take_turns(
    scheduler: TurnScheduler,
    pipes: Mapping[str, tuple[_Lines, int]],
    first: str,
    drop: Callable[[str, str], None],
    byes: dict[str, int],
) -> None:
    """Hand the token between the two children until both have exited (see TurnScheduler).
    A side that goes silent past the timeout, or talks nonsense, is dropped (killed)."""

    def heard(name: str) -> Message | MessageError | None:
        # The next message past the tests the side says it runs (the scheduler keeps them).
        message = pipes[name][0].message()
        while isinstance(message, PerfTests):
            scheduler.tests[name] = set(message.nodeids)
            message = pipes[name][0].message()
        return message

    # Both start up and collect together (nothing is timed yet); each then says "ready".
    for name in pipes:
        if not isinstance(heard(name), Ready):
            if pipes[name][0].timed_out:
                drop(name, f"did not get ready within {PAIR_TIMEOUT_S:.0f} s: killed")
            scheduler.exit(name)
    holder = scheduler.begin(first)
    while holder is not None:
        message = heard(holder) if _go(pipes[holder][1]) else None  # not sent: it died meanwhile
        # Anything else (a line that is no message: MessageError) is passed over.
        while message is not None and not isinstance(message, (At, Bye)):
            message = heard(holder)
        if isinstance(message, At):
            holder = scheduler.arrive(holder, (message.nodeid, message.name))
            continue
        if isinstance(message, Bye):  # measured everything; teardown off the shared CPUs
            byes[holder] = message.code
        elif pipes[holder][0].timed_out:
            drop(
                holder,
                f"held the turn for {PAIR_TIMEOUT_S:.0f} s without giving it back (a hung "
                f"test?): killed",
            )
        holder = scheduler.exit(holder)


class _Lines:
    """A child's messages (:mod:`pytest_torchperf.core.child_protocol`), one a line, read from
    its pipe without buffering past what ``select`` can see."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buffer = b""
        self.closed = False
        self.timed_out = False
        #: The child process: its exit ends the wait even while a process it forked (a data
        #: loader worker) still holds the pipe open.
        self.proc: Any = None

    def message(self) -> Message | MessageError | None:
        """The next message, or why its line is none (:class:`MessageError`: the caller passes
        over it, and a side whose first word it is is not ready); None when the child exited or
        went silent past :data:`PAIR_TIMEOUT_S` (then :attr:`timed_out`)."""
        deadline = time.monotonic() + PAIR_TIMEOUT_S
        while b"\n" not in self.buffer:
            if self.closed:
                return None
            ready, _, _ = select.select([self.fd], [], [], 1.0)
            if ready:
                chunk = os.read(self.fd, 65536)
                if not chunk:
                    self.closed = True
                    return None
                self.buffer += chunk
            elif self.proc is not None and self.proc.poll() is not None:
                self.closed = True
                return None
            elif time.monotonic() > deadline:
                self.closed = self.timed_out = True
                return None
        line, self.buffer = self.buffer.split(b"\n", 1)
        try:
            return decode(line)
        except MessageError as exc:
            return exc


def _go(write_fd: int) -> bool:
    try:
        os.write(write_fd, (encode(Go()) + "\n").encode())
        return True
    except OSError:  # it died meanwhile
        return False
